package policy_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// benchObjects builds a cluster with the given number of Servers: one pod
// per two Servers (an HTTP/1 port with three HTTPRoutes, each with its
// AuthorizationPolicy, and an opaque port with seven
// AuthorizationPolicies), ten pods per namespace. That is five
// authorizations per Server: 1,000 Servers come with 5,000.
func benchObjects(servers int) *policy.Objects {
	pods := servers / 2
	o := &policy.Objects{}
	str := func(s string) *string { return &s }
	group := gatewayv1.Group("policy.linkerd.io")
	kind := gatewayv1.Kind("Server")
	exact, prefix, regex := gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix, gatewayv1.PathMatchRegularExpression
	for i := 0; i < pods; i++ {
		ns := fmt.Sprintf("ns-%d", i/10)
		if i%10 == 0 {
			o.Namespaces = append(o.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{"linkerd.io/inject": "enabled"}}})
		}
		app := fmt.Sprintf("app-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: app + "-0", Namespace: ns, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{ServiceAccountName: app, Containers: []corev1.Container{{Name: "c",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "tcp", ContainerPort: 9000}}}}},
			Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)},
		}
		o.Workloads = append(o.Workloads, policy.PodWorkload(pod))
		for _, port := range []struct {
			name  string
			proto v1beta3.ProxyProtocol
		}{{"http", v1beta3.ProxyProtocolHTTP1}, {"tcp", v1beta3.ProxyProtocolOpaque}} {
			srv := fmt.Sprintf("%s-%s", app, port.name)
			o.Servers = append(o.Servers, &v1beta3.Server{ObjectMeta: metav1.ObjectMeta{Name: srv, Namespace: ns},
				Spec: v1beta3.ServerSpec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
					Port: intstr.FromString(port.name), ProxyProtocol: port.proto}})
			if port.name != "tcp" {
				continue
			}
			for j := 0; j < 7; j++ {
				o.AuthorizationPolicies = append(o.AuthorizationPolicies, &v1alpha1.AuthorizationPolicy{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", srv, j), Namespace: ns},
					Spec: v1alpha1.AuthorizationPolicySpec{
						TargetRef:                  v1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: gatewayv1.ObjectName(srv)},
						RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{{Kind: "ServiceAccount", Name: gatewayv1.ObjectName(fmt.Sprintf("client-%d", j))}},
					}})
			}
		}
		parent := []gatewayv1.ParentReference{{Group: &group, Kind: &kind, Name: gatewayv1.ObjectName(app + "-http")}}
		routes := []struct {
			name  string
			match gatewayv1.HTTPRouteMatch
		}{
			{"admin", gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: str("/admin")}}},
			{"items", gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &regex, Value: str("/api/items/[0-9]+")},
				Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Tenant", Value: "a"}}}},
			{"api", gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: str("/api")}}},
		}
		for j, r := range routes {
			name := fmt.Sprintf("%s-%s", app, r.name)
			o.GatewayHTTPRoutes = append(o.GatewayHTTPRoutes, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent},
					Rules: []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{r.match}}}}})
			o.AuthorizationPolicies = append(o.AuthorizationPolicies, &v1alpha1.AuthorizationPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1alpha1.AuthorizationPolicySpec{
					TargetRef:                  v1alpha1.TargetRef{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: gatewayv1.ObjectName(name)},
					RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{{Kind: "ServiceAccount", Name: gatewayv1.ObjectName(fmt.Sprintf("client-%d", j))}},
				}})
		}
	}
	return o
}

var benchSizes = []int{10, 1000}

func benchTarget(servers int) policy.WorkloadRef {
	i := servers / 4
	return policy.WorkloadRef{Namespace: fmt.Sprintf("ns-%d", i/10), Kind: "pod", Name: fmt.Sprintf("app-%d-0", i)}
}

func clientConn(servers, j int) authz.Conn {
	ns := fmt.Sprintf("ns-%d", (servers/4)/10)
	return authz.Conn{IP: netip.MustParseAddr("10.200.0.1"), TLS: true, Identity: fmt.Sprintf("client-%d.%s.serviceaccount.identity.weft.cluster.local", j, ns)}
}

