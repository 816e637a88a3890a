//go:build kubeintegration

package integration_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/discovery"
	discoverykube "github.com/weftmesh/weft/mesh/discovery/kubernetes"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// watchBound is how long a change may take to travel from the API server
// through a real watch into a source. Measured figures are logged; they are
// far below this on an idle machine (see docs/testing-kube.md).
const watchBound = 5 * time.Second

// latencies collects how long changes took to arrive and summarizes them.
type latencies []time.Duration

func (l latencies) String() string {
	if len(l) == 0 {
		return "no samples"
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return fmt.Sprintf("n=%d min=%s median=%s max=%s", len(s),
		s[0].Round(100*time.Microsecond), s[len(s)/2].Round(100*time.Microsecond), s[len(s)-1].Round(100*time.Microsecond))
}

// waitFor blocks until cond holds, re-checking whenever updated fires, and
// returns how long that took from since. It fails t after watchBound.
func waitFor(t *testing.T, since time.Time, updated <-chan struct{}, cond func() bool, what string) time.Duration {
	t.Helper()
	deadline := time.NewTimer(watchBound)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-updated:
		case <-deadline.C:
			t.Fatalf("%s: not seen within %s", what, watchBound)
		}
	}
	return time.Since(since)
}

func TestDiscoverySourceSeesEndpointSliceChangesThroughARealWatch(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c) // the source also watches ServiceProfiles
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "discovery", nil, nil)

	_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := c.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, svc.Spec.ClusterIP, "the API server allocates a cluster IP")

	// Two meshed pods. Without a kubelet nobody sets their IPs, so the
	// test writes their status as a kubelet would.
	podIPs := map[string]string{"web-0": "10.1.0.10", "web-1": "10.1.0.11"}
	for name, ip := range podIPs {
		pod, err := c.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web", "linkerd.io/control-plane-ns": "weft"}},
			Spec: corev1.PodSpec{
				ServiceAccountName: "web",
				Containers: []corev1.Container{{
					Name: "web", Image: "example.com/web:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		_, err = c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	endpoint := func(pod string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{
			Addresses:  []string{podIPs[pod]},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
		}
	}
	slice, err := c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{endpoint("web-0")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	idx, err := discovery.NewIndex(discovery.WithControlPlaneNamespace("weft"), discovery.WithTrustDomain("cluster.local"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = idx.Close() })
	began := time.Now()
	src, err := discoverykube.New(ctx, idx, c.kube, c.dyn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	t.Logf("discovery source synced its informers in %s", time.Since(began).Round(time.Millisecond))

	sub, err := idx.SubscribeEndpoints(fmt.Sprintf("web.%s.svc.cluster.local:80", ns))
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	addrs := func() []string {
		var out []string
		for _, ep := range sub.Latest().Set.Endpoints {
			out = append(out, ep.Addr.String())
		}
		return out
	}
	waitFor(t, time.Now(), sub.Updated(), func() bool { return slices.Equal(addrs(), []string{"10.1.0.10:8080"}) }, "the initial endpoint")

	// The endpoint carries what discovery derives from the real pod.
	ep := sub.Latest().Set.Endpoints[0]
	assert.Equal(t, netip.MustParseAddrPort("10.1.0.10:8080"), ep.Addr)
	assert.Equal(t, "web."+ns+".serviceaccount.identity.weft.cluster.local", ep.Identity)
	assert.Equal(t, "web-0", ep.MetricLabels["pod"])

	// Scale up and down a few times; each change goes through the API
	// server, the watch, the informer, the index and the topic.
	var took latencies
	want := [][]string{
		{"10.1.0.10:8080", "10.1.0.11:8080"},
		{"10.1.0.11:8080"},
		{"10.1.0.10:8080", "10.1.0.11:8080"},
		{"10.1.0.10:8080"},
		{"10.1.0.10:8080", "10.1.0.11:8080"},
		{"10.1.0.11:8080"},
	}
	for i, w := range want {
		var eps []discoveryv1.Endpoint
		for _, a := range w {
			for pod, ip := range podIPs {
				if a == ip+":8080" {
					eps = append(eps, endpoint(pod))
				}
			}
		}
		slice.Endpoints = eps
		start := time.Now()
		slice, err = c.kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{})
		require.NoError(t, err)
		took = append(took, waitFor(t, start, sub.Updated(), func() bool { return slices.Equal(addrs(), w) }, fmt.Sprintf("change %d to %v", i+1, w)))
	}
	t.Logf("EndpointSlice update -> subscriber sees the new endpoint set: %s (bound %s)", took, watchBound)

	// Deleting the slice empties the set.
	start := time.Now()
	require.NoError(t, c.kube.DiscoveryV1().EndpointSlices(ns).Delete(ctx, slice.Name, metav1.DeleteOptions{}))
	d := waitFor(t, start, sub.Updated(), func() bool { return len(sub.Latest().Set.Endpoints) == 0 && sub.Latest().Set.Exists }, "the slice's deletion")
	t.Logf("EndpointSlice delete -> empty set: %s", d.Round(100*time.Microsecond))
}

func TestPolicySourceSeesServerChangesThroughARealWatch(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "policy", nil, nil)

	began := time.Now()
	src, err := policykube.New(ctx, c.kube, c.dyn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	t.Logf("policy source synced its informers in %s", time.Since(began).Round(time.Millisecond))

	servers := c.dyn.Resource(policykube.ServersResource).Namespace(ns)
	// port returns the port of the named Server in the source's current
	// snapshot, or -1 when it has none.
	port := func(name string) int {
		for _, s := range src.Objects().Servers {
			if s.Namespace == ns && s.Name == name {
				return s.Spec.Port.IntValue()
			}
		}
		return -1
	}
	server := func(name string, p int32) *unstructured.Unstructured {
		s := &policyv1beta3.Server{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta3", Kind: "Server"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1beta3.ServerSpec{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Port:        intstr.FromInt32(p),
			},
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		return u
	}

	var created, updated, deleted latencies
	for round := range 3 {
		name := fmt.Sprintf("web-http-%d", round)
		start := time.Now()
		_, err := servers.Create(ctx, server(name, 8080), metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err)
		created = append(created, waitFor(t, start, src.Updated(), func() bool { return port(name) == 8080 }, "Server "+name+" created"))

		cur, err := servers.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(cur.Object, int64(9090), "spec", "port"))
		start = time.Now()
		_, err = servers.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		updated = append(updated, waitFor(t, start, src.Updated(), func() bool { return port(name) == 9090 }, "Server "+name+" port changed"))

		start = time.Now()
		require.NoError(t, servers.Delete(ctx, name, metav1.DeleteOptions{}))
		deleted = append(deleted, waitFor(t, start, src.Updated(), func() bool { return port(name) == -1 }, "Server "+name+" deleted"))
	}
	t.Logf("Server change -> policy source snapshot (includes the source's 50ms debounce): create %s; update %s; delete %s (bound %s)", created, updated, deleted, watchBound)

	// Everything in the cluster, the examples included when they ran first,
	// converted into typed objects.
	assert.Empty(t, src.Errors(), "objects the policy source could not convert")
}
