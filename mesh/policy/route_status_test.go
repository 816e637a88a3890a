package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/mesh/policy"
)

// routeStatusBase is a namespace with one pod serving HTTP on 8080 and
// gRPC on 9090, a Server for each, a Service with a ClusterIP, a headless
// one, and a Service the routes send to.
const routeStatusBase = `apiVersion: v1
kind: Namespace
metadata: {name: my-app}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: my-app, labels: {app: web}}
spec:
  containers:
  - name: web
    image: example/web
    ports:
    - {name: http, containerPort: 8080}
    - {name: grpc, containerPort: 9090}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: my-app}
spec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: HTTP/1}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-grpc, namespace: my-app}
spec: {podSelector: {matchLabels: {app: web}}, port: grpc, proxyProtocol: gRPC}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: my-app}
spec: {clusterIP: 10.96.0.10, selector: {app: web}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web-canary, namespace: my-app}
spec: {clusterIP: 10.96.0.11, selector: {app: web}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web-headless, namespace: my-app}
spec: {clusterIP: None, selector: {app: web}, ports: [{name: http, port: 80}]}
`

// cond is one expected condition: its status and reason.
type cond struct {
	status metav1.ConditionStatus
	reason string
}

// parentConds is what one status.parents entry should say, by
// "Kind/name" of its parent.
type parentConds map[string]map[string]cond

func statusOf(t *testing.T, ix *policy.Index, kind, group, name string) policy.RouteStatus {
	t.Helper()
	for _, s := range ix.RouteStatuses() {
		if s.Kind == kind && s.Group == group && s.Name == name && s.Namespace == "my-app" {
			return s
		}
	}
	t.Fatalf("no status for %s.%s my-app/%s", kind, group, name)
	return policy.RouteStatus{}
}

func conditionsByParent(s policy.RouteStatus) (parentConds, map[string]string) {
	got := parentConds{}
	msgs := map[string]string{}
	for _, p := range s.Parents {
		key := string(*p.ParentRef.Kind) + "/" + string(p.ParentRef.Name)
		got[key] = map[string]cond{}
		for _, c := range p.Conditions {
			got[key][c.Type] = cond{c.Status, c.Reason}
			msgs[key+" "+c.Type] = c.Message
		}
	}
	return got, msgs
}

func TestRouteStatusSaysWhetherEachServerOrServiceParentTakesTheRoute(t *testing.T) {
	yes := metav1.ConditionTrue
	no := metav1.ConditionFalse
	accepted := func(s metav1.ConditionStatus, reason string) map[string]cond {
		return map[string]cond{"Accepted": {s, reason}}
	}
	outbound := func(a cond, r cond) map[string]cond { return map[string]cond{"Accepted": a, "ResolvedRefs": r} }
	resolved := cond{yes, "ResolvedRefs"}
	for _, tc := range []struct {
		name, route, kind, group string
		want                     parentConds
		// message, when set, must be in the message of this parent's
		// condition ("Server/web-grpc Accepted").
		message [2]string
	}{
		{
			name: "policy HTTPRoute on an HTTP Server", kind: "HTTPRoute", group: "policy.linkerd.io",
			route: `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules: [{matches: [{path: {type: PathPrefix, value: /api}}]}]
`,
			want: parentConds{"Server/web-http": accepted(yes, "Accepted")},
		},
		{
			name: "policy HTTPRoute on a gRPC Server (issue 29)", kind: "HTTPRoute", group: "policy.linkerd.io",
			route: `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-grpc}]
`,
			want:    parentConds{"Server/web-grpc": accepted(no, "NotAllowedByListeners")},
			message: [2]string{"Server/web-grpc Accepted", "use a GRPCRoute"},
		},
		{
			name: "parent Server that does not exist", kind: "HTTPRoute", group: "policy.linkerd.io",
			route: `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: nope}]
`,
			want:    parentConds{"Server/nope": accepted(no, "NoMatchingParent")},
			message: [2]string{"Server/nope Accepted", "Server my-app/nope not found"},
		},
		{
			name: "Server parent named by port", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http, port: 8080}]
`,
			want:    parentConds{"Server/web-http": accepted(no, "UnsupportedValue")},
			message: [2]string{"Server/web-http Accepted", "by port"},
		},
		{
			name: "GRPCRoute on the gRPC Server", kind: "GRPCRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-grpc}]
`,
			want: parentConds{"Server/web-grpc": accepted(yes, "Accepted")},
		},
		{
			name: "GRPCRoute on an HTTP/1 Server", kind: "GRPCRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
`,
			want: parentConds{"Server/web-http": accepted(no, "NotAllowedByListeners")},
		},
		{
			name: "HTTPRoute on a Server a GRPCRoute also names", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-grpc}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-grpc}]
`,
			want: parentConds{"Server/web-grpc": accepted(no, "RouteReasonConflicted")},
		},
		{
			name: "unsupported filter", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
  - filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /x}}}]
