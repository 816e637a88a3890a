package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Limits bound what ReadRequest accepts. Zero fields take the defaults.
type Limits struct {
	// MaxRequestLine bounds the request line (default 8 KiB); longer is 414.
	MaxRequestLine int
	// MaxHeaderBytes bounds the request line and header fields together
	// (default 64 KiB); more is 431.
	MaxHeaderBytes int
	// MaxHeaders bounds the number of header fields (default 128); more is
	// 431.
	MaxHeaders int
	// MaxTrailerBytes bounds the trailer section of a chunked body
	// (default 16 KiB).
	MaxTrailerBytes int
}

// Default limits.
const (
	DefaultMaxRequestLine  = 8 << 10
	DefaultMaxHeaderBytes  = 64 << 10
	DefaultMaxHeaders      = 128
	DefaultMaxTrailerBytes = 16 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxRequestLine <= 0 {
		l.MaxRequestLine = DefaultMaxRequestLine
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = DefaultMaxHeaders
	}
	if l.MaxTrailerBytes <= 0 {
		l.MaxTrailerBytes = DefaultMaxTrailerBytes
	}
	return l
}

// Error is a refused request: the status to answer and why.
type Error struct {
	Status int
	Reason string
}

// Error renders the status and the reason.
func (e *Error) Error() string {
	return fmt.Sprintf("h1: %d %s: %s", e.Status, http.StatusText(e.Status), e.Reason)
}

func bad(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Reason: fmt.Sprintf(format, args...)}
}

// StatusOf returns the status an error from ReadRequest should be answered
// with, or 0 when there is nothing to answer (the connection ended).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// lineReader reads CRLF-terminated lines against a byte budget.
type lineReader struct {
	br     *bufio.Reader
	total  int // bytes consumed so far against the budget
	budget int
}

// line reads one line ending in CRLF, refusing bare LF and stray CR, and
// returns it without the CRLF. max bounds the line itself; tooLong is the
// status for a longer one. The returned slice is only valid until the
// next read.
func (lr *lineReader) line(max, tooLong int) ([]byte, error) {
	var acc []byte
	for {
		frag, err := lr.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			acc = append(acc, frag...)
			lr.total += len(frag)
			if len(acc) > max+2 {
				return nil, &Error{Status: tooLong, Reason: "line too long"}
			}
			if lr.total > lr.budget {
				return nil, &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Reason: "header section too large"}
			}
			continue
		}
		lr.total += len(frag)
		if err != nil {
			if err == io.EOF && len(acc) == 0 && len(frag) == 0 {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if acc != nil {
			acc = append(acc, frag...)
			frag = acc
		}
		if len(frag) > max+2 {
			return nil, &Error{Status: tooLong, Reason: "line too long"}
		}
		if lr.total > lr.budget {
			return nil, &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Reason: "header section too large"}
		}
		if len(frag) < 2 || frag[len(frag)-2] != '\r' {
			return nil, bad("line ends with a bare LF")
		}
		frag = frag[:len(frag)-2]
		if bytes.IndexByte(frag, '\r') >= 0 {
			return nil, bad("bare CR inside a line")
		}
		return frag, nil
	}
}

// ReadRequest reads one request head from br and returns the request with
// a body reading on from br according to its framing. It returns io.EOF
// when the connection ended cleanly before a request, and an *Error
// (carrying the status to answer) for a request it refuses. The package
// documentation lists what is refused.
func ReadRequest(br *bufio.Reader, lim Limits) (*http.Request, error) {
	lim = lim.withDefaults()
	lr := &lineReader{br: br, budget: lim.MaxHeaderBytes}
	line, err := lr.line(lim.MaxRequestLine, http.StatusRequestURITooLong)
	if err != nil {
		return nil, err
	}
	req, err := parseRequestLine(string(line))
	if err != nil {
		return nil, err
	}
	h, err := readFields(lr, fieldRules{maxLine: lim.MaxHeaderBytes, maxFields: lim.MaxHeaders, tooLarge: http.StatusRequestHeaderFieldsTooLarge})
	if err != nil {
		return nil, err
	}
	req.Header = h
	if err := finishRequest(req, br, lim); err != nil {
		return nil, err
	}
	return req, nil
}

