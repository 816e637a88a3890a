package dataplane_test

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// servicePair is client proxy A -> server proxy B -> app, where the
// client application dials a Service's ClusterIP (as in a pod) and
// discovery knows that address as Service web in namespace shop. A and B
// have profile sources of their own, so a test decides what each proxy's
// discovery says.
type servicePair struct {
	app            *httpApp
	a, b           *running
	profA, profB   *dataplane.MemoryProfiles
	clientAddr     string
	clusterIP, fqn string // "10.96.0.10:PORT", "web.shop.svc.cluster.local:PORT"
}

func startServicePair(t *testing.T, cfgA func(*dataplane.Config)) *servicePair {
	t.Helper()
	app := startHTTPApp(t)
	pk := newPKI(t)
	sp := &servicePair{app: app, profA: dataplane.NewMemoryProfiles(), profB: dataplane.NewMemoryProfiles()}
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), allowAll(t))
	inB := testutil.Listen(t)
	sp.b = startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: inB}, dataplane.WithProfiles(sp.profB))

	sp.clusterIP = fmt.Sprintf("10.96.0.10:%d", app.port())
	sp.fqn = fmt.Sprintf("web.shop.svc.cluster.local:%d", app.port())
	res := dataplane.NewMemoryResolver()
	res.Set(sp.clusterIP, dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), Identity: idB,
		OpaqueTransportPort: uint16(inB.Addr().(*net.TCPAddr).Port)})
	cfg := testConfig()
	if cfgA != nil {
		cfgA(&cfg)
	}
	mapped := testutil.Listen(t)
	sp.a = startProxy(t, cfg, pk.identity(t, idA), res, nil,
		dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: sp.clusterIP}}}, dataplane.WithProfiles(sp.profA))
	sp.clientAddr = mapped.Addr().String()
	return sp
}

func (sp *servicePair) url(path string) string { return "http://" + sp.clientAddr + path }

// webProfile is what the destination service answers for Service web of
// namespace shop: its name, its parent Service, and a ServiceProfile
// route "books".
func webProfile(port uint16) *pdst.DestinationProfile {
	return &pdst.DestinationProfile{
		FullyQualifiedName: "web.shop.svc.cluster.local",
		ParentRef: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: "core", Kind: "Service", Name: "web", Namespace: "shop", Port: uint32(port),
		}}},
		Routes: []*pdst.Route{{
			Condition:     &pdst.RequestMatch{Match: &pdst.RequestMatch_Path{Path: &pdst.PathMatch{Regex: "/books/.*"}}},
			MetricsLabels: map[string]string{"route": "books"},
		}},
	}
}

// routeLines returns the route_response_total lines of a proxy's metrics
// in a direction.
func routeLines(t *testing.T, r *running, direction string) []string {
	t.Helper()
	_, body := r.admin(t, "/metrics")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "route_response_total{") && strings.Contains(l, `direction="`+direction+`"`) {
			out = append(out, l)
		}
	}
	return out
}

