//go:build unix

package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// latencies collects per-operation durations from parallel workers.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	p := func(q float64) float64 { return float64(l.d[int(q*float64(len(l.d)-1))].Microseconds()) }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}

// benchParallelism is the number of concurrent callers per CPU for the
// throughput runs: enough in-flight requests to keep both cores busy
// while others wait on the loopback round trip, as many proxies would.
const benchParallelism = 4

// parallel runs op in b.RunParallel with benchParallelism callers per CPU
// (throughput), timing each call.
func parallel(b *testing.B, op func() error) { run(b, benchParallelism, op) }

// serial runs op from a single caller (latency without queueing).
func serial(b *testing.B, op func() error) { run(b, 0, op) }

// cpuTime is the user+system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run times op; besides wall-clock ns/op it reports the process CPU time
// per operation (cpu-µs/op), which stays meaningful on a shared machine:
// the rate two dedicated cores sustain is 2 s / cpu-µs/op.
func run(b *testing.B, par int, op func() error) {
	var l latencies
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	defer func() {
		b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}()
	if par == 0 {
		local := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			local = append(local, time.Since(start))
		}
		b.StopTimer()
		l.add(local)
		l.report(b)
		return
	}
	b.SetParallelism(par)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			start := time.Now()
			if err := op(); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(start))
		}
		l.add(local)
	})
	b.StopTimer()
	l.report(b)
}

// BenchmarkCertify compares, in one run: Certify over gRPC on loopback
// through grpc-go's server (Register) and through Service.Handler on Go's
// HTTP/2 server, the same service called in-process, the bare work (parse and verify the
// CSR, x509.CreateCertificate with the issuer key), and raw ECDSA P-256
// sign+verify, the physical floor.
//
//	go test -run '^$' -bench BenchmarkCertify -benchtime 3s ./mesh/identity/
func BenchmarkCertify(b *testing.B) {
	p := newPKI(b)
	name := mustName(b, "shop", "web")
	csrDER := testutil.CSR(b, testutil.GenerateKey(b, testutil.ECDSAP256), name.String())
	tokens := identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}
	// No rate limit: the benchmark measures issuance, not the limiter.
	svc, err := identity.NewService(context.Background(), tokens, p.ca, identity.WithRateLimit(identity.RateLimit{}))
	require.NoError(b, err)
	req := identity.Request{Identity: name.String(), Token: []byte("web-token"), CSR: csrDER}

	b.Run("grpc-loopback", func(b *testing.B) {
		lis := testutil.Listen(b)
		srv := grpc.NewServer()
		svc.Register(srv)
		go func() { _ = srv.Serve(lis) }()
		defer srv.Stop()
		benchCalls(b, lis.Addr().String(), req)
	})

	b.Run("handler-loopback", func(b *testing.B) {
		// The same call through Service.Handler on Go's HTTP/2 server
		// (unencrypted HTTP/2, as grpc-loopback is plaintext).
		lis := testutil.Listen(b)
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		srv := &http.Server{Handler: svc.Handler(0), Protocols: &protos, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer srv.Close()
		benchCalls(b, lis.Addr().String(), req)
	})

	b.Run("service-in-process", func(b *testing.B) {
		ctx := context.Background()
		parallel(b, func() error {
			_, err := svc.Certify(ctx, req)
			return err
		})
	})

	b.Run("bare-parse-verify-create", func(b *testing.B) {
		issuerCert, issuerKey := p.issuer.Cert, p.issuer.Key
		bare := func() error {
			csr, err := x509.ParseCertificateRequest(csrDER)
			if err != nil {
				return err
			}
			if err := csr.CheckSignature(); err != nil {
				return err
			}
			now := time.Now()
			tmpl, err := identity.LeafTemplate(identity.IssueRequest{CSR: csr, Name: name, NotBefore: now, NotAfter: now.Add(24 * time.Hour)})
			if err != nil {
				return err
			}
			_, err = x509.CreateCertificate(rand.Reader, tmpl, issuerCert, csr.PublicKey, issuerKey)
			return err
		}
		b.Run("throughput", func(b *testing.B) { parallel(b, bare) })
		b.Run("one-caller", func(b *testing.B) { serial(b, bare) })
	})

	b.Run("ecdsa-p256-sign+verify", func(b *testing.B) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(b, err)
		digest := sha256.Sum256([]byte("a certificate's to-be-signed bytes"))
		parallel(b, func() error {
			sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
			if err != nil {
				return err
			}
			if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig) {
				return errBadSig
			}
			return nil
		})
	})
}

// benchCalls runs the throughput and one-caller sub-benchmarks of
// Certify over one plaintext gRPC connection to addr.
func benchCalls(b *testing.B, addr string, req identity.Request) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	client := pb.NewIdentityClient(conn)
	msg := &pb.CertifyRequest{Identity: req.Identity, Token: req.Token, CertificateSigningRequest: req.CSR}
	ctx := context.Background()
	_, err = client.Certify(ctx, msg) // warm the connection
	require.NoError(b, err)
	certify := func() error {
		_, err := client.Certify(ctx, msg)
		return err
	}
	b.Run("throughput", func(b *testing.B) { parallel(b, certify) })
	b.Run("one-caller", func(b *testing.B) { serial(b, certify) })
}

type benchError string

func (e benchError) Error() string { return string(e) }

const errBadSig = benchError("signature did not verify")
