package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/mesh/policy"
)

// egressStatusBase is a namespace with a Service that has a ClusterIP.
const egressStatusBase = `apiVersion: v1
kind: Namespace
metadata: {name: my-app}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: my-app}
spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}
`

// egressNetwork is an EgressNetwork in my-app; networks is the YAML of
// spec.networks, or "" to leave the field out.
func egressNetwork(name, networks string) string {
	doc := "apiVersion: policy.linkerd.io/v1alpha1\nkind: EgressNetwork\nmetadata: {name: " + name + ", namespace: my-app, generation: 3}\nspec:\n  trafficPolicy: Allow\n"
	if networks != "" {
		doc += "  networks: " + networks + "\n"
	}
	return doc
}

func egressStatusOf(t *testing.T, ix *policy.Index, name string) policy.EgressNetworkStatus {
	t.Helper()
	for _, s := range ix.EgressNetworkStatuses() {
		if s.Namespace == "my-app" && s.Name == name {
			return s
		}
	}
	t.Fatalf("no status for EgressNetwork my-app/%s", name)
	return policy.EgressNetworkStatus{}
}

// TestLinkerdEgressNetworkStatusCases are the cases of Linkerd's status
// controller tests for EgressNetworks (k8s/status/src/tests/
// egress_network.rs), with Linkerd's default cluster networks, plus
// Weft's own.
func TestLinkerdEgressNetworkStatusCases(t *testing.T) {
	for _, tc := range []struct {
		name, networks string
		status         metav1.ConditionStatus
		reason         string
	}{
		{name: "egress_network_with_no_networks_specified", status: metav1.ConditionTrue, reason: "Accepted"},
		// Linkerd's case also lists fd00::/8 among the exceptions of
		// 0.0.0.0/0, which its admission webhook (and Weft, wherever the
		// object comes from) refuses as outside the CIDR; without it the
		// network is the same.
		{name: "egress_network_with_nonoverlapping_networks_specified",
			networks: `[{cidr: 0.0.0.0/0, except: [10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16]}]`,
			status:   metav1.ConditionTrue, reason: "Accepted"},
		{name: "egress_network_with_overlapping_networks_specified",
			networks: `[{cidr: 0.0.0.0/0, except: [10.0.0.0/8, 100.64.0.0/10, 192.168.0.0/16]}]`,
			status:   metav1.ConditionFalse, reason: policy.ReasonEgressNetworkOverlap},
		// Weft's own.
		{name: "WeftANetworkInsideAClusterNetworkOverlaps", networks: `[{cidr: 10.1.0.0/16}]`,
			status: metav1.ConditionFalse, reason: policy.ReasonEgressNetworkOverlap},
		{name: "WeftAnExceptionCoveringOnlyPartOfAClusterNetworkLeavesAnOverlap",
			networks: `[{cidr: 0.0.0.0/0, except: [10.0.0.0/9, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16]}]`,
			status:   metav1.ConditionFalse, reason: policy.ReasonEgressNetworkOverlap},
		{name: "WeftAnIPv6NetworkOverlapsTheIPv6ClusterNetworkOnly", networks: `[{cidr: "fd00:1::/32"}]`,
			status: metav1.ConditionFalse, reason: policy.ReasonEgressNetworkOverlap},
		{name: "WeftAnAddressOutsideTheClusterNetworksIsAccepted", networks: `[{cidr: 203.0.113.7/32}, {cidr: "2001:db8::/32"}]`,
			status: metav1.ConditionTrue, reason: "Accepted"},
		{name: "WeftAnInvalidEgressNetworkIsNotAcceptedAndSaysWhy", networks: `[]`,
			status: metav1.ConditionFalse, reason: policy.ReasonEgressNetworkInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := policy.Build(objectsFrom(t, egressStatusBase+"---\n"+egressNetwork("egress", tc.networks)), nil)
			s := egressStatusOf(t, ix, "egress")
			assert.Equal(t, "Accepted", s.Accepted.Type)
			assert.Equal(t, tc.status, s.Accepted.Status)
			assert.Equal(t, tc.reason, s.Accepted.Reason)
			assert.Equal(t, int64(3), s.Accepted.ObservedGeneration)
			assert.True(t, s.Accepted.LastTransitionTime.IsZero(), "times are Merge's to set")
			switch tc.reason {
			case policy.ReasonEgressNetworkOverlap:
				assert.Equal(t, "networks overlap with clusterNetworks", s.Accepted.Message, "Linkerd's message")
			case policy.ReasonEgressNetworkInvalid:
				assert.Contains(t, s.Accepted.Message, "spec.networks")
			}
		})
	}
}

