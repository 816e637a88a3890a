// Package dnsname checks DNS names as Kubernetes writes them, for the
// packages that must not link k8s.io (the proxy, the viz core).
package dnsname

// Label reports whether s is a lower-case RFC 1123 label: 1 to 63 of
// a-z, 0-9 and '-', neither first nor last a '-' (a Kubernetes namespace
// or Service name).
func Label(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
