package h1

import (
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// hopByHop are the headers that describe one connection and never travel
// past the hop that received them (RFC 9110 section 7.6.1, plus the
// HTTP/2 upgrade settings).
var hopByHop = []string{
	"Connection",
	"Keep-Alive",
	"Proxy-Connection",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
	"Http2-Settings",
}

// ConnectionTokens returns the lower-case options of every Connection
// field, all lines and all list items, skipping empty ones.
func ConnectionTokens(h http.Header) []string {
	var out []string
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// RemoveHopByHop deletes the hop-by-hop headers and every header a
// Connection field names. A TE field is replaced by "TE: trailers" when it
// offered trailers (gRPC needs it end to end), and dropped otherwise.
func RemoveHopByHop(h http.Header) {
	for _, t := range ConnectionTokens(h) {
		if httpguts.ValidHeaderFieldName(t) {
			delete(h, textproto.CanonicalMIMEHeaderKey(t))
		}
	}
	te := h["Te"]
	if len(te) == 1 && te[0] == "trailers" {
		// The common case (every gRPC call): already what is kept.
		for _, k := range hopByHop {
			if k != "Te" {
				delete(h, k)
			}
		}
		return
	}
	trailers := false
	for _, v := range te {
		for _, t := range strings.Split(v, ",") {
			t, _, _ = strings.Cut(t, ";")
			if strings.EqualFold(strings.TrimSpace(t), "trailers") {
				trailers = true
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
	if trailers {
		h["Te"] = []string{"trailers"}
	}
}

// Upgrade reports the protocol a request asks to switch to: the Upgrade
// field of a request whose Connection names "upgrade". h2c is never
// returned (a proxy must not let a client switch a hop to cleartext
// HTTP/2 behind its back), and neither is anything on a request that is
// not HTTP/1.1.
func Upgrade(r *http.Request) (string, bool) {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		return "", false
	}
	up := r.Header["Upgrade"]
	if len(up) == 0 {
		return "", false
	}
	named := false
	for _, t := range ConnectionTokens(r.Header) {
		named = named || t == "upgrade"
	}
	if !named {
		return "", false
	}
	v := strings.Join(up, ",")
	for _, t := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(t), "h2c") {
			return "", false
		}
	}
	if strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

// ValidHeader reports whether a field may be written on an HTTP/1.1
// connection: a token name without "_" and a value without control
// characters other than tab.
func ValidHeader(name, value string) bool {
	if !ValidName(name) {
		return false
	}
	return httpguts.ValidHeaderFieldValue(value)
}

// ValidName reports whether a header name is a token without "_".
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isTokenChar(c) || c == '_' {
			return false
		}
	}
	return true
}

// CheckHeader returns the first header whose name or value is not
// acceptable (see ValidHeader), for requests that arrived over HTTP/2 and
// may go on over HTTP/1.
func CheckHeader(h http.Header) (string, bool) {
	for k, vs := range h {
		if !ValidName(k) {
			return k, false
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return k, false
			}
		}
	}
	return "", true
}
