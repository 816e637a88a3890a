package dataplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The tap server speaks gRPC over HTTP/2 itself (tap_h2.go). These tests
// hold it to what grpc-go's server answered, by asking a real grpc-go
// server the same questions, and attack it with what a grpc-go client
// never sends.

// tapH2Client is a plain HTTP/2 client over mutual TLS with a
// certificate for name.
func tapH2Client(t testing.TB, pk *pki, name, serverID string) (*http.Client, *http.Transport) {
	t.Helper()
	leaf := pk.issuer.Leaf(t, testutil.CertOptions{Name: name})
	var protos http.Protocols
	protos.SetHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DisableCompression: true, TLSClientConfig: &tls.Config{
		RootCAs: testutil.Pool(pk.anchor), ServerName: serverID, MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{leaf.TLS},
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

// tapAnswer is what a server said to a raw call.
type tapAnswer struct {
	httpStatus   int
	contentType  string
	code         string // grpc-status
	message      string // grpc-message
	trailersOnly bool   // the status came in the response head
	body         []byte
}

// rawCall sends one HTTP/2 request to the tap server at addr and reads
// the whole answer.
func rawCall(t testing.TB, c *http.Client, addr, method, path string, header map[string]string, body []byte) tapAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), method, "https://"+addr+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := tapAnswer{httpStatus: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: got}
	if a.code = resp.Header.Get("Grpc-Status"); a.code != "" {
		a.trailersOnly, a.message = true, resp.Header.Get("Grpc-Message")
	} else {
		a.code, a.message = resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	}
	return a
}

// grpcFrame is one gRPC length-prefixed message.
func grpcFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// referenceTap is grpc-go's server with the tap service, configured as
// the tap server was before it left grpc-go: it answers a valid request
// with OK at once.
type referenceTap struct{ ptap.UnimplementedTapServer }

func (referenceTap) Observe(*ptap.ObserveRequest, grpc.ServerStreamingServer[ptap.TapEvent]) error {
	return nil
}

func startReferenceTap(t testing.TB, pk *pki, serverID string) string {
	t.Helper()
	leaf := pk.issuer.Leaf(t, testutil.CertOptions{Name: serverID})
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{leaf.TLS}, ClientAuth: tls.RequireAnyClientCert,
		MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
	})), grpc.MaxRecvMsgSize(64<<10))
	ptap.RegisterTapServer(srv, referenceTap{})
	l := testutil.Listen(t)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

func TestTheTapServerAnswersBadCallsAsGRPCGoDid(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	ref := startReferenceTap(t, hp.pki, idA)
	c, _ := tapH2Client(t, hp.pki, idTapper, idA)

	valid, err := proto.Marshal(&ptap.ObserveRequest{Limit: 1, Match: everything()})
	require.NoError(t, err)
	huge := make([]byte, 64<<10+1)
	for _, tc := range []struct {
		name         string
		method, path string
		header       map[string]string
		body         []byte
		code         codes.Code
		sameMessage  bool // grpc-go's message is deterministic and ours repeats it
	}{
		{name: "an unknown method", path: "/io.linkerd.proxy.tap.Tap/Nope", body: grpcFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "an unknown service", path: "/grpc.health.v1.Health/Check", body: grpcFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a malformed method name", path: "/nothing", body: grpcFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a query after the method", path: "/io.linkerd.proxy.tap.Tap/Observe?x=1", body: grpcFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "another content-type", header: map[string]string{"Content-Type": "application/json"}, body: grpcFrame(0, valid), code: codes.InvalidArgument, sameMessage: true},
		{name: "no content-type", header: map[string]string{"Content-Type": ""}, body: grpcFrame(0, valid), code: codes.InvalidArgument, sameMessage: true},
		{name: "a GET", method: http.MethodGet, code: codes.Internal, sameMessage: true},
		{name: "a malformed grpc-timeout", header: map[string]string{"Grpc-Timeout": "12x"}, body: grpcFrame(0, valid), code: codes.Internal},
		{name: "a request over the size limit", body: grpcFrame(0, huge), code: codes.ResourceExhausted, sameMessage: true},
		{name: "a compressed request, no encoding named", body: grpcFrame(1, valid), code: codes.Internal, sameMessage: true},
		{name: "a compressed request in an unknown encoding", header: map[string]string{"Grpc-Encoding": "weft-zip"}, body: grpcFrame(1, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a bad prefix flag", body: grpcFrame(7, valid), code: codes.Internal, sameMessage: true},
		{name: "two requests", body: append(grpcFrame(0, valid), grpcFrame(0, valid)...), code: codes.Internal, sameMessage: true},
		{name: "no request", body: nil, code: codes.Internal, sameMessage: true},
		{name: "a truncated prefix", body: grpcFrame(0, valid)[:3], code: codes.Internal, sameMessage: true},
		{name: "a truncated message", body: grpcFrame(0, valid)[:len(valid)], code: codes.Internal, sameMessage: true},
		{name: "a message that is not protobuf", body: grpcFrame(0, []byte{0xff, 0xff, 0xff}), code: codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/io.linkerd.proxy.tap.Tap/Observe"
			}
			want := rawCall(t, c, ref, method, path, tc.header, tc.body)
			got := rawCall(t, c, hp.tapA.Addr().String(), method, path, tc.header, tc.body)
			require.Equal(t, strconv.Itoa(int(tc.code)), want.code, "grpc-go's answer: %+v", want)
			assert.Equal(t, want.httpStatus, got.httpStatus, "the HTTP status")
			assert.Equal(t, want.contentType, got.contentType)
			assert.Equal(t, want.code, got.code, "the gRPC status: %q", got.message)
			assert.Equal(t, want.trailersOnly, got.trailersOnly, "where the status comes")
			assert.Empty(t, got.body)
			if tc.sameMessage {
				assert.Equal(t, want.message, got.message)
			} else {
				assert.NotEmpty(t, got.message)
			}
		})
	}
	require.NoError(t, hp.a.proxy.Ready(), "the proxy still serves")
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
}

