package cli_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	dstpb "github.com/weftmesh/weft/apis/proxy/destination"
	idpb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/grpclimit"
)

// limitFlags are the server limit flags every gRPC controller takes.
var limitFlags = []string{
	"connection-timeout", "keepalive-min-time", "keepalive-time", "keepalive-timeout", "max-connection-idle",
	"max-connections", "max-connections-per-peer", "max-requests", "max-requests-per-peer",
	"max-streams-per-connection", "max-message-bytes", "max-watches", "max-watches-per-peer", "request-timeout",
}

// controller is one gRPC controller started for a test.
type controller struct {
	name string
	addr string
	// unary is a unary method of the controller.
	unary string
}

// startControllers runs `weft-controller identity`, `destination` and
// `policy` on loopback with extra (the same for all three) and returns
// them once they listen.
func startControllers(t *testing.T, extra ...string) []controller {
	t.Helper()
	dir := t.TempDir()
	discoveryWrite(t, filepath.Join(dir, "shop.yaml"), discoveryManifests)
	anchorDir, issuerDir := identityMakePKI(t)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens:\n- token: \"web-token-0123456789\"\n  namespace: shop\n  serviceAccount: web\n"))

	base := []string{"--addr", "127.0.0.1:0"}
	id, _ := startController(t, cli.IdentityControllerCommand(), "identity service", append(append(base,
		"--trust-anchors", filepath.Join(anchorDir, "ca.crt"), "--issuer-dir", issuerDir,
		"--token-backend", "static", "--static-tokens", tokens), extra...)...)
	dst, _ := startController(t, cli.DestinationControllerCommand(), "destination service", append(append(base,
		"--source", "static", "--manifests", dir), extra...)...)
	pol, _ := startController(t, cli.PolicyControllerCommand(), "policy controller", append(append(base,
		"--source", "static", "--manifests", dir), extra...)...)
	return []controller{
		{"identity", id, "/io.linkerd.proxy.identity.Identity/Certify"},
		{"destination", dst, "/grpc.health.v1.Health/Check"},
		{"policy", pol, "/io.linkerd.proxy.inbound.InboundServerPolicies/GetPort"},
	}
}

func grpcConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestEveryControllerTakesTheSameServerLimitFlags: identity, destination
// and policy list the same limit flags with the same defaults.
func TestEveryControllerTakesTheSameServerLimitFlags(t *testing.T) {
	usage := map[string]map[string]string{}
	for _, cmd := range []cli.Command{cli.IdentityControllerCommand(), cli.DestinationControllerCommand(), cli.PolicyControllerCommand()} {
		st, help, _ := runCommand(t, cmd, "", "-h")
		require.Equal(t, cli.ExitOK, st)
		usage[cmd.Name] = map[string]string{}
		for _, name := range limitFlags {
			// "      --name type   usage (default x)", padded to the
			// longest flag of the command: the padding is left out.
			m := regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(name) + ` (\S+)\s+(.*)$`).FindStringSubmatch(help)
			require.NotEmpty(t, m, "%s has no --%s flag:\n%s", cmd.Name, name, help)
			usage[cmd.Name][name] = m[1] + " " + m[2]
		}
	}
	assert.Equal(t, usage["identity"], usage["destination"])
	assert.Equal(t, usage["identity"], usage["policy"])
	assert.Contains(t, usage["policy"]["connection-timeout"], "(default 10s)")
	assert.Contains(t, usage["policy"]["max-watches"], "(default 20000)")
}

