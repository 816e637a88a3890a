package inject_test

import (
	kjson "sigs.k8s.io/json"

	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
)

// testValues returns default values with a trust anchor made at run time.
func testValues(t testing.TB) inject.Values {
	t.Helper()
	v := inject.DefaultValues()
	v.Version = "v0.1.0"
	v.IdentityTrustAnchorsPEM = string(testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test"}).CertPEM)
	return v
}

func namespace(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

// appPod is a typical application pod in namespace ns.
func appPod(ns string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d9f8", Namespace: ns,
			Labels:      map[string]string{"app": "web"},
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web",
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "example.com/web:1.0",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "mysql", ContainerPort: 3306}},
			}},
		},
	}
}

// applyPatch applies p to pod with an independent JSON Patch library and
// decodes the result strictly (unknown or duplicate fields fail).
func applyPatch(t testing.TB, pod *corev1.Pod, p inject.Patch) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	require.NoError(t, err)
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	jp, err := jsonpatch.DecodePatch(raw)
	require.NoError(t, err, "patch must decode: %s", raw)
	out, err := jp.Apply(doc)
	require.NoError(t, err, "patch must apply: %s", raw)
	return strictPod(t, out)
}

// strictPod decodes a patched pod (JSON, as JSON Patch produces it)
// strictly: unknown, duplicate or case-mismatched fields fail the test.
func strictPod(t testing.TB, b []byte) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	strictErrs, err := kjson.UnmarshalStrict(b, &pod)
	require.NoError(t, err, "patched document must decode as a Pod")
	require.Empty(t, strictErrs, "patched document must decode strictly as a Pod")
	return &pod
}

func container(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func env(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func setting(t testing.TB, r inject.Report, name string) inject.Setting {
	t.Helper()
	for _, s := range r.Settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("report has no setting %q", name)
	return inject.Setting{}
}