func TestTheTapServerRefusesANonTapperInTheResponseHead(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	c, _ := tapH2Client(t, hp.pki, idC, idA)
	valid, err := proto.Marshal(&ptap.ObserveRequest{Limit: 1, Match: everything()})
	require.NoError(t, err)
	got := rawCall(t, c, hp.tapA.Addr().String(), http.MethodPost, "/io.linkerd.proxy.tap.Tap/Observe", nil, grpcFrame(0, valid))
	assert.Equal(t, http.StatusOK, got.httpStatus)
	assert.Equal(t, "application/grpc", got.contentType)
	assert.Equal(t, strconv.Itoa(int(codes.PermissionDenied)), got.code)
	assert.True(t, got.trailersOnly, "refused before any event")
	assert.Equal(t, "dataplane: \""+idC+"\" is not an accepted tapper", got.message)
	assert.Equal(t, 1.0, hp.a.metric(t, "tap_streams_refused_total", `reason="identity"`))
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
}

func TestGarbageFromAnHTTP2ClientGetsAnErrorAndLeavesNothingBehind(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	valid, err := proto.Marshal(&ptap.ObserveRequest{Limit: 1, Match: everything()})
	require.NoError(t, err)
	addr := hp.tapA.Addr().String()
	// A first call warms what the proxy starts once, and a first scrape
	// opens the admin connection the test keeps: the count after them is
	// the steady one.
	var transports []*http.Transport
	closeAll := func() {
		for _, tr := range transports {
			tr.CloseIdleConnections() // a connection is idle once its streams ended on both sides
		}
	}
	c0, tr0 := tapH2Client(t, hp.pki, idTapper, idA)
	transports = append(transports, tr0)
	rawCall(t, c0, addr, http.MethodPost, "/nothing", nil, nil)
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
	baseline := -1
	testutil.Eventually(t, 10*time.Second, func() bool {
		closeAll()
		n := runtime.NumGoroutine()
		steady := n == baseline // two polls apart
		baseline = n
		return steady
	}, "a steady goroutine count")

	for round := 0; round < 3; round++ {
		c, tr := tapH2Client(t, hp.pki, idTapper, idA)
		transports = append(transports, tr)
		for _, body := range [][]byte{
			{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01},                // a bad prefix
			append(grpcFrame(0, valid), grpcFrame(0, valid)...), // two requests
			grpcFrame(0, valid)[:4+len(valid)/2],                // a truncated message
			grpcFrame(0, []byte{0x0a, 0xff, 0xff}),              // a message that is not protobuf
		} {
			got := rawCall(t, c, addr, http.MethodPost, "/io.linkerd.proxy.tap.Tap/Observe", nil, body)
			assert.NotEqual(t, "0", got.code, "%x gets an error status", body)
			assert.NotEmpty(t, got.code, "%x gets a gRPC status", body)
		}
	}
	require.NoError(t, hp.a.proxy.Ready(), "the proxy still serves")
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
	// Polled on the test's goroutine (testutil.Poll): a helper polling
	// from a goroutine of its own would be counted.
	testutil.Eventually(t, 10*time.Second, func() bool { closeAll(); return runtime.NumGoroutine() <= baseline },
		"the goroutines of the closed connections and their streams end")
}

func TestATapWithADeadlineEndsWithDeadlineExceeded(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	c, _ := tapH2Client(t, hp.pki, idTapper, idA)
	valid, err := proto.Marshal(&ptap.ObserveRequest{Limit: 10, Match: everything()})
	require.NoError(t, err)
	got := rawCall(t, c, hp.tapA.Addr().String(), http.MethodPost, "/io.linkerd.proxy.tap.Tap/Observe",
		map[string]string{"Grpc-Timeout": "200m"}, grpcFrame(0, valid))
	assert.Equal(t, strconv.Itoa(int(codes.DeadlineExceeded)), got.code, "%+v", got)
	testutil.Eventually(t, 5*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 0 }, "the tap is unregistered")
}

