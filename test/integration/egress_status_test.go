//go:build kubeintegration

package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/weftmesh/weft/mesh/policy"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// egressAccepted reads the Accepted condition of an EgressNetwork on the
// API server: "True/Accepted" and its observedGeneration, or "" while
// there is none; and every condition type it carries, in order.
func egressAccepted(ctx context.Context, c clients, ns, name string) (string, int64, []string, error) {
	u, err := c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", 0, nil, err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var types []string
	got, gen := "", int64(0)
	for _, cd := range conds {
		cm, _ := cd.(map[string]any)
		typ, _, _ := unstructured.NestedString(cm, "type")
		types = append(types, typ)
		if typ == "Accepted" {
			st, _, _ := unstructured.NestedString(cm, "status")
			r, _, _ := unstructured.NestedString(cm, "reason")
			got = st + "/" + r
			gen, _, _ = unstructured.NestedInt64(cm, "observedGeneration")
		}
	}
	return got, gen, types, nil
}

// waitEgressAccepted polls the EgressNetwork until its Accepted condition
// reads want for generation gen, and fails t after statusBound.
func waitEgressAccepted(t *testing.T, c clients, ns, name, want string, gen int64) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statusBound)
	defer cancel()
	for {
		got, g, types, err := egressAccepted(ctx, c, ns, name)
		if err == nil && got == want && g == gen {
			return types
		}
		select {
		case <-ctx.Done():
			t.Fatalf("EgressNetwork %s/%s: Accepted is %q for generation %d (err %v), want %q for %d within %s", ns, name, got, g, err, want, gen, statusBound)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPolicyControllerWritesEgressNetworkStatusAsLinkerdDoes is issue 30
// item 2's status: through a real API server (CRD schema, status
// subresource, resourceVersion checks), the writer sets each
// EgressNetwork's Accepted condition (False, EgressReasonNetworkOverlap,
// for one overlapping the cluster networks), keeps another controller's
// condition, and writes the status of the routes whose parent is an
// EgressNetwork; when the overlapping network is moved outside the
// cluster networks, both follow.
func TestPolicyControllerWritesEgressNetworkStatusAsLinkerdDoes(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "egress-status", nil, nil)
	leaseNS := newNamespace(t, c, "egress-status-cp", nil, nil)

	applyYAML(t, c, policykube.EgressNetworksResource, ns, "apiVersion: policy.linkerd.io/v1alpha1\nkind: EgressNetwork\nmetadata: {name: outside}\nspec: {trafficPolicy: Allow}\n")
	applyYAML(t, c, policykube.EgressNetworksResource, ns, "apiVersion: policy.linkerd.io/v1alpha1\nkind: EgressNetwork\nmetadata: {name: overlap}\nspec: {trafficPolicy: Deny, networks: [{cidr: 10.0.0.0/8}]}\n")
	// Another controller's condition on "outside", written before Weft
	// starts.
	u, err := c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Get(ctx, "outside", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{
		"type": "example.com/Audited", "status": "True", "reason": "Audited", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}, "status", "conditions"))
	_, err = c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)

	route := func(name, parent string) string {
		return fmt.Sprintf("apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: %s}\nspec:\n  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: %s, port: 443}]\n  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]\n", name, parent)
	}
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, route("to-outside", "outside"))
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, route("to-overlap", "overlap"))

	startStatusWriter(t, c, leaseNS, "replica-a")

	types := waitEgressAccepted(t, c, ns, "outside", "True/Accepted", 1)
	assert.Equal(t, []string{"example.com/Audited", "Accepted"}, types, "the other controller's condition is kept, first")
	waitEgressAccepted(t, c, ns, "overlap", "False/"+policy.ReasonEgressNetworkOverlap, 1)
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "to-outside", "EgressNetwork", "outside", "Accepted", "True/Accepted")
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "to-outside", "EgressNetwork", "outside", "ResolvedRefs", "True/ResolvedRefs")
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "to-overlap", "EgressNetwork", "overlap", "Accepted", "False/NoMatchingParent")

	// Move the network out of the cluster networks: a new generation,
	// accepted, and the route on it follows.
	o, err := c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Get(ctx, "overlap", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(o.Object, []any{map[string]any{"cidr": "203.0.113.0/24"}}, "spec", "networks"))
	_, err = c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Update(ctx, o, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitEgressAccepted(t, c, ns, "overlap", "True/Accepted", 2)
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "to-overlap", "EgressNetwork", "overlap", "Accepted", "True/Accepted")
}