// TestEgressNetworkStatusFollowsTheClusterNetworksOfTheConfig: overlap is
// judged against the policy controller's --cluster-networks, not a fixed
// list.
func TestEgressNetworkStatusFollowsTheClusterNetworksOfTheConfig(t *testing.T) {
	objs := objectsFrom(t, egressStatusBase+"---\n"+egressNetwork("egress", `[{cidr: 198.51.100.0/24}]`))
	assert.Equal(t, metav1.ConditionTrue, egressStatusOf(t, policy.Build(objs, nil), "egress").Accepted.Status)
	cfg, err := policy.NewConfig(policy.WithClusterNetworks("198.51.0.0/16"))
	require.NoError(t, err)
	assert.Equal(t, policy.ReasonEgressNetworkOverlap, egressStatusOf(t, policy.Build(objs, cfg), "egress").Accepted.Reason)
}

func TestEgressNetworkStatusMergeKeepsOtherConditionsAndWritesOnlyOnChange(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	other := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", LastTransitionTime: metav1.NewTime(t0)}
	ok := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 3}
	overlap := metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: policy.ReasonEgressNetworkOverlap, Message: "networks overlap with clusterNetworks", ObservedGeneration: 4}

	s := policy.EgressNetworkStatus{Current: []metav1.Condition{other}, Accepted: ok}
	got, changed := s.Merge(t1)
	require.True(t, changed)
	require.Len(t, got, 2)
	assert.Equal(t, other, got[0], "another type's condition is kept as it is, first")
	assert.True(t, got[1].LastTransitionTime.Time.Equal(t1))

	s.Current = got
	again, changed := s.Merge(t1.Add(time.Minute))
	assert.False(t, changed, "an unchanged status is not written again")
	assert.Equal(t, got, again)

	s.Accepted = overlap
	flipped, changed := s.Merge(t1.Add(time.Hour))
	require.True(t, changed)
	require.Len(t, flipped, 2, "the Accepted condition is replaced, not added")
	assert.True(t, flipped[1].LastTransitionTime.Time.Equal(t1.Add(time.Hour)), "a flip gets a new time")
	assert.Equal(t, policy.ReasonEgressNetworkOverlap, flipped[1].Reason)

	s.Current = flipped
	s.Accepted.Message = "other words"
	reworded, changed := s.Merge(t1.Add(2 * time.Hour))
	assert.True(t, changed)
	assert.True(t, reworded[1].LastTransitionTime.Time.Equal(t1.Add(time.Hour)), "the same status keeps its time")
}

// TestEgressNetworkStatusReadsTheStatusTheObjectCarries: Current is what
// the object holds, so a status written earlier is not written again.
func TestEgressNetworkStatusReadsTheStatusTheObjectCarries(t *testing.T) {
	objs := objectsFrom(t, egressStatusBase+"---\n"+egressNetwork("egress", ""))
	ix := policy.Build(objs, nil)
	conds, changed := egressStatusOf(t, ix, "egress").Merge(time.Now())
	require.True(t, changed)
	require.Len(t, objs.EgressNetworks, 1)
	objs.EgressNetworks[0].Status = &v1alpha1.EgressNetworkStatus{Conditions: conds}
	_, changed = egressStatusOf(t, policy.Build(objs, nil), "egress").Merge(time.Now())
	assert.False(t, changed)
}

// linkerdEgressRoute is a route in my-app named r with one parentRef
// and the given backendRefs (YAML), in the form of kind: "linkerd" (a
// policy.linkerd.io HTTPRoute), "gateway" (a Gateway API HTTPRoute) or
// "grpc" (a GRPCRoute).
func linkerdEgressRoute(form, name, parent, backends string) (doc, kind, group string) {
	apiVersion, kind, group := "gateway.networking.k8s.io/v1", "HTTPRoute", "gateway.networking.k8s.io"
	switch form {
	case "linkerd":
		apiVersion, group = "policy.linkerd.io/v1beta3", "policy.linkerd.io"
	case "grpc":
		kind = "GRPCRoute"
	case "tcp":
		apiVersion, kind = "gateway.networking.k8s.io/v1alpha2", "TCPRoute"
	case "tls":
		apiVersion, kind = "gateway.networking.k8s.io/v1alpha2", "TLSRoute"
	}
	doc = "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {name: " + name + ", namespace: my-app}\nspec:\n  parentRefs: [" + parent + "]\n"
	if backends != "" || form == "tcp" || form == "tls" {
		// Linkerd's TCPRoute and TLSRoute cases always have their one
		// rule, with no backends when the case names none.
		doc += "  rules: [{backendRefs: [" + backends + "]}]\n"
	}
	return doc, kind, group
}

