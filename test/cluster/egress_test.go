//go:build clusterintegration

package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/internal/tools/cluster"
)

var egressGVR = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "egressnetworks"}

// external is a destination outside the cluster: an HTTP server and a TCP
// echo that the test process opens in the node's network namespace on the
// node's own address. Pods reach it over their default route, and it is
// no Service's and no pod's address, so discovery does not know it: it is
// what an EgressNetwork is for.
type external struct {
	http, echo net.Listener

	mu sync.Mutex
	// seen records, in arrival order, "http MARKER" for each HTTP request
	// and "tcp LINE" for each line an echo connection sent.
	seen []string
	// accepted counts the connections each listener accepted.
	accepted map[string]int
	// open are the echo's connections, closed with the listener.
	open map[net.Conn]bool
}

func (e *env) startExternal(t *testing.T) *external {
	t.Helper()
	x := &external{accepted: map[string]int{}, open: map[net.Conn]bool{}}
	require.NoError(t, e.state.InNodeNetwork(func() error {
		var err error
		if x.http, err = net.Listen("tcp", net.JoinHostPort(cluster.NodeIP, "0")); err != nil {
			return err
		}
		x.echo, err = net.Listen("tcp", net.JoinHostPort(cluster.NodeIP, "0"))
		return err
	}), "listen on the node's address")
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		marker := r.Header.Get("X-Marker")
		x.record("http " + marker)
		fmt.Fprintf(w, "external %s\n", marker)
	})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = srv.Serve(&countingListener{Listener: x.http, count: func() { x.count("http") }})
	}()
	go func() {
		defer wg.Done()
		x.serveEcho()
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = x.echo.Close()
		x.mu.Lock()
		for c := range x.open {
			_ = c.Close()
		}
		x.mu.Unlock()
		wg.Wait()
	})
	return x
}

type countingListener struct {
	net.Listener
	count func()
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.count()
	}
	return c, err
}

