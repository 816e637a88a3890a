package h1

import (
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// fieldRules are what one section of header or trailer fields is read
// against.
type fieldRules struct {
	maxLine   int // the longest field line
	maxFields int
	tooLarge  int // the status for a section past its bounds
	// underscore lets names hold "_". Requests may not: a name with "_"
	// may be read as the one with "-" by software behind the proxy (CGI
	// variables), so a client could pass one for the other. Responses
	// may: what an upstream names its fields is its business.
	underscore bool
}

// readFields reads header (or trailer) fields up to the empty line. Every
// error it returns is an *Error.
func readFields(lr *lineReader, r fieldRules) (http.Header, error) {
	h := make(http.Header, 8)
	// The first value of each field is sliced from one array, as
	// net/textproto does: one allocation for the section, not one per
	// field.
	var firsts []string
	n := 0
	for {
		line, err := lr.line(r.maxLine, r.tooLarge)
		if err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if n++; n > r.maxFields {
			return nil, &Error{Status: r.tooLarge, Reason: "too many header fields"}
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, bad("obsolete line folding")
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil, bad("header line without a name and colon")
		}
		name := line[:colon]
		if err := checkName(name, r.underscore); err != nil {
			return nil, err
		}
		value := trimOWS(line[colon+1:])
		for _, c := range value {
			if !validValueByte(c) {
				return nil, bad("invalid character 0x%02x in value of %q", c, abbreviate(string(name)))
			}
		}
		key := canonicalKey(name)
		if vs, ok := h[key]; ok {
			h[key] = append(vs, string(value))
			continue
		}
		if len(firsts) == 0 {
			firsts = make([]string, 8)
		}
		firsts[0] = string(value)
		h[key], firsts = firsts[:1:1], firsts[1:]
	}
}

// commonKeys are field names seen on most exchanges, in canonical form:
// canonicalKey returns these strings instead of allocating new ones.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Date",
		"Etag", "Expect", "Grpc-Encoding", "Grpc-Accept-Encoding", "Grpc-Timeout", "Host",
		"If-Modified-Since", "If-None-Match", "Keep-Alive", "Last-Modified", "Location",
		"Origin", "Referer", "Server", "Set-Cookie", "Te", "Trailer", "Traceparent",
		"Tracestate", "Transfer-Encoding", "Upgrade", "User-Agent", "Vary", "Via",
		"X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// canonicalKey is textproto.CanonicalMIMEHeaderKey of a name checkName
// accepted (token characters only): the first letter and each one after
// "-" upper case, the others lower case. A common name costs no
// allocation.
func canonicalKey(name []byte) string {
	var buf [64]byte
	if len(name) > len(buf) {
		return textproto.CanonicalMIMEHeaderKey(string(name))
	}
	k := buf[:len(name)]
	upper := true
	for i, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
	if s, ok := commonKeys[string(k)]; ok {
		return s
	}
	return string(k)
}

// checkName refuses a field name that is not a token, or holds "_" when
// the rules forbid it.
func checkName(name []byte, underscore bool) error {
	if len(name) == 0 {
		return bad("empty header name")
	}
	for _, c := range name {
		if !isTokenChar(c) {
			if c == ' ' || c == '\t' {
				return bad("whitespace in or after header name %q", abbreviate(string(name)))
			}
			return bad("invalid character 0x%02x in header name", c)
		}
		if c == '_' && !underscore {
			return bad("underscore in header name %q", abbreviate(string(name)))
		}
	}
	return nil
}

// trailerNames reads the names a Trailer field announces (a list, empty
// items skipped), each checked as a field name is, canonicalized.
func trailerNames(values []string, underscore bool) (http.Header, error) {
	out := http.Header{}
	for _, v := range values {
		for _, k := range strings.Split(v, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if err := checkName([]byte(k), underscore); err != nil {
				return nil, bad("invalid Trailer name %q", abbreviate(k))
			}
			out[textproto.CanonicalMIMEHeaderKey(k)] = nil
		}
	}
	return out, nil
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func validValueByte(c byte) bool {
	return c == '\t' || c == ' ' || (c > ' ' && c != 0x7f)
}