func TestRouteMetricsNameTheServiceAndItsProfileRoutesOnBothSides(t *testing.T) {
	for _, hop := range peerHops {
		t.Run(hop.name, func(t *testing.T) {
			sp := startServicePair(t, hop.cfgA)
			prof := webProfile(sp.app.port())
			sp.profA.Set(sp.clusterIP, prof) // the ClusterIP resolves to the Service's profile
			sp.profB.Set(sp.fqn, prof)       // and so does the Service's name, on the server side
			c := h1Client()
			for _, path := range []string{"/books/1", "/books/2", "/other"} {
				// A forged header from the application changes nothing.
				resp, _ := get(t, c, sp.url(path), "L5d-Dst-Canonical", "admin.shop.svc.cluster.local:1")
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			assert.Empty(t, sp.app.last().Header["L5d-Dst-Canonical"], "the mesh header does not reach the application")

			dst := `dst="` + sp.fqn + `"`
			testutil.Eventually(t, 5*time.Second, func() bool {
				return sp.b.metric(t, "route_response_total", `direction="inbound"`) == 3
			}, "the server proxy counts the responses")
			// Client side: the Service's name, not the address dialled.
			assert.Equal(t, 2.0, sp.a.metric(t, "route_response_total", `direction="outbound"`, dst, `rt_route="books"`, `classification="success"`, `tls="true"`))
			assert.Equal(t, 1.0, sp.a.metric(t, "route_response_total", `direction="outbound"`, dst, `rt_route="default"`, `tls="true"`))
			for _, l := range routeLines(t, sp.a, "outbound") {
				assert.NotContains(t, l, sp.clusterIP, "no route series is labelled with the ClusterIP")
			}
			// Server side: the Service the client called, with its profile's
			// routes, over mutual TLS.
			assert.Equal(t, 2.0, sp.b.metric(t, "route_response_total", `direction="inbound"`, dst, `rt_route="books"`, `classification="success"`, `tls="true"`))
			assert.Equal(t, 1.0, sp.b.metric(t, "route_response_total", `direction="inbound"`, dst, `rt_route="default"`, `tls="true"`))
			assert.Equal(t, 2.0, sp.b.metric(t, "route_request_total", `direction="inbound"`, dst, `rt_route="books"`))
			for _, l := range routeLines(t, sp.b, "inbound") {
				assert.NotContains(t, l, "admin.shop", "the forged name is no label")
			}
		})
	}
}

func TestInboundRoutesIgnoreNamesDiscoveryDoesNotKnowAsAService(t *testing.T) {
	sp := startServicePair(t, nil)
	prof := webProfile(sp.app.port())
	sp.profA.Set(sp.clusterIP, prof)
	// The server proxy's discovery says the name is no Service: a profile
	// without a parent Service.
	notService := webProfile(sp.app.port())
	notService.ParentRef = nil
	sp.profB.Set(sp.fqn, notService)
	c := h1Client()
	resp, _ := get(t, c, sp.url("/books/1"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return sp.b.metric(t, "route_response_total", `direction="inbound"`) == 1
	}, "the server proxy counts the response")
	lines := routeLines(t, sp.b, "inbound")
	require.Len(t, lines, 1)
	assert.NotContains(t, lines[0], "dst=", "no dst label for a name discovery does not know as a Service")
	assert.Contains(t, lines[0], `rt_route="default"`, "and no profile route")
	assert.Contains(t, lines[0], `tls="true"`)
	// The client side still names the Service its own discovery gave.
	assert.Equal(t, 1.0, sp.a.metric(t, "route_response_total", `direction="outbound"`, `dst="`+sp.fqn+`"`, `rt_route="books"`))
}

func TestRouteMetricsKeepTheAddressWhenDiscoveryNamesNoService(t *testing.T) {
	sp := startServicePair(t, nil)
	// A profile with routes but no parent Service (an address that is no
	// Service's): the dst stays the target, and the client proxy sends no
	// name the server proxy could look up.
	prof := webProfile(sp.app.port())
	prof.ParentRef = nil
	sp.profA.Set(sp.clusterIP, prof)
	sp.profB.Set(sp.fqn, webProfile(sp.app.port()))
	c := h1Client()
	resp, _ := get(t, c, sp.url("/books/1"), "L5d-Dst-Canonical", sp.fqn)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return sp.b.metric(t, "route_response_total", `direction="inbound"`) == 1
	}, "the server proxy counts the response")
	assert.Equal(t, 1.0, sp.a.metric(t, "route_response_total", `direction="outbound"`, `dst="`+sp.clusterIP+`"`, `rt_route="books"`, `tls="true"`))
	lines := routeLines(t, sp.b, "inbound")
	require.Len(t, lines, 1)
	assert.NotContains(t, lines[0], "dst=", "the application's own header is not passed on as the Service's name")
}

func TestInboundProfileRoutesClassifyResponsesByTheProfile(t *testing.T) {
	sp := startServicePair(t, nil)
	prof := webProfile(sp.app.port())
	prof.Routes = append(prof.Routes, &pdst.Route{
		Condition: &pdst.RequestMatch{Match: &pdst.RequestMatch_Path{Path: &pdst.PathMatch{Regex: "/status/.*"}}},
		ResponseClasses: []*pdst.ResponseClass{{
			Condition: &pdst.ResponseMatch{Match: &pdst.ResponseMatch_Status{Status: &pdst.HttpStatusRange{Min: 404, Max: 404}}},
			IsFailure: true,
		}},
		MetricsLabels: map[string]string{"route": "status"},
	})
	sp.profA.Set(sp.clusterIP, prof)
	sp.profB.Set(sp.fqn, prof)
	c := h1Client()
	resp, _ := get(t, c, sp.url("/status/404"))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, c, sp.url("/books/404"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return sp.b.metric(t, "route_response_total", `direction="inbound"`) == 2
	}, "the server proxy counts the responses")
	// The profile says a 404 on this route is a failure: both sides
	// classify it so, at the route and at the endpoint level.
	assert.Equal(t, 1.0, sp.b.metric(t, "route_response_total", `direction="inbound"`, `rt_route="status"`, `status_code="404"`, `classification="failure"`))
	assert.Equal(t, 1.0, sp.b.metric(t, "response_total", `direction="inbound"`, `status_code="404"`, `classification="failure"`))
	assert.Equal(t, 1.0, sp.a.metric(t, "route_response_total", `direction="outbound"`, `rt_route="status"`, `status_code="404"`, `classification="failure"`))
	// Another route's responses keep the default classes.
	assert.Equal(t, 1.0, sp.b.metric(t, "route_response_total", `direction="inbound"`, `rt_route="books"`, `status_code="200"`, `classification="success"`))
}