`,
			want:    parentConds{"Server/web-http": accepted(no, "UnsupportedValue")},
			message: [2]string{"Server/web-http Accepted", "URLRewrite filters are not supported"},
		},
		{
			name: "invalid match", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules: [{matches: [{path: {type: RegularExpression, value: "("}}]}]
`,
			want:    parentConds{"Server/web-http": accepted(no, "UnsupportedValue")},
			message: [2]string{"Server/web-http Accepted", "spec.rules[0].matches[0].path.value"},
		},
		{
			name: "outbound route whose backends exist", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: web-canary, port: 80}]}]
`,
			want: parentConds{"Service/web": outbound(cond{yes, "Accepted"}, resolved)},
		},
		{
			name: "outbound route to a missing backend", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: web-canary, port: 80}, {name: nope, port: 80}]}]
`,
			want:    parentConds{"Service/web": outbound(cond{yes, "Accepted"}, cond{no, "BackendNotFound"})},
			message: [2]string{"Service/web ResolvedRefs", "my-app/nope"},
		},
		{
			name: "outbound route to a backend of another kind", kind: "GRPCRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web}]
  rules: [{backendRefs: [{group: example.com, kind: Bucket, name: b}]}]
`,
			want: parentConds{"Service/web": outbound(cond{yes, "Accepted"}, cond{no, "InvalidKind"})},
		},
		{
			name: "outbound route on a missing Service", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: nope}]
`,
			want: parentConds{"Service/nope": outbound(cond{no, "NoMatchingParent"}, resolved)},
		},
		{
			name: "outbound route on a headless Service", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web-headless}]
`,
			want:    parentConds{"Service/web-headless": outbound(cond{no, "NoMatchingParent"}, resolved)},
			message: [2]string{"Service/web-headless Accepted", "ClusterIP"},
		},
		{
			name: "a Gateway parent is another controller's", kind: "HTTPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{name: edge}, {group: policy.linkerd.io, kind: Server, name: web-http}, {group: policy.linkerd.io, kind: Server, name: web-http}]
`,
			want: parentConds{"Server/web-http": accepted(yes, "Accepted")},
		},
		{
			name: "v1alpha2 TLSRoute on a Service", kind: "TLSRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  hostnames: [web.example.com]
  rules: [{backendRefs: [{name: web-canary, port: 80}]}]
`,
			want: parentConds{"Service/web": outbound(cond{yes, "Accepted"}, resolved)},
		},
		{
			name: "TCPRoute with a missing backend", kind: "TCPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: nope, port: 80}]}]
`,
			want: parentConds{"Service/web": outbound(cond{yes, "Accepted"}, cond{no, "BackendNotFound"})},
		},
		{
			name: "TCPRoute with two rules", kind: "TCPRoute", group: "gateway.networking.k8s.io",
			route: `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: r, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: web, port: 80}]}, {backendRefs: [{name: web-canary, port: 80}]}]
`,
			want:    parentConds{"Service/web": outbound(cond{no, "UnsupportedValue"}, resolved)},
			message: [2]string{"Service/web Accepted", "single rule"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := policy.Build(objectsFrom(t, routeStatusBase+"---\n"+tc.route), nil)
			s := statusOf(t, ix, tc.kind, tc.group, "r")
			got, msgs := conditionsByParent(s)
			assert.Equal(t, tc.want, got)
			assert.Len(t, s.Parents, len(tc.want), "one entry per distinct parent Weft serves")
			for _, p := range s.Parents {
				assert.Equal(t, gatewayv1.GatewayController(policy.ControllerName), p.ControllerName)
			}
			if tc.message[0] != "" {
				assert.Contains(t, msgs[tc.message[0]], tc.message[1])
			}
		})
	}
}