func parseRequestLine(line string) (*http.Request, error) {
	method, rest, ok := strings.Cut(line, " ")
	if !ok {
		return nil, bad("malformed request line")
	}
	target, version, ok := strings.Cut(rest, " ")
	if !ok {
		if isVersionLike(rest) || rest == "" {
			return nil, bad("malformed request line")
		}
		return nil, bad("request line without an HTTP version (HTTP/0.9 is not supported)")
	}
	if strings.IndexByte(version, ' ') >= 0 {
		return nil, bad("malformed request line")
	}
	if !validMethod(method) {
		return nil, bad("invalid method %q", abbreviate(method))
	}
	var minor int
	switch version {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
		minor = 0
	default:
		if isVersionLike(version) {
			return nil, &Error{Status: http.StatusHTTPVersionNotSupported, Reason: "version " + version}
		}
		return nil, bad("invalid HTTP version %q", abbreviate(version))
	}
	if err := checkTarget(method, target); err != nil {
		return nil, err
	}
	req := &http.Request{
		Method:     method,
		Proto:      version,
		ProtoMajor: 1,
		ProtoMinor: minor,
		RequestURI: target,
	}
	var u *url.URL
	var err error
	switch {
	case method == http.MethodConnect && !strings.HasPrefix(target, "/"):
		u = &url.URL{Host: target}
	case target == "*":
		u = &url.URL{Path: "*"}
	default:
		u, err = url.ParseRequestURI(target)
		if err != nil {
			return nil, bad("invalid request target")
		}
		if !strings.HasPrefix(target, "/") {
			if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return nil, bad("invalid absolute request target")
			}
		}
	}
	req.URL = u
	return req, nil
}

func isVersionLike(s string) bool {
	if !strings.HasPrefix(s, "HTTP/") || len(s) != 8 {
		return false
	}
	return s[5] >= '0' && s[5] <= '9' && s[6] == '.' && s[7] >= '0' && s[7] <= '9'
}

