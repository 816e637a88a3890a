package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/grpclimit"
)

// serve starts a server with l and the gRPC health service (unary Check,
// streaming Watch) on loopback, and returns its address and health server.
func serve(t *testing.T, l grpclimit.Limits) (string, *grpclimit.Server, *health.Server) {
	t.Helper()
	srv, err := grpclimit.NewServer(l)
	require.NoError(t, err)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	lis := testutil.Listen(t)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String(), srv, hs
}

// dial connects a real gRPC client to addr from the loopback address src
// (such as 127.0.0.2), or from the default one when src is empty.
func dial(t *testing.T, addr, src string) healthpb.HealthClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if src != "" {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// watch opens a health Watch for service and returns the stream once its
// first status arrived, or the error that ended it.
func watch(ctx context.Context, c healthpb.HealthClient, service string) (healthpb.Health_WatchClient, error) {
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return nil, err
	}
	if _, err := w.Recv(); err != nil {
		return nil, err
	}
	return w, nil
}

func small(mut func(*grpclimit.Limits)) grpclimit.Limits {
	l := grpclimit.Defaults()
	mut(&l)
	return l
}

func TestDefaultsAreValid(t *testing.T) {
	require.NoError(t, grpclimit.Defaults().Validate())
}

func TestValidateRefusesLimitsThatAreNotPositive(t *testing.T) {
	cases := map[string]func(*grpclimit.Limits){
		"connection timeout":     func(l *grpclimit.Limits) { l.ConnectionTimeout = 0 },
		"keepalive minimum time": func(l *grpclimit.Limits) { l.KeepaliveMinTime = -time.Second },
		"keepalive time":         func(l *grpclimit.Limits) { l.KeepaliveTime = 0 },
		"keepalive timeout":      func(l *grpclimit.Limits) { l.KeepaliveTimeout = 0 },
		"connection idle":        func(l *grpclimit.Limits) { l.MaxConnectionIdle = 0 },
		"request timeout":        func(l *grpclimit.Limits) { l.RequestTimeout = 0 },
		"streams per connection": func(l *grpclimit.Limits) { l.MaxStreamsPerConnection = 0 },
		"message size":           func(l *grpclimit.Limits) { l.MaxRecvMsgSize = 0 },
		"watches":                func(l *grpclimit.Limits) { l.MaxWatches = 0 },
		"watches per peer":       func(l *grpclimit.Limits) { l.MaxWatchesPerPeer = -1 },
		"per peer above total":   func(l *grpclimit.Limits) { l.MaxWatches, l.MaxWatchesPerPeer = 10, 11 },
		"requests":               func(l *grpclimit.Limits) { l.MaxRequests = 0 },
		"requests per peer":      func(l *grpclimit.Limits) { l.MaxRequestsPerPeer = 0 },
		"reqs per peer > total":  func(l *grpclimit.Limits) { l.MaxRequests, l.MaxRequestsPerPeer = 10, 11 },
		"connections":            func(l *grpclimit.Limits) { l.MaxConnections = 0 },
		"connections per peer":   func(l *grpclimit.Limits) { l.MaxConnectionsPerPeer = -1 },
		"conns per peer > total": func(l *grpclimit.Limits) { l.MaxConnections, l.MaxConnectionsPerPeer = 10, 11 },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			err := small(mut).Validate()
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "grpclimit: "), err.Error())
			_, err = grpclimit.NewServer(small(mut))
			require.Error(t, err)
		})
	}
}

func TestASilentConnectionIsClosedAfterTheConnectionTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) { l.ConnectionTimeout = timeout }))

	start := time.Now() // before the server can accept, so its timer starts later
	conn, err := net.DialTimeout("tcp", addr, testutil.DefaultTimeout)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(testutil.DefaultTimeout)))
	_, err = io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept a silent connection open for %s", testutil.DefaultTimeout)
	assert.GreaterOrEqual(t, time.Since(start), timeout, "closed before the timeout")
}

