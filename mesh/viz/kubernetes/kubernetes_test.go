package kubernetes_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/mesh/viz"
	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
)

type body string

func (b body) DoRaw(context.Context) ([]byte, error) { return []byte(b), nil }
func (b body) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(b))), nil
}

var _ restclient.ResponseWrapper = body("")

func pod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"linkerd.io/control-plane-ns": "weft", "pod-template-hash": "5d9f"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "web"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
	ctrl := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &ctrl}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestSourceListsMeshedPodsAndReadsMetricsThroughThePodProxy(t *testing.T) {
	objs := []runtime.Object{
		pod("web-1", nil),
		pod("web-2", func(p *corev1.Pod) { p.Annotations = map[string]string{"config.linkerd.io/admin-port": "9991"} }),
		pod("pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		pod("plain", func(p *corev1.Pod) { delete(p.Labels, "linkerd.io/control-plane-ns") }),
	}
	cs := fake.NewSimpleClientset(objs...)
	var asked []string
	cs.AddProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		g := a.(k8stesting.ProxyGetAction)
		asked = append(asked, g.GetNamespace()+"/"+g.GetName()+":"+g.GetPort()+g.GetPath())
		return true, body("# TYPE response_total counter\nresponse_total{direction=\"inbound\",classification=\"success\",pod=\"liar\"} 7\n"), nil
	})
	src := vizk8s.New(cs, vizk8s.WithNamespace("shop"))
	ts, err := src.Targets(t.Context())
	require.NoError(t, err)
	require.Len(t, ts, 2, "only running, meshed pods")
	assert.Equal(t, "deployment", ts[0].WorkloadKind)
	assert.Equal(t, "web", ts[0].Workload)
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", ts[0].Identity)
	assert.Equal(t, "4191", ts[0].Admin)
	assert.Equal(t, "9991", ts[1].Admin, "the admin-port annotation wins")

	r, err := viz.ScrapeAll(t.Context(), src, time.Now)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"shop/web-1:4191/metrics", "shop/web-2:9991/metrics"}, asked)
	w := viz.Between(nil, r)
	rows := viz.Stat(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop"})
	require.Len(t, rows, 1)
	assert.Equal(t, 14.0, rows[0].Requests())
	assert.Equal(t, 2, rows[0].Meshed)
}
