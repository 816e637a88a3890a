package install_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
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

func TestInstallServesTheTapAPIBehindTheAggregationLayer(t *testing.T) {
	v := inject.DefaultValues()
	v.ControlPlaneNamespace = "mesh"
	fx := newFixture(t, "mesh")
	m := render(t, v, fx.certs)
	x := indexOf(m.Objects)
	assert.Equal(t, tapapi.APIServiceName, install.TapAPIServiceName, "the install registers the API the tap component serves")
	assert.Equal(t, tapapi.Group, install.TapAPIGroup)

	api := get[*unstructured.Unstructured](t, x, "APIService", "v1alpha1.tap.weftmesh.io")
	spec := api.Object["spec"].(map[string]any)
	assert.Equal(t, "tap.weftmesh.io", spec["group"])
	assert.Equal(t, "v1alpha1", spec["version"])
	assert.Equal(t, map[string]any{"name": "weft-tap", "namespace": "mesh", "port": int64(443)}, spec["service"])
	ca, err := base64.StdEncoding.DecodeString(spec["caBundle"].(string))
	require.NoError(t, err)
	assert.Equal(t, fx.certs.Tap.CAPEM, ca, "the API server verifies the tap API against the tap CA")
	assert.NotContains(t, spec, "insecureSkipTLSVerify")

	svc := get[*corev1.Service](t, x, "Service", install.ServiceTap)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, "https", svc.Spec.Ports[0].TargetPort.StrVal)
	assert.Equal(t, map[string]string{install.LabelComponent: "tap"}, svc.Spec.Selector)

	d := get[*appsv1.Deployment](t, x, "Deployment", install.ServiceTap)
	pod := d.Spec.Template.Spec
	assert.Equal(t, install.ServiceAccountTap, pod.ServiceAccountName)
	assert.Equal(t, vocab.InjectDisabled, d.Spec.Template.Annotations[vocab.AnnotationInject], "the tapper holds its identity itself, without a proxy")
	require.Len(t, pod.Containers, 1)
	args := pod.Containers[0].Args
	assert.Equal(t, "tap", args[0])
	assert.Contains(t, args, "--identity=weft-tap.mesh.serviceaccount.identity.mesh.cluster.local")
	assert.Contains(t, args, "--identity-addr="+v.IdentityAddress())
	assert.Contains(t, args, "--token-file="+vocab.IdentityTokenFile)
	var token *corev1.ServiceAccountTokenProjection
	for _, vol := range pod.Volumes {
		if vol.Projected != nil {
			token = vol.Projected.Sources[0].ServiceAccountToken
		}
	}
	require.NotNil(t, token, "a projected token for the identity service")
	assert.Equal(t, vocab.IdentityTokenAudience, token.Audience)
	secret := get[*corev1.Secret](t, x, "Secret", install.SecretTapTLS)
	assert.Equal(t, fx.certs.Tap.CertPEM, secret.Data[corev1.TLSCertKey])

	delegator := get[*rbacv1.ClusterRoleBinding](t, x, "ClusterRoleBinding", "weft-mesh-tap-auth-delegator")
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"}, delegator.RoleRef)
	reader := get[*rbacv1.RoleBinding](t, x, "RoleBinding", "weft-mesh-tap-auth-reader")
	assert.Equal(t, "kube-system", reader.Namespace)
	assert.Equal(t, "extension-apiserver-authentication-reader", reader.RoleRef.Name)
	for _, b := range []rbacv1.Subject{delegator.Subjects[0], reader.Subjects[0]} {
		assert.Equal(t, rbacv1.Subject{Kind: "ServiceAccount", Name: "weft-tap", Namespace: "mesh"}, b)
	}
	admin := get[*rbacv1.ClusterRole](t, x, "ClusterRole", "weft-mesh-tap-admin")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"tap.weftmesh.io"}, Resources: []string{"*"}, Verbs: []string{"watch"}}}, admin.Rules)

	// The whole manifest decodes back, the APIService included.
	y, err := m.YAML()
	require.NoError(t, err)
	back, err := install.Decode(y)
	require.NoError(t, err)
	assert.Len(t, back, len(m.Objects))
}

func TestInstallWithoutATapCertificateWarnsAndServesNoTapAPI(t *testing.T) {
	certs := newFixture(t, "weft").certs
	certs.Tap = install.Webhook{}
	m := render(t, inject.DefaultValues(), certs)
	assert.NotContains(t, kinds(m.Objects), "APIService")
	assert.NotContains(t, indexOf(m.Objects), "Deployment/weft-tap")
	require.Len(t, m.Warnings, 1)
	assert.Contains(t, m.Warnings[0], "the tap API (weft-tap, APIService v1alpha1.tap.weftmesh.io) is not installed")

	// A certificate for another name is refused, naming it.
	other := newFixture(t, "elsewhere").certs
	certs.Tap = other.Tap
	_, err := install.Render(inject.DefaultValues(), certs)
	require.ErrorContains(t, err, "tap serving certificate is not valid for weft-tap.weft.svc")
}

func TestGeneratedTapCertificateIsAccepted(t *testing.T) {
	certs := newFixture(t, "weft").certs
	tap, err := install.GenerateTap("weft", "cluster.local", time.Now())
	require.NoError(t, err)
	certs.Tap = tap
	m := render(t, inject.DefaultValues(), certs)
	assert.Empty(t, m.Warnings)
}
