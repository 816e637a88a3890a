// Package detect classifies the first bytes of a connection: HTTP/1, the
// HTTP/2 client preface, a TLS ClientHello, or something else (opaque). It
// also reads the server name out of a ClientHello without terminating TLS.
//
// Everything here is a pure function of a byte slice. The caller reads bytes
// from the connection, calls [Classify] after every read, and stops as soon
// as the answer is final, or when its detection timeout fires. Binary
// protocols are recognised as opaque from their first bytes, so only a
// silent client, or one that stops in the middle of what could still be an
// HTTP request, waits for the timeout; what the caller then does with the
// bytes it has (Classify still says Unknown) is its own policy.
//
// HTTP/1 is recognised broadly on purpose: anything an HTTP/1 server
// somewhere might read as a request (bare LF line ends, odd versions,
// double spaces or tabs, leading empty lines, lower-case or very long
// methods) is HTTP/1, so that a strict HTTP parser refuses it instead of
// it slipping past HTTP policy as opaque bytes.
package detect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol is the result of a classification.
type Protocol uint8

// Protocols. Unknown means more bytes are needed to decide.
const (
	Unknown Protocol = iota
	Opaque
	HTTP1
	HTTP2
	TLS
)

// String names the protocol.
func (p Protocol) String() string {
	switch p {
	case Unknown:
		return "unknown"
	case Opaque:
		return "opaque"
	case HTTP1:
		return "http/1"
	case HTTP2:
		return "h2"
	case TLS:
		return "tls"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// H2Preface is the HTTP/2 client connection preface (RFC 9113 §3.4).
const H2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// MaxRequestLine bounds the HTTP/1 request line that detection reads. A
// longer first line is HTTP/1 when what was read could only be the start
// of a request (the HTTP server then refuses it with 414), and opaque
// otherwise.
const MaxRequestLine = 8 << 10

// Classify inspects the bytes a client sent first. It returns Unknown while
// b is a prefix of something it could still recognise; once it returns
// another value, more bytes will not change the answer.
func Classify(b []byte) Protocol {
	if len(b) == 0 {
		return Unknown
	}
	// TLS: a handshake record (22) with major version 3.
	if b[0] == 0x16 {
		if len(b) < 2 {
			return Unknown
		}
		if b[1] == 0x03 {
			return TLS
		}
		return Opaque
	}
	if n := min(len(b), len(H2Preface)); string(b[:n]) == H2Preface[:n] {
		if n == len(H2Preface) {
			return HTTP2
		}
		return Unknown
	}
	return classifyHTTP1(b)
}

// classifyHTTP1 decides whether b starts an HTTP/1 request. It is
// deliberately broad: anything an HTTP/1 server somewhere might read as a
// request is HTTP/1 here, so that the proxy's strict parser answers it
// (400, 414, 505) instead of the bytes reaching an application as opaque
// traffic, past HTTP policy and header hygiene. That is, after optional
// leading whitespace (SP, HTAB, CR, LF, which lenient servers skip), a
// token (the method, of any length) followed by SP or HTAB and then
// either a request target that starts like one ("/", "*", or
// "scheme://"), or a first line that mentions "HTTP/" in any case (an
// authority-form CONNECT, a version with odd spacing). A first line with
// control characters, or a first token not followed by SP or HTAB, is
// opaque.
func classifyHTTP1(b []byte) Protocol {
	// Only the first MaxRequestLine bytes count, so that the answer never
	// changes as more bytes arrive.
	long := len(b) >= MaxRequestLine
	if long {
		b = b[:MaxRequestLine]
	}
	// undecided is the answer when b ends before a decision: more bytes
	// are needed, unless the line is already longer than any request
	// line, and what was read so far could only be HTTP/1 (the parser then
	// answers 414 or 400).
	undecided := func(couldBeHTTP bool) Protocol {
		switch {
		case !long:
			return Unknown
		case couldBeHTTP:
			return HTTP1
		}
		return Opaque
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return undecided(true)
	}
	// The method.
	j := i
	for j < len(b) && isTokenChar(b[j]) {
		j++
	}
	switch {
	case j == i:
		return Opaque
	case j == len(b):
		return undecided(true)
	case b[j] != ' ' && b[j] != '\t':
		return Opaque
	}
	// The request target.
	k := j
	for k < len(b) && (b[k] == ' ' || b[k] == '\t') {
		k++
	}
	if k == len(b) {
		return undecided(true)
	}
	if b[k] == '/' || b[k] == '*' {
		return HTTP1
	}
	switch absoluteForm(b[k:]) {
	case HTTP1:
		return HTTP1
	case Unknown:
		return undecided(false)
	}
	// Otherwise the first line decides.
	line := b[k:]
	end := bytes.IndexByte(line, '\n')
	if end >= 0 {
		line = line[:end]
	}
	for _, c := range line {
		if c < 0x20 && c != '\r' && c != '\t' || c == 0x7f {
			return Opaque
		}
	}
	if end < 0 {
		return undecided(false)
	}
	if mentionsHTTP(line) {
		return HTTP1
	}
	return Opaque
}

// mentionsHTTP reports whether line holds "HTTP/" in any case.
func mentionsHTTP(line []byte) bool {
	const word = "http/"
	for i := 0; i+len(word) <= len(line); i++ {
		j := 0
		for j < len(word) && line[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}

// absoluteForm reports whether b starts with "scheme://" (HTTP1), cannot
// (Opaque), or needs more bytes to tell (Unknown).
func absoluteForm(b []byte) Protocol {
	if !isAlpha(b[0]) {
		return Opaque
	}
	i := 1
	for i < len(b) && (isAlpha(b[i]) || b[i] >= '0' && b[i] <= '9' || b[i] == '+' || b[i] == '-' || b[i] == '.') {
		i++
	}
	const sep = "://"
	rest := b[i:]
	n := min(len(rest), len(sep))
	switch {
	case string(rest[:n]) != sep[:n]:
		return Opaque
	case n < len(sep):
		return Unknown
	}
	return HTTP1
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

// MaxClientHello bounds the bytes ClientHelloSNI looks at (records included).
const MaxClientHello = 16 << 10

// ErrIncomplete means the bytes hold only the beginning of a ClientHello.
var ErrIncomplete = errors.New("detect: incomplete ClientHello")

// ErrNotClientHello is wrapped by every error about bytes that are not a
// well-formed ClientHello.
var ErrNotClientHello = errors.New("detect: not a TLS ClientHello")

// ClientHelloSNI returns the server name a TLS client asked for in its
// ClientHello, which starts b (the ClientHello may span several records).
// It returns "" and no error when the hello has no server_name extension,
// ErrIncomplete when more bytes are needed, and an error wrapping
// ErrNotClientHello for anything malformed.
func ClientHelloSNI(b []byte) (string, error) {
	msg, err := handshakeMessage(b)
	if err != nil {
		return "", err
	}
	return parseClientHello(msg)
}

// handshakeMessage reassembles the first handshake message from TLS
// records at the start of b.
func handshakeMessage(b []byte) ([]byte, error) {
	var hs []byte
	need := -1
	for off := 0; ; {
		if off >= MaxClientHello {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrNotClientHello, MaxClientHello)
		}
		if len(b)-off < 5 {
			if len(b)-off > 0 && b[off] != 0x16 {
				return nil, fmt.Errorf("%w: record type %d", ErrNotClientHello, b[off])
			}
			return nil, ErrIncomplete
		}
		if b[off] != 0x16 || b[off+1] != 0x03 {
			return nil, fmt.Errorf("%w: record type %d version %d.%d", ErrNotClientHello, b[off], b[off+1], b[off+2])
		}
		n := int(binary.BigEndian.Uint16(b[off+3 : off+5]))
		if n == 0 || n > 1<<14 {
			return nil, fmt.Errorf("%w: record length %d", ErrNotClientHello, n)
		}
		if len(b)-off-5 < n {
			return nil, ErrIncomplete
		}
		hs = append(hs, b[off+5:off+5+n]...)
		off += 5 + n
		if need < 0 && len(hs) >= 4 {
			if hs[0] != 1 {
				return nil, fmt.Errorf("%w: handshake type %d", ErrNotClientHello, hs[0])
			}
			need = 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
			if need > MaxClientHello {
				return nil, fmt.Errorf("%w: hello of %d bytes above %d", ErrNotClientHello, need, MaxClientHello)
			}
		}
		if need >= 0 && len(hs) >= need {
			return hs[4:need], nil
		}
	}
}

// reader walks a byte slice with bounds checks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) skip(n int) {
	if r.bad || n > len(r.b) {
		r.bad = true
		return
	}
	r.b = r.b[n:]
}

func (r *reader) u8() int {
	if r.bad || len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := int(r.b[0])
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() int {
	if r.bad || len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := int(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func parseClientHello(msg []byte) (string, error) {
	r := &reader{b: msg}
	r.skip(2 + 32)  // legacy_version, random
	r.skip(r.u8())  // legacy_session_id
	r.skip(r.u16()) // cipher_suites
	r.skip(r.u8())  // legacy_compression_methods
	if r.bad {
		return "", fmt.Errorf("%w: truncated fields", ErrNotClientHello)
	}
	if len(r.b) == 0 {
		return "", nil // no extensions
	}
	exts := &reader{b: r.bytes(r.u16())}
	if r.bad {
		return "", fmt.Errorf("%w: truncated extensions", ErrNotClientHello)
	}
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.bytes(exts.u16())
		if exts.bad {
			return "", fmt.Errorf("%w: truncated extension", ErrNotClientHello)
		}
		if typ != 0 { // server_name
			continue
		}
		list := &reader{b: data}
		names := &reader{b: list.bytes(list.u16())}
		for len(names.b) > 0 && !names.bad {
			kind := names.u8()
			name := names.bytes(names.u16())
			if names.bad {
				break
			}
			if kind == 0 {
				if len(name) == 0 {
					return "", fmt.Errorf("%w: empty server name", ErrNotClientHello)
				}
				for _, c := range name {
					if c <= ' ' || c >= 0x7f {
						return "", fmt.Errorf("%w: server name has byte 0x%02x", ErrNotClientHello, c)
					}
				}
				return string(name), nil
			}
		}
		return "", fmt.Errorf("%w: malformed server_name extension", ErrNotClientHello)
	}
	return "", nil
}
