package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The codec is checked against net/http's readers, which read the same
// bytes independently: every input one accepts and the other refuses must
// be a refusal documented here, with its reason. Any other difference is a
// bug in one of the two (and, the proxy being the one that forwards, the
// codec's to fix). The fuzz targets below run these checks on every input.

// refusal is a documented difference: a pattern of the refusing reader's
// error and why the difference is intended.
type refusal struct {
	pattern *regexp.Regexp
	why     string
}

func documented(table []refusal, err error) (string, bool) {
	for _, r := range table {
		if r.pattern.MatchString(err.Error()) {
			return r.why, true
		}
	}
	return "", false
}

// stricterRequests: requests net/http reads and the codec refuses. A
// proxy forwards what it reads to a server it does not know, so it refuses
// what any server could read differently, and what net/http leaves to its
// server (Host, Expect) the codec decides while reading.
var stricterRequests = []refusal{
	{regexp.MustCompile(`underscore in header name`), "a name with _ may be read as the one with - behind the proxy (CGI variables), letting a client pass one for the other"},
	{regexp.MustCompile(`whitespace in or after header name|invalid character 0x.. in header name|empty header name|without a name and colon`), "a field name is a token followed at once by a colon (RFC 9112 section 5.1: whitespace before the colon must be refused); net/http keeps some such names, other readers trim them into another field"},
	{regexp.MustCompile(`obsolete line folding`), "obs-fold is deprecated (RFC 9112 section 5.2); servers that unfold and servers that do not read different fields"},
	{regexp.MustCompile(`invalid method`), "methods are case-sensitive and every registered one is upper case: get is refused, not guessed at; at most 32 characters"},
	{regexp.MustCompile(`Transfer-Encoding on an HTTP/1.0 request`), "net/http ignores it and reads the body by Content-Length; another reader may honour it: the framing is ambiguous"},
	{regexp.MustCompile(`Transfer-Encoding .* is not exactly chunked|unsupported Transfer-Encoding|several Transfer-Encoding`), "only a single exact 'chunked' is unambiguous; net/http lower-cases it, others do not"},
	{regexp.MustCompile(`unsupported expectation`), "net/http's server answers 417 after reading; the codec refuses while reading, before anything is forwarded"},
	{regexp.MustCompile(`missing Host|several Host fields|invalid Host|invalid authority`), "net/http's server checks Host after ReadRequest; the codec does it while reading, and refuses hosts with / ? # @ \\ or controls"},
	{regexp.MustCompile(`fragment|asterisk target is only for OPTIONS|invalid request target form|invalid absolute request target|CONNECT`), "a target of none of the four forms of RFC 9112 section 3.2 (or one with a fragment, userinfo, a scheme other than http(s), or * for another method than OPTIONS) reaches routing nowhere meaningful"},
	{regexp.MustCompile(`empty request target`), "a request line needs a target; net/http reads two spaces as an empty one"},
	{regexp.MustCompile(`request target holds byte`), "bytes outside visible ASCII in the target are read differently by different servers"},
	{regexp.MustCompile(`version HTTP/|invalid HTTP version|malformed request line|HTTP/0.9`), "only HTTP/1.0 and HTTP/1.1 with single spaces are proxied (505 for other versions); net/http reads HTTP/1.x for any x"},
	{regexp.MustCompile(`Trailer without a chunked body|forbidden trailer|invalid Trailer name`), "announced trailers are checked as every field, and those that could change framing, routing or authorization are refused (net/http refuses only three)"},
	{regexp.MustCompile(`chunk|quoted`), "chunk lines are read strictly (RFC 9112 section 7.1): hexadecimal only, well formed extensions, bounded framing overhead"},
	{regexp.MustCompile(`bare LF|bare CR`), "a line ends in CRLF only; readers that accept LF see different lines"},
	{regexp.MustCompile(`both Content-Length and Transfer-Encoding`), "the classic smuggling vector: net/http lets chunked win, another reader may take the length (RFC 9112 section 6.1 allows refusing)"},
	{regexp.MustCompile(`invalid Content-Length|several Content-Length`), "only one Content-Length field of 1 to 18 digits is unambiguous (net/http accepts a list of equal values)"},
	{regexp.MustCompile(`line too long|too large|too many header fields`), "bounds on what one client can hold (docs/limits.md); net/http leaves them to its server"},
	{regexp.MustCompile(`invalid character 0x(0[0-8a-f]|1.|7f) in value`), "control characters in values; net/http's reader leaves some to its server"},
}

// laxerRequests: requests the codec reads and net/http refuses.
var laxerRequests = []refusal{
	{regexp.MustCompile(`missing required Host header`), "never reached: the codec refuses it too (listed for the reader's order of checks)"},
}

