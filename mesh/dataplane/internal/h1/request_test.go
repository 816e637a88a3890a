package h1_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

func read(raw string) (*http.Request, error) {
	return h1.ReadRequest(bufio.NewReaderSize(strings.NewReader(raw), 4096), h1.Limits{})
}

// readAll reads a request and its whole body.
func readAll(raw string) (*http.Request, string, error) {
	req, err := read(raw)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(req.Body)
	return req, string(b), err
}

func TestReadRequestRefusesAmbiguousFraming(t *testing.T) {
	// T01: every way two parsers could disagree about where a body ends.
	cases := map[string]struct {
		raw    string
		status int
	}{
		"CL and TE":             {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		"TE and CL":             {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400},
		"duplicate CL":          {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400},
		"CL list":               {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello", 400},
		"CL sign":               {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello", 400},
		"CL hex":                {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello", 400},
		"space before colon":    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
		"TE list":               {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
		"TE upper case":         {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n", 400},
		"TE mixed case":         {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", 400},
		"TE padded":             {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400},
		"TE twice":              {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		"TE gzip only":          {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		"TE on HTTP/1.0":        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		"TE with vertical tab":  {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n", 400},
		"Trailer without chunk": {"POST / HTTP/1.1\r\nHost: a\r\nTrailer: X\r\nContent-Length: 1\r\n\r\nx", 400},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := read(c.raw)
			require.Error(t, err)
			assert.Equal(t, c.status, h1.StatusOf(err), err.Error())
		})
	}
}

func TestReadRequestRefusesMalformedChunks(t *testing.T) {
	// T02: bare LF or CR in chunk lines, malformed extensions, trailers.
	head := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	cases := map[string]string{
		"bare LF after size":        "5\nhello\r\n0\r\n\r\n",
		"bare CR in size line":      "5\r;x\r\nhello\r\n0\r\n\r\n",
		"bare LF after data":        "5\r\nhello\n0\r\n\r\n",
		"no CRLF after data":        "5\r\nhelloXX0\r\n\r\n",
		"unterminated quoted ext":   "5;a=\"abc\r\nhello\r\n0\r\n\r\n",
		"ext without name":          "5;=x\r\nhello\r\n0\r\n\r\n",
		"ext value missing":         "5;a=\r\nhello\r\n0\r\n\r\n",
		"space without extension":   "5 \r\nhello\r\n0\r\n\r\n",
		"size with sign":            "+5\r\nhello\r\n0\r\n\r\n",
		"size overflow":             "fffffffffffffffff\r\nhello\r\n0\r\n\r\n",
		"bare LF in trailer":        "5\r\nhello\r\n0\r\nX-T: 1\n\r\n",
		"obs-fold in trailer":       "5\r\nhello\r\n0\r\nX-T: 1\r\n 2\r\n\r\n",
		"truncated body":            "5\r\nhel",
		"missing last chunk":        "5\r\nhello\r\n",
		"NUL in trailer value":      "0\r\nX-T: a\x00b\r\n\r\n",
		"underscore in trailer":     "0\r\nX_T: a\r\n\r\n",
		"chunk line too long":       strings.Repeat("0", 5000) + "5\r\nhello\r\n0\r\n\r\n",
		"huge extension per byte":   strings.Repeat("1;"+strings.Repeat("e", 4000)+"\r\nx\r\n", 8) + "0\r\n\r\n",
		"size line is only ext":     ";a=b\r\nhello\r\n0\r\n\r\n",
		"quoted ext with bare ctrl": "5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := readAll(head + body)
			assert.Error(t, err, "the body must not be read as complete")
		})
	}
}

func TestReadRequestAcceptsWellFormedChunksAndTrailers(t *testing.T) {
	raw := "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
		"5;name=value;q=\"quoted \\\" text\"\r\nhello\r\n6 ; spaced = ext\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n"
	req, body, err := readAll(raw)
	require.NoError(t, err)
	assert.Equal(t, "hello world", body)
	assert.Equal(t, int64(-1), req.ContentLength)
	assert.Equal(t, []string{"chunked"}, req.TransferEncoding)
	assert.Equal(t, "42", req.Trailer.Get("X-Sum"))
	assert.Empty(t, req.Header.Get("Transfer-Encoding"), "framing headers are not handed on")
}

func TestReadRequestRefusesBadHeaderFields(t *testing.T) {
	// T03: refused before any policy or routing sees the request.
	cases := map[string]string{
		"obs-fold":            "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n",
		"obs-fold tab":        "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\t2\r\n\r\n",
		"NUL in value":        "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
		"CR in value":         "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n",
		"bare LF line end":    "GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n",
		"NUL in name":         "GET / HTTP/1.1\r\nHost: a\r\nX\x00A: b\r\n\r\n",
		"space in name":       "GET / HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n",
		"non-token name":      "GET / HTTP/1.1\r\nHost: a\r\nX(A): b\r\n\r\n",
		"underscore":          "GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1.2.3.4\r\n\r\n",
		"empty name":          "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n",
		"no colon":            "GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n",
		"DEL in value":        "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x7fb\r\n\r\n",
		"high bit in name":    "GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: b\r\n\r\n",
		"missing host":        "GET / HTTP/1.1\r\n\r\n",
		"two hosts":           "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"host with CRLF text": "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
		"host with slash":     "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
		"host with at":        "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
		// Announced trailer names follow the rules of every field name.
		"underscore in an announced trailer": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X_Sum\r\n\r\n0\r\n\r\n",
		"space in an announced trailer":      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X Sum\r\n\r\n0\r\n\r\n",
		"forbidden announced trailer":        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: Host\r\n\r\n0\r\n\r\n",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := read(raw)
			require.Error(t, err)
			assert.Equal(t, http.StatusBadRequest, h1.StatusOf(err), err.Error())
		})
	}
}

func TestReadRequestRefusesBadRequestLinesWithTheRightStatus(t *testing.T) {
	// T04.
	cases := map[string]struct {
		raw    string
		status int
	}{
		"HTTP/0.9":             {"GET /\r\n\r\n", 400},
		"lower-case method":    {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"unknown version":      {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505},
		"HTTP/2 line":          {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		"garbage version":      {"GET / HTTPS/1.1\r\nHost: a\r\n\r\n", 400},
		"two spaces":           {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"fragment":             {"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"space in target":      {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"control in target":    {"GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"relative target":      {"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"asterisk not OPTIONS": {"GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"ftp absolute":         {"GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		"bare LF request line": {"GET / HTTP/1.1\nHost: a\r\n\r\n", 400},
		"long request line":    {"GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		"long header":          {"GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("a", 70000) + "\r\n\r\n", 431},
		"many headers":         {"GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: b\r\n", 200) + "\r\n", 431},
		"expect other":         {"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := read(c.raw)
			require.Error(t, err)
			assert.Equal(t, c.status, h1.StatusOf(err), err.Error())
		})
	}
}

func TestConnectTargetsNeedAValidHost(t *testing.T) {
	for _, host := range []string{"web.shop", "10.0.0.1", "[fd00::1]", "a%2Db", "x_y~z"} {
		req, err := read("CONNECT " + host + ":443 HTTP/1.1\r\nHost: " + host + ":443\r\n\r\n")
		if assert.NoError(t, err, host) {
			assert.Equal(t, host+":443", req.Host)
		}
	}
	// found by FuzzReadRequestAgainstNetHTTP: a bad percent-encoding
	for _, host := range []string{"%", "%4", "%zz", "a b", "a/b", "a@b", "[fd00::1", "[10.0.0.1]", "[fe80::1%25eth0]", "a:b"} {
		_, err := read("CONNECT " + host + ":443 HTTP/1.1\r\nHost: x:443\r\n\r\n")
		assert.Error(t, err, "CONNECT to %q", host)
	}
}

func TestReadRequestUnderstandsEveryTargetForm(t *testing.T) {
	req, err := read("GET http://web.shop:8080/a/b?x=1 HTTP/1.1\r\nHost: ignored\r\n\r\n")
	require.NoError(t, err)
	assert.Equal(t, "web.shop:8080", req.Host, "the absolute-form authority wins over Host")
	assert.Equal(t, "/a/b", req.URL.Path)

	req, err = read("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
	require.NoError(t, err)
	assert.Equal(t, "*", req.RequestURI)

	req, err = read("CONNECT web:443 HTTP/1.1\r\nHost: web:443\r\n\r\n")
	require.NoError(t, err)
	assert.Equal(t, "web:443", req.Host)

	req, err = read("GET /x HTTP/1.0\r\n\r\n")
	require.NoError(t, err, "HTTP/1.0 may omit Host")
	assert.True(t, req.Close, "HTTP/1.0 closes unless asked to keep alive")

	req, err = read("GET /x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n")
	require.NoError(t, err)
	assert.True(t, req.Close)

	_, err = read("")
	assert.ErrorIs(t, err, io.EOF, "a connection that ends between requests is not an error to answer")
}

func TestReadRequestBoundsMemoryForHugeHeads(t *testing.T) {
	// A head that never ends is refused at the limit, not buffered.
	r := io.MultiReader(strings.NewReader("GET / HTTP/1.1\r\nHost: a\r\n"), &endless{b: []byte("X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")})
	_, err := h1.ReadRequest(bufio.NewReaderSize(r, 4096), h1.Limits{MaxHeaderBytes: 16 << 10, MaxHeaders: 100000})
	require.Error(t, err)
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, h1.StatusOf(err))
}

type endless struct {
	b []byte
	n int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.b[e.n%len(e.b):])
		n += c
		e.n += c
	}
	return n, nil
}

func TestContentLengthBodiesEndExactly(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\nHost: a\r\n\r\n"))
	req, err := h1.ReadRequest(br, h1.Limits{})
	require.NoError(t, err)
	b, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	next, err := h1.ReadRequest(br, h1.Limits{})
	require.NoError(t, err, "the pipelined request starts exactly after the body")
	assert.Equal(t, "/next", next.RequestURI)

	req, err = read("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nshort")
	require.NoError(t, err)
	_, err = io.ReadAll(req.Body)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: T\r\n\r\n3;e=\"q\"\r\nabc\r\n0\r\nT: 1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET http://a:1/b HTTP/1.0\r\n\r\n",
		"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		req, err := read(raw)
		if err != nil {
			if st := h1.StatusOf(err); st != 0 && (st < 400 || st > 599) {
				t.Fatalf("refusal with status %d", st)
			}
			return
		}
		// Whatever is accepted is unambiguous.
		if len(req.TransferEncoding) > 0 && req.Header.Get("Content-Length") != "" {
			t.Fatal("accepted Content-Length with Transfer-Encoding")
		}
		if len(req.Header["Content-Length"]) > 1 {
			t.Fatal("accepted several Content-Length fields")
		}
		for k, vs := range req.Header {
			if !h1.ValidName(k) {
				t.Fatalf("accepted header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("accepted value %q", v)
				}
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	})
}

func FuzzChunkedReader(f *testing.F) {
	f.Add("5\r\nhello\r\n0\r\n\r\n")
	f.Add("1;a=b;c=\"d\"\r\nx\r\n0\r\nT: v\r\n\r\n")
	f.Add("5\nhello\r\n0\r\n\r\n")
	f.Fuzz(func(t *testing.T, body string) {
		cr := h1.NewChunkedReader(bufio.NewReader(strings.NewReader(body)), 0)
		n, err := io.Copy(io.Discard, io.LimitReader(cr, 1<<20))
		if err == nil && n > int64(len(body)) {
			t.Fatalf("read %d bytes of data from %d bytes of input", n, len(body))
		}
	})
}

func ExampleReadRequest() {
	raw := "POST /orders HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
	_, err := h1.ReadRequest(bufio.NewReader(strings.NewReader(raw)), h1.Limits{})
	fmt.Println(h1.StatusOf(err))

	raw = "GET /orders/7 HTTP/1.1\r\nHost: shop\r\n\r\n"
	req, _ := h1.ReadRequest(bufio.NewReader(strings.NewReader(raw)), h1.Limits{})
	fmt.Println(req.Method, req.Host, req.URL.Path)
	// Output:
	// 400
	// GET shop /orders/7
}