// validMethod accepts a token of at most 32 characters without lower-case
// letters: methods are case-sensitive and every registered one is upper
// case, so "get" is refused rather than guessed at.
func validMethod(m string) bool {
	if m == "" || len(m) > 32 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !isTokenChar(c) || (c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

func checkTarget(method, t string) error {
	if t == "" {
		return bad("empty request target")
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c <= ' ' || c >= 0x7f {
			return bad("request target holds byte 0x%02x at %d", c, i)
		}
		if c == '#' {
			return bad("request target holds a fragment")
		}
	}
	switch {
	case t == "*":
		if method != http.MethodOptions {
			return bad("asterisk target is only for OPTIONS")
		}
	case method == http.MethodConnect:
		if strings.HasPrefix(t, "/") {
			return bad("CONNECT needs an authority target")
		}
		host, _, err := splitHostPort(t)
		if err != nil {
			return bad("CONNECT target must be host:port")
		}
		if !validURIHost(host) {
			return bad("CONNECT target's host is not a valid host")
		}
	case strings.HasPrefix(t, "/"):
	case strings.HasPrefix(t, "http://"), strings.HasPrefix(t, "https://"):
	default:
		return bad("invalid request target form")
	}
	return nil
}

// validURIHost reports whether h is RFC 3986's uri-host: an IP literal in
// brackets, or a reg-name of unreserved characters, sub-delims and
// well-formed percent-encodings (which covers an IPv4 address).
func validURIHost(h string) bool {
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return false
		}
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		return err == nil && a.Is6() && a.Zone() == ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(h) && isHex(h[i+1]) && isHex(h[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", errors.New("missing port")
	}
	if _, err := strconv.ParseUint(s[i+1:], 10, 16); err != nil {
		return "", "", errors.New("bad port")
	}
	return s[:i], s[i+1:], nil
}

// finishRequest applies the framing and Host rules and sets the body.
func finishRequest(req *http.Request, br *bufio.Reader, lim Limits) error {
	h := req.Header
	te := h["Transfer-Encoding"]
	cl := h["Content-Length"]
	if len(te) > 0 {
		if req.ProtoMinor == 0 {
			return bad("Transfer-Encoding on an HTTP/1.0 request")
		}
		if len(cl) > 0 {
			return bad("both Content-Length and Transfer-Encoding")
		}
		if len(te) > 1 {
			return bad("several Transfer-Encoding fields")
		}
		if te[0] != "chunked" {
			if strings.Contains(strings.ToLower(te[0]), "chunked") {
				return bad("Transfer-Encoding %q is not exactly chunked", abbreviate(te[0]))
			}
			return &Error{Status: http.StatusNotImplemented, Reason: "unsupported Transfer-Encoding " + abbreviate(te[0])}
		}
	}
	length := int64(0)
	if len(cl) > 1 {
		return bad("several Content-Length fields")
	}
	if len(cl) == 1 {
		n, ok := parseContentLength(cl[0])
		if !ok {
			return bad("invalid Content-Length %q", abbreviate(cl[0]))
		}
		length = n
	}

	hosts := h["Host"]
	switch {
	case len(hosts) > 1:
		return bad("several Host fields")
	case len(hosts) == 0 && req.ProtoMinor == 1:
		return bad("missing Host")
	case len(hosts) == 1:
		if !validHost(hosts[0]) {
			return bad("invalid Host %q", abbreviate(hosts[0]))
		}
		req.Host = hosts[0]
	}
	if req.URL.Host != "" {
		// Absolute or authority form: the target's authority wins.
		if !validHost(req.URL.Host) {
			return bad("invalid authority in request target")
		}
		req.Host = req.URL.Host
	}
	delete(h, "Host")

	if ex := h["Expect"]; len(ex) > 0 {
		if len(ex) > 1 || !strings.EqualFold(ex[0], "100-continue") || req.ProtoMinor == 0 {
			return &Error{Status: http.StatusExpectationFailed, Reason: "unsupported expectation"}
		}
	}

	req.Close = shouldClose(req.ProtoMinor, h)

	// Declared trailers: names checked as every field name is, and none
	// that only a head may carry.
	if tr := h["Trailer"]; len(tr) > 0 {
		if len(te) == 0 {
			return bad("Trailer without a chunked body")
		}
		names, err := trailerNames(tr, false)
		if err != nil {
			return err
		}
		for k := range names {
			if forbiddenTrailer(k) {
				return bad("forbidden trailer %q", k)
			}
		}
		req.Trailer = names
		delete(h, "Trailer")
	}

	switch {
	case len(te) > 0:
		req.TransferEncoding = []string{"chunked"}
		req.ContentLength = -1
		delete(h, "Transfer-Encoding")
		req.Body = &Body{src: NewChunkedReader(br, lim.MaxTrailerBytes), trailer: req.Trailer}
	case length > 0:
		req.ContentLength = length
		req.Body = &Body{src: io.LimitReader(br, length), remaining: length, sized: true}
	default:
		req.ContentLength = 0
		req.Body = http.NoBody
	}
	return nil
}

// parseContentLength accepts 1 to 18 digits and nothing else.
func parseContentLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '@' || c == '\\' {
			return false
		}
	}
	return httpguts.ValidHostHeader(h)
}

// shouldClose reports whether the connection ends after this exchange.
func shouldClose(minor int, h http.Header) bool {
	close, keep := false, false
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(t)) {
			case "close":
				close = true
			case "keep-alive":
				keep = true
			}
		}
	}
	if minor == 0 {
		return close || !keep
	}
	return close
}

func forbiddenTrailer(k string) bool {
	switch k {
	case "Transfer-Encoding", "Content-Length", "Trailer", "Host", "Connection", "Keep-Alive",
		"Te", "Upgrade", "Proxy-Connection", "Content-Type", "Content-Encoding", "Content-Range",
		"Authorization", "Cache-Control", "Expect", "Max-Forwards", "Pragma", "Range", "Set-Cookie":
		return true
	}
	return false
}

// isTokenChar reports whether c may appear in an RFC 9110 token.
func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func abbreviate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