func TestControllersRefuseLimitFlagsOutOfRange(t *testing.T) {
	for _, args := range [][]string{
		{"--connection-timeout", "0s"}, {"--max-watches", "0"}, {"--max-streams-per-connection", "0"},
		{"--max-watches", "10", "--max-watches-per-peer", "11"}, {"--request-timeout", "-1s"}, {"--max-message-bytes", "-5"},
		{"--max-connections", "0"}, {"--max-connections", "10", "--max-connections-per-peer", "11"},
		{"--max-requests-per-peer", "0"}, {"--max-requests", "10", "--max-requests-per-peer", "11"},
	} {
		for _, cmd := range []cli.Command{cli.IdentityControllerCommand(), cli.DestinationControllerCommand(), cli.PolicyControllerCommand()} {
			var all []string
			if cmd.Name == "identity" {
				all = append([]string{"--addr", "127.0.0.1:0", "--trust-anchors", "x", "--issuer-dir", "x", "--token-backend", "static", "--static-tokens", "x"}, args...)
			} else {
				all = append([]string{"--addr", "127.0.0.1:0", "--source", "static", "--manifests", "x"}, args...)
			}
			st, _, errOut := runCommand(t, cmd, "", all...)
			assert.Equal(t, cli.ExitUsage, st, "%s %v: %s", cmd.Name, args, errOut)
			assert.Contains(t, errOut, args[len(args)-2], "%s names the flag", cmd.Name)
		}
	}
}

// TestEveryControllerClosesASilentConnectionAtTheSameTimeout is the
// regression test of issue 13: `weft-controller policy` kept a TCP
// connection that sent nothing open past 14 s while the others closed it
// at 10 s. With the defaults, every controller closes it after
// grpclimit.DefaultConnectionTimeout.
func TestEveryControllerClosesASilentConnectionAtTheSameTimeout(t *testing.T) {
	cs := startControllers(t)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			start := time.Now()
			conn, err := net.DialTimeout("tcp", c.addr, testutil.DefaultTimeout)
			if !assert.NoError(t, err, c.name) {
				return
			}
			defer conn.Close()
			// Three times the timeout: enough on a loaded machine, far
			// below the 120 s gRPC would otherwise allow.
			_ = conn.SetReadDeadline(time.Now().Add(3 * grpclimit.DefaultConnectionTimeout))
			_, err = io.ReadAll(conn)
			var ne net.Error
			assert.False(t, errors.As(err, &ne) && ne.Timeout(), "%s kept a silent connection open for %s", c.name, time.Since(start))
			assert.GreaterOrEqual(t, time.Since(start), grpclimit.DefaultConnectionTimeout, "%s closed it before the timeout", c.name)
		})
	}
	wg.Wait()
}

// TestEveryControllerAnswersAHalfSentRequestWithDeadlineExceeded: a client
// that sends the headers and part of a unary request, then nothing, gets
// DEADLINE_EXCEEDED at --request-timeout instead of holding the stream.
func TestEveryControllerAnswersAHalfSentRequestWithDeadlineExceeded(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range startControllers(t, "--request-timeout", timeout.String()) {
		res := testutil.HalfSentGRPC(t, c.addr, c.unary, 200, []byte{0x0a, 0x05, 'w', 'e'}, testutil.DefaultTimeout)
		assert.Equal(t, int(codes.DeadlineExceeded), res.Status, "%s %s: %s", c.name, c.unary, res)
		assert.GreaterOrEqual(t, res.Elapsed, timeout, "%s: %s", c.name, res)
	}
}

