package check_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
)

// cluster is a fake cluster holding a rendered install.
type cluster struct {
	ns     string
	kube   *fake.Clientset
	ext    *apiextfake.Clientset
	anchor *testutil.CA
	issuer *testutil.CA
	hookCA *testutil.CA
	values inject.Values
	certs  install.Certificates
}

func ptr[T any](v T) *T { return &v }

// healthyCluster renders an install for namespace ns and loads it into fake
// clientsets as a running cluster would show it: CRDs Established, every
// Deployment with ready pods, the injector Service with a ready endpoint.
func healthyCluster(t *testing.T, ns string) *cluster {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test", Lifetime: 365 * 24 * time.Hour})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.weft.test", Lifetime: 180 * 24 * time.Hour})
	hookCA := testutil.NewAnchor(t, testutil.CertOptions{Name: "webhook CA", Lifetime: 365 * 24 * time.Hour})
	leaf := hookCA.Leaf(t, testutil.CertOptions{Name: install.InjectorServerName(ns), Lifetime: 365 * 24 * time.Hour})
	certs := install.Certificates{
		Identity: install.Identity{TrustAnchorsPEM: anchor.CertPEM, IssuerCertPEM: issuer.CertPEM, IssuerKeyPEM: issuer.KeyPEM},
		Webhook:  install.Webhook{CAPEM: hookCA.CertPEM, CertPEM: leaf.CertPEM, KeyPEM: leaf.KeyPEM},
	}
	values := inject.DefaultValues()
	values.ControlPlaneNamespace = ns
	m, err := install.Render(values, certs)
	require.NoError(t, err)

	var kubeObjs, extObjs []runtime.Object
	for _, o := range m.Objects {
		switch obj := o.(type) {
		case *apiextensionsv1.CustomResourceDefinition:
			obj.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
			}
			extObjs = append(extObjs, obj)
		case *appsv1.Deployment:
			obj.Generation = 1
			obj.Status.ObservedGeneration = 1
			kubeObjs = append(kubeObjs, obj)
			for i := 0; i < int(*obj.Spec.Replicas); i++ {
				kubeObjs = append(kubeObjs, readyPod(obj, i))
			}
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	kubeObjs = append(kubeObjs, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: install.ServiceInjector + "-abcde", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: install.ServiceInjector}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("webhook"), Port: ptr(int32(install.InjectorPort))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	})
	kube := fake.NewClientset(kubeObjs...)
	kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}
	allowAll(kube)
	values.IdentityTrustAnchorsPEM = string(anchor.CertPEM)
	return &cluster{ns: ns, kube: kube, ext: apiextfake.NewClientset(extObjs...), anchor: anchor, issuer: issuer, hookCA: hookCA, values: values, certs: certs}
}

func readyPod(d *appsv1.Deployment, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-7c9f-" + string(rune('a'+i)), Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// allowAll answers every SelfSubjectAccessReview with allowed.
func allowAll(kube *fake.Clientset) {
	allow(kube, func(*authorizationv1.ResourceAttributes) bool { return true })
}

func allow(kube *fake.Clientset, decide func(*authorizationv1.ResourceAttributes) bool) {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ssar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ssar.Status.Allowed = decide(ssar.Spec.ResourceAttributes)
		if !ssar.Status.Allowed {
			ssar.Status.Reason = "RBAC: no rule allows it"
		}
		return true, ssar, nil
	})
}

// meshedPod is a pod the injector meshed with the cluster's values.
func (c *cluster) meshedPod(ns, name string, ready bool) *corev1.Pod {
	sum := sha256.Sum256(c.anchor.CertPEM)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{vocab.LabelControlPlaneNamespace: c.ns, "app": name},
			Annotations: map[string]string{vocab.AnnotationProxyVersion: vocab.DefaultVersion, vocab.AnnotationTrustRootSHA256: hex.EncodeToString(sum[:])},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: vocab.ProxyContainerName, Image: c.values.ProxyImage(), RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: vocab.ProxyContainerName, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

func (c *cluster) checker(t *testing.T, opts ...check.Option) *check.Checker {
	t.Helper()
	ch, err := check.New(c.kube, c.ext, append([]check.Option{check.WithNamespace(c.ns)}, opts...)...)
	require.NoError(t, err)
	return ch
}

func (c *cluster) run(t *testing.T, scope check.Scope, opts ...check.Option) check.Report {
	t.Helper()
	return c.checker(t, opts...).Check(testutil.Context(t, 0), scope)
}

// result returns the named result or fails the test.
func result(t *testing.T, r check.Report, category, name string) check.Result {
	t.Helper()
	res, ok := r.Find(category, name)
	require.True(t, ok, "no result %s / %q in %+v", category, name, r.Results)
	return res
}

// must returns v, or panics (failing the test) when a fake client call
// that cannot fail did.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("fake client: %v", err))
	}
	return v
}

var bg = context.Background()
