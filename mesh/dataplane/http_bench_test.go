package dataplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/stretchr/testify/require"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The HTTP benchmarks compare, in one process on loopback, an application
// reached directly, through the Weft proxy pair (outbound -> HTTP/1.1 over
// mutual TLS -> inbound; or HTTP/2 over mutual TLS for weft-pair-h2hop)
// and through the obvious Go alternative: a pair of
// httputil.ReverseProxy with mutual TLS between them (HTTP/1.1 keep-alive,
// or HTTP/2 when the client speaks HTTP/2). Besides ns/op each reports
// cpu-us/op, the process CPU time (user+system) per request: clients,
// proxies and application together, so the proxies' share is the
// difference to "direct".
//
//	go test -run XXX -bench HTTP -benchtime 3s ./mesh/dataplane

type httpBenchTargets struct {
	direct, weft, weftH2Hop, rp string
}

func startBenchTargets(b *testing.B) httpBenchTargets {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	hp := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b)})
	h2hop := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b), cfgA: func(c *dataplane.Config) { c.HTTP1OverH2 = true }})
	return httpBenchTargets{
		direct:    app.ln.Addr().String(),
		weft:      hp.clientAddr,
		weftH2Hop: h2hop.clientAddr,
		rp:        startReverseProxyPair(b, app.ln.Addr().String(), false),
	}
}