func TestWatchesBeyondTheCapAreRefusedWhileOpenOnesKeepWorking(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, srv, hs := serve(t, small(func(l *grpclimit.Limits) { l.MaxWatches, l.MaxWatchesPerPeer = 3, 3 }))
	greedy := dial(t, addr, "")
	other := dial(t, addr, "127.0.0.2")

	var open []healthpb.Health_WatchClient
	var cancels []context.CancelFunc
	for i := range 3 {
		client := greedy
		if i == 2 {
			client = other
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := watch(wctx, client, "")
		require.NoError(t, err, "watch %d", i)
		open, cancels = append(open, w), append(cancels, cancel)
	}
	_, err := watch(ctx, greedy, "")
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "the fourth watch: %v", err)
	assert.Contains(t, status.Convert(err).Message(), "maximum of 3 watches")
	_, err = watch(ctx, other, "")
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "another client's new watch, while the server is full: %v", err)
	assert.Equal(t, 3, srv.Watches().InUse())
	assert.Equal(t, uint64(2), srv.Watches().Refused())

	// The open watches still get updates.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	for i, w := range open {
		m, err := w.Recv()
		require.NoError(t, err, "watch %d", i)
		assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, m.GetStatus(), "watch %d", i)
	}
	// Unary calls are not watches and still work.
	resp, err := greedy.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, resp.GetStatus())

	// A watch that ends frees its place.
	cancels[0]()
	testutil.Eventually(t, 0, func() bool { return srv.Watches().InUse() == 2 }, "the cancelled watch to be released")
	_, err = watch(ctx, other, "")
	require.NoError(t, err)
}

func TestOneClientCannotTakeMoreThanItsShareOfWatches(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, srv, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxWatches, l.MaxWatchesPerPeer = 10, 2 }))
	greedy := dial(t, addr, "")
	// A second connection from the same address shares the same budget.
	greedy2 := dial(t, addr, "")
	other := dial(t, addr, "127.0.0.2")

	for i := range 2 {
		_, err := watch(ctx, greedy, "")
		require.NoError(t, err, "watch %d", i)
	}
	for _, c := range []healthpb.HealthClient{greedy, greedy2} {
		_, err := watch(ctx, c, "")
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		assert.Contains(t, status.Convert(err).Message(), "peer 127.0.0.1 holds its maximum of 2 watches")
	}
	for i := range 2 {
		_, err := watch(ctx, other, "")
		require.NoError(t, err, "another client's watch %d", i)
	}
	assert.Equal(t, 4, srv.Watches().InUse())
}

func TestAHalfSentUnaryRequestGetsDeadlineExceeded(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) { l.RequestTimeout = timeout }))

	// The message prefix announces 100 bytes; 3 arrive, then nothing.
	res := testutil.HalfSentGRPC(t, addr, "/grpc.health.v1.Health/Check", 100, []byte{0x0a, 0x01, 'x'}, testutil.DefaultTimeout)
	assert.Equal(t, int(codes.DeadlineExceeded), res.Status, res.String())
	assert.GreaterOrEqual(t, res.Elapsed, timeout, res.String())

	// A real client that opens the call and never sends the request.
	ctx := testutil.Context(t, 0)
	conn := dialConn(t, addr)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/grpc.health.v1.Health/Check")
	require.NoError(t, err)
	err = s.RecvMsg(new(healthpb.HealthCheckResponse))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
}

func TestWatchesOutliveTheRequestTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ctx := testutil.Context(t, 0)
	addr, _, hs := serve(t, small(func(l *grpclimit.Limits) { l.RequestTimeout = timeout }))
	w, err := watch(ctx, dial(t, addr, ""), "")
	require.NoError(t, err)

	// A unary call opened after the watch runs out of time first...
	res := testutil.HalfSentGRPC(t, addr, "/grpc.health.v1.Health/Check", 100, nil, testutil.DefaultTimeout)
	require.Equal(t, int(codes.DeadlineExceeded), res.Status, res.String())
	// ...and the watch is still served.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	m, err := w.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, m.GetStatus())
}

func TestARequestOverTheMessageSizeIsRefused(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxRecvMsgSize = 1 << 10 }))
	c := dial(t, addr, "")
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 2<<10)})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.NoError(t, err, "the connection keeps working")
}

func TestAConnectionPastTheStreamLimitIsRefusedMoreStreams(t *testing.T) {
	ctx := testutil.Context(t, 0)
	addr, _, _ := serve(t, small(func(l *grpclimit.Limits) { l.MaxStreamsPerConnection = 2 }))
	conn := dialConn(t, addr)
	c := healthpb.NewHealthClient(conn)
	for i := range 2 {
		_, err := watch(ctx, c, "")
		require.NoError(t, err, "watch %d", i)
	}
	// The third stream waits for a free slot (grpc-go queues it on the
	// client); it cannot start while both watches are open.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := watch(short, c, "")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