func readOurs(raw string) (*http.Request, []byte, error) {
	req, err := ReadRequest(bufio.NewReader(strings.NewReader(raw)), Limits{})
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(req.Body)
	return req, b, err
}

func readTheirs(raw string) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(req.Body)
	return req, b, err
}

// checkRequest compares both readers on raw.
func checkRequest(t *testing.T, raw string) {
	ours, ob, oerr := readOurs(raw)
	theirs, tb, terr := readTheirs(raw)
	switch {
	case oerr != nil && terr == nil:
		if errors.Is(oerr, io.ErrUnexpectedEOF) && StatusOf(oerr) == 0 {
			t.Fatalf("codec wants more input than net/http for %q: %v", raw, oerr)
		}
		if _, ok := documented(stricterRequests, oerr); !ok {
			t.Fatalf("undocumented refusal of %q (net/http reads it): %v", raw, oerr)
		}
	case oerr == nil && terr != nil:
		if _, ok := documented(laxerRequests, terr); !ok {
			t.Fatalf("codec reads %q, net/http refuses it: %v", raw, terr)
		}
	case oerr == nil && terr == nil:
		if ours.Method != theirs.Method || ours.RequestURI != theirs.RequestURI || ours.Host != theirs.Host ||
			ours.ProtoMinor != theirs.ProtoMinor {
			t.Fatalf("%q read differently: %s %s %s 1.%d vs %s %s %s 1.%d", raw,
				ours.Method, ours.RequestURI, ours.Host, ours.ProtoMinor,
				theirs.Method, theirs.RequestURI, theirs.Host, theirs.ProtoMinor)
		}
		if !bytes.Equal(ob, tb) {
			t.Fatalf("%q: bodies differ: %q vs %q", raw, ob, tb)
		}
		if ours.ContentLength != theirs.ContentLength {
			t.Fatalf("%q: Content-Length %d vs %d", raw, ours.ContentLength, theirs.ContentLength)
		}
		if ours.Close != theirs.Close {
			t.Fatalf("%q: close %v vs %v", raw, ours.Close, theirs.Close)
		}
		sameFields(t, raw, ours.Header, theirs.Header)
		sameTrailers(t, raw, ours.Trailer, theirs.Trailer)
	}
}

// sameTrailers compares the announced trailers; net/http also keeps
// trailers nobody announced, which the codec drops (the next hop learns
// of trailers from the head, before the body).
func sameTrailers(t *testing.T, raw string, ours, theirs http.Header) {
	t.Helper()
	for k, v := range ours {
		if !slices.Equal(v, theirs[k]) {
			t.Fatalf("%q: trailer %s is %q vs %q", raw, k, v, theirs[k])
		}
	}
}

// sameFields compares two headers (framing fields the readers consume in
// different ways aside).
func sameFields(t *testing.T, what string, a, b http.Header) {
	t.Helper()
	skip := func(k string) bool { return k == "Transfer-Encoding" || k == "Trailer" }
	for k, v := range a {
		if !skip(k) && !slices.Equal(v, b[k]) {
			t.Fatalf("%q: field %s is %q vs %q", what, k, v, b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && !skip(k) && len(v) > 0 {
			t.Fatalf("%q: field %s only in net/http's reading: %q", what, k, v)
		}
	}
}

// requestSeeds are inputs written for this test: well-formed requests of
// every form, and each kind of ambiguity the codec refuses.
var requestSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /p?q=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a:1/b HTTP/1.1\r\nHost: c\r\n\r\n",
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: T, U\r\n\r\n3;e=\"q\"\r\nabc\r\n0\r\nT: 1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\nx",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\nx",
	"GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"get / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
	"GET /#f HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, x\r\nX: 1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n0\r\nContent-Length: 9\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Late: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]:80\r\nA:\r\nB: \t v \t\r\n\r\n",
}

func TestRequestReadersAgreeOnTheSeeds(t *testing.T) {
	for _, s := range requestSeeds {
		checkRequest(t, s)
	}
}

func FuzzReadRequestAgainstNetHTTP(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkRequest(t, raw)
	})
}

