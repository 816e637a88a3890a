package pathnorm

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLength is the longest path Normalize accepts, in bytes.
const MaxLength = 16 << 10

// ErrInvalid is wrapped by every error Normalize and SplitTarget return, so
// callers can refuse the request with one check.
var ErrInvalid = errors.New("pathnorm: invalid path")

// Error describes why a path was refused.
type Error struct {
	// Path is the refused input, shortened to 120 bytes.
	Path string
	// Offset is the byte offset of the offending input.
	Offset int
	// Reason is a short, stable description such as "encoded slash".
	Reason string
}

// Error names the reason, offset and path.
func (e *Error) Error() string {
	return fmt.Sprintf("pathnorm: %s at offset %d in %q", e.Reason, e.Offset, e.Path)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func fail(p string, off int, reason string) error {
	if len(p) > 120 {
		p = p[:120]
	}
	return &Error{Path: p, Offset: off, Reason: reason}
}

// Reasons used in Error.Reason.
const (
	ReasonNotAbsolute  = "path does not start with /"
	ReasonTooLong      = "path too long"
	ReasonEncodedSlash = "encoded slash or backslash"
	ReasonBackslash    = "backslash"
	ReasonFragment     = "fragment"
	ReasonQuery        = "query in path"
	ReasonDotParams    = "parameters on a dot segment"
	ReasonControl      = "control character"
	ReasonBadEncoding  = "malformed percent-encoding"
)

// byte classes
const (
	clsRaw     = iota // may appear raw in a normalized path
	clsEncode         // percent-encode it
	clsControl        // refuse
	clsSpecial        // '%', '/', '\\', '?', '#': handled one by one
)

// class maps every byte to its class. It is computed once and never
// written afterwards.
var class = func() (t [256]uint8) {
	for i := 0; i < 256; i++ {
		c := byte(i)
		switch {
		case c < 0x20 || c == 0x7f:
			t[i] = clsControl
		case c == '%' || c == '/' || c == '\\' || c == '?' || c == '#':
			t[i] = clsSpecial
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@", c) >= 0:
			t[i] = clsRaw
		default:
			t[i] = clsEncode
		}
	}
	return t
}()

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperhex = "0123456789ABCDEF"

// Normalize returns the normalized form of the path of a request target
// (the part before any "?"), or an error wrapping ErrInvalid when the path
// is ambiguous or malformed. The package documentation lists the rules.
// A path that is already normalized is returned as is, without allocating.
func Normalize(p string) (string, error) {
	if p == "" {
		return "/", nil
	}
	if len(p) > MaxLength {
		return "", fail(p, MaxLength, ReasonTooLong)
	}
	if p[0] != '/' {
		return "", fail(p, 0, ReasonNotAbsolute)
	}
	if isNormal(p) {
		return p, nil
	}
	return slow(p)
}

// isNormal reports whether p is already in normal form: only raw bytes
// and single slashes, no dot segments.
func isNormal(p string) bool {
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c != '/' {
				if class[c] != clsRaw {
					return false
				}
				continue
			}
		}
		seg := p[segStart:i]
		if i < len(p) && seg == "" {
			return false // empty segment: "//"
		}
		if isDotLike(seg) {
			return false
		}
		segStart = i + 1
	}
	return true
}

// isDotLike reports whether seg is ".", "..", or one of them followed by
// ";" parameters.
func isDotLike(seg string) bool {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	return seg == "." || seg == ".."
}

func slow(p string) (string, error) {
	// Pass 1: canonical bytes. Decoding never lengthens; encoding may
	// triple a byte, so size for the worst case lazily via append.
	buf := make([]byte, 0, len(p)+8)
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch class[c] {
		case clsRaw:
			buf = append(buf, c)
		case clsEncode:
			buf = append(buf, '%', upperhex[c>>4], upperhex[c&15])
		case clsControl:
			return "", fail(p, i, ReasonControl)
		default:
			switch c {
			case '/':
				buf = append(buf, '/')
			case '\\':
				return "", fail(p, i, ReasonBackslash)
			case '?':
				return "", fail(p, i, ReasonQuery)
			case '#':
				return "", fail(p, i, ReasonFragment)
			case '%':
				if i+2 >= len(p) {
					return "", fail(p, i, ReasonBadEncoding)
				}
				hi, ok1 := unhex(p[i+1])
				lo, ok2 := unhex(p[i+2])
				if !ok1 || !ok2 {
					return "", fail(p, i, ReasonBadEncoding)
				}
				v := hi<<4 | lo
				switch {
				case v == '/' || v == '\\':
					return "", fail(p, i, ReasonEncodedSlash)
				case v < 0x20 || v == 0x7f:
					return "", fail(p, i, ReasonControl)
				case isUnreserved(v):
					buf = append(buf, v)
				default:
					buf = append(buf, '%', upperhex[v>>4], upperhex[v&15])
				}
				i += 2
			}
		}
	}
	if len(buf) > MaxLength {
		return "", fail(p, MaxLength, ReasonTooLong)
	}

	// Pass 2: segments. buf starts with '/'.
	segs := make([]string, 0, 8)
	s := string(buf)
	trailing := false
	for rest := s[1:]; ; {
		var seg string
		last := false
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			seg, rest = rest[:j], rest[j+1:]
		} else {
			seg, last = rest, true
		}
		switch {
		case seg == "":
			// merged slash, or the empty segment after a trailing slash
			if last {
				trailing = true
			}
		case seg == ".":
			trailing = last
		case seg == "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = last
		case isDotLike(seg):
			return "", fail(p, strings.Index(p, ";"), ReasonDotParams)
		default:
			segs = append(segs, seg)
			trailing = false
		}
		if last {
			break
		}
	}
	if len(segs) == 0 {
		return "/", nil
	}
	var b strings.Builder
	n := len(segs) + 1
	for _, sg := range segs {
		n += len(sg)
	}
	b.Grow(n)
	for _, sg := range segs {
		b.WriteByte('/')
		b.WriteString(sg)
	}
	if trailing {
		b.WriteByte('/')
	}
	return b.String(), nil
}

// SplitTarget splits an origin-form request target ("/a/b?x=1") into its
// raw path and raw query. It refuses a target holding a fragment ("#"),
// which a client never sends and a backend may read differently. The path
// still needs Normalize.
func SplitTarget(target string) (path, query string, err error) {
	if i := strings.IndexByte(target, '#'); i >= 0 {
		return "", "", fail(target, i, ReasonFragment)
	}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		return target[:i], target[i+1:], nil
	}
	return target, "", nil
}
