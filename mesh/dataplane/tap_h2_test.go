package dataplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"syscall"
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
		{name: "an unknown method", path: "/io.linkerd.proxy.tap.Tap/Nope", body: testutil.GRPCFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "an unknown service", path: "/grpc.health.v1.Health/Check", body: testutil.GRPCFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a malformed method name", path: "/nothing", body: testutil.GRPCFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a query after the method", path: "/io.linkerd.proxy.tap.Tap/Observe?x=1", body: testutil.GRPCFrame(0, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "another content-type", header: map[string]string{"Content-Type": "application/json"}, body: testutil.GRPCFrame(0, valid), code: codes.InvalidArgument, sameMessage: true},
		{name: "no content-type", header: map[string]string{"Content-Type": ""}, body: testutil.GRPCFrame(0, valid), code: codes.InvalidArgument, sameMessage: true},
		{name: "a GET", method: http.MethodGet, code: codes.Internal, sameMessage: true},
		{name: "a malformed grpc-timeout", header: map[string]string{"Grpc-Timeout": "12x"}, body: testutil.GRPCFrame(0, valid), code: codes.Internal},
		{name: "a request over the size limit", body: testutil.GRPCFrame(0, huge), code: codes.ResourceExhausted, sameMessage: true},
		{name: "a compressed request, no encoding named", body: testutil.GRPCFrame(1, valid), code: codes.Internal, sameMessage: true},
		{name: "a compressed request in an unknown encoding", header: map[string]string{"Grpc-Encoding": "weft-zip"}, body: testutil.GRPCFrame(1, valid), code: codes.Unimplemented, sameMessage: true},
		{name: "a bad prefix flag", body: testutil.GRPCFrame(7, valid), code: codes.Internal, sameMessage: true},
		{name: "two requests", body: append(testutil.GRPCFrame(0, valid), testutil.GRPCFrame(0, valid)...), code: codes.Internal, sameMessage: true},
		{name: "no request", body: nil, code: codes.Internal, sameMessage: true},
		{name: "a truncated prefix", body: testutil.GRPCFrame(0, valid)[:3], code: codes.Internal, sameMessage: true},
		{name: "a truncated message", body: testutil.GRPCFrame(0, valid)[:len(valid)], code: codes.Internal, sameMessage: true},
		{name: "a message that is not protobuf", body: testutil.GRPCFrame(0, []byte{0xff, 0xff, 0xff}), code: codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/io.linkerd.proxy.tap.Tap/Observe"
			}
			want := testutil.RawGRPCCall(t, c, ref, method, path, tc.header, tc.body)
			got := testutil.RawGRPCCall(t, c, hp.tapA.Addr().String(), method, path, tc.header, tc.body)
			require.Equal(t, strconv.Itoa(int(tc.code)), want.Code, "grpc-go's answer: %+v", want)
			assert.Equal(t, want.HTTPStatus, got.HTTPStatus, "the HTTP status")
			assert.Equal(t, want.ContentType, got.ContentType)
			assert.Equal(t, want.Code, got.Code, "the gRPC status: %q", got.Message)
			assert.Equal(t, want.TrailersOnly, got.TrailersOnly, "where the status comes")
			assert.Empty(t, got.Body)
			if tc.sameMessage {
				assert.Equal(t, want.Message, got.Message)
			} else {
				assert.NotEmpty(t, got.Message)
			}
		})
	}
	require.NoError(t, hp.a.proxy.Ready(), "the proxy still serves")
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
}

func TestTheTapServerClosesANonTapperRightAfterItsHandshake(t *testing.T) {
	// A non-tapper's connection is closed before it can send a request
	// (internal/tap/gate.go): it holds no slot, and no stream of it is read.
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	c, _ := tapH2Client(t, hp.pki, idC, idA)
	valid, err := proto.Marshal(&ptap.ObserveRequest{Limit: 1, Match: everything()})
	require.NoError(t, err)
	resp, err := c.Post("https://"+hp.tapA.Addr().String()+"/io.linkerd.proxy.tap.Tap/Observe", "application/grpc",
		bytes.NewReader(testutil.GRPCFrame(0, valid)))
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err, "the connection is closed, no answer")
	testutil.Eventually(t, 10*time.Second, func() bool {
		return hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="not-a-tapper"`) >= 1
	}, "the refusal is counted")
	assert.Equal(t, -1.0, hp.a.metric(t, "tap_streams_refused_total", `reason="identity"`), "no stream was read")
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_connections_open"))
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
	testutil.RawGRPCCall(t, c0, addr, http.MethodPost, "/nothing", nil, nil)
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
			{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01},                                  // a bad prefix
			append(testutil.GRPCFrame(0, valid), testutil.GRPCFrame(0, valid)...), // two requests
			testutil.GRPCFrame(0, valid)[:4+len(valid)/2],                         // a truncated message
			testutil.GRPCFrame(0, []byte{0x0a, 0xff, 0xff}),                       // a message that is not protobuf
		} {
			got := testutil.RawGRPCCall(t, c, addr, http.MethodPost, "/io.linkerd.proxy.tap.Tap/Observe", nil, body)
			assert.NotEqual(t, "0", got.Code, "%x gets an error status", body)
			assert.NotEmpty(t, got.Code, "%x gets a gRPC status", body)
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
	got := testutil.RawGRPCCall(t, c, hp.tapA.Addr().String(), http.MethodPost, "/io.linkerd.proxy.tap.Tap/Observe",
		map[string]string{"Grpc-Timeout": "200m"}, testutil.GRPCFrame(0, valid))
	assert.Equal(t, strconv.Itoa(int(codes.DeadlineExceeded)), got.Code, "%+v", got)
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
		// Closed right after the handshake (internal/tap/gate.go): a request
		// written after the close may make it a reset.
		assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "%v: the connection is closed, not timed out: %v", protos, err)
		c.Close()
	}
}
