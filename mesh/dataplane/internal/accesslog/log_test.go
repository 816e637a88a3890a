package accesslog_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/accesslog"
)

// lines hands each Write of the log to the test, in order.
type lines chan string

func (l lines) Write(b []byte) (int, error) {
	l <- string(b)
	return len(b), nil
}

func (l lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no access-log line")
		return ""
	}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 7, 21, 4, 5, 120_000_000, time.FixedZone("CET", 3600))

// server serves handler, wrapped as the proxy wraps inbound requests, on a
// real loopback socket; client describes the connection.
func server(t *testing.T, lg *accesslog.Log, client accesslog.Client, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := lg.Start(r, client)
		defer rec.Finish()
		handler(rec.Writer(w), r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// rawRequest sends req as is on a new connection to srv and returns the
// response's status line.
func rawRequest(t *testing.T, srv *httptest.Server, req string) (net.Conn, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	status, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return c, status
}

func TestNewRefusesAnUnknownFormat(t *testing.T) {
	_, err := accesslog.New("common", io.Discard, time.Now)
	assert.ErrorContains(t, err, `accesslog: format "common" is not apache or json`)
	for _, f := range []string{accesslog.Apache, accesslog.JSON} {
		_, err := accesslog.New(f, io.Discard, time.Now)
		assert.NoError(t, err, f)
	}
}

func TestAnApacheLineEscapesWhatTheClientSentOverARealSocket(t *testing.T) {
	out := make(lines, 4)
	clk := &clock{t: t0}
	lg, err := accesslog.New(accesslog.Apache, out, clk.now)
	require.NoError(t, err)
	srv := server(t, lg, accesslog.Client{Identity: "web.ns.serviceaccount.identity.weft.cluster.local"}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	// Quotes, a backslash and bytes that are not UTF-8 in the target;
	// Go's server refuses control characters and spaces there itself.
	c, status := rawRequest(t, srv, "GET /a\"b\\c\xff\xfe?q=<x>\" HTTP/1.1\r\nHost: h\r\n\r\n")
	assert.Equal(t, "HTTP/1.1 202 Accepted\r\n", status)
	want := fmt.Sprintf("%s web.ns.serviceaccount.identity.weft.cluster.local - [2026-12-07T20:04:05.12Z] \"GET /a\\x22b\\x5cc\\xff\\xfe?q=<x>\\x22 HTTP/1.1\" 202\n", c.LocalAddr())
	assert.Equal(t, want, out.next(t))
}

func TestApacheFieldsWithControlCharactersStayOnOneLine(t *testing.T) {
	out := make(lines, 4)
	lg, err := accesslog.New(accesslog.Apache, out, func() time.Time { return t0 })
	require.NoError(t, err)
	// A request no HTTP/1 server would pass on, as an HTTP/2 server might
	// (its pseudo-headers are not the request line): every peer-controlled
	// field carries a line break, a quote and an escape sequence.
	r := &http.Request{
		Method:     "GET\r\n1.2.3.4 - - [x] \"GET / HTTP/1.1\" 200",
		RequestURI: "/p?\x1b[2J\"\n",
		Host:       "evil\n\"host",
		Proto:      "HTTP/2.0", ProtoMajor: 2,
		RemoteAddr: "not an address",
		Header:     http.Header{},
	}
	rec := lg.Start(r, accesslog.Client{IP: netip.MustParseAddr("10.0.0.7")})
	rec.Finish()
	rec.Finish() // once
	line := out.next(t)
	assert.Equal(t, `10.0.0.7 - - [2026-12-07T20:04:05.12Z] "GET\x0d\x0a1.2.3.4\x20-\x20-\x20[x]\x20\x22GET\x20/\x20HTTP/1.1\x22\x20200 http://evil\x0a\x22host/p?\x1b[2J\x22\x0a HTTP/2.0"`+"\n", line)
	assert.Equal(t, 1, strings.Count(line, "\n"))
	assert.Empty(t, out, "a second Finish writes nothing")
}

func TestAJSONLineWithControlCharactersInEveryFieldIsOneValidObject(t *testing.T) {
	out := make(lines, 4)
	lg, err := accesslog.New(accesslog.JSON, out, func() time.Time { return t0 })
	require.NoError(t, err)
	hostile := "a\r\n{\"forged\":1}\x00\x1b\x7f\\\xff"
	r := &http.Request{
		Method: hostile, RequestURI: "/" + hostile, Host: hostile, Proto: "HTTP/2.0", ProtoMajor: 2,
		RemoteAddr: hostile, Header: http.Header{"User-Agent": {hostile}, "X-B3-Traceid": {hostile}, "Content-Length": {hostile}},
	}
	lg.Start(r, accesslog.Client{Identity: hostile}).Finish()
	line := out.next(t)
	assert.Equal(t, 1, strings.Count(line, "\n"))
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &got), line)
	want := string([]rune(hostile))
	for _, k := range []string{"client.addr", "client.id", "host", "method", "request_bytes", "trace_id", "user_agent"} {
		assert.Equal(t, want, got[k], k)
	}
	assert.Equal(t, "http://"+want+"/"+want, got["uri"])
}

func TestAJSONLineIsOneObjectWithSortedKeysWhateverTheHeadersHold(t *testing.T) {
	out := make(lines, 4)
	clk := &clock{t: t0}
	lg, err := accesslog.New(accesslog.JSON, out, clk.now)
	require.NoError(t, err)
	srv := server(t, lg, accesslog.Client{}, func(w http.ResponseWriter, r *http.Request) {
		clk.set(t0.Add(time.Millisecond))
		waited := accesslog.UpstreamTimer(w)
		clk.set(t0.Add(5 * time.Millisecond))
		waited()
		waited() // a second end adds nothing
		clk.set(t0.Add(7 * time.Millisecond))
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusCreated)
		clk.set(t0.Add(time.Hour)) // after the head: not in total_ns
		io.WriteString(w, "ok")
	})
	ua := "ua \"quoted\" \\ \xff\xfe \u2028 " + strings.Repeat("\"x", 128<<10) // 256 KiB of quotes
	req := "POST /submit?a=%22b HTTP/1.1\r\nHost: app.ns:8080\r\nContent-Length: 3\r\n" +
		"User-Agent: " + ua + "\r\nX-Request-Id: req\"1\r\nX-Amzn-Trace-Id: amzn\r\n\r\nabc"
	c, status := rawRequest(t, srv, req)
	assert.Equal(t, "HTTP/1.1 201 Created\r\n", status)

	line := out.next(t)
	require.True(t, strings.HasSuffix(line, "}\n"))
	assert.Equal(t, 1, strings.Count(line, "\n"), "one line, however many quotes and separators the headers hold")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &got), "%.200s", line)
	assert.Equal(t, map[string]any{
		"client.addr":    c.LocalAddr().String(),
		"client.id":      "-",
		"host":           "app.ns:8080",
		"method":         "POST",
		"processing_ns":  "3000000", // 7 ms to the head, 4 of them waiting for the application
		"request_bytes":  "3",
		"response_bytes": "2",
		"status":         float64(201),
		"timestamp":      "2026-12-07T20:04:05.12Z",
		"total_ns":       "7000000",
		"trace_id":       "req\"1", // x-request-id before x-amzn-trace-id
		"uri":            "/submit?a=%22b",
		"user_agent":     string([]rune(ua)),
		"version":        "HTTP/1.1",
	}, got)
	var keys []string
	dec := json.NewDecoder(strings.NewReader(line))
	_, err = dec.Token()
	require.NoError(t, err)
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var v any
		require.NoError(t, dec.Decode(&v))
	}
	assert.IsNonDecreasing(t, keys, "keys sorted, as Linkerd writes them")
}

