package dataplane_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// grpcPair is client proxy -> mesh TLS -> server proxy -> the gRPC interop
// test service, with a client connection through it.
type grpcPair struct {
	a, b   *running
	client testgrpc.TestServiceClient
	addr   string // the client proxy's mapped listener
}

func startGRPCPair(t *testing.T, cfgB func(*dataplane.Config)) *grpcPair {
	ln := testutil.Listen(t)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer(interop.NewTestServerOptions{}))
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	pk := newPKI(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(port), allowOnly(idA))
	cfg := testConfig()
	if cfgB != nil {
		cfgB(&cfg)
	}
	inB := testutil.Listen(t)
	b := startProxy(t, cfg, pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: inB})
	res := dataplane.NewMemoryResolver()
	target := fmt.Sprintf("interop.shop.svc.cluster.local:%d", port)
	res.Set(target, dataplane.Endpoint{Addr: netipAddrPort(port), Identity: idB, OpaqueTransportPort: uint16(inB.Addr().(*net.TCPAddr).Port)})
	mapped := testutil.Listen(t)
	a := startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: target}}})
	cc, err := grpc.NewClient("passthrough:///"+mapped.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return &grpcPair{a: a, b: b, client: testgrpc.NewTestServiceClient(cc), addr: mapped.Addr().String()}
}

// slowStream asks for n messages, interval apart; started is closed when
// the first one arrived (the stream runs through both proxies).
func slowStream(ctx context.Context, c testgrpc.TestServiceClient, n int, interval time.Duration, started chan<- struct{}) (int, error) {
	req := &testgrpc.StreamingOutputCallRequest{}
	for i := 0; i < n; i++ {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: 100, IntervalUs: int32(interval / time.Microsecond)})
	}
	stream, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if got++; got == 1 {
			close(started)
		}
	}
}

func TestDrainLetsInFlightHTTP1HTTP2AndGRPCFinish(t *testing.T) {
	// T36: SIGTERM to the server proxy with an HTTP/1 request, an HTTP/2
	// stream and a gRPC server stream in flight.
	hp := startHTTPPair(t, httpPairOptions{cfgB: func(c *dataplane.Config) { c.ShutdownGracePeriod = 5 * time.Second }})
	gp := startGRPCPair(t, func(c *dataplane.Config) { c.ShutdownGracePeriod = 5 * time.Second })
	ctx := ctxTimeout(t, 20*time.Second)

	var wg sync.WaitGroup
	results := map[string]string{}
	var mu sync.Mutex
	record := func(k, v string) { mu.Lock(); results[k] = v; mu.Unlock() }
	wg.Add(3)
	go func() {
		defer wg.Done()
		resp, err := h1Client().Get(hp.url("/sleep?d=800ms"))
		if err != nil {
			record("h1", err.Error())
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		record("h1", fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b))))
	}()
	go func() {
		defer wg.Done()
		resp, err := h2cClient().Get(hp.url("/stream?n=60"))
		if err != nil {
			record("h2", err.Error())
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		record("h2", fmt.Sprint(resp.StatusCode, " ", strings.Count(string(b), "\n"), " ", err))
	}()
	grpcStarted := make(chan struct{})
	go func() {
		defer wg.Done()
		n, err := slowStream(ctx, gp.client, 8, 100*time.Millisecond, grpcStarted)
		record("grpc", fmt.Sprint(n, " ", err))
	}()
	testutil.Eventually(t, 5*time.Second, func() bool { return hp.app.requests.Load() >= 2 }, "the HTTP requests are in flight")
	select {
	case <-grpcStarted:
	case <-ctx.Done():
		t.Fatal("the gRPC stream never delivered its first message")
	}

	hp.b.cancel()
	gp.b.cancel()
	testutil.Eventually(t, 2*time.Second, func() bool {
		code, _ := hp.b.admin(t, "/ready")
		return code == http.StatusServiceUnavailable
	}, "not ready at once")
	wg.Wait()
	assert.Equal(t, "200 slept", results["h1"], "the HTTP/1 request finishes")
	assert.Equal(t, "200 60 <nil>", results["h2"], "the HTTP/2 stream finishes")
	assert.Equal(t, "8 <nil>", results["grpc"], "the gRPC stream finishes")
	for _, r := range []*running{hp.b, gp.b} {
		select {
		case <-r.done:
			assert.NoError(t, r.err)
		case <-time.After(4 * time.Second):
			t.Fatal("the proxy did not stop once its streams ended (GOAWAY lets clients go)")
		}
	}
	// New requests find the server proxy gone.
	resp, _ := get(t, h1Client(), hp.url("/"))
	assert.GreaterOrEqual(t, resp.StatusCode, 500)
}

