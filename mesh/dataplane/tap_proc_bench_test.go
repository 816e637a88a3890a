//go:build linux

package dataplane_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// BenchmarkTapProxyCPU measures what an active tap costs the proxy it
// taps, and nothing else: the CPU of that proxy's process per request.
//
// The tapped proxy is the outbound one (the client's side, where
// BenchmarkHTTPTap taps too). Each variant runs it in a process of its
// own (this test binary again, as TestTappedProxyProcess); the inbound
// proxy, the application, the clients and the tapper stay in the
// benchmark's process, whose CPU is not counted. Only the outbound proxy
// is measured because it alone does the tap's work: the inbound proxy does
// the same work in every variant, and counting it would halve the share
// the tap appears to take.
//
// Variants: no tap; no tap again, in a second process (the control: how
// far two identical processes differ, the resolution of the figures); a
// tap open that matches nothing; a tap of every request within the
// default budget (1,000 events a second, so at a few hundred requests a
// second and more most requests are dropped as over budget and counted); a
// tap of every request without a budget (every request's three events
// sent). Each benchmark iteration is a round of 496 HTTP/1.1 requests (8
// concurrent) through each variant in turn, starting with the next variant
// each round. Per round, the proxy process's CPU (its whole-process CPU
// clock, user plus system, read before and after) is divided by the
// requests. The result per variant is the median over rounds of that
// figure and of its ratio to the no-tap figure of the same round (with the
// quartiles of the ratio in the log), and the events the tapper received
// per request. The tapper decodes and counts every event, and the
// benchmark fails unless it received every event the proxy counted sent,
// request-init and response-end pair up, and the taps stayed open, so a
// broken tap cannot look cheap.
//
// With WEFT_TAP_BENCH_TOGETHER=1 each round drives all the variants at
// once instead of in turn (for a shared, busy machine, whose load changes
// from one variant's turn to the next). With
// WEFT_TAP_BENCH_CPUPROFILE=PREFIX each proxy process writes its CPU
// profile to PREFIX.VARIANT.prof.
//
//	go test -run '^$' -bench 'BenchmarkTapProxyCPU$' -benchtime 40x -v ./mesh/dataplane
func BenchmarkTapProxyCPU(b *testing.B) {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	pk := newPKI(b)
	policies := dataplane.NewMemoryPolicies()
	policies.Set(uint32(app.port()), allowAll(b))
	inB := testutil.Listen(b)
	startProxy(b, testConfig(), pk.identity(b, idB), nil, policies, dataplane.Listeners{Inbound: inB})

	type variant struct {
		name  string
		match *ptap.ObserveRequest_Match
		all   bool // the tap takes every request
		rate  int
		proc  *tappedProxy
		tap   *benchTapper
		c     *http.Client
		cpu   []float64 // per round, µs per request
	}
	variants := []*variant{
		{name: "no-tap"},
		{name: "no-tap-control"},
		{name: "tap-matching-nothing", match: pathPrefix("/never")},
		{name: "tap-every-request-default-budget", match: everything(), all: true},
		{name: "tap-every-request-no-budget", match: everything(), all: true, rate: 1 << 20},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, v := range variants {
		v.proc = startTappedProxy(b, pk, tappedProxySpec{
			Name: v.name, Target: fmt.Sprintf("web.shop.svc.cluster.local:%d", app.port()),
			App: app.ln.Addr().String(), Peer: idB, Hop: uint16(inB.Addr().(*net.TCPAddr).Port), TapRate: v.rate,
		})
		v.c = h1Client()
		v.c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		if v.match != nil {
			v.tap = startBenchTapper(ctx, b, pk, v.proc, &ptap.ObserveRequest{Limit: 1 << 31, Match: v.match})
		}
	}

	const perRound, workers = 496, 8
	// drive sends a round's requests through v's proxy.
	drive := func(v *variant) { getConcurrently(b, v.c, "http://"+v.proc.Mapped+"/", perRound, workers) }
	record := func(v *variant, start time.Duration) {
		v.cpu = append(v.cpu, float64(v.proc.cpu(b)-start)/float64(time.Microsecond)/float64(perRound))
	}
	round := func(v *variant) {
		start := v.proc.cpu(b)
		drive(v)
		record(v, start)
	}
	// With WEFT_TAP_BENCH_TOGETHER=1, a round drives every variant at
	// once, so that all of them meet the same machine: for a busy, shared
	// machine, where the load changes between one variant's turn and the
	// next's.
	together := os.Getenv("WEFT_TAP_BENCH_TOGETHER") == "1"
	roundTogether := func() {
		starts := make([]time.Duration, len(variants))
		for i, v := range variants {
			starts[i] = v.proc.cpu(b)
		}
		var wg sync.WaitGroup
		for _, v := range variants {
			wg.Add(1)
			go func() {
				defer wg.Done()
				drive(v)
			}()
		}
		wg.Wait()
		for i, v := range variants {
			record(v, starts[i])
		}
	}
	for _, v := range variants {
		round(v) // warm connections and caches
		v.cpu = nil
	}
	// What each tapper received and each proxy counted sent before the
	// measured rounds, once the two agree.
	before := make([]tapCounts, len(variants))
	for i, v := range variants {
		if v.tap != nil {
			before[i] = v.tap.settle(b, v.proc)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if together {
			roundTogether()
			continue
		}
		for j := range variants {
			round(variants[(i+j)%len(variants)])
		}
	}
	b.StopTimer()

	median := medianOf
	requests := float64(b.N * perRound)
	noTap := variants[0]
	for i, v := range variants {
		b.ReportMetric(median(v.cpu), v.name+"-proxy-cpu-us/req")
		line := fmt.Sprintf("%s: median %.1f µs/req of the proxy's CPU", v.name, median(v.cpu))
		if v != noTap {
			// The variant against the no-tap process in the same round.
			ratios := make([]float64, len(v.cpu))
			for r := range v.cpu {
				ratios[r] = 100 * (v.cpu[r] - noTap.cpu[r]) / noTap.cpu[r]
			}
			b.ReportMetric(median(ratios), v.name+"-overhead-%")
			sort.Float64s(ratios)
			line += fmt.Sprintf(", %+.1f%% of no-tap's (median of rounds; quartiles %+.1f%%, %+.1f%%)", median(ratios), ratios[len(ratios)/4], ratios[3*len(ratios)/4])
		}
		if v.tap != nil {
			got := v.tap.settle(b, v.proc).sub(before[i])
			if v.all {
				// Every request went through the tap: a tap that delivered
				// nothing is broken, not cheap. Between two settled
				// moments, every request reported has its end reported
				// too, unless a full buffer dropped it.
				require.Positive(b, got.received, "%s: the tapper received no events", v.name)
				if got.droppedBuffer == 0 {
					require.Equal(b, got.requestInit, got.responseEnd, "%s: request-init and response-end events do not pair up", v.name)
				}
			} else {
				require.Zero(b, got.received, "%s: a tap matching nothing delivered events", v.name)
			}
			require.Equal(b, 1.0, v.proc.metric(b, "tap_streams_open"), "%s: the tap closed during the run", v.name)
			b.ReportMetric(got.received/requests, v.name+"-events/req")
			line += fmt.Sprintf("; %.3f events/req received (%.0f request-init, %.0f response-init, %.0f response-end; dropped: %.0f over budget, %.0f for a full buffer)",
				got.received/requests, got.requestInit, got.responseInit, got.responseEnd, got.droppedRate, got.droppedBuffer)
		}
		b.Logf("%s; per round: %.1f", line, v.cpu)
	}
	b.ReportMetric(0, "ns/op")
}

// tappedProxySpec is what TestTappedProxyProcess is told to run: an
// outbound proxy whose one mapped listener sends to Target, resolved to
// the application App reached through the inbound proxy on port Hop with
// identity Peer.
type tappedProxySpec struct {
	Name       string
	Target     string
	App        string
	Peer       string
	Hop        uint16
	TapRate    int    // events per second per tap; 0 for the default
	CPUProfile string // written when set
}

// tappedProxy is a proxy running in a process of its own.
type tappedProxy struct {
	pid                int
	Mapped, Tap, Admin string // its listeners' addresses
	ID                 string `json:"-"` // its identity
}

// startTappedProxy runs the outbound proxy of spec in a process of its
// own. The process ends when this one does (parent-death signal, and its
// stdin closing) and is waited for in b's cleanup.
func startTappedProxy(b *testing.B, pk *pki, spec tappedProxySpec) *tappedProxy {
	b.Helper()
	dir := b.TempDir()
	if prefix := os.Getenv("WEFT_TAP_BENCH_CPUPROFILE"); prefix != "" {
		spec.CPUProfile = prefix + "." + spec.Name + ".prof"
	}
	leaf := pk.issuer.Leaf(b, testutil.CertOptions{Name: idA})
	js, err := json.Marshal(spec)
	require.NoError(b, err)
	for name, data := range map[string][]byte{"cert.pem": leaf.ChainPEM, "key.pem": leaf.KeyPEM, "ca.pem": pk.anchor.CertPEM, "spec.json": js} {
		require.NoError(b, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTappedProxyProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WEFT_TAPPED_PROXY_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		stdin.Close() // the proxy stops and writes its profile
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			b.Errorf("%s: the proxy process did not stop; killing it", spec.Name)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), tappedProxyAddrs); ok {
				addrs <- line
			}
		}
		close(addrs)
		io.Copy(io.Discard, stdout)
	}()
	tp := &tappedProxy{pid: cmd.Process.Pid}
	select {
	case line, ok := <-addrs:
		require.True(b, ok, "%s: the proxy process ended before it listened", spec.Name)
		require.NoError(b, json.Unmarshal([]byte(line), tp))
		tp.ID = idA
	case <-exited:
		b.Fatalf("%s: the proxy process ended before it listened", spec.Name)
	case <-time.After(30 * time.Second):
		b.Fatalf("%s: the proxy process did not report its listeners", spec.Name)
	}
	return tp
}

