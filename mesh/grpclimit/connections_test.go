package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/grpclimit"
)

// dialRaw opens a TCP connection to addr from the loopback address src.
func dialRaw(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: testutil.DefaultTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// closedUnread reports whether the server closed conn without sending a
// byte: an admitted connection gets the server's HTTP/2 SETTINGS at once.
func closedUnread(t *testing.T, conn net.Conn) bool {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(testutil.DefaultTimeout)))
	n, err := conn.Read(make([]byte, 1))
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server neither spoke nor closed within %s", testutil.DefaultTimeout)
	return n == 0 && err != nil
}

func TestOneClientCannotHoldMoreThanItsShareOfConnections(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, srv, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxConnections, l.MaxConnectionsPerPeer = 10, 2 }))

	// The greedy client's two connections are admitted and served.
	for i := range 2 {
		_, err := dial(t, addr, "127.0.0.1").Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "connection %d", i)
	}
	require.Equal(t, 2, srv.Connections().InUse())

	// Its third is closed as soon as it is accepted, before the server
	// says anything; a gRPC client sees it fail.
	assert.True(t, closedUnread(t, dialRaw(t, addr, "127.0.0.1")), "the third connection from one address was served")
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := dial(t, addr, "127.0.0.1").Check(short, &healthpb.HealthCheckRequest{})
	require.Error(t, err, "a gRPC call over a third connection from one address")
	assert.GreaterOrEqual(t, srv.Connections().Refused(), uint64(2))

	// Another client is served meanwhile.
	other := dialRaw(t, addr, "127.0.0.2")
	assert.False(t, closedUnread(t, other), "another address was refused")
	_, err = dial(t, addr, "127.0.0.2").Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "another address")
	assert.Equal(t, 4, srv.Connections().InUse())
}

func TestAConnectionThatClosesGivesItsPlaceBack(t *testing.T) {
	addr, srv, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxConnections, l.MaxConnectionsPerPeer = 10, 1 }))
	first := dialRaw(t, addr, "127.0.0.1")
	require.False(t, closedUnread(t, first), "the first connection was refused")
	require.True(t, closedUnread(t, dialRaw(t, addr, "127.0.0.1")), "a second connection over the per-peer cap of 1 was served")

	require.NoError(t, first.Close())
	testutil.Eventually(t, 0, func() bool { return srv.Connections().InUse() == 0 }, "the closed connection to be released")
	assert.False(t, closedUnread(t, dialRaw(t, addr, "127.0.0.1")), "the place the first connection freed was not given back")
}

func TestConnectionsBeyondTheTotalCapAreRefusedWhateverTheirAddress(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, srv, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxConnections, l.MaxConnectionsPerPeer = 3, 3 }))
	for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		_, err := dial(t, addr, src).Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, src)
	}
	assert.True(t, closedUnread(t, dialRaw(t, addr, "127.0.0.4")), "a fourth connection past the total cap of 3 was served")
	assert.Equal(t, 3, srv.Connections().InUse())
	assert.Equal(t, uint64(1), srv.Connections().Refused())
}

// h2conn is a raw HTTP/2 client connection that has sent its preface and
// settings.
func h2conn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	conn := dialRaw(t, addr, "127.0.0.1")
	require.NoError(t, conn.SetDeadline(time.Now().Add(testutil.DefaultTimeout)))
	_, err := conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	return conn, fr
}

func TestAClientThatPingsTooOftenIsDisconnected(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, _, _ := serve(t, grpclimit.Defaults()) // pings at most every 5 s
	_, fr := h2conn(t, addr)
	for i := range 5 {
		require.NoError(t, fr.WritePing(false, [8]byte{byte(i)}), "ping %d", i)
	}
	var away *http2.GoAwayFrame
	for away == nil {
		f, err := fr.ReadFrame()
		require.NoError(t, err, "the connection ended without GOAWAY")
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.GoAwayFrame:
			away = f
		}
	}
	assert.Equal(t, http2.ErrCodeEnhanceYourCalm, away.ErrCode)
	assert.Equal(t, "too_many_pings", string(away.DebugData()))

	// A client that does not flood is served meanwhile.
	_, err := dial(t, addr, "127.0.0.2").Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}

func TestAConnectionWithNoRPCIsClosedAfterTheIdleTime(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxConnectionIdle = idle }))
	start := time.Now() // before the server accepts, so its timer starts later
	_, fr := h2conn(t, addr)
	for {
		f, err := fr.ReadFrame()
		require.NoError(t, err, "the idle connection ended without GOAWAY")
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WritePing(true, f.Data))
			}
		case *http2.GoAwayFrame:
			assert.GreaterOrEqual(t, time.Since(start), idle, "GOAWAY before the idle time")
			return
		}
	}
}

func TestAPeerThatStopsAnsweringPingsIsDisconnected(t *testing.T) {
	// grpc-go pings no more often than once a second, whatever is asked.
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) {
		l.KeepaliveTime, l.KeepaliveTimeout = time.Second, 300*time.Millisecond
	}))
	conn, fr := h2conn(t, addr)
	pinged := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "a peer that ignores pings was kept for %s", testutil.DefaultTimeout)
			break
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.PingFrame:
			pinged = pinged || !f.IsAck() // and never answered
		}
	}
	assert.True(t, pinged, "the server closed the connection without pinging it first")
	_ = conn.Close()
}

// holdRequest opens a unary Check from src and never sends its request,
// as a stalling client would; the stream lasts until cancel.
func holdRequest(t *testing.T, ctx context.Context, addr, src string) context.CancelFunc {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	sctx, cancel := context.WithCancel(ctx)
	_, err = conn.NewStream(sctx, &grpc.StreamDesc{ClientStreams: true}, "/grpc.health.v1.Health/Check")
	require.NoError(t, err)
	return cancel
}

func TestOneClientCannotHoldMoreThanItsShareOfRequests(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, srv, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxRequests, l.MaxRequestsPerPeer = 3, 2 }))
	first := holdRequest(t, ctx, addr, "127.0.0.1")
	holdRequest(t, ctx, addr, "127.0.0.1")
	testutil.Eventually(t, 0, func() bool { return srv.RequestsInUse() == 2 }, "the server to hold both stalled requests")

	greedy := dial(t, addr, "127.0.0.1")
	_, err := greedy.Check(ctx, &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "peer 127.0.0.1 holds its maximum of 2 requests in flight")

	// Another client is served; once it holds the last place, the server
	// is full for everyone.
	_, err = dial(t, addr, "127.0.0.2").Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "another address")
	holdRequest(t, ctx, addr, "127.0.0.2")
	testutil.Eventually(t, 0, func() bool { return srv.RequestsInUse() == 3 }, "the server to hold three stalled requests")
	_, err = dial(t, addr, "127.0.0.3").Check(ctx, &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "the server holds its maximum of 3 requests in flight")
	assert.Equal(t, uint64(2), srv.RequestsRefused())

	// A request that ends gives its place back.
	first()
	testutil.Eventually(t, 0, func() bool { return srv.RequestsInUse() == 2 }, "the cancelled request to be released")
	_, err = greedy.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool { return srv.RequestsInUse() == 2 }, "the finished request to be released")
}