func TestACanceledTapFreesItsPlace(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) { tapConfig(c); c.TapMaxTaps = 1 }})
	c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(ctxTimeout(t, 30*time.Second))
		stream, err := c.Observe(ctx, &ptap.ObserveRequest{Limit: 10, Match: everything()})
		require.NoError(t, err)
		testutil.Eventually(t, 10*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 1 }, fmt.Sprintf("tap %d is open", i))
		cancel() // a RST_STREAM
		_, err = stream.Recv()
		assert.Equal(t, codes.Canceled, status.Code(err))
		testutil.Eventually(t, 10*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 0 }, fmt.Sprintf("tap %d gives its place back", i))
	}
	assert.LessOrEqual(t, hp.a.metric(t, "tap_streams_refused_total", `reason="limit"`), 0.0, "never refused (absent or zero)")
}

// rawEvents is a grpc-go codec that hands over a message's bytes as they
// came, so that a test sees what the tap put on the wire.
type rawEvents struct{}

func (rawEvents) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (rawEvents) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawEvents) Name() string { return "proto" }

func TestAGRPCGoClientReceivesEveryEventAsTheTapSentIt(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapMaxEventsPerSecond = 1 << 20
	}})
	leaf := hp.pki.issuer.Leaf(t, testutil.CertOptions{Name: idTapper})
	conn, err := grpc.NewClient(hp.tapA.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: testutil.Pool(hp.pki.anchor), ServerName: idA, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{leaf.TLS},
	})))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	stream, err := conn.NewStream(ctxTimeout(t, 60*time.Second), &grpc.StreamDesc{ServerStreams: true},
		"/io.linkerd.proxy.tap.Tap/Observe", grpc.ForceCodec(rawEvents{}))
	require.NoError(t, err)
	require.NoError(t, stream.SendMsg(&ptap.ObserveRequest{Limit: 1 << 20, Match: everything(), Extract: withHeaders()}))
	require.NoError(t, stream.CloseSend())
	testutil.Eventually(t, 10*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 1 }, "the tap is registered")

	const requests = 400 // 1,200 events: full batches of 256, writes past HTTP/2's 16 KiB frames
	want := dataplane.TapEncodedForTest(hp.a.proxy, requests)
	require.Len(t, want, 3*requests)
	got := make(chan []byte, len(want))
	go func() {
		defer close(got)
		for range want {
			var b []byte
			if stream.RecvMsg(&b) != nil {
				return
			}
			got <- b
		}
	}()
	dataplane.TapFeedForTest(hp.a.proxy, requests)
	for i, w := range want {
		var b []byte
		select {
		case b = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d events", i, len(want))
		}
		require.NotNil(t, b, "event %d arrives", i)
		require.Equal(t, w, b, "event %d is received bit for bit as it was encoded", i)
		var ev ptap.TapEvent
		require.NoError(t, proto.Unmarshal(b, &ev), "event %d decodes", i)
		require.Equal(t, uint64(i/3), idOf(&ev).GetStream(), "event %d is of request %d", i, i/3)
	}
}

func TestTheTapServerSpeaksOnlyHTTP2(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	leaf := hp.pki.issuer.Leaf(t, testutil.CertOptions{Name: idTapper})
	dial := func(protos ...string) (*tls.Conn, error) {
		d := &tls.Dialer{Config: &tls.Config{
			RootCAs: testutil.Pool(hp.pki.anchor), ServerName: idA, MinVersion: tls.VersionTLS13,
			Certificates: []tls.Certificate{leaf.TLS}, NextProtos: protos,
		}}
		c, err := d.DialContext(ctxTimeout(t, 10*time.Second), "tcp", hp.tapA.Addr().String())
		if err != nil {
			return nil, err
		}
		return c.(*tls.Conn), nil
	}
	_, err := dial("spdy/3")
	assert.Error(t, err, "a client that offers no protocol the server has fails the handshake")

	// A client offering HTTP/1.1 (crypto/tls lets it through with no
	// protocol chosen) or nothing completes the handshake, and the server
	// closes the connection without an answer.
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		c, err := dial(protos...)
		require.NoError(t, err)
		assert.Empty(t, c.ConnectionState().NegotiatedProtocol)
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, _ = c.Write([]byte("POST /io.linkerd.proxy.tap.Tap/Observe HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
		n, err := c.Read(make([]byte, 1))
		assert.Zero(t, n, "%v: no answer", protos)
		assert.ErrorIs(t, err, io.EOF, "%v: the connection is closed, not timed out", protos)
		c.Close()
	}
}
