package install_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

func TestInstallWiresTheTapperIdentityIntoTheInjectorsValues(t *testing.T) {
	v := inject.DefaultValues()
	v.ControlPlaneNamespace = "mesh"
	v.IdentityTrustDomain = "example.org"
	x := indexOf(render(t, v, newFixture(t, "mesh").certs).Objects)
	cm := get[*corev1.ConfigMap](t, x, "ConfigMap", install.ConfigMapValues)
	got, err := inject.ParseValues([]byte(cm.Data[install.ValuesKey]))
	require.NoError(t, err)
	want := "weft-tap.mesh.serviceaccount.identity.mesh.example.org"
	assert.Equal(t, want, install.TapperIdentity(v))
	assert.Equal(t, want, got.Proxy.TapIdentities, "every injected proxy serves tap to the tapper only")
	get[*corev1.ServiceAccount](t, x, "ServiceAccount", install.ServiceAccountTap)

	// A list the values give is kept as is.
	v.Proxy.TapIdentities = "tap.linkerd-viz.serviceaccount.identity.linkerd.cluster.local"
	x = indexOf(render(t, v, newFixture(t, "mesh").certs).Objects)
	got, err = inject.ParseValues([]byte(get[*corev1.ConfigMap](t, x, "ConfigMap", install.ConfigMapValues).Data[install.ValuesKey]))
	require.NoError(t, err)
	assert.Equal(t, v.Proxy.TapIdentities, got.Proxy.TapIdentities)
}

func TestInstallRefusesATapIdentityThatIsNoName(t *testing.T) {
	v := inject.DefaultValues()
	v.Proxy.TapIdentities = "tap.weft,not a name"
	_, err := install.Render(v, newFixture(t, "weft").certs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `proxy.tapIdentities: "not a name" is not an identity name`)
}

func TestPrometheusOperatorAddsAPodMonitorScrapingEveryProxysAdminPort(t *testing.T) {
	v := inject.DefaultValues()
	plain := render(t, v, newFixture(t, "weft").certs)
	assert.NotContains(t, kinds(plain.Objects), "PodMonitor", "only on request")

	m := render(t, v, newFixture(t, "weft").certs, install.WithPrometheusOperator())
	objs := m.Objects
	last := objs[len(objs)-1]
	require.Equal(t, "PodMonitor", gvk(last).Kind, "applied last, after what it watches")
	assert.Equal(t, "monitoring.coreos.com/v1", gvk(last).GroupVersion().String())
	assert.Equal(t, install.PodMonitorName, last.GetName())
	assert.Equal(t, "weft", last.GetNamespace())
	u := last.(*unstructured.Unstructured)
	anyNS, _, _ := unstructured.NestedBool(u.Object, "spec", "namespaceSelector", "any")
	assert.True(t, anyNS, "meshed pods in every namespace")
	sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]string{vocab.LabelControlPlaneNamespace: "weft"}, sel, "the pods this control plane meshes")
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "podMetricsEndpoints")
	require.Len(t, eps, 1)
	ep := eps[0].(map[string]any)
	assert.Equal(t, vocab.AdminPortName, ep["port"], "the proxy container's admin port, by the name the injector gives it")
	assert.Equal(t, "/metrics", ep["path"])

	// It serializes with the rest, as the API server expects it.
	y, err := m.YAML()
	require.NoError(t, err)
	doc := string(y[strings.LastIndex(string(y), "---\n"):])
	assert.Contains(t, doc, "kind: PodMonitor")
	assert.Contains(t, doc, "port: "+vocab.AdminPortName)
	assert.Contains(t, doc, "regex: "+vocab.ProxyContainerName)
}