const (
	egressParent  = "{group: policy.linkerd.io, kind: EgressNetwork, name: egress, port: 8080}"
	serviceParent = "{group: core, kind: Service, name: web, port: 80}"
)

// TestLinkerdRouteStatusCasesForEgressNetworks are the EgressNetwork
// cases of Linkerd's route status tests (k8s/status/src/tests/routes/
// http.rs and grpc.rs, conflict.rs): a case "after create" or "after
// delete" builds the index without and then with the EgressNetwork (or
// the reverse), as the status is a function of the snapshot. Linkerd's
// HTTP cases come in two forms (linkerd_ and gateway_ for the two
// HTTPRoute groups); its gRPC cases have no prefix.
func TestLinkerdRouteStatusCasesForEgressNetworks(t *testing.T) {
	yes, no := metav1.ConditionTrue, metav1.ConditionFalse
	type want struct {
		parent              string // "EgressNetwork/egress"
		accepted, resolved  cond
		resolvedMsgContains string
	}
	acceptedC := cond{yes, "Accepted"}
	resolvedC := cond{yes, "ResolvedRefs"}
	notEgressParent := "EgressNetwork backend needs to be on a route that has an EgressNetwork parent"
	type tcase struct {
		name     string
		nets     []string // EgressNetworks present (by name)
		parent   string
		backends string
		want     want
		// before, when wantBefore is set, are the EgressNetworks of a
		// first index, whose route status must be wantBefore.
		before     []string
		wantBefore *want
	}
	cases := func() []tcase {
		egressBackend := func(name string) string {
			return "{group: policy.linkerd.io, kind: EgressNetwork, name: " + name + ", port: 8080}"
		}
		return []tcase{
			{name: "route_with_valid_egress_network_backend", nets: []string{"egress"}, parent: egressParent, backends: egressBackend("egress"),
				want: want{parent: "EgressNetwork/egress", accepted: acceptedC, resolved: resolvedC}},
			{name: "route_with_egress_network_backend_different_from_parent", nets: []string{"svc", "backend-1"},
				parent: strings.Replace(egressParent, "name: egress", "name: svc", 1), backends: egressBackend("backend-1"),
				want: want{parent: "EgressNetwork/svc", accepted: acceptedC, resolved: cond{no, "InvalidKind"}, resolvedMsgContains: notEgressParent}},
			{name: "route_with_egress_network_backend_and_service_parent", nets: []string{"backend-1"}, parent: serviceParent, backends: egressBackend("backend-1"),
				want: want{parent: "Service/web", accepted: acceptedC, resolved: cond{no, "InvalidKind"}, resolvedMsgContains: notEgressParent}},
			{name: "route_with_egress_network_parent_and_service_backend", nets: []string{"egress"}, parent: egressParent, backends: "{name: web, port: 80}",
				want: want{parent: "EgressNetwork/egress", accepted: acceptedC, resolved: resolvedC}},
			{name: "route_accepted_after_egress_network_create", before: []string{}, nets: []string{"egress"}, parent: egressParent,
				wantBefore: &want{parent: "EgressNetwork/egress", accepted: cond{no, "NoMatchingParent"}, resolved: resolvedC},
				want:       want{parent: "EgressNetwork/egress", accepted: acceptedC, resolved: resolvedC}},
			{name: "route_rejected_after_egress_network_delete", before: []string{"egress"}, nets: []string{}, parent: egressParent,
				wantBefore: &want{parent: "EgressNetwork/egress", accepted: acceptedC, resolved: resolvedC},
				want:       want{parent: "EgressNetwork/egress", accepted: cond{no, "NoMatchingParent"}, resolved: resolvedC}},
		}
	}
	run := func(t *testing.T, form string, tc tcase) {
		route, kind, group := linkerdEgressRoute(form, "r", tc.parent, tc.backends)
		check := func(t *testing.T, nets []string, w want) {
			doc := egressStatusBase + "---\n" + route
			for _, n := range nets {
				doc += "---\n" + egressNetwork(n, "")
			}
			s := statusOf(t, policy.Build(objectsFrom(t, doc), nil), kind, group, "r")
			got, msgs := conditionsByParent(s)
			assert.Equal(t, parentConds{w.parent: {"Accepted": w.accepted, "ResolvedRefs": w.resolved}}, got)
			if w.resolvedMsgContains != "" {
				assert.Contains(t, msgs[w.parent+" ResolvedRefs"], w.resolvedMsgContains)
			}
		}
		if tc.wantBefore != nil {
			check(t, tc.before, *tc.wantBefore)
		}
		check(t, tc.nets, tc.want)
	}
	for _, form := range []string{"linkerd", "gateway"} {
		for _, tc := range cases() {
			name := form + "_" + tc.name
			// Linkerd's HTTP names say "egress_networks_backends" for the
			// valid case.
			if tc.name == "route_with_valid_egress_network_backend" {
				name = form + "_route_with_valid_egress_networks_backends"
			}
			t.Run(name, func(t *testing.T) { run(t, form, tc) })
		}
	}
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) { run(t, "grpc", tc) })
	}
	// routes/tcp.rs and routes/tls.rs have the same cases for their
	// kinds.
	for _, form := range []string{"tcp", "tls"} {
		for _, tc := range cases() {
			t.Run(form+"/"+tc.name, func(t *testing.T) { run(t, form, tc) })
		}
	}

	// Conflicts between route kinds on one EgressNetwork parent
	// (grpc.rs egress_network_route_type_conflict, conflict.rs).
	conflict := func(t *testing.T, withGRPC, withHTTP bool) (httpConds, grpcConds parentConds) {
		doc := egressStatusBase + "---\n" + egressNetwork("egress", "")
		if withHTTP {
			r, _, _ := linkerdEgressRoute("gateway", "http", egressParent, "")
			doc += "---\n" + r
		}
		if withGRPC {
			r, _, _ := linkerdEgressRoute("grpc", "grpc", egressParent, "")
			doc += "---\n" + r
		}
		ix := policy.Build(objectsFrom(t, doc), nil)
		if withHTTP {
			httpConds, _ = conditionsByParent(statusOf(t, ix, "HTTPRoute", "gateway.networking.k8s.io", "http"))
		}
		if withGRPC {
			grpcConds, _ = conditionsByParent(statusOf(t, ix, "GRPCRoute", "gateway.networking.k8s.io", "grpc"))
		}
		return httpConds, grpcConds
	}
	ok := parentConds{"EgressNetwork/egress": {"Accepted": acceptedC, "ResolvedRefs": resolvedC}}
	conflicted := parentConds{"EgressNetwork/egress": {"Accepted": {no, policy.ReasonRouteConflicted}, "ResolvedRefs": resolvedC}}
	t.Run("egress_network_route_type_conflict", func(t *testing.T) {
		h, g := conflict(t, true, true)
		assert.Equal(t, conflicted, h, "the HTTPRoute")
		assert.Equal(t, ok, g, "the GRPCRoute")
	})
	t.Run("http_route_conflict_grpc_egress_network", func(t *testing.T) {
		h, _ := conflict(t, true, true)
		assert.Equal(t, conflicted, h)
	})
	t.Run("grpc_route_no_conflict_egress_network", func(t *testing.T) {
		_, g := conflict(t, true, true)
		assert.Equal(t, ok, g)
	})
	t.Run("http_route_no_conflict_egress_network", func(t *testing.T) {
		h, _ := conflict(t, false, true)
		assert.Equal(t, ok, h)
	})

	// routes/tls.rs: a TLSRoute beside a TCPRoute on one parent (a
	// Service or an EgressNetwork) takes it; the TCPRoute is conflicted.
	streamConflict := func(t *testing.T, parent, key string) {
		tcp, _, _ := linkerdEgressRoute("tcp", "tcproute-foo", parent, "")
		tls, _, _ := linkerdEgressRoute("tls", "tlsroute-foo", parent, "")
		base := egressStatusBase + "---\n" + egressNetwork("egress", "") + "---\n" + tcp
		accepted := parentConds{key: {"Accepted": acceptedC, "ResolvedRefs": resolvedC}}
		got, _ := conditionsByParent(statusOf(t, policy.Build(objectsFrom(t, base), nil), "TCPRoute", "gateway.networking.k8s.io", "tcproute-foo"))
		assert.Equal(t, accepted, got, "the TCPRoute alone")
		ix := policy.Build(objectsFrom(t, base+"---\n"+tls), nil)
		got, _ = conditionsByParent(statusOf(t, ix, "TCPRoute", "gateway.networking.k8s.io", "tcproute-foo"))
		assert.Equal(t, parentConds{key: {"Accepted": {no, policy.ReasonRouteConflicted}, "ResolvedRefs": resolvedC}}, got, "the TCPRoute beside the TLSRoute")
		got, _ = conditionsByParent(statusOf(t, ix, "TLSRoute", "gateway.networking.k8s.io", "tlsroute-foo"))
		assert.Equal(t, accepted, got, "the TLSRoute")
	}
	t.Run("tls/service_route_type_conflict", func(t *testing.T) { streamConflict(t, serviceParent, "Service/web") })
	t.Run("tls/egress_network_route_type_conflict", func(t *testing.T) { streamConflict(t, egressParent, "EgressNetwork/egress") })

	// Weft's own: a parent that is not accepted, in Linkerd's words; a
	// backend EgressNetwork that does not exist; a parent in another
	// namespace.
	t.Run("WeftAnOverlappingEgressNetworkParentIsNotAccepted", func(t *testing.T) {
		r, kind, group := linkerdEgressRoute("gateway", "r", egressParent, "")
		ix := policy.Build(objectsFrom(t, egressStatusBase+"---\n"+egressNetwork("egress", "[{cidr: 10.0.0.0/8}]")+"---\n"+r), nil)
		got, msgs := conditionsByParent(statusOf(t, ix, kind, group, "r"))
		assert.Equal(t, parentConds{"EgressNetwork/egress": {"Accepted": {no, "NoMatchingParent"}, "ResolvedRefs": resolvedC}}, got)
		assert.Equal(t, "EgressNetwork parent has not been accepted", msgs["EgressNetwork/egress Accepted"])
	})
	t.Run("WeftAMissingEgressNetworkBackendIsNotFound", func(t *testing.T) {
		r, kind, group := linkerdEgressRoute("gateway", "r", egressParent, "{group: policy.linkerd.io, kind: EgressNetwork, name: gone, port: 8080}")
		ix := policy.Build(objectsFrom(t, egressStatusBase+"---\n"+egressNetwork("egress", "")+"---\n"+r), nil)
		got, _ := conditionsByParent(statusOf(t, ix, kind, group, "r"))
		assert.Equal(t, parentConds{"EgressNetwork/egress": {"Accepted": acceptedC, "ResolvedRefs": {no, "BackendNotFound"}}}, got)
	})
	t.Run("WeftAnEgressNetworkParentInAnotherNamespaceIsUnsupported", func(t *testing.T) {
		r, kind, group := linkerdEgressRoute("gateway", "r", "{group: policy.linkerd.io, kind: EgressNetwork, name: egress, namespace: linkerd-egress, port: 8080}", "")
		ix := policy.Build(objectsFrom(t, egressStatusBase+"---\n"+r), nil)
		got, _ := conditionsByParent(statusOf(t, ix, kind, group, "r"))
		assert.Equal(t, parentConds{"EgressNetwork/egress": {"Accepted": {no, "UnsupportedValue"}, "ResolvedRefs": resolvedC}}, got)
	})
}

