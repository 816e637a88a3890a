package h2client_test

//lint:file-ignore SA1019 x/net's HTTP/2 Server is the independent server the client is tested against, served on the test's own connections (ServeConn).

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// h2Server serves handler with x/net's HTTP/2 server on a loopback
// listener, over TLS when tlsOn, h2c otherwise.
type h2Server struct {
	addr   string
	tlsCfg *tls.Config // the client's, when TLS
}

func startH2(t *testing.T, tlsOn bool, srv *http2.Server, handler http.Handler) *h2Server {
	t.Helper()
	l := testutil.Listen(t)
	s := &h2Server{addr: l.Addr().String()}
	var serverTLS *tls.Config
	if tlsOn {
		ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "test-ca"})
		leaf := ca.Leaf(t, testutil.CertOptions{Name: "server.test"})
		serverTLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}
		s.tlsCfg = &tls.Config{RootCAs: testutil.Pool(ca), ServerName: "server.test", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}
	}
	if srv == nil {
		srv = &http2.Server{}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if serverTLS != nil {
				tc := tls.Server(c, serverTLS)
				_ = tc.SetDeadline(time.Now().Add(testutil.DefaultTimeout))
				if tc.Handshake() != nil {
					c.Close()
					continue
				}
				_ = tc.SetDeadline(time.Time{})
				c = tc
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(c, &http2.ServeConnOpts{Handler: handler})
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// dial connects a client to s with opts, closed when the test ends.
func (s *h2Server) dial(t *testing.T, opts ...h2client.Option) *h2client.Conn {
	t.Helper()
	return dialAddr(t, s.addr, s.tlsCfg, opts...)
}

func dialAddr(t *testing.T, addr string, tlsCfg *tls.Config, opts ...h2client.Option) *h2client.Conn {
	t.Helper()
	ctx := testutil.Context(t, 0)
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	require.NoError(t, err)
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		require.NoError(t, tc.HandshakeContext(ctx))
		require.Equal(t, "h2", tc.ConnectionState().NegotiatedProtocol)
		c = tc
	}
	cc, err := h2client.New(ctx, c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// request builds a request to addr under the test's timeout.
func request(t *testing.T, method, addr, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 0), method, "http://"+addr+path, body)
	require.NoError(t, err)
	return req
}

// readyBody is a request body already in memory that says so.
type readyBody struct{ *bytes.Reader }

func (readyBody) ReadReady() bool { return true }
func (readyBody) Close() error    { return nil }

// slowBody is a request body that yields its chunks one by one as the test
// sends them on next, and ends when next is closed.
type slowBody struct {
	next   chan []byte
	cur    []byte
	closed chan struct{}
	once   sync.Once
}

func newSlowBody() *slowBody {
	return &slowBody{next: make(chan []byte), closed: make(chan struct{})}
}

func (b *slowBody) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		select {
		case c, ok := <-b.next:
			if !ok {
				return 0, io.EOF
			}
			b.cur = c
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *slowBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// noClientGoroutines waits until no goroutine runs this package's code.
func noClientGoroutines(t *testing.T) {
	t.Helper()
	ok := testutil.Poll(testutil.Context(t, 0), func() bool {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "internal/h2client.") && !strings.Contains(g, "_test.") {
				return false
			}
		}
		return true
	})
	if !ok {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("h2client goroutines left:\n%s", buf[:n])
	}
}

// rawServer is a scripted HTTP/2 server for the cases a real one never
// produces: it reads the preface and SETTINGS, sends settings, and hands
// the framer to script.
type rawServer struct {
	addr string
}

// rawConn is the server side of one connection.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func startRaw(t *testing.T, settings []http2.Setting, script func(rc *rawConn)) *rawServer {
	t.Helper()
	l := testutil.Listen(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(testutil.DefaultTimeout))
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, pre); err != nil || string(pre) != http2.ClientPreface {
			t.Errorf("raw server: bad preface %q %v", pre, err)
			return
		}
		rc := &rawConn{t: t, c: c, fr: http2.NewFramer(c, c)}
		rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		rc.enc = hpack.NewEncoder(&rc.hbuf)
		if err := rc.fr.WriteSettings(settings...); err != nil {
			return
		}
		script(rc)
	}()
	t.Cleanup(func() {
		l.Close()
		select {
		case <-done:
		case <-time.After(testutil.DefaultTimeout):
			t.Error("raw server did not end")
		}
	})
	return &rawServer{addr: l.Addr().String()}
}

// next reads frames until one of type T (answering nothing), failing
// the script when the connection ends first.
func readUntil[T http2.Frame](rc *rawConn) (T, bool) {
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			var zero T
			return zero, false
		}
		if v, ok := f.(T); ok {
			return v, true
		}
	}
}

// block encodes header fields given as name, value pairs.
func (rc *rawConn) block(kv ...string) []byte {
	rc.hbuf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), rc.hbuf.Bytes()...)
}

func (rc *rawConn) headers(id uint32, end bool, kv ...string) {
	_ = rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.block(kv...), EndStream: end, EndHeaders: true})
}

// waitClosed reads until the client closes the connection, returning the
// GOAWAY it sent, if any.
func (rc *rawConn) waitClosed() *http2.GoAwayFrame {
	var ga *http2.GoAwayFrame
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return ga
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			ga = &http2.GoAwayFrame{LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
		}
	}
}

func contextWithCancel(req *http.Request) (context.Context, context.CancelFunc) {
	return context.WithCancel(req.Context())
}

// recv receives from c under the test's timeout.
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("timed out waiting on a channel")
		panic("unreachable")
	}
}
