package conformance_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// grpcCoreCases are the interop client's core test cases.
var grpcCoreCases = []string{
	"empty_unary", "large_unary", "client_streaming", "server_streaming", "ping_pong", "empty_stream",
	"timeout_on_sleeping_server", "cancel_after_begin", "cancel_after_first_response",
	"status_code_and_message", "special_status_message", "custom_metadata",
	"unimplemented_method", "unimplemented_service",
}

func interopDir() string {
	return filepath.Join(gopathBin(), "grpc-interop")
}

func TestGRPCInteropThroughTheMesh(t *testing.T) {
	dir := interopDir()
	client := need(t, "WEFT_GRPC_INTEROP_CLIENT", "grpc-interop-client", filepath.Join(envOr("WEFT_GRPC_INTEROP_DIR", dir), "client"))
	server := need(t, "WEFT_GRPC_INTEROP_SERVER", "grpc-interop-server", filepath.Join(envOr("WEFT_GRPC_INTEROP_DIR", dir), "server"))

	// The interop server has no host flag: it binds every address of the
	// port; the test only sends traffic over loopback.
	port := testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, server, "-port", strconv.Itoa(port), "-use_tls=false")
	require.NoError(t, srv.Start())
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
	testutil.Eventually(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "the interop server listens")

	m := startMesh(t, uint16(port))
	host, mport, err := net.SplitHostPort(m.outbound)
	require.NoError(t, err)
	passed := 0
	for _, tc := range grpcCoreCases {
		t.Run(tc, func(t *testing.T) {
			cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer ccancel()
			out, err := exec.CommandContext(cctx, client, "-server_host", host, "-server_port", mport, "-test_case", tc, "-use_tls=false").CombinedOutput()
			if err != nil {
				t.Fatalf("interop client %s failed: %v\n%s", tc, err, out)
			}
			passed++
		})
	}
	require.GreaterOrEqual(t, requests(t, m.client, "outbound", false), float64(len(grpcCoreCases)), "the calls went through the client proxy")
	require.GreaterOrEqual(t, requests(t, m.server, "inbound", true), float64(len(grpcCoreCases)), "and over mutual TLS through the server proxy")
	t.Logf("gRPC interop through client -> outbound proxy -> mutual TLS -> inbound proxy -> server: %d/%d core cases passed", passed, len(grpcCoreCases))
}