// TestLinkerdTCPAndTLSRouteStatusCasesForServicesAndServers are the
// Service and Server cases of Linkerd's routes/tcp.rs and routes/tls.rs:
// backends that exist or not under a Service parent, and a Server parent
// that appears or goes away (the route is Accepted once the Server
// exists; a Server parent has no ResolvedRefs condition).
func TestLinkerdTCPAndTLSRouteStatusCasesForServicesAndServers(t *testing.T) {
	yes, no := metav1.ConditionTrue, metav1.ConditionFalse
	const backend1 = "---\napiVersion: v1\nkind: Service\nmetadata: {name: backend-1, namespace: my-app}\nspec: {clusterIP: 10.96.0.11, ports: [{port: 8080}]}\n"
	const server = "---\napiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: srv-8080, namespace: my-app}\nspec: {podSelector: {}, port: 8080}\n"
	const serverParent = "{group: policy.linkerd.io, kind: Server, name: srv-8080}"
	for _, form := range []string{"tcp", "tls"} {
		kind := map[string]string{"tcp": "TCPRoute", "tls": "TLSRoute"}[form]
		status := func(t *testing.T, objs, parent, backends string) (parentConds, map[string]string) {
			r, _, _ := linkerdEgressRoute(form, "route-foo", parent, backends)
			ix := policy.Build(objectsFrom(t, egressStatusBase+objs+"---\n"+r), nil)
			return conditionsByParent(statusOf(t, ix, kind, "gateway.networking.k8s.io", "route-foo"))
		}
		t.Run(form+"/route_with_valid_service_backends", func(t *testing.T) {
			got, _ := status(t, backend1, serviceParent, "{group: core, kind: Service, name: backend-1, port: 8080}")
			assert.Equal(t, parentConds{"Service/web": {"Accepted": {yes, "Accepted"}, "ResolvedRefs": {yes, "ResolvedRefs"}}}, got)
		})
		t.Run(form+"/route_with_invalid_service_backend", func(t *testing.T) {
			got, _ := status(t, backend1, serviceParent, "{group: core, kind: Service, name: backend-1, port: 8080}, {group: core, kind: Service, name: nonexistant-backend, port: 8080}")
			assert.Equal(t, parentConds{"Service/web": {"Accepted": {yes, "Accepted"}, "ResolvedRefs": {no, "BackendNotFound"}}}, got)
		})
		t.Run(form+"/route_accepted_after_server_create", func(t *testing.T) {
			got, _ := status(t, "", serverParent, "")
			assert.Equal(t, parentConds{"Server/srv-8080": {"Accepted": {no, "NoMatchingParent"}}}, got, "before the Server")
			got, _ = status(t, server, serverParent, "")
			assert.Equal(t, parentConds{"Server/srv-8080": {"Accepted": {yes, "Accepted"}}}, got, "after")
		})
		t.Run(form+"/route_rejected_after_server_delete", func(t *testing.T) {
			got, _ := status(t, server, serverParent, "")
			assert.Equal(t, parentConds{"Server/srv-8080": {"Accepted": {yes, "Accepted"}}}, got, "with the Server")
			got, _ = status(t, "", serverParent, "")
			assert.Equal(t, parentConds{"Server/srv-8080": {"Accepted": {no, "NoMatchingParent"}}}, got, "after its deletion")
		})
	}
}