// BenchmarkTCPDecision measures one connection decision: finding the
// port's policy in the index, then evaluating it (the last of seven
// authorizations admits the client).
func BenchmarkTCPDecision(b *testing.B) {
	for _, n := range benchSizes {
		ix := policy.Build(benchObjects(n), nil)
		ref := benchTarget(n)
		conn := clientConn(n, 6)
		b.Run(fmt.Sprintf("servers=%d/authorizations=%d/allow", n, 5*n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				srv, _ := ix.Lookup(ref, 9000)
				if authz.Evaluate(srv, conn, nil).Decision != authz.Allow {
					b.Fatal("expected allow")
				}
			}
		})
		b.Run(fmt.Sprintf("servers=%d/authorizations=%d/deny", n, 5*n), func(b *testing.B) {
			denied := clientConn(n, 9)
			b.ReportAllocs()
			for b.Loop() {
				srv, _ := ix.Lookup(ref, 9000)
				if authz.Evaluate(srv, denied, nil).Decision != authz.Deny {
					b.Fatal("expected deny")
				}
			}
		})
	}
}

// BenchmarkHTTPDecision measures one request decision on a port with
// three HTTPRoutes (exact, regex with a header, prefix).
func BenchmarkHTTPDecision(b *testing.B) {
	for _, n := range benchSizes {
		ix := policy.Build(benchObjects(n), nil)
		ref := benchTarget(n)
		conn := clientConn(n, 1)
		req := &authz.Request{Method: "GET", Path: "/api/items/42?full=1", Host: "app.ns.svc.cluster.local:8080", Header: http.Header{"X-Tenant": {"a"}}}
		b.Run(fmt.Sprintf("servers=%d/authorizations=%d/normalized-path", n, 5*n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				srv, _ := ix.Lookup(ref, 8080)
				if authz.Evaluate(srv, conn, req).Decision != authz.Allow {
					b.Fatal("expected allow")
				}
			}
		})
		tricky := &authz.Request{Method: "GET", Path: "/public/..//api/./items/%34%32", Header: req.Header}
		b.Run(fmt.Sprintf("servers=%d/authorizations=%d/path-to-normalize", n, 5*n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				srv, _ := ix.Lookup(ref, 8080)
				if authz.Evaluate(srv, conn, tricky).Decision != authz.Allow {
					b.Fatal("expected allow")
				}
			}
		})
	}
}

// BenchmarkOfflineEvaluate measures the offline API (`weft policy test`):
// service-account client, port by name, through Index.Evaluate.
func BenchmarkOfflineEvaluate(b *testing.B) {
	ix := policy.Build(benchObjects(1000), nil)
	ref := benchTarget(1000)
	r := policy.Request{Workload: ref, Port: intstr.FromString("tcp"), Client: policy.Client{ServiceAccount: "client-6", Namespace: ref.Namespace}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := ix.Evaluate(r)
		if err != nil || res.Decision != authz.Allow {
			b.Fatal("expected allow")
		}
	}
}

// BenchmarkIndexRebuild measures building the whole index again after one
// object changed (what the indexer does on every change).
func BenchmarkIndexRebuild(b *testing.B) {
	for _, n := range benchSizes {
		objs := benchObjects(n)
		cfg, _ := policy.NewConfig()
		b.Run(fmt.Sprintf("servers=%d/authorizations=%d", n, 5*n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// Change one AuthorizationPolicy's required service account.
				ap := objs.AuthorizationPolicies[i%len(objs.AuthorizationPolicies)].DeepCopy()
				ap.Spec.RequiredAuthenticationRefs[0].Name = gatewayv1.ObjectName(fmt.Sprintf("changed-%d", i))
				objs.AuthorizationPolicies[i%len(objs.AuthorizationPolicies)] = ap
				i++
				policy.Build(objs, cfg)
			}
		})
	}
}
