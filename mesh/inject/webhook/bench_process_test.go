//go:build linux

package webhook_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// benchServerEnv names the directory of the certificate files when the
// test binary is re-executed as the webhook server of
// BenchmarkInjectorHTTPSServerProcess; benchProfileEnv, when set to a
// path, has that server write its CPU profile there.
const (
	benchServerEnv  = "WEFT_WEBHOOK_BENCH_SERVER"
	benchProfileEnv = "WEFT_WEBHOOK_BENCH_CPUPROFILE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(benchServerEnv); dir != "" {
		if err := benchServer(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchServer serves the injector over HTTPS on 127.0.0.1 as
// weft-controller's injector serves it (same http.Server settings, the
// Prometheus metrics), prints the address and serves until stdin closes
// or five minutes pass.
func benchServer(dir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return err
	}
	anchors, err := os.ReadFile(filepath.Join(dir, "anchors.pem"))
	if err != nil {
		return err
	}
	values := inject.DefaultValues()
	values.Version = "v0.1.0"
	values.IdentityTrustAnchorsPEM = string(anchors)
	metrics, err := webhook.NewPrometheusMetrics(prometheus.NewRegistry())
	if err != nil {
		return err
	}
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	h, err := webhook.NewInjector(values, nss, webhook.WithMetrics(metrics))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if path := os.Getenv(benchProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	fmt.Println(lis.Addr().String())
	done := make(chan struct{})
	go func() {
		// Each line asks for the collector's count so far; the end of
		// stdin stops the server.
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Println(ms.NumGC, ms.PauseTotalNs)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
	}
	return srv.Close()
}

// BenchmarkInjectorHTTPSServerProcess runs the injector in a child process
// (this test binary re-executed) and drives it from this one at a fixed
// 500 requests per second over HTTPS with keep-alive connections, the
// load open: each request starts on its 2 ms schedule whatever the
// earlier ones do, so a slow answer cannot hold the next ones back. The
// server has its own garbage collector and its own CPU (reported as
// server-cpu-µs/op); the latencies are the client's, from the request's
// start to the end of the response body.
//
// It also reports the server's garbage collections per thousand reviews
// and their stop-the-world pause per review. A review beyond the injector's in-flight cap (DefaultMaxInFlight) is
// answered 429 at once; those are counted (refused-429), their latency
// kept with the others.
//
//	go test -c -o wh.test ./mesh/inject/webhook && cd mesh/inject/webhook && ../../../wh.test -test.run '^$' -test.bench BenchmarkInjectorHTTPSServerProcess -test.benchtime 5000x -test.count 3
func BenchmarkInjectorHTTPSServerProcess(b *testing.B) {
	dir := b.TempDir()
	ca := testutil.NewAnchor(b, testutil.CertOptions{Name: "webhook-ca.test"})
	leaf := ca.Leaf(b, testutil.CertOptions{Name: "weft-injector.weft.svc", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	testutil.WriteFile(b, filepath.Join(dir, "tls.crt"), leaf.CertPEM)
	testutil.WriteFile(b, filepath.Join(dir, "tls.key"), leaf.KeyPEM)
	testutil.WriteFile(b, filepath.Join(dir, "anchors.pem"), []byte(testValues(b).IdentityTrustAnchorsPEM))

	exe, err := os.Executable()
	require.NoError(b, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), benchServerEnv+"="+dir)
	srv := testutil.StartServerProcess(b, cmd)
	addr, stdin, out := srv.Addr, srv.Stdin, srv.Stdout

	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: testutil.Pool(ca), MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: maxInFlight,
		},
	}
	defer client.CloseIdleConnections()
	url := "https://" + addr + "/"
	body := podReview(b, "bench", appPod("shop", map[string]string{vocab.AnnotationProxyCPURequest: "100m"}))
	// call returns the response's status.
	call := func() (int, error) {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, err
	}
	// Open a few connections so the handshakes are not measured.
	var wg sync.WaitGroup
	for range webhook.DefaultMaxInFlight {
		wg.Go(func() { _, _ = call() })
	}
	wg.Wait()

	b.Run("500rps", func(b *testing.B) {
		const interval = time.Second / 500
		lat := make([]time.Duration, b.N)
		var failed, refused atomic.Int64
		slots := make(chan struct{}, maxInFlight)
		cpu0 := testutil.ProcessCPU(b, cmd.Process.Pid)
		gc0, pause0 := serverGC(b, stdin, out)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range b.N {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				t0 := time.Now()
				status, err := call()
				lat[i] = time.Since(t0)
				switch {
				case status == http.StatusTooManyRequests:
					// The server's in-flight cap refused it, as it
					// would refuse the API server: counted, not fatal.
					refused.Add(1)
				case err == nil && status != http.StatusOK:
					err = fmt.Errorf("status %d", status)
				}
				if err != nil && failed.Add(1) == 1 {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64((testutil.ProcessCPU(b, cmd.Process.Pid)-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/op")
		gc1, pause1 := serverGC(b, stdin, out)
		b.ReportMetric(float64(gc1-gc0)*1000/float64(b.N), "server-GCs/1k-reviews")
		b.ReportMetric(float64(pause1-pause0)/1e3/float64(b.N), "server-GC-pause-µs/op")
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		pct := func(p float64) float64 {
			return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(0.999), "p99.9-ms")
		b.ReportMetric(float64(refused.Load()), "refused-429")
	})
}

// serverGC asks the server process for its garbage collections so far and
// their total stop-the-world pause in nanoseconds.
func serverGC(b *testing.B, stdin io.Writer, out *bufio.Reader) (count, pauseNs uint64) {
	_, err := io.WriteString(stdin, "gc\n")
	require.NoError(b, err)
	line, err := out.ReadString('\n')
	require.NoError(b, err)
	_, err = fmt.Sscan(line, &count, &pauseNs)
	require.NoError(b, err, "the server answered %q", line)
	return count, pauseNs
}

// maxInFlight bounds the requests the load generator holds open at once
// (and its idle connections): far above what 500 req/s needs at a
// millisecond each, so it bounds only a stalled server.
const maxInFlight = 64