// tappedProxyAddrs starts the line on which TestTappedProxyProcess
// reports its listeners.
const tappedProxyAddrs = "WEFT_TAPPED_PROXY "

// cpu is the process's CPU time (user and system, all its threads).
func (tp *tappedProxy) cpu(b *testing.B) time.Duration {
	return testutil.ProcessCPU(b, tp.pid)
}

// metric reads one of the proxy's metrics from its admin listener.
func (tp *tappedProxy) metric(b *testing.B, name string, labels ...string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + tp.Admin + "/metrics")
	require.NoError(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	return sumMetric(string(body), name, labels...)
}

// TestTappedProxyProcess is the proxy process BenchmarkTapProxyCPU runs;
// without WEFT_TAPPED_PROXY_DIR it does nothing. It runs until its stdin
// closes.
func TestTappedProxyProcess(t *testing.T) {
	dir := os.Getenv("WEFT_TAPPED_PROXY_DIR")
	if dir == "" {
		return
	}
	var spec tappedProxySpec
	require.NoError(t, json.Unmarshal(readChildFile(t, dir, "spec.json"), &spec))
	cert, roots := childPKI(t, dir)
	id, err := dataplane.NewStaticIdentity(idA, cert, roots)
	require.NoError(t, err)
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		require.NoError(t, err)
		require.NoError(t, pprof.StartCPUProfile(f))
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	appAddr, err := netip.ParseAddrPort(spec.App)
	require.NoError(t, err)
	resolver := dataplane.NewMemoryResolver()
	resolver.Set(spec.Target, dataplane.Endpoint{Addr: appAddr, Identity: spec.Peer, OpaqueTransportPort: spec.Hop})
	cfg := testConfig()
	tapConfig(&cfg)
	if spec.TapRate != 0 {
		cfg.TapMaxEventsPerSecond = spec.TapRate
	}
	mapped, tapL, admin := testutil.Listen(t), testutil.Listen(t), testutil.Listen(t)
	r := startProxy(t, cfg, id, resolver, nil, dataplane.Listeners{
		Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: spec.Target}}, Tap: tapL, Admin: admin,
	}, dataplane.WithOutboundPolicies(dataplane.NewMemoryOutboundPolicies()), dataplane.WithProfiles(dataplane.NewMemoryProfiles()))
	addrs, err := json.Marshal(tappedProxy{Mapped: mapped.Addr().String(), Tap: tapL.Addr().String(), Admin: admin.Addr().String()})
	require.NoError(t, err)
	fmt.Printf("%s%s\n", tappedProxyAddrs, addrs)
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes it or ends
	r.stop(t)
}