// startReverseProxyPair is client -> ReverseProxy (cleartext HTTP/1.1 and
// h2c) -> mutual TLS -> ReverseProxy -> application.
func startReverseProxyPair(b *testing.B, app string, h2cToApp bool) string {
	pk := newPKI(b)
	serverLeaf := pk.issuer.Leaf(b, testutil.CertOptions{Name: idB})
	clientLeaf := pk.issuer.Leaf(b, testutil.CertOptions{Name: idA})
	roots := testutil.Pool(pk.anchor)

	appURL, _ := url.Parse("http://" + app)
	var h2c http.Protocols
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	back := httputil.NewSingleHostReverseProxy(appURL)
	back.Transport = &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	if h2cToApp {
		var only http.Protocols
		only.SetUnencryptedHTTP2(true)
		back.Transport = &http.Transport{Protocols: &only, DisableCompression: true}
	}
	backLn := testutil.Listen(b)
	backSrv := &http.Server{Handler: back, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{serverLeaf.TLS}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	}}
	go backSrv.ServeTLS(backLn, "", "")
	b.Cleanup(func() { backSrv.Close() })

	backURL, _ := url.Parse("https://" + backLn.Addr().String())
	front := httputil.NewSingleHostReverseProxy(backURL)
	front.Transport = &http.Transport{
		MaxIdleConnsPerHost: 256, DisableCompression: true, ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{clientLeaf.TLS}, RootCAs: roots, ServerName: idB, MinVersion: tls.VersionTLS13},
	}
	frontLn := testutil.Listen(b)
	frontSrv := &http.Server{Handler: front, Protocols: &h2c}
	go frontSrv.Serve(frontLn)
	b.Cleanup(func() { frontSrv.Close() })
	return frontLn.Addr().String()
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// getConcurrently sends n GET requests (rounded down to a multiple of
// workers) to u from workers goroutines, and returns when all are answered.
// Any other answer than 200 is an error.
func getConcurrently(b *testing.B, c *http.Client, u string, n, workers int) {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/workers; i++ {
				if !getOK(b, c, u) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// getOK sends one GET request to u and reads the answer; false, with an
// error reported, unless it is a 200.
func getOK(b *testing.B, c *http.Client, u string) bool {
	resp, err := c.Get(u)
	if err != nil {
		b.Error(err)
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: status %d", u, resp.StatusCode)
		return false
	}
	return true
}

// medianOf is the median of xs (the mean of the middle two for an even
// count); xs is not changed.
func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func benchGet(b *testing.B, c *http.Client, u string, parallel int) {
	benchDo(b, parallel, func() { getOK(b, c, u) })
}

// benchDo runs do b.N times, from parallel goroutines per CPU when
// parallel > 1, and reports allocations and CPU time per operation.
func benchDo(b *testing.B, parallel int, do func()) {
	do() // warm the connections
	b.ReportAllocs()
	start := cpuTime()
	b.ResetTimer()
	if parallel <= 1 {
		for i := 0; i < b.N; i++ {
			do()
		}
	} else {
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				do()
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

// weft-pair is the default configuration: an HTTP/1.1 request crosses
// the hop between the proxies as HTTP/1.1 over mutual TLS; weft-pair-h2hop
// carries it over the HTTP/2 hop (Extras.HTTP1OverH2), as before. They
// run one after the other in each round, so that -count N alternates them.
var httpBenchOrder = []string{"direct", "weft-pair", "weft-pair-h2hop", "go-reverseproxy-pair"}

func (t httpBenchTargets) addr(name string) string {
	switch name {
	case "direct":
		return t.direct
	case "weft-pair":
		return t.weft
	case "weft-pair-h2hop":
		return t.weftH2Hop
	}
	return t.rp
}

// BenchmarkHTTP1Latency sends one request at a time on a kept-alive
// HTTP/1.1 connection: the time per request is the latency.
func BenchmarkHTTP1Latency(b *testing.B) {
	t := startBenchTargets(b)
	for _, name := range httpBenchOrder {
		b.Run(name, func(b *testing.B) {
			benchGet(b, h1Client(), "http://"+t.addr(name)+"/", 1)
		})
	}
}

// BenchmarkHTTP1Throughput sends requests from 8 goroutines per CPU over
// kept-alive HTTP/1.1 connections.
func BenchmarkHTTP1Throughput(b *testing.B) {
	t := startBenchTargets(b)
	for _, name := range httpBenchOrder {
		b.Run(name, func(b *testing.B) {
			c := h1Client()
			c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			benchGet(b, c, "http://"+t.addr(name)+"/", 8)
		})
	}
}

// BenchmarkHTTP1Upload posts a 16 KiB body of unknown length (sent
// chunked) from 8 goroutines per CPU over kept-alive HTTP/1.1 connections:
// the request-body path (the body is written by a goroutine of its own
// while the response is read, at the outbound and at the inbound).
func BenchmarkHTTP1Upload(b *testing.B) {
	t := startBenchTargets(b)
	body := bytes.Repeat([]byte("x"), 16<<10)
	for _, name := range httpBenchOrder {
		b.Run(name, func(b *testing.B) {
			c := h1Client()
			c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			u := "http://" + t.addr(name) + "/upload"
			benchDo(b, 8, func() {
				// Not a *bytes.Reader: the length is unknown, the body chunked.
				req, err := http.NewRequest(http.MethodPost, u, io.NopCloser(bytes.NewReader(body)))
				if err != nil {
					b.Error(err)
					return
				}
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
				}
			})
		})
	}
}

// BenchmarkHTTP2Throughput multiplexes requests from 8 goroutines per CPU
// on one prior-knowledge HTTP/2 connection.
func BenchmarkHTTP2Throughput(b *testing.B) {
	t := startBenchTargets(b)
	for _, name := range httpBenchOrder {
		b.Run(name, func(b *testing.B) {
			benchGet(b, h2cClient(), "http://"+t.addr(name)+"/", 8)
		})
	}
}

// BenchmarkHTTPGRPCUnary makes unary gRPC calls (the interop service's
// UnaryCall with a 100-byte payload) from 8 goroutines per CPU;
// weft-pair-http-path is weft-pair with both proxies' gRPC on the
// http.Handler path instead of the frame path, weft-pair-inbound-frames
// with only the server proxy's on the frame path.
func BenchmarkHTTPGRPCUnary(b *testing.B) {
	ln := testutil.Listen(b)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer(interop.NewTestServerOptions{}))
	go s.Serve(ln)
	b.Cleanup(s.Stop)
	// The pair only needs the application's listener (its port).
	hp := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), app: &httpApp{ln: ln}})
	// The same pair with both proxies' gRPC on the http.Handler path, as
	// before the frame path (issue 28 item 3), and with only the server
	// proxy's on the frame path.
	viaHTTP := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), app: &httpApp{ln: ln},
		optsA: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()},
		optsB: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()}})
	inboundOnly := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), app: &httpApp{ln: ln},
		optsA: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()}})
	targets := map[string]string{
		"direct":                   ln.Addr().String(),
		"weft-pair":                hp.clientAddr,
		"weft-pair-http-path":      viaHTTP.clientAddr,
		"weft-pair-inbound-frames": inboundOnly.clientAddr,
		"go-reverseproxy-pair":     startReverseProxyPair(b, ln.Addr().String(), true),
	}
	// No weft-pair-h2hop: gRPC takes the HTTP/2 hop whatever
	// HTTP1OverH2 says.
	for _, name := range []string{"direct", "weft-pair", "weft-pair-http-path", "weft-pair-inbound-frames", "go-reverseproxy-pair"} {
		b.Run(name, func(b *testing.B) {
			cc, err := grpc.NewClient("passthrough:///"+targets[name], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := testgrpc.NewTestServiceClient(cc)
			req := &testgrpc.SimpleRequest{ResponseSize: 100, Payload: &testgrpc.Payload{Body: make([]byte, 100)}}
			ctx := context.Background()
			if _, err := client.UnaryCall(ctx, req); err != nil {
				b.Fatal(fmt.Errorf("%s: %w", name, err))
			}
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.UnaryCall(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkHTTPTap measures what tap costs the proxies. Four proxy pairs
// run side by side: one with no tap open, one with a tap open that
// matches none of the requests, one with a tap taking every request within
// the default budget (1,000 events per second: at this rate most requests
// are counted as dropped), and one with a tap taking every request without
// a budget. Each benchmark iteration is a round of 1,000 HTTP/1.1 requests
// (8 concurrent) through each pair in turn, so the four share the
// machine's state of the moment, with a fifth run straight to the
// application (each round starts with the next variant in turn); the result is the median over rounds of the process CPU
// per request, and of the tap's cost as a share of the proxies' CPU per
// request ((tapped - no-tap) / (no-tap - direct), in the same round),
// and the events each tap sent per request. The tapper runs in a process
// of its own (as a tapper does), so the figures hold the proxies' cost,
// the clients' and the application's, not the tapper's.
//
//	go test -run XXX -bench HTTPTap -benchtime 20x ./mesh/dataplane
func BenchmarkHTTPTap(b *testing.B) {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	type variant struct {
		name  string
		match *ptap.ObserveRequest_Match
		rate  int
		hp    *httpPair
		url   string
		c     *http.Client
		cpu   []float64 // per round, us per request
	}
	variants := []*variant{
		{name: "direct"},
		{name: "no-tap"},
		{name: "tap-matching-nothing", match: pathPrefix("/never")},
		{name: "tap-every-request-default-budget", match: everything()},
		{name: "tap-every-request-no-budget", match: everything(), rate: 1 << 20},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	defer func() { cancel(); readers.Wait() }()
	for _, v := range variants {
		v.c = h1Client()
		v.c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		if v.name == "direct" {
			v.url = "http://" + app.ln.Addr().String() + "/"
			continue
		}
		v.hp = startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b), cfgA: func(c *dataplane.Config) {
			tapConfig(c)
			if v.rate != 0 {
				c.TapMaxEventsPerSecond = v.rate
			}
		}})
		v.url = v.hp.url("/")
		if v.match == nil {
			continue
		}
		startTapperProcess(ctx, b, v.hp, &ptap.ObserveRequest{Limit: 1 << 31, Match: v.match}, &readers)
		testutil.Eventually(b, 10*time.Second, func() bool { return v.hp.a.metric(b, "tap_streams_open") == 1 }, "tap open")
	}
	const perRound, workers = 1000, 8
	round := func(v *variant) {
		start := cpuTime()
		getConcurrently(b, v.c, v.url, perRound, workers)
		v.cpu = append(v.cpu, float64(cpuTime()-start)/float64(time.Microsecond)/float64(perRound/workers*workers))
	}
	for _, v := range variants {
		round(v) // warm connections and caches
		v.cpu = nil
	}
	// Events handed to each tap during the measured rounds, per request:
	// what the tap's goroutine encoded and sent.
	sent := func(v *variant) float64 {
		if v.match == nil {
			return 0
		}
		return v.hp.a.metric(b, "tap_events_sent_total")
	}
	sentBefore := make([]float64, len(variants))
	for i, v := range variants {
		sentBefore[i] = sent(v)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each round starts with the next variant, so that none always
		// runs first or last.
		for j := range variants {
			round(variants[(i+j)%len(variants)])
		}
	}
	b.StopTimer()
	median := medianOf
	direct, noTap := variants[0], variants[1]
	for i, v := range variants {
		if v.match != nil {
			b.ReportMetric((sent(v)-sentBefore[i])/float64(b.N*perRound), v.name+"-events/req")
		}
		b.ReportMetric(median(v.cpu), v.name+"-cpu-us/req")
		b.Logf("%s: %.0f us/req per round: %.0f", v.name, median(v.cpu), v.cpu)
		if v == direct || v == noTap {
			continue
		}
		// The tap's cost against the proxies' own CPU per request (the
		// pair minus the direct run), round by round.
		ratios := make([]float64, len(v.cpu))
		for i := range v.cpu {
			ratios[i] = 100 * (v.cpu[i] - noTap.cpu[i]) / (noTap.cpu[i] - direct.cpu[i])
		}
		b.ReportMetric(median(ratios), v.name+"-overhead-%-of-proxy-cpu")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTapStream measures what one tap event costs the proxy on the
// tap's side: encoding it and writing it to the tapper's gRPC stream over
// mutual TLS, with the tapper in a process of its own. The events are
// handed straight to the open tap (as for a request the budget admits),
// with no requests running, so the process CPU per event is the tap
// stream's alone (the feeding loop's channel sends included). A request
// the tap takes costs three events plus the hook BenchmarkTapDataPath
// measures.
//
//	go test -run XXX -bench TapStream -benchtime 20000x ./mesh/dataplane
func BenchmarkTapStream(b *testing.B) {
	hp := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapMaxEventsPerSecond = 1 << 20
	}})
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	defer func() { cancel(); readers.Wait() }()
	startTapperProcess(ctx, b, hp, &ptap.ObserveRequest{Limit: 1 << 31, Match: everything()}, &readers)
	testutil.Eventually(b, 10*time.Second, func() bool { return hp.a.metric(b, "tap_streams_open") == 1 }, "tap open")
	dataplane.TapFeedForTest(hp.a.proxy, 1000) // warm the stream and its buffers
	b.ResetTimer()
	start := cpuTime()
	dataplane.TapFeedForTest(hp.a.proxy, b.N)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(3*b.N), "cpu-us/event")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTapStreamPaced measures what a tap's stream costs the proxy
// per request at the rates a tap of every request sees: events handed
// over as the data path hands them (three per request), paced at 333
// requests a second (the default budget of 1,000 events a second) and at
// 1,000, to a tapper in a process of its own. Unlike BenchmarkTapStream,
// whose batches are full, batches here are what internal/tap's batchWait gathers, so
// the per-batch costs (waking the tap's goroutine and HTTP/2's, the
// write, the tapper's window updates and pings) are counted. Each round
// runs the same pace with no tap open (the pacing's own cost, and the
// process's idle CPU) and with the tap; the result is the median over
// rounds of their difference, per request.
//
//	go test -run XXX -bench TapStreamPaced -benchtime 4x ./mesh/dataplane
func BenchmarkTapStreamPaced(b *testing.B) {
	for _, rate := range []int{333, 1000} {
		b.Run(fmt.Sprintf("%d-req-per-s", rate), func(b *testing.B) {
			hp := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), cfgA: func(c *dataplane.Config) {
				tapConfig(c)
				c.TapMaxEventsPerSecond = 1 << 20
			}})
			idle := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), cfgA: tapConfig})
			ctx, cancel := context.WithCancel(context.Background())
			var readers sync.WaitGroup
			defer func() { cancel(); readers.Wait() }()
			startTapperProcess(ctx, b, hp, &ptap.ObserveRequest{Limit: 1 << 31, Match: everything()}, &readers)
			testutil.Eventually(b, 10*time.Second, func() bool { return hp.a.metric(b, "tap_streams_open") == 1 }, "tap open")
			n := rate                                       // a second per run
			dataplane.TapPaceForTest(hp.a.proxy, n/4, rate) // warm the stream
			var diffs []float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := cpuTime()
				dataplane.TapPaceForTest(idle.a.proxy, n, rate)
				mid := cpuTime()
				dataplane.TapPaceForTest(hp.a.proxy, n, rate)
				end := cpuTime()
				diffs = append(diffs, float64((end-mid)-(mid-start))/float64(time.Microsecond)/float64(n))
			}
			b.StopTimer()
			b.ReportMetric(medianOf(diffs), "cpu-us/req")
			b.Logf("per round: %.2f", diffs)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// startTapperProcess runs a tapper in a process of its own (this test