func TestAJSONLineWithoutAResponseHeadHasNoStatus(t *testing.T) {
	out := make(lines, 4)
	lg, err := accesslog.New(accesslog.JSON, out, func() time.Time { return t0 })
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-B3-Traceid", "b3")
	r.Header.Set("X-Request-Id", "req")
	lg.Start(r, accesslog.Client{}).Finish()
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.next(t)), &got))
	assert.NotContains(t, got, "status")
	assert.NotContains(t, got, "response_bytes")
	assert.Equal(t, "b3", got["trace_id"], "x-b3-traceid first")
	assert.Equal(t, "0", got["total_ns"])
}

func TestAnHTTP1RequestAPeerProxyCarriedOverHTTP2IsLoggedWithItsVersion(t *testing.T) {
	out := make(lines, 4)
	lg, err := accesslog.New(accesslog.Apache, out, func() time.Time { return t0 })
	require.NoError(t, err)
	r := &http.Request{Method: "GET", RequestURI: "/x", Host: "app", Proto: "HTTP/2.0", ProtoMajor: 2,
		RemoteAddr: "[::ffff:10.0.0.8]:4143", Header: http.Header{"L5d-Orig-Proto": {"HTTP/1.0; absolute-form"}}}
	lg.Start(r, accesslog.Client{FromProxy: true}).Finish()
	assert.Equal(t, `10.0.0.8:4143 - - [2026-12-07T20:04:05.12Z] "GET /x HTTP/1.0"`+"\n", out.next(t))

	// From anything but a peer proxy the header is not believed.
	lg.Start(r, accesslog.Client{}).Finish()
	assert.Equal(t, `10.0.0.8:4143 - - [2026-12-07T20:04:05.12Z] "GET http://app/x HTTP/2.0"`+"\n", out.next(t))
}

func TestTheWriterFlushesAndAHijackIsLoggedAsSwitchingProtocols(t *testing.T) {
	out := make(lines, 4)
	lg, err := accesslog.New(accesslog.Apache, out, func() time.Time { return t0 })
	require.NoError(t, err)
	headRead := make(chan struct{})
	srv := server(t, lg, accesslog.Client{}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flush" {
			w.WriteHeader(http.StatusOK)
			assert.NoError(t, http.NewResponseController(w).Flush())
			<-headRead // the head reached the client before the handler ends
			return
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		brw.Flush()
		c.Close()
	})
	_, status := rawRequest(t, srv, "GET /flush HTTP/1.1\r\nHost: h\r\n\r\n")
	assert.Equal(t, "HTTP/1.1 200 OK\r\n", status)
	close(headRead)
	assert.Contains(t, out.next(t), `"GET /flush HTTP/1.1" 200`)

	_, status = rawRequest(t, srv, "GET /up HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
	assert.Equal(t, "HTTP/1.1 101 Switching Protocols\r\n", status)
	assert.Contains(t, out.next(t), `"GET /up HTTP/1.1" 101`)
}