// benchTapper is a tapper in the benchmark's process: it decodes every
// event of its tap and counts them by kind.
type benchTapper struct {
	requestInit, responseInit, responseEnd atomic.Int64
	err                                    atomic.Pointer[error]
}

// tapCounts are a tapper's counts and its proxy's, at one moment.
type tapCounts struct {
	received, requestInit, responseInit, responseEnd float64
	sent, droppedRate, droppedBuffer                 float64
}

func (c tapCounts) sub(o tapCounts) tapCounts {
	return tapCounts{
		received: c.received - o.received, requestInit: c.requestInit - o.requestInit,
		responseInit: c.responseInit - o.responseInit, responseEnd: c.responseEnd - o.responseEnd,
		sent: c.sent - o.sent, droppedRate: c.droppedRate - o.droppedRate, droppedBuffer: c.droppedBuffer - o.droppedBuffer,
	}
}

func startBenchTapper(ctx context.Context, b *testing.B, pk *pki, tp *tappedProxy, req *ptap.ObserveRequest) *benchTapper {
	b.Helper()
	leaf := pk.issuer.Leaf(b, testutil.CertOptions{Name: idTapper})
	cfg := &tls.Config{RootCAs: testutil.Pool(pk.anchor), ServerName: tp.ID, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{leaf.TLS}}
	conn, err := grpc.NewClient(tp.Tap, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(b, err)
	b.Cleanup(func() { conn.Close() })
	stream, err := ptap.NewTapClient(conn).Observe(ctx, req)
	require.NoError(b, err)
	bt := &benchTapper{}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				if ctx.Err() == nil {
					bt.err.Store(&err)
				}
				return
			}
			switch {
			case ev.GetHttp().GetRequestInit() != nil:
				bt.requestInit.Add(1)
			case ev.GetHttp().GetResponseInit() != nil:
				bt.responseInit.Add(1)
			case ev.GetHttp().GetResponseEnd() != nil:
				bt.responseEnd.Add(1)
			default:
				err := fmt.Errorf("an event of no known kind: %v", ev)
				bt.err.Store(&err)
			}
		}
	}()
	testutil.Eventually(b, 10*time.Second, func() bool { return tp.metric(b, "tap_streams_open") == 1 }, "the tap is open")
	return bt
}

// settle waits until the tapper received every event its proxy counted
// sent, and returns the counts.
func (bt *benchTapper) settle(b *testing.B, tp *tappedProxy) tapCounts {
	b.Helper()
	var c tapCounts
	ok := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if p := bt.err.Load(); p != nil {
			b.Fatalf("tapper: %v", *p)
		}
		c = tapCounts{
			requestInit: float64(bt.requestInit.Load()), responseInit: float64(bt.responseInit.Load()), responseEnd: float64(bt.responseEnd.Load()),
			sent:          max(tp.metric(b, "tap_events_sent_total"), 0),
			droppedRate:   max(tp.metric(b, "tap_events_dropped_total", `reason="rate"`), 0),
			droppedBuffer: max(tp.metric(b, "tap_events_dropped_total", `reason="buffer"`), 0),
		}
		c.received = c.requestInit + c.responseInit + c.responseEnd
		if c.received == c.sent {
			ok = true
			break
		}
	}
	require.True(b, ok, "the tapper received %.0f of the %.0f events the proxy sent", c.received, c.sent)
	return c
}