// TestEveryControllerCapsTheConnectionsOfOneClient: with
// --max-connections-per-peer 2, a third connection from one address is
// closed on every controller before the server says a word, while another
// address is still served.
func TestEveryControllerCapsTheConnectionsOfOneClient(t *testing.T) {
	ctx := testutil.Context(t, 0)
	dialFrom := func(addr, src string) net.Conn {
		d := net.Dialer{Timeout: testutil.DefaultTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		conn, err := d.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	// spoke reads the server's first byte (its HTTP/2 SETTINGS) or the
	// end of a connection closed unread.
	spoke := func(conn net.Conn) bool {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(testutil.DefaultTimeout)))
		n, err := conn.Read(make([]byte, 1))
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server neither spoke nor closed")
		return n == 1
	}
	for _, c := range startControllers(t, "--max-connections", "10", "--max-connections-per-peer", "2") {
		for i := range 2 {
			assert.True(t, spoke(dialFrom(c.addr, "127.0.0.1")), "%s: connection %d was refused", c.name, i)
		}
		assert.False(t, spoke(dialFrom(c.addr, "127.0.0.1")), "%s served a third connection from one address", c.name)

		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		conn, err := grpc.NewClient("passthrough:///"+c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
		require.NoError(t, err)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		assert.NoError(t, err, "%s: another address is served", c.name)
		_ = conn.Close()
	}
}

// TestEveryControllerCapsTheRequestsOneClientHoldsInFlight: with
// --max-requests-per-peer 1, a client stalling one unary request on any
// controller has its next one refused with RESOURCE_EXHAUSTED, while
// another address is served.
func TestEveryControllerCapsTheRequestsOneClientHoldsInFlight(t *testing.T) {
	ctx := testutil.Context(t, 0)
	from := func(addr, src string) *grpc.ClientConn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	for _, c := range startControllers(t, "--max-requests", "10", "--max-requests-per-peer", "1") {
		greedy := from(c.addr, "127.0.0.1")
		// The stalled request: headers sent, the message never.
		_, err := greedy.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, c.unary)
		require.NoError(t, err)
		var refused error
		testutil.Eventually(t, 0, func() bool {
			_, refused = healthpb.NewHealthClient(greedy).Check(ctx, &healthpb.HealthCheckRequest{})
			return status.Code(refused) == codes.ResourceExhausted
		}, c.name+" to refuse a second request in flight from one address")
		assert.Contains(t, status.Convert(refused).Message(), "peer 127.0.0.1 holds its maximum of 1 requests in flight", c.name)
		_, err = healthpb.NewHealthClient(from(c.addr, "127.0.0.2")).Check(ctx, &healthpb.HealthCheckRequest{})
		assert.NoError(t, err, "%s: another address is served", c.name)
	}
}

// TestEveryControllerCapsWatches: with --max-watches 2, a third stream on
// any controller gets RESOURCE_EXHAUSTED; the open ones keep working.
func TestEveryControllerCapsWatches(t *testing.T) {
	ctx := testutil.Context(t, 0)
	for _, c := range startControllers(t, "--max-watches", "2", "--max-watches-per-peer", "2") {
		h := healthpb.NewHealthClient(grpcConn(t, c.addr))
		for i := range 2 {
			w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			_, err = w.Recv()
			require.NoError(t, err, "%s watch %d", c.name, i)
		}
		w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = w.Recv()
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%s: %v", c.name, err)
		assert.Contains(t, status.Convert(err).Message(), "maximum of 2 watches", c.name)
		_, err = h.Check(ctx, &healthpb.HealthCheckRequest{})
		assert.NoError(t, err, "%s: unary calls still work", c.name)
	}
}

// TestDestinationRefusesAWatchBeyondTheCapWhileOthersKeepGettingUpdates:
// a greedy client fills the destination controller's watches; its next
// Get is refused with RESOURCE_EXHAUSTED, and another client's open Get
// still receives the endpoint change that follows.
func TestDestinationRefusesAWatchBeyondTheCapWhileOthersKeepGettingUpdates(t *testing.T) {
	ctx := testutil.Context(t, 0)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "shop.yaml")
	discoveryWrite(t, manifest, discoveryManifests)
	addr, _ := startController(t, cli.DestinationControllerCommand(), "destination service",
		"--addr", "127.0.0.1:0", "--source", "static", "--manifests", dir, "--max-watches", "5", "--max-watches-per-peer", "3")

	get := func(c dstpb.DestinationClient) (dstpb.Destination_GetClient, error) {
		s, err := c.Get(ctx, &dstpb.GetDestination{Scheme: "k8s", Path: "web.shop.svc.cluster.local:80"})
		if err != nil {
			return nil, err
		}
		_, err = s.Recv()
		return s, err
	}
	// The other client connects from 127.0.0.2, so the per-peer cap of
	// the greedy one (127.0.0.1) does not apply to it.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	otherConn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	require.NoError(t, err)
	defer otherConn.Close()
	other, err := get(dstpb.NewDestinationClient(otherConn))
	require.NoError(t, err)

	greedy := dstpb.NewDestinationClient(grpcConn(t, addr))
	for i := range 3 {
		_, err := get(greedy)
		require.NoError(t, err, "greedy watch %d", i)
	}
	_, err = get(greedy)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "holds its maximum of 3 watches")

	// The other client's open watch still gets the next change.
	discoveryWrite(t, manifest, strings.Replace(discoveryManifests, `["10.0.0.1"]`, `["10.0.0.9"]`, 1))
	for moved := false; !moved; {
		u, err := other.Recv()
		require.NoError(t, err, "the other client's watch keeps working")
		for _, a := range u.GetAdd().GetAddrs() {
			ap, err := discovery.TCPAddressFromProto(a.GetAddr())
			require.NoError(t, err)
			moved = moved || ap.Addr().String() == "10.0.0.9"
		}
	}
	// The other client takes the last place; then the server is full.
	_, err = get(dstpb.NewDestinationClient(otherConn))
	require.NoError(t, err)
	_, err = get(dstpb.NewDestinationClient(otherConn))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "the server holds its maximum of 5 watches")
}