func (x *external) serveEcho() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := x.echo.Accept()
		if err != nil {
			return
		}
		x.mu.Lock()
		x.accepted["tcp"]++
		x.open[c] = true
		x.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				x.mu.Lock()
				delete(x.open, c)
				x.mu.Unlock()
				_ = c.Close()
			}()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				x.record("tcp " + sc.Text())
				if _, err := fmt.Fprintf(c, "external %s\n", sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

func (x *external) record(s string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seen = append(x.seen, s)
}

func (x *external) count(listener string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.accepted[listener]++
}

// saw returns what the listeners have received so far and how many
// connections they accepted.
func (x *external) saw() (seen []string, accepted map[string]int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	accepted = map[string]int{}
	for k, v := range x.accepted {
		accepted[k] = v
	}
	return append([]string(nil), x.seen...), accepted
}

// egressNetwork creates an EgressNetwork in the application's namespace
// covering the node's address, with trafficPolicy Deny, and checks with
// client's proxy: an HTTP request to the external server is answered 403
// by the proxy (l5d-proxy-error: traffic not allowed), a TCP connection to
// the external echo is closed without a reply, and neither reaches the
// listeners; switched to Allow, both do. The client proxy's route metrics
// name the EgressNetwork as the parent, and its refusals are counted.
func (m *mesh) egressNetwork(t *testing.T) {
	e := m.e
	client := m.pods["client"]
	x := e.startExternal(t)
	httpURL := fmt.Sprintf("http://%s/", x.http.Addr())
	echoAddr := x.echo.Addr().String()
	name := "external-" + randomSuffix()
	obj := map[string]any{
		"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "EgressNetwork",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"networks":      []any{map[string]any{"cidr": cluster.NodeIP + "/32"}},
			"trafficPolicy": "Deny",
		},
	}
	objs := []policyObject{{egressGVR, obj}}
	ms, err := e.proxyMetrics(timeout(t, time.Minute), client)
	require.NoError(t, err)
	forbiddenBefore := sum(ms, "tcp_refused_total", map[string]string{"direction": "outbound", "reason": "forbidden"})

	t.Cleanup(func() { m.deleteObjects(t, m.app, objs) })
	_, err = e.dyn.Resource(egressGVR).Namespace(m.app).Create(timeout(t, time.Minute), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err, "create the EgressNetwork")

	// Deny is in force once client's proxy refuses a connection to the
	// echo. A connection before the policy controller has the
	// EgressNetwork gets the fallback policy, which forwards: the probe
	// may reach the listener. The probe is TCP, a new connection each
	// time, because an HTTP client's kept-alive connection forwarded under
	// the fallback would stay forwarded; the HTTP port is first called
	// below, its policy asked for when the controller has the Deny.
	eventually(t, time.Minute, "the TCP connection to the external address refused", func(ctx context.Context) error {
		reply, errText, err := e.tcpExchange(ctx, client, echoAddr, "weft-egress-probe")
		if err != nil {
			return err
		}
		if errText == "" {
			return fmt.Errorf("forwarded: reply %q", reply)
		}
		return nil
	})
	_, acceptedBefore := x.saw()

	denied := "weft-egress-denied-" + randomSuffix()
	c := e.callWith(t, client, httpURL, denied, 5, nil, []string{"l5d-proxy-error"})
	assert.Equal(t, 5, c.Codes["403"], "HTTP under Deny: %+v", c)
	assert.Contains(t, c.Headers["l5d-proxy-error"], "traffic not allowed", "the proxy says why, as Linkerd's does: %+v", c)
	for i := 0; i < 2; i++ {
		reply, errText, err := e.tcpExchange(timeout(t, time.Minute), client, echoAddr, denied)
		require.NoError(t, err)
		assert.Empty(t, reply, "TCP under Deny")
		assert.NotEmpty(t, errText, "TCP under Deny: the connection is closed without a reply")
	}
	_, acceptedDenied := x.saw()
	assert.Equal(t, acceptedBefore, acceptedDenied, "no connection reached the external listeners under Deny")
	t.Logf("under Deny: HTTP %v (l5d-proxy-error %q); connections the listeners accepted: %v", c.Codes, c.Headers["l5d-proxy-error"], acceptedDenied)

	// A route attached to the EgressNetwork comes before its default
	// route: under Deny, what it matches is forwarded, the rest still
	// refused; deleted, its path is refused again.
	routed := "weft-egress-routed-" + randomSuffix()
	route := policyObject{policyRouteGVR, map[string]any{
		"apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name + "-allowed"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": name, "port": x.http.Addr().(*net.TCPAddr).Port}},
			"rules":      []any{map[string]any{"matches": []any{map[string]any{"path": map[string]any{"type": "Exact", "value": "/allowed"}}}}},
		},
	}}
	objs = append(objs, route) // the Cleanup deletes it too
	_, err = e.dyn.Resource(policyRouteGVR).Namespace(m.app).Create(timeout(t, time.Minute), &unstructured.Unstructured{Object: route.obj}, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err, "create the HTTPRoute on the EgressNetwork")
	eventually(t, time.Minute, "the route's path forwarded under Deny", func(ctx context.Context) error {
		if c := e.call(t, client, httpURL+"allowed", routed, 1); c.OK != 1 || c.Last != "external "+routed {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	c = e.call(t, client, httpURL, denied, 3)
	assert.Equal(t, 3, c.Codes["403"], "a path the route does not match is still refused: %+v", c)
	m.deleteObjects(t, m.app, []policyObject{route})
	eventually(t, time.Minute, "the route's path refused again once the route is deleted", func(ctx context.Context) error {
		if c := e.call(t, client, httpURL+"allowed", routed, 1); c.Codes["403"] != 1 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})

	// Allow: the same object updated; in force when both get through.
	eventually(t, time.Minute, "the EgressNetwork switched to Allow", func(ctx context.Context) error {
		u, err := e.dyn.Resource(egressGVR).Namespace(m.app).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, "Allow", "spec", "trafficPolicy"); err != nil {
			return err
		}
		_, err = e.dyn.Resource(egressGVR).Namespace(m.app).Update(ctx, u, metav1.UpdateOptions{FieldValidation: "Strict"})
		return err // a conflict is tried again
	})
	allowed := "weft-egress-allowed-" + randomSuffix()
	eventually(t, time.Minute, "HTTP and TCP to the external address admitted", func(ctx context.Context) error {
		if c := e.call(t, client, httpURL, allowed, 1); c.OK != 1 || c.Last != "external "+allowed {
			return fmt.Errorf("HTTP: %+v", c)
		}
		reply, errText, err := e.tcpExchange(ctx, client, echoAddr, allowed)
		if err != nil {
			return err
		}
		if reply != "external "+allowed {
			return fmt.Errorf("TCP: reply %q, error %q", reply, errText)
		}
		return nil
	})
	c = e.call(t, client, httpURL, allowed, 5)
	assert.Equal(t, 5, c.OK, "HTTP under Allow: %+v", c)

	// The listeners got the allowed traffic, and never the denied: what
	// arrived after the switch to Allow came after anything the proxy
	// might have let through under Deny.
	seen, accepted := x.saw()
	t.Logf("under Allow: HTTP %v; the listeners accepted %v connections and received %d requests and lines", c.Codes, accepted, len(seen))
	assert.Contains(t, seen, "http "+allowed)
	assert.Contains(t, seen, "http "+routed)
	assert.Contains(t, seen, "tcp "+allowed)
	for _, s := range seen {
		assert.NotContains(t, s, denied, "denied traffic reached the external listeners")
	}

	parent := map[string]string{"direction": "outbound", "parent_group": "policy.linkerd.io", "parent_kind": "EgressNetwork", "parent_namespace": m.app, "parent_name": name}
	withRoute := func(route string) map[string]string {
		l := map[string]string{"rt_route": route}
		for k, v := range parent {
			l[k] = v
		}
		return l
	}
	eventually(t, 30*time.Second, "client's proxy names the EgressNetwork in its route metrics and counts the refusals", func(ctx context.Context) error {
		ms, err := e.proxyMetrics(ctx, client)
		if err != nil {
			return err
		}
		var errs []error
		if got := sum(ms, "route_request_total", withRoute("http-egress-deny")); got < 5 {
			errs = append(errs, fmt.Errorf("route_request_total of http-egress-deny: %v, want at least 5", got))
		}
		if got := sum(ms, "route_request_total", withRoute("http-egress-allow")); got < 6 {
			errs = append(errs, fmt.Errorf("route_request_total of http-egress-allow: %v, want at least 6", got))
		}
		if got := sum(ms, "tcp_refused_total", map[string]string{"direction": "outbound", "reason": "forbidden"}) - forbiddenBefore; got < 3 {
			errs = append(errs, fmt.Errorf("tcp_refused_total forbidden: %v more, want at least 3", got))
		}
		// The opaque connections on the EgressNetwork's built-in routes,
		// under Linkerd's TCP route metrics (docs/metrics.md).
		tcpRoute := func(route, why string) map[string]string {
			l := map[string]string{"parent_group": "policy.linkerd.io", "parent_kind": "EgressNetwork", "parent_namespace": m.app, "parent_name": name, "route_kind": "default", "route_name": route}
			if why != "-" {
				l["error"] = why
			}
			return l
		}
		if got := sum(ms, "outbound_tcp_route_close_total", tcpRoute("tcp-egress-deny", "forbidden")); got < 3 {
			errs = append(errs, fmt.Errorf("outbound_tcp_route_close_total of tcp-egress-deny, forbidden: %v, want at least 3", got))
		}
		if got := sum(ms, "outbound_tcp_route_open_total", tcpRoute("tcp-egress-allow", "-")); got < 1 {
			errs = append(errs, fmt.Errorf("outbound_tcp_route_open_total of tcp-egress-allow: %v, want at least 1", got))
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w; route series: %s", errors.Join(errs...), routeSeries(ms))
		}
		return nil
	})

	// weft viz routes shows the same under the EgressNetwork (docs/viz.md,
	// "Egress"): the built-in routes by their names, at the listener's
	// address.
	code, out, errs := e.weftCmd(t, nil, "viz", "routes", "deploy/client", "-n", m.app, "--to", "egressnetwork/"+name, "-o", "json", "--since-start")
	require.Equal(t, 0, code, errs)
	var vr struct {
		Routes []struct {
			Route, Authority, EgressNetwork string
			Requests                        float64
		}
	}
	require.NoError(t, json.Unmarshal(out, &vr), "%s", out)
	byRoute := map[string]float64{}
	for _, r := range vr.Routes {
		assert.Equal(t, m.app+"/"+name, r.EgressNetwork, "%+v", r)
		byRoute[r.Route] += r.Requests
	}
	assert.GreaterOrEqual(t, byRoute["http-egress-deny"], 5.0, "weft viz routes --to egressnetwork/%s: %s", name, out)
	assert.GreaterOrEqual(t, byRoute["http-egress-allow"], 6.0, "weft viz routes --to egressnetwork/%s: %s", name, out)

	// weft viz edges: one edge from client to the EgressNetwork, with the
	// HTTP requests and the opaque connections, refusals as denied.
	code, out, errs = e.weftCmd(t, nil, "viz", "edges", "-n", m.app, "-o", "json", "--since-start")
	require.Equal(t, 0, code, errs)
	var ve struct {
		Edges []struct {
			Src, Dst            struct{ Namespace, Kind, Name string }
			Denied, Connections float64
		}
	}
	require.NoError(t, json.Unmarshal(out, &ve), "%s", out)
	found := false
	for _, ed := range ve.Edges {
		if ed.Dst.Kind != "egressnetwork" || ed.Dst.Name != name {
			continue
		}
		found = true
		assert.Equal(t, "client", ed.Src.Name, "%s", out)
		assert.GreaterOrEqual(t, ed.Connections, 4.0, "opaque connections refused and let out: %s", out)
		assert.GreaterOrEqual(t, ed.Denied, 8.0, "HTTP requests and opaque connections refused: %s", out)
	}
	assert.True(t, found, "an edge to egressnetwork/%s: %s", name, out)

	// Deleted, the EgressNetwork no longer applies: the address gets the
	// fallback policy, which forwards.
	m.deleteObjects(t, m.app, objs)
	eventually(t, 30*time.Second, "forwarded after the EgressNetwork is deleted", func(ctx context.Context) error {
		if c := e.call(t, client, httpURL, allowed, 1); c.OK != 1 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	m.assertNoRestarts(t)
}

// routeSeries lists the outbound route_request_total series, for messages.
func routeSeries(ms []sample) string {
	var out []string
	for _, s := range ms {
		if s.name == "route_request_total" && s.labels["direction"] == "outbound" {
			out = append(out, fmt.Sprintf("%v=%v", s.labels, s.value))
		}
	}
	return strings.Join(out, "; ")
}
