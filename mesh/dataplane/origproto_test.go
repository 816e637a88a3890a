package dataplane_test

//lint:file-ignore SA1019 x/net's HTTP/2 Transport speaks to the proxy on a connection this test dials itself (NewClientConn), which net/http's bundled copy does not offer on a bare connection.

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

func TestOnlyTheOrigProtoValuesProxiesSendTurnAPeersHTTP2RequestIntoHTTP1(t *testing.T) {
	// Any l5d-orig-proto value from a peer turned its HTTP/2 request into
	// HTTP/1.1. Linkerd's proxies send HTTP/1.1 or HTTP/1.0 (with
	// "; absolute-form" when the URI was absolute); with any other value
	// the request stays HTTP/2, as Linkerd's proxy leaves it.
	pk := newPKI(t)
	app := startHTTPApp(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), allowAll(t))
	in := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in})
	cert, err := pk.identity(t, idA).Certificate()
	require.NoError(t, err)

	for _, tc := range []struct {
		value, proto string
	}{
		{"HTTP/1.1", "HTTP/1.1"},
		{"HTTP/1.0", "HTTP/1.1"}, // restored as HTTP/1, sent to the application as HTTP/1.1
		{"HTTP/1.1; absolute-form", "HTTP/1.1"},
		{"HTTP/2", "HTTP/2.0"},
		{"HTTP/3", "HTTP/2.0"},
		{"http/1.1", "HTTP/2.0"},
		{"HTTP/1.1x", "HTTP/2.0"},
		{"h2c", "HTTP/2.0"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, app.port(), transport.HTTP2)
			require.NotNil(t, c, "a meshed peer completes the handshake")
			cc, err := (&http2.Transport{}).NewClientConn(c)
			require.NoError(t, err)
			defer cc.Close()
			req, err := http.NewRequest(http.MethodGet, "http://web.shop.svc.cluster.local/orig", nil)
			require.NoError(t, err)
			req.Header.Set("L5d-Orig-Proto", tc.value)
			resp, err := cc.RoundTrip(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			last := app.last()
			assert.Equal(t, tc.proto, last.Proto)
			assert.Empty(t, last.Header["L5d-Orig-Proto"], "the header never reaches the application")
		})
	}
}