func TestDrainClosesStreamsLeftAtTheEndOfTheGracePeriod(t *testing.T) {
	gp := startGRPCPair(t, func(c *dataplane.Config) { c.ShutdownGracePeriod = 300 * time.Millisecond })
	ctx := ctxTimeout(t, 20*time.Second)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := slowStream(ctx, gp.client, 100, 100*time.Millisecond, started)
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the gRPC stream never delivered its first message")
	}
	start := time.Now()
	gp.b.cancel()
	select {
	case <-gp.b.done:
		assert.NoError(t, gp.b.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop at the end of its grace period")
	}
	assert.Less(t, time.Since(start), 3*time.Second)
	select {
	case err := <-done:
		assert.Error(t, err, "the stream left over was cut")
	case <-time.After(5 * time.Second):
		t.Fatal("the stream was not ended")
	}
}

func TestManyUniqueHostsKeepMetricSeriesBounded(t *testing.T) {
	// T39 (Linkerd CVE-2025-43915): 100k requests, each with its own Host
	// and path, make no new series. Under the race detector, which slows
	// every request several times, 20k keep the test within its time.
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t)})
	count := func(r *running) int {
		_, body := r.admin(t, "/metrics")
		n := 0
		for _, l := range strings.Split(body, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				n++
			}
		}
		return n
	}
	c := h2cClient()
	warm := func(i int) {
		req, _ := http.NewRequest(http.MethodGet, hp.url(fmt.Sprintf("/p/%d", i)), nil)
		req.Host = fmt.Sprintf("host-%d.example", i)
		resp, err := c.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := 0; i < 50; i++ {
		warm(i)
	}
	beforeA, beforeB := count(hp.a), count(hp.b)

	total := 100000
	if raceEnabled {
		total = 20000
	}
	const workers = 32
	start := time.Now()
	var wg sync.WaitGroup
	var failed sync.Map
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				req, _ := http.NewRequest(http.MethodGet, hp.url(fmt.Sprintf("/unique/%d", i)), nil)
				req.Host = fmt.Sprintf("h%d.example", i)
				resp, err := c.Do(req)
				if err != nil {
					failed.Store(i, err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d requests in %s", total, time.Since(start))
	n := 0
	failed.Range(func(any, any) bool { n++; return true })
	assert.Zero(t, n, "every request succeeded")
	// Histogram buckets of new latency classes aside, nothing grows with
	// the number of hosts or paths.
	assert.LessOrEqual(t, count(hp.a), beforeA+60)
	assert.LessOrEqual(t, count(hp.b), beforeB+60)
	assert.Equal(t, float64(total+50), hp.a.metric(t, "request_total", `direction="outbound"`, `authority="`+hp.target+`"`))
}

func TestStoppedProxiesLeaveNoGoroutinesBehind(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	hp := startHTTPPair(t, httpPairOptions{})
	h1c, h2c := h1Client(), h2cClient()
	for _, c := range []*http.Client{h1c, h2c} {
		for _, path := range []string{"/", "/stream?n=3", "/echo"} {
			resp, _ := get(t, c, hp.url(path))
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
	}
	h1c.CloseIdleConnections()
	h2c.CloseIdleConnections()
	hp.a.stop(t)
	hp.b.stop(t)
	hp.app.srv.Close()
	noLeakedGoroutines(t, ignore)
}

// noLeakedGoroutines fails the test when goroutines other than ignore's
// are still running 10 s from now. goleak retries for about a second; a
// loaded machine may need longer for closed connections' goroutines to
// notice.
func noLeakedGoroutines(t *testing.T, ignore goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(ignore)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}