func TestRouteStatusEntriesNameTheirParentAsLinkerdDoes(t *testing.T) {
	ix := policy.Build(objectsFrom(t, routeStatusBase+`---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: my-app, generation: 7}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}, {group: core, kind: Service, name: web, port: 80}]
`), nil)
	s := statusOf(t, ix, "HTTPRoute", "gateway.networking.k8s.io", "r")
	require.Len(t, s.Parents, 2)
	srv, svc := s.Parents[0].ParentRef, s.Parents[1].ParentRef
	assert.Equal(t, "policy.linkerd.io", string(*srv.Group))
	assert.Equal(t, "Server", string(*srv.Kind))
	assert.Equal(t, "my-app", string(*srv.Namespace))
	assert.Nil(t, srv.Port)
	assert.Equal(t, "core", string(*svc.Group))
	assert.Equal(t, "Service", string(*svc.Kind))
	require.NotNil(t, svc.Port)
	assert.Equal(t, 80, int(*svc.Port))
	for _, p := range s.Parents {
		for _, c := range p.Conditions {
			assert.Equal(t, int64(7), c.ObservedGeneration, "conditions say which generation they describe")
			assert.True(t, c.LastTransitionTime.IsZero(), "times are Merge's to set")
		}
	}
}

func parentStatus(controller, kind, name string, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	group := gatewayv1.Group("policy.linkerd.io")
	k := gatewayv1.Kind(kind)
	ns := gatewayv1.Namespace("my-app")
	return gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Group: &group, Kind: &k, Namespace: &ns, Name: gatewayv1.ObjectName(name)},
		ControllerName: gatewayv1.GatewayController(controller),
		Conditions:     conds,
	}
}

