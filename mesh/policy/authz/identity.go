package authz

import (
	"fmt"
	"strings"
)

// ParseIdentity reads an identity pattern as MeshTLSAuthentication and
// ServerAuthorization write them: an exact name
// ("web.shop.serviceaccount.identity.weft.cluster.local"), "*" for any
// authenticated client, or "*." followed by a suffix
// ("*.shop.serviceaccount.identity.weft.cluster.local"). It returns the
// exact name or, when suffix is true, the suffix without "*.". A "*"
// anywhere else ("web*", "a.*.b", "**"), empty labels, and characters
// outside letters, digits, "-", "_" and "." are errors.
func ParseIdentity(s string) (name string, suffix bool, err error) {
	switch {
	case s == "":
		return "", false, fmt.Errorf("authz: empty identity")
	case s == "*":
		return "", true, nil
	case strings.HasPrefix(s, "*."):
		rest := s[2:]
		if err := checkLabels(rest); err != nil {
			return "", false, fmt.Errorf("authz: identity %q: %w", s, err)
		}
		return rest, true, nil
	}
	if err := checkLabels(s); err != nil {
		return "", false, fmt.Errorf("authz: identity %q: %w", s, err)
	}
	return s, false, nil
}

func checkLabels(s string) error {
	if s == "" {
		return fmt.Errorf("nothing after the wildcard")
	}
	if len(s) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" {
			return fmt.Errorf("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label %q longer than 63 characters", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c == '*':
				return fmt.Errorf("a wildcard is only allowed as the whole first label (\"*.suffix\") or alone (\"*\")")
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return fmt.Errorf("invalid character %q", c)
			}
		}
	}
	return nil
}

// NewAuthentication builds a TLSAuthenticated authentication from
// identity patterns (see ParseIdentity), removing duplicates.
func NewAuthentication(patterns ...string) (Authentication, error) {
	a := Authentication{Kind: TLSAuthenticated}
	seen := map[string]bool{}
	for _, p := range patterns {
		name, suffix, err := ParseIdentity(p)
		if err != nil {
			return Authentication{}, err
		}
		key := name
		if suffix {
			key = "*." + name
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		if suffix {
			a.Suffixes = append(a.Suffixes, name)
		} else {
			a.Identities = append(a.Identities, name)
		}
	}
	if len(a.Identities) == 0 && len(a.Suffixes) == 0 {
		return Authentication{}, fmt.Errorf("authz: no identities")
	}
	return a, nil
}
