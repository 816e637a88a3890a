//go:build linux

package identity_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// benchServerEnv makes the test binary run only an identity server on
// loopback (for BenchmarkCertifyServerProcess) and print its address.
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
	if os.Getenv(benchServerEnv) == "1" {
		os.Exit(benchServer())
	}
	os.Exit(m.Run())
}

// benchServer serves Certify on 127.0.0.1 until stdin closes (the parent
// exits or kills it) or five minutes pass.
func benchServer() int {
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
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
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
	srv.Stop()
	return 0
}

// BenchmarkCertifyServerProcess runs the identity server in a child
// process (set WEFT_IDENTITY_BENCH_CPUPROFILE=path for its CPU profile,
// WEFT_IDENTITY_BENCH_SERVER_CPUS=1 to pin it to CPU 1) and reports the server's own CPU time per Certify
// (server-cpu-µs/op), the figure to compare with the bare in-process work
// of BenchmarkCertify: 2 cores sustain 2 s / server-cpu-µs/op calls per
// second when the callers are other machines' proxies.
//
//	go test -run '^$' -bench 'BenchmarkCertify' -benchtime 3s ./mesh/identity/
func BenchmarkCertifyServerProcess(b *testing.B) {
	exe, err := os.Executable()
	require.NoError(b, err)
	cmd := exec.Command(exe)
	if cpus := os.Getenv(benchServerCPUsEnv); cpus != "" {
		// The server on its own cores (its GOMAXPROCS follows), the
		// callers (run this binary under taskset too) on the others.
		taskset, err := exec.LookPath("taskset")
		require.NoError(b, err, "%s needs taskset", benchServerCPUsEnv)
		cmd = exec.Command(taskset, "-c", cpus, exe)
	}
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	addr := testutil.StartServerProcess(b, cmd).Addr

	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	client := pb.NewIdentityClient(conn)
	name := mustName(b, "shop", "web")
	msg := &pb.CertifyRequest{Identity: name.String(), Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(b, testutil.GenerateKey(b, testutil.ECDSAP256), name.String())}
	ctx := context.Background()
	_, err = client.Certify(ctx, msg)
	require.NoError(b, err)
	certify := func() error {
		_, err := client.Certify(ctx, msg)
		return err
	}
	measure := func(b *testing.B, f func(*testing.B, func() error)) {
		before := testutil.ProcessCPU(b, cmd.Process.Pid)
		f(b, certify)
		b.ReportMetric(float64((testutil.ProcessCPU(b, cmd.Process.Pid)-before).Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
	b.Run("throughput", func(b *testing.B) { measure(b, parallel) })
	b.Run("one-caller", func(b *testing.B) { measure(b, serial) })
}