func TestMergeKeepsOtherControllersEntriesAndWritesOnlyOnChange(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	acceptedAt := func(ok bool, at time.Time) metav1.Condition {
		c := metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NoMatchingParent", LastTransitionTime: metav1.NewTime(at)}
		if ok {
			c.Status, c.Reason = metav1.ConditionTrue, "Accepted"
		}
		return c
	}
	other := parentStatus("example.com/gateway-controller", "Gateway", "edge", acceptedAt(true, t0))
	ours := func(ok bool) gatewayv1.RouteParentStatus {
		return parentStatus(policy.ControllerName, "Server", "web-http", acceptedAt(ok, time.Time{}))
	}

	t.Run("first write keeps the other entry first and stamps the time", func(t *testing.T) {
		s := policy.RouteStatus{Current: []gatewayv1.RouteParentStatus{other}, Parents: []gatewayv1.RouteParentStatus{ours(true)}}
		got, changed := s.Merge(t1)
		assert.True(t, changed)
		require.Len(t, got, 2)
		assert.Equal(t, other, got[0], "another controller's entry is untouched")
		assert.True(t, got[1].Conditions[0].LastTransitionTime.Time.Equal(t1))

		// The same computation against what was written: nothing to write.
		s.Current = got
		again, changed := s.Merge(t1.Add(time.Minute))
		assert.False(t, changed, "an unchanged status is not written again")
		assert.Equal(t, got, again)
	})
	t.Run("a condition that keeps its status keeps its transition time", func(t *testing.T) {
		written := ours(true)
		written.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
		written.Conditions[0].Message = "old words"
		s := policy.RouteStatus{Current: []gatewayv1.RouteParentStatus{written}, Parents: []gatewayv1.RouteParentStatus{ours(true)}}
		got, changed := s.Merge(t1)
		assert.True(t, changed, "the message changed")
		assert.True(t, got[0].Conditions[0].LastTransitionTime.Time.Equal(t0))
	})
	t.Run("a condition that flips gets a new transition time", func(t *testing.T) {
		written := ours(true)
		written.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
		s := policy.RouteStatus{Current: []gatewayv1.RouteParentStatus{written}, Parents: []gatewayv1.RouteParentStatus{ours(false)}}
		got, changed := s.Merge(t1)
		assert.True(t, changed)
		assert.True(t, got[0].Conditions[0].LastTransitionTime.Time.Equal(t1))
		assert.Equal(t, metav1.ConditionFalse, got[0].Conditions[0].Status)
	})
	t.Run("entries for parents no longer ours are removed, others stay", func(t *testing.T) {
		written := ours(true)
		written.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
		s := policy.RouteStatus{Current: []gatewayv1.RouteParentStatus{written, other}}
		got, changed := s.Merge(t1)
		assert.True(t, changed)
		assert.Equal(t, []gatewayv1.RouteParentStatus{other}, got)
	})
	t.Run("no entries either way is no change", func(t *testing.T) {
		_, changed := policy.RouteStatus{Current: []gatewayv1.RouteParentStatus{}}.Merge(t1)
		assert.False(t, changed)
		_, changed = policy.RouteStatus{}.Merge(t1)
		assert.False(t, changed)
	})
	t.Run("at most 32 entries, other controllers' first", func(t *testing.T) {
		var current []gatewayv1.RouteParentStatus
		for i := 0; i < 32; i++ {
			current = append(current, parentStatus("example.com/gateway-controller", "Gateway", "edge-"+string(rune('a'+i)), acceptedAt(true, t0)))
		}
		s := policy.RouteStatus{Current: current, Parents: []gatewayv1.RouteParentStatus{ours(true)}}
		got, changed := s.Merge(t1)
		assert.False(t, changed)
		assert.Len(t, got, 32)
	})
}

func TestAConsumerRouteIsAcceptedByItsServiceInAnotherNamespace(t *testing.T) {
	// A route in shop whose parent is Service my-app/web: Linkerd's status
	// controller judges it as any route of that Service (the Service
	// exists and has a ClusterIP), and names the parent in its namespace.
	// Its backends resolve in the route's namespace unless they name one.
	route := `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, namespace: my-app, name: web, port: 80}]
  rules: [{backendRefs: [{namespace: my-app, name: web-canary, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: local-backend, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, namespace: my-app, name: web, port: 80}]
  rules: [{backendRefs: [{name: web-canary, port: 80}]}]
`
	ix := policy.Build(objectsFrom(t, routeStatusBase+"---\n"+route), nil)
	find := func(name string) policy.RouteStatus {
		for _, s := range ix.RouteStatuses() {
			if s.Kind == "HTTPRoute" && s.Namespace == "shop" && s.Name == name {
				return s
			}
		}
		t.Fatalf("no status for shop/%s", name)
		return policy.RouteStatus{}
	}
	s := find("r")
	require.Len(t, s.Parents, 1)
	assert.Equal(t, "my-app", string(*s.Parents[0].ParentRef.Namespace), "the parent is named in its own namespace")
	got, _ := conditionsByParent(s)
	assert.Equal(t, parentConds{"Service/web": {"Accepted": {metav1.ConditionTrue, "Accepted"}, "ResolvedRefs": {metav1.ConditionTrue, "ResolvedRefs"}}}, got)

	got, msgs := conditionsByParent(find("local-backend"))
	assert.Equal(t, cond{metav1.ConditionFalse, "BackendNotFound"}, got["Service/web"]["ResolvedRefs"])
	assert.Contains(t, msgs["Service/web ResolvedRefs"], "shop/web-canary", "a backend without a namespace is the route's namespace's")
}