// stricterResponses: responses net/http reads and the client refuses.
var stricterResponses = []refusal{
	{regexp.MustCompile(`obsolete line folding`), "as for requests"},
	{regexp.MustCompile(`whitespace in or after header name|invalid character 0x.. in header name|empty header name|without a name and colon`), "as for requests"},
	{regexp.MustCompile(`bare LF|bare CR`), "as for requests"},
	{regexp.MustCompile(`malformed status line`), "HTTP/1.0 or HTTP/1.1, one space, three digits 100 to 999, then a space or the end; net/http also reads other minor versions and codes with extra text"},
	{regexp.MustCompile(`unsupported Transfer-Encoding`), "kept for the record: net/http refuses these too"},
	{regexp.MustCompile(`Transfer-Encoding on an HTTP/1.0 response`), "faulty framing (RFC 9112 section 6.1); net/http ignores the field and reads to the end, another reader would read chunks"},
	{regexp.MustCompile(`both Content-Length and Transfer-Encoding`), "ambiguous framing: net/http lets chunked win, the proxy refuses to guess (RFC 9112 section 6.3 item 3)"},
	{regexp.MustCompile(`invalid Content-Length`), "as for requests, except that repeated values written the same are read (equal numbers written differently, 02 and 2, are refused as by net/http)"},
	{regexp.MustCompile(`invalid Trailer name`), "announced trailer names are checked as every field name; net/http canonicalizes anything"},
	{regexp.MustCompile(`chunk|quoted`), "as for requests"},
	{regexp.MustCompile(`too large|too many|line too long`), "bounds on what one upstream can make the proxy hold"},
	{regexp.MustCompile(`invalid character 0x(0[0-8a-f]|1.|7f) in value`), "as for requests"},
	{regexp.MustCompile(`underscore in header name`), "trailers keep the request rule"},
}

// laxerResponses: responses the client reads and net/http refuses.
var laxerResponses = []refusal{
	{regexp.MustCompile(`bad trailer key`), "net/http refuses a response announcing Content-Length, Transfer-Encoding or Trailer as trailers; the client drops them (they are never read as trailers) and reads the rest"},
}

type quietConn struct{ net.Conn }

func (quietConn) Close() error { return nil }

func readOurResponse(raw, method string) (*http.Response, []byte, error) {
	br := bufio.NewReader(strings.NewReader(raw))
	req := &http.Request{Method: method, Header: http.Header{}}
	resp, err := readResponse(br, req, Limits{})
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, nil, nil // informational: the client reads the next head
	}
	cc := &clientConn{c: quietConn{}, br: br, addr: "upstream"}
	body, err := newClientBody(&Client{}, cc, req, resp, func() bool { return true }, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(body)
	return resp, b, err
}

func readTheirResponse(raw, method string) (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func checkResponse(t *testing.T, raw string, head bool) {
	method := http.MethodGet
	if head {
		method = http.MethodHead
	}
	ours, ob, oerr := readOurResponse(raw, method)
	theirs, tb, terr := readTheirResponse(raw, method)
	switch {
	case oerr != nil && terr == nil:
		if _, ok := documented(stricterResponses, oerr); !ok {
			t.Fatalf("undocumented refusal of response %q (net/http reads it): %v", raw, oerr)
		}
	case oerr == nil && terr != nil && ours.StatusCode < 200 && ours.StatusCode != http.StatusSwitchingProtocols:
		// Documented: an informational response has no body, so the
		// client does not read its framing fields; net/http checks them.
	case oerr == nil && terr != nil:
		if _, ok := documented(laxerResponses, terr); !ok {
			t.Fatalf("client reads response %q, net/http refuses it: %v", raw, terr)
		}
	case oerr == nil && terr == nil:
		if ours.StatusCode != theirs.StatusCode || ours.ProtoMinor != theirs.ProtoMinor {
			t.Fatalf("%q: status %d 1.%d vs %d 1.%d", raw, ours.StatusCode, ours.ProtoMinor, theirs.StatusCode, theirs.ProtoMinor)
		}
		if ours.StatusCode < 200 && ours.StatusCode != http.StatusSwitchingProtocols {
			return
		}
		if !bytes.Equal(ob, tb) {
			t.Fatalf("%q: bodies differ: %q vs %q", raw, ob, tb)
		}
		if ours.Close != theirs.Close {
			t.Fatalf("%q: close %v vs %v", raw, ours.Close, theirs.Close)
		}
		sameTrailers(t, raw, ours.Trailer, theirs.Trailer)
	}
}

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n",
	"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\n\r\nto the end",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200\r\nX_A: 1\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
}

func TestResponseReadersAgreeOnTheSeeds(t *testing.T) {
	for _, s := range responseSeeds {
		checkResponse(t, s, false)
		checkResponse(t, s, true)
	}
}

func FuzzReadResponseAgainstNetHTTP(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, head bool) {
		checkResponse(t, raw, head)
	})
}

func TestCanonicalKeyMatchesTextproto(t *testing.T) {
	for _, name := range []string{
		"content-type", "CONTENT-LENGTH", "x-forwarded-for", "l5d-dst-canonical", "Weft-Mesh",
		"a", "-", "--x", "x--y", "x_y-z", "te", "Etag", "ETAG", "www-authenticate",
		"x-0a-b9", "~!#$%&'*+.^`|", strings.Repeat("ab-", 30),
	} {
		assert.Equal(t, textproto.CanonicalMIMEHeaderKey(name), canonicalKey([]byte(name)), name)
	}
}
