//go:build linux

package identity_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// benchServerEnv makes the test binary run only an identity server on
// loopback (for BenchmarkCertifyServerProcess) and print its address:
// "grpc-go" (or "1") serves Certify as the identity controller does
// (grpclimit.NewServer, grpc-go's transport), "handler" through
// Service.Handler on Go's HTTP/2 server.
const benchServerEnv = "WEFT_IDENTITY_BENCH_SERVER"

// benchProfileEnv, when set to a path, has the server process write its CPU
// profile there (the server's side alone, without the load's).
const benchProfileEnv = "WEFT_IDENTITY_BENCH_CPUPROFILE"

// benchServerCPUsEnv, when set to a CPU list ("1"), starts the server
// process pinned to those CPUs with taskset.
const benchServerCPUsEnv = "WEFT_IDENTITY_BENCH_SERVER_CPUS"

// startCPUProfile starts a CPU profile written to path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(benchServerEnv); mode != "" {
		os.Exit(benchServer(mode))
	}
	// Otherwise the tests run, and a goroutine that outlives them fails the run.
	goleak.VerifyTestMain(m)
}

// benchServer serves Certify on 127.0.0.1 until stdin closes (the parent
// exits or kills it) or five minutes pass.
func benchServer(mode string) int {
	anchor, err := pki.NewAnchor(pki.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	issuer, err := pki.NewIssuer(anchor, pki.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	svc, err := identity.NewService(context.Background(), identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, ca, identity.WithRateLimit(identity.RateLimit{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if path := os.Getenv(benchProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
	}
	var stop func()
	if mode == "handler" {
		// Go's HTTP/2 server with grpclimit's per-connection defaults
		// where net/http has the knob.
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		hs := &http.Server{
			Handler:           svc.Handler(grpclimit.DefaultMaxRecvMsgSize),
			Protocols:         &protos,
			ReadHeaderTimeout: grpclimit.DefaultConnectionTimeout,
			IdleTimeout:       grpclimit.DefaultMaxConnectionIdle,
			HTTP2: &http.HTTP2Config{
				MaxConcurrentStreams: grpclimit.DefaultMaxStreamsPerConnection,
				SendPingTimeout:      grpclimit.DefaultKeepaliveTime,
				PingTimeout:          grpclimit.DefaultKeepaliveTimeout,
			},
		}
		go func() { _ = hs.Serve(lis) }()
		stop = func() { _ = hs.Close() }
	} else {
		srv, err := grpclimit.NewServer(grpclimit.Defaults())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		svc.Register(srv)
		go func() { _ = srv.Serve(lis) }()
		stop = srv.Stop
	}
	fmt.Println(lis.Addr().String())
	done := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
	}
	stop()
	return 0
}

// BenchmarkCertifyServerProcess runs the identity server in a child
// process, once as the identity controller serves it (grpc-go's
// transport, grpclimit's defaults) and once through Service.Handler on
// Go's HTTP/2 server, and reports the server's own
// CPU time per Certify (server-cpu-µs/op), the figure to compare with the
// bare in-process work of BenchmarkCertify: 2 cores sustain
// 2 s / server-cpu-µs/op calls per second when the callers are other
// machines' proxies. The two servers run side by side and their
// sub-benchmarks alternate within a run (-count repeats each one back to
// back: for rounds, run the test binary several times). Set WEFT_IDENTITY_BENCH_CPUPROFILE=path for a
// server's CPU profile (path.grpc-go, path.handler),
// WEFT_IDENTITY_BENCH_SERVER_CPUS=1 to pin the servers to CPU 1.
//
//	go test -run '^$' -bench 'BenchmarkCertify' -benchtime 3s ./mesh/identity/
func BenchmarkCertifyServerProcess(b *testing.B) {
	exe, err := os.Executable()
	require.NoError(b, err)
	name := mustName(b, "shop", "web")
	msg := &pb.CertifyRequest{Identity: name.String(), Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(b, testutil.GenerateKey(b, testutil.ECDSAP256), name.String())}
	ctx := context.Background()
	type server struct {
		mode   string
		pid    int
		client pb.IdentityClient
	}
	var servers []server
	for _, mode := range []string{"grpc-go", "handler"} {
		cmd := exec.Command(exe)
		if cpus := os.Getenv(benchServerCPUsEnv); cpus != "" {
			// The server on its own cores (its GOMAXPROCS follows), the
			// callers (run this binary under taskset too) on the others.
			taskset, err := exec.LookPath("taskset")
			require.NoError(b, err, "%s needs taskset", benchServerCPUsEnv)
			cmd = exec.Command(taskset, "-c", cpus, exe)
		}
		cmd.Env = append(os.Environ(), benchServerEnv+"="+mode)
		if path := os.Getenv(benchProfileEnv); path != "" {
			cmd.Env = append(cmd.Env, benchProfileEnv+"="+path+"."+mode)
		}
		addr := testutil.StartServerProcess(b, cmd).Addr
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		b.Cleanup(func() { _ = conn.Close() })
		client := pb.NewIdentityClient(conn)
		_, err = client.Certify(ctx, msg)
		require.NoError(b, err, mode)
		servers = append(servers, server{mode, cmd.Process.Pid, client})
	}
	for _, load := range []struct {
		name string
		f    func(*testing.B, func() error)
	}{{"throughput", parallel}, {"one-caller", serial}} {
		for _, s := range servers {
			b.Run(s.mode+"/"+load.name, func(b *testing.B) {
				before := testutil.ProcessCPU(b, s.pid)
				load.f(b, func() error {
					_, err := s.client.Certify(ctx, msg)
					return err
				})
				b.ReportMetric(float64((testutil.ProcessCPU(b, s.pid)-before).Microseconds())/float64(b.N), "server-cpu-µs/op")
			})
		}
	}
}