// TestLinkerdRouteKindConflictCasesForServicesAndEgressNetworks are the
// cases of Linkerd's conflict.rs for a Service and an EgressNetwork
// parent: a route of one kind beside one of another on the same parent
// is conflicted when the other kind comes first (GRPCRoute, then
// HTTPRoute, then TLSRoute, then TCPRoute), accepted otherwise.
func TestLinkerdRouteKindConflictCasesForServicesAndEgressNetworks(t *testing.T) {
	no := metav1.ConditionFalse
	forms := map[string]struct{ form, kind string }{
		"grpc": {"grpc", "GRPCRoute"}, "http": {"gateway", "HTTPRoute"},
		"tls": {"tls", "TLSRoute"}, "tcp": {"tcp", "TCPRoute"},
	}
	cases := []struct {
		name         string
		route, other string // kinds: the checked route, the one beside it ("" none)
		conflicted   bool
	}{
		{"grpc_route_no_conflict", "grpc", "http", false},
		{"http_route_conflict_grpc", "http", "grpc", true},
		{"http_route_no_conflict", "http", "", false},
		{"tls_route_conflict_http", "tls", "http", true},
		{"tls_route_conflict_grpc", "tls", "grpc", true},
		{"tls_route_no_conflict", "tls", "tcp", false},
		{"tcp_route_conflict_grpc", "tcp", "grpc", true},
		{"tcp_route_conflict_http", "tcp", "http", true},
		{"tcp_route_conflict_tls", "tcp", "tls", true},
		{"tcp_route_no_conflict", "tcp", "", false},
	}
	parents := []struct{ suffix, ref, key string }{
		{"service", serviceParent, "Service/web"},
		{"egress_network", egressParent, "EgressNetwork/egress"},
	}
	for _, p := range parents {
		for _, tc := range cases {
			t.Run(tc.name+"_"+p.suffix, func(t *testing.T) {
				f := forms[tc.route]
				r, kind, group := linkerdEgressRoute(f.form, "checked", p.ref, "")
				doc := egressStatusBase + "---\n" + egressNetwork("egress", "") + "---\n" + r
				if tc.other != "" {
					o, _, _ := linkerdEgressRoute(forms[tc.other].form, "other", p.ref, "")
					doc += "---\n" + o
				}
				got, msgs := conditionsByParent(statusOf(t, policy.Build(objectsFrom(t, doc), nil), kind, group, "checked"))
				accepted := got[p.key]["Accepted"]
				if tc.conflicted {
					assert.Equal(t, cond{no, policy.ReasonRouteConflicted}, accepted, "%v", msgs)
				} else {
					assert.Equal(t, "True", string(accepted.status), "%v", msgs)
				}
			})
		}
	}
}
