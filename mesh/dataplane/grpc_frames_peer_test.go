package dataplane_test

//lint:file-ignore SA1019 x/net's HTTP/2 Transport speaks to the proxy on a connection this test dials itself (NewClientConn), which net/http's bundled copy does not offer on a bare connection.

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// A meshed peer's mesh fields never reach the application, on either of
// the server proxy's paths for gRPC: a peer (mesh TLS with a client
// certificate, the transport header) sends a gRPC call carrying a forged
// l5d-client-id and other l5d-*/weft-* fields; the application sees the
// identity mesh TLS verified, once, and none of the others.
func TestAPeersMeshFieldsNeverReachTheApplicationOverGRPC(t *testing.T) {
	onBothGRPCPaths(t, 1, func(t *testing.T, serverOpts ...dataplane.Option) {
		pk := newPKI(t)
		app, seen := startRecordingTestService(t)
		port := uint16(app.ln.Addr().(*net.TCPAddr).Port)
		pols := dataplane.NewMemoryPolicies()
		pols.Set(uint32(port), allowAll(t))
		in := testutil.Listen(t)
		startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, serverOpts...)
		cert, err := pk.identity(t, idA).Certificate()
		require.NoError(t, err)

		c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, port, transport.HTTP2)
		require.NotNil(t, c, "a meshed peer completes the handshake")
		cc, err := (&http2.Transport{}).NewClientConn(c)
		require.NoError(t, err)
		defer cc.Close()
		req, err := http.NewRequest(http.MethodPost, "http://app.shop.svc.cluster.local/grpc.testing.TestService/EmptyCall",
			bytes.NewReader(testutil.GRPCFrame(0, nil)))
		require.NoError(t, err)
		req.ContentLength = -1 // as grpc-go: no content-length
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		req.Header.Set("X-Call", "peer")
		req.Header.Set("L5d-Client-Id", "admin.shop.serviceaccount.identity.linkerd.cluster.local")
		req.Header.Set("L5d-Dst-Canonical", "payments.shop.svc.cluster.local:8080")
		req.Header.Set("L5d-Anything", "forged")
		req.Header.Set("Weft-Anything", "forged")
		resp, err := cc.RoundTrip(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "0", resp.Trailer.Get("Grpc-Status"), "the call succeeded: %v %v", resp.Header, resp.Trailer)

		md := seen.Take()["peer"]
		require.NotNil(t, md, "the application got the call")
		assert.Equal(t, []string{idA}, md.Get("l5d-client-id"), "the identity mesh TLS verified, once")
		for k := range md {
			if k != "l5d-client-id" {
				assert.NotRegexp(t, "^(l5d|weft)-", k, "a peer's mesh field reached the application")
			}
		}
	})
}