// TestIdentityControllerRateLimitsEachIdentity: with --certify-burst 3 and
// a rate too slow to refill during the test, a fourth certificate for the
// same service account is refused with RESOURCE_EXHAUSTED, and another
// service account still gets its certificates.
func TestIdentityControllerRateLimitsEachIdentity(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchorDir, issuerDir := identityMakePKI(t)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens:\n"+
		"- {token: \"web-token-0123456789\", namespace: shop, serviceAccount: web}\n"+
		"- {token: \"api-token-0123456789\", namespace: shop, serviceAccount: api}\n"))
	conn, _ := identityStartController(t, "--trust-anchors", filepath.Join(anchorDir, "ca.crt"), "--issuer-dir", issuerDir,
		"--token-backend", "static", "--static-tokens", tokens, "--certify-burst", "3", "--certify-rate", "0.001")
	client := idpb.NewIdentityClient(conn)
	certify := func(sa, token string) error {
		name := sa + ".shop.serviceaccount.identity.weft.cluster.local"
		csr := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name)
		_, err := client.Certify(ctx, &idpb.CertifyRequest{Identity: name, Token: []byte(token), CertificateSigningRequest: csr})
		return err
	}
	for i := range 3 {
		require.NoError(t, certify("web", "web-token-0123456789"), "web %d", i)
	}
	err := certify("web", "web-token-0123456789")
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "too many certificate requests for web.shop.serviceaccount")
	for i := range 3 {
		require.NoError(t, certify("api", "api-token-0123456789"), "api %d", i)
	}
}

func TestInjectorControllerRefusesLimitFlagsOutOfRange(t *testing.T) {
	for _, args := range [][]string{{"--max-in-flight", "0"}, {"--inject-max-body-bytes", "0"}, {"--validate-max-body-bytes", "-1"},
		{"--max-connections", "0"}, {"--max-connections-per-peer", "600"}} {
		st, _, errOut := runCommand(t, cli.InjectorControllerCommand(), "", append([]string{"--tls-cert", "x", "--tls-key", "y"}, args...)...)
		assert.Equal(t, cli.ExitUsage, st, "%v: %s", args, errOut)
		assert.Contains(t, errOut, args[0])
	}
	st, help, _ := runCommand(t, cli.InjectorControllerCommand(), "", "-h")
	require.Equal(t, cli.ExitOK, st)
	assert.Regexp(t, `--inject-max-body-bytes int .*\(default 4194304\)\n`, help)
	assert.Regexp(t, `--validate-max-body-bytes int .*\(default 1048576\)\n`, help)
	assert.Regexp(t, `--max-in-flight int .*\(default 8\)\n`, help)
	assert.Regexp(t, `--max-connections int .*\(default 500\)\n`, help)
	assert.Regexp(t, `--max-connections-per-peer int .*\(default 50\)\n`, help)
}
