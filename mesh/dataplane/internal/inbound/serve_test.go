package inbound

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// A client's mesh headers never reach the application, whoever the
// client is: the application reads l5d-client-id as the identity mesh
// TLS verified, and the Service a client names in l5d-dst-canonical is
// asked of discovery (HTTP.Route) only for a peer proxy. Served through
// HTTP.Serve to an application on a real socket.
func TestTheApplicationSeesOnlyTheIdentityMeshTLSVerifiedAndNoClientMeshHeader(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer app.Close()
	appAddr := netip.MustParseAddrPort(app.Listener.Addr().String())

	var asked []string
	h := newTestHTTP(appAddr.Addr(), func(_ context.Context, name, _, _ string) (string, string, []route.ResponseClass) {
		mu.Lock()
		asked = append(asked, name)
		mu.Unlock()
		return "", route.DefaultName, nil
	})
	defer h.AppH1.CloseIdle(true)

	const verified = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	for _, c := range []struct {
		name   string
		peer   authz.Conn
		proxy  bool
		wantID string
		asks   bool
	}{
		{"unmeshed client", authz.Conn{IP: netip.MustParseAddr("10.0.0.9")}, false, "", false},
		{"peer proxy without a client identity", authz.Conn{IP: netip.MustParseAddr("10.0.0.9"), TLS: true}, true, "", true},
		{"mesh TLS client that is not a proxy", authz.Conn{IP: netip.MustParseAddr("10.0.0.9"), TLS: true, Identity: verified}, false, verified, false},
		{"peer proxy", authz.Conn{IP: netip.MustParseAddr("10.0.0.9"), TLS: true, Identity: verified}, true, verified, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			got, asked = nil, nil
			mu.Unlock()
			r := httptest.NewRequest(http.MethodGet, "/orders", nil)
			r.Header.Set(httpcore.HeaderClientID, "admin.shop.serviceaccount.identity.linkerd.cluster.local")
			r.Header.Set(httpcore.HeaderDstCanonical, "payments.shop.svc.cluster.local:8080")
			r.Header.Set(httpcore.HeaderOrigProto, "HTTP/1.1")
			r.Header.Set("Weft-Anything", "forged")
			r.Header.Set("X-Kept", "yes")
			w := httptest.NewRecorder()
			conn := &Conn{Port: appAddr.Port(), Peer: c.peer, FromProxy: c.proxy}
			conn.Remote = netip.AddrPortFrom(c.peer.IP, 40000)
			conn.TargetAddr = appAddr
			h.Serve(w, r, conn)

			require.Equal(t, http.StatusNoContent, w.Code, "admitted and answered by the application: %s", w.Body.String())
			mu.Lock()
			defer mu.Unlock()
			require.NotNil(t, got, "the application got the request")
			assert.Equal(t, "yes", got.Get("X-Kept"))
			for _, name := range []string{httpcore.HeaderDstCanonical, httpcore.HeaderOrigProto, "Weft-Anything"} {
				assert.Empty(t, got.Values(name), "%s reached the application", name)
			}
			if c.wantID == "" {
				assert.Empty(t, got.Values(httpcore.HeaderClientID), "no verified identity: no l5d-client-id")
			} else {
				assert.Equal(t, []string{c.wantID}, got.Values(httpcore.HeaderClientID), "l5d-client-id is the verified identity, once")
			}
			if c.asks {
				assert.Equal(t, []string{"payments.shop.svc.cluster.local:8080"}, asked, "a peer proxy's l5d-dst-canonical is asked of discovery")
			} else {
				assert.Empty(t, asked, "a client that is not a peer proxy names no Service")
			}
		})
	}
}

// A port without a policy denies every request, and the application is
// never dialled.
func TestAPortWithoutPolicyIsDeniedBeforeTheApplication(t *testing.T) {
	dialled := false
	h := newTestHTTP(netip.MustParseAddr("127.0.0.1"), nil)
	h.Policy = func(context.Context, uint32) (*Policy, error) { return nil, context.DeadlineExceeded }
	h.AppH1.Dial = func(context.Context, string) (net.Conn, error) { dialled = true; return nil, net.ErrClosed }
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	h.Serve(w, r, &Conn{Port: 8080, Peer: authz.Conn{IP: netip.MustParseAddr("10.0.0.9")}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, authz.ReasonNoPolicy.String(), w.Header().Get(httpcore.HeaderDenyReason))
	assert.False(t, dialled)
}

// newTestHTTP is an inbound side whose every port admits any client (as
// the all-unauthenticated default policy does) and whose application is
// reached over HTTP/1 at app.
func newTestHTTP(app netip.Addr, rt func(ctx context.Context, name, method, path string) (string, string, []route.ResponseClass)) *HTTP {
	srv := &authz.Server{
		Meta: authz.DefaultMeta("all-unauthenticated"), Protocol: authz.ProtocolDetect,
		HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()},
		Authorizations: []authz.Authorization{{Meta: authz.DefaultMeta("all-unauthenticated"), Networks: authz.AllNetworks(),
			Authentication: authz.Authentication{Kind: authz.Unauthenticated}}},
	}
	pol := &Policy{Srv: srv}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	return &HTTP{
		Policy:        func(context.Context, uint32) (*Policy, error) { return pol, nil },
		NoPolicy:      &Policy{},
		Route:         rt,
		Metrics:       reqmetrics.New(metricstore.NewStore(nil)),
		Tap:           tap.NewHub(1, 1),
		Log:           slog.New(slog.DiscardHandler),
		App:           app,
		Dial:          dial,
		AppH1:         &h1.Client{Dial: dial},
		AppH2:         func(*http.Request, netip.AddrPort) (*http.Response, error) { panic("no HTTP/2 request in these tests") },
		UpstreamTimer: func(http.ResponseWriter) func() { return func() {} },
	}
}
