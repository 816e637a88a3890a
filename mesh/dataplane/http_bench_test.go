package dataplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/weftmesh/weft/internal/testutil"
)

// The HTTP benchmarks compare, in one process on loopback, an application
// reached directly, through the Weft proxy pair (outbound -> HTTP/2 over
// mutual TLS -> inbound) and through the obvious Go alternative: a pair of
// httputil.ReverseProxy with mutual TLS between them (HTTP/1.1 keep-alive,
// or HTTP/2 when the client speaks HTTP/2). Besides ns/op each reports
// cpu-us/op, the process CPU time (user+system) per request: clients,
// proxies and application together, so the proxies' share is the
// difference to "direct".
//
//	go test -run XXX -bench HTTP -benchtime 3s ./mesh/dataplane

type httpBenchTargets struct {
	direct, weft, rp string
}

func startBenchTargets(b *testing.B) httpBenchTargets {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	hp := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b)})
	return httpBenchTargets{
		direct: app.ln.Addr().String(),
		weft:   hp.clientAddr,
		rp:     startReverseProxyPair(b, app.ln.Addr().String(), false),
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

func benchGet(b *testing.B, c *http.Client, u string, parallel int) {
	benchDo(b, parallel, func() {
		resp, err := c.Get(u)
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

var httpBenchOrder = []string{"direct", "weft-pair", "go-reverseproxy-pair"}

func (t httpBenchTargets) addr(name string) string {
	switch name {
	case "direct":
		return t.direct
	case "weft-pair":
		return t.weft
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
// UnaryCall with a 100-byte payload) from 8 goroutines per CPU.
func BenchmarkHTTPGRPCUnary(b *testing.B) {
	ln := testutil.Listen(b)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer(interop.NewTestServerOptions{}))
	go s.Serve(ln)
	b.Cleanup(s.Stop)
	// The pair only needs the application's listener (its port).
	hp := startHTTPPair(b, httpPairOptions{serverPolicy: allowAll(b), app: &httpApp{ln: ln}})
	targets := map[string]string{
		"direct":               ln.Addr().String(),
		"weft-pair":            hp.clientAddr,
		"go-reverseproxy-pair": startReverseProxyPair(b, ln.Addr().String(), true),
	}
	for _, name := range httpBenchOrder {
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