// binary, as TestTapperProcess), so that its CPU is not counted with the
// proxies'. It reads the tap's events as bytes and discards them, until
// ctx ends.
func startTapperProcess(ctx context.Context, b *testing.B, hp *httpPair, req *ptap.ObserveRequest, wg *sync.WaitGroup) {
	dir := b.TempDir()
	leaf := hp.pki.issuer.Leaf(b, testutil.CertOptions{Name: idTapper})
	body, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string][]byte{"cert.pem": leaf.ChainPEM, "key.pem": leaf.KeyPEM, "ca.pem": hp.pki.anchor.CertPEM, "req.bin": body}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTapperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WEFT_TAPPER_DIR="+dir, "WEFT_TAPPER_ADDR="+hp.tapA.Addr().String(), "WEFT_TAPPER_SERVER="+idA)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = cmd.Wait()
	}()
}

// TestTapperProcess is the tapper BenchmarkHTTPTap runs in a process of
// its own; without WEFT_TAPPER_DIR it does nothing.
func TestTapperProcess(t *testing.T) {
	dir := os.Getenv("WEFT_TAPPER_DIR")
	if dir == "" {
		return
	}
	read := func(name string) []byte { return readChildFile(t, dir, name) }
	cert, roots := childPKI(t, dir)
	cfg := &tls.Config{RootCAs: roots, ServerName: os.Getenv("WEFT_TAPPER_SERVER"), MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	conn, err := grpc.NewClient(os.Getenv("WEFT_TAPPER_ADDR"), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	stream, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, ptap.Tap_Observe_FullMethodName, grpc.ForceCodec(benchRawCodec{}))
	require.NoError(t, err)
	body := read("req.bin")
	require.NoError(t, stream.SendMsg(&body))
	require.NoError(t, stream.CloseSend())
	for {
		var m []byte
		if stream.RecvMsg(&m) != nil {
			return
		}
	}
}

// readChildFile reads one of the files a benchmark left in dir for a
// process it started.
func readChildFile(t *testing.T, dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return b
}

// childPKI loads the certificate (cert.pem, key.pem) and the trust roots
// (ca.pem) a benchmark left in dir for a process it started.
func childPKI(t *testing.T, dir string) (tls.Certificate, *x509.CertPool) {
	cert, err := tls.X509KeyPair(readChildFile(t, dir, "cert.pem"), readChildFile(t, dir, "key.pem"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(readChildFile(t, dir, "ca.pem")), "no certificate in ca.pem")
	return cert, roots
}

// benchRawCodec passes message bytes through undecoded.
type benchRawCodec struct{}

func (benchRawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (benchRawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = data
	return nil
}
func (benchRawCodec) Name() string { return "proto" }

// BenchmarkHTTPIdleConnectionMemory measures what idle proxied HTTP/1.1
// connections cost with each hop between the proxies: c client
// connections (c = 16 and 64) each send one request, held at the
// application until all c have arrived (so that the HTTP/1.1 hop opens
// one connection per request), and are then left idle. It reports the
// heap and stacks in use per client connection over the same exchange
// made directly to the application (the client's and the application's
// share), for both proxies together, the goroutines per connection, and
// the connections between the proxies: open while idle, and accepted in
// all (more than open when a handshake timed out on a busy machine and
// was tried again).
//
//	go test -run XXX -bench HTTPIdleConnectionMemory -benchtime 1x ./mesh/dataplane
func BenchmarkHTTPIdleConnectionMemory(b *testing.B) {
	hops := []struct {
		name string
		cfgA func(*dataplane.Config)
	}{
		{"h1hop", nil},
		{"h2hop", func(c *dataplane.Config) { c.HTTP1OverH2 = true }},
	}
	for _, conc := range []int{16, 64} {
		for _, hop := range hops {
			b.Run(fmt.Sprintf("%s/c%d", hop.name, conc), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					idleHTTPMemory(b, conc, hop.cfgA)
				}
			})
		}
	}
}

func idleHTTPMemory(b *testing.B, conc int, cfgA func(*dataplane.Config)) {
	app := startHTTPApp(b)
	var arrived atomic.Int32
	var gate atomic.Pointer[chan struct{}] // closed when all conc requests arrived
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		all := *gate.Load()
		if int(arrived.Add(1)) == conc {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(30 * time.Second):
		}
		io.WriteString(w, "ok\n")
	}
	hp := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b), cfgA: cfgA})
	hold := func(addr string) (uint64, float64, func()) {
		arrived.Store(0)
		all := make(chan struct{})
		gate.Store(&all)
		before := settledMemory()
		g0 := runtime.NumGoroutine()
		var wg sync.WaitGroup
		clients := make([]*http.Client, conc)
		for j := range clients {
			clients[j] = h1Client()
			wg.Add(1)
			go func(c *http.Client) {
				defer wg.Done()
				resp, err := c.Get("http://" + addr + "/")
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}(clients[j])
		}
		wg.Wait()
		time.Sleep(500 * time.Millisecond) // goroutines parked, timers settled
		after := settledMemory()
		g := float64(runtime.NumGoroutine()-g0) / float64(conc)
		return after - before, g, func() {
			for _, c := range clients {
				c.CloseIdleConnections()
			}
		}
	}
	direct, directG, closeDirect := hold(app.ln.Addr().String())
	closeDirect()
	pair, pairG, closePair := hold(hp.clientAddr)
	defer closePair()
	b.ReportMetric(float64(int64(pair)-int64(direct))/float64(conc), "bytes/conn")
	b.ReportMetric(pairG-directG, "goroutines/conn")
	b.ReportMetric(hp.b.metric(b, "tcp_open_connections", `direction="inbound"`, `peer="src"`, `tls="true"`), "hop-conns-open")
	b.ReportMetric(float64(hp.inB.accepted.Load()), "hop-conns-accepted")
}
