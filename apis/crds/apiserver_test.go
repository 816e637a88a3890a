package crds_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/internal/testutil/kubeenv"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates every embedded CRD in a real API server and waits
// until each is established.
func installCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface) map[schema.GroupKind]string {
	t.Helper()
	all, err := crds.All()
	require.NoError(t, err)
	plurals := map[schema.GroupKind]string{}
	for _, crd := range all {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		require.NoError(t, err)
		_, err = dyn.Resource(crdGVR).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "creating %s", crd.Name)
		plurals[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
	}
	for _, crd := range all {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crdGVR).Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var got apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "%s becomes established", crd.Name)
	}
	return plurals
}

// warnings collects the warnings the API server sends.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func TestCRDsInARealAPIServer(t *testing.T) {
	env := kubeenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := env.Config()
	warned := &warnings{}
	cfg.WarningHandler = warned
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	plurals := installCRDs(ctx, t, dyn)

	t.Run("the server stores the Linkerd examples as the decoder reads them", func(t *testing.T) {
		storesExamplesAsDecoded(ctx, t, dyn, plurals)
		assert.Contains(t, warned.all(), "policy.linkerd.io/v1beta1 Server is deprecated; use policy.linkerd.io/v1beta3 Server")
	})
	t.Run("the server rejects what the decoder rejects", func(t *testing.T) {
		rejectsWhatTheDecoderRejects(ctx, t, dyn)
	})
}

func storesExamplesAsDecoded(ctx context.Context, t *testing.T, dyn dynamic.Interface, plurals map[schema.GroupKind]string) {
	objs, err := manifest.LoadPaths("../testdata")
	require.NoError(t, err)
	scheme := manifest.Scheme()

	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	for _, ns := range []string{"my-app", "booksapp", "linkerd", "linkerd-egress", "shop"} {
		_, err := dyn.Resource(nsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	created := 0
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		plural, ours := plurals[gvk.GroupKind()]
		if !ours {
			continue
		}
		gvr := gvk.GroupVersion().WithResource(plural)
		// What the decoder returns, defaults included.
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.Object)
		require.NoError(t, err)
		md := want["metadata"].(map[string]any)
		name, ns := md["name"].(string), md["namespace"].(string)

		// What the API server stores from the document as written (strict
		// field validation, as kubectl sends it), read back at the same
		// version through the dynamic client and converted to the Go type,
		// the way a Kubernetes backend reads it.
		raw, err := manifestAsWritten(o)
		require.NoError(t, err)
		_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, raw, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "%s", o)
		got, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "%s", o)
		typed, err := scheme.New(gvk)
		require.NoError(t, err)
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, typed), "%s", o)
		gotSpec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		require.NoError(t, err)
		assert.Equal(t, want["spec"], gotSpec["spec"], "%s: the decoder and the API server agree on the spec", o)
		created++
	}
	assert.Equal(t, 16, created, "every Linkerd example in testdata was created")

	// A v1beta1 Server reads back as the v1beta3 storage version, with the
	// v1beta3 default filled in.
	v1beta3 := schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}
	admin, err := dyn.Resource(v1beta3).Namespace("booksapp").Get(ctx, "admin", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "deny", admin.Object["spec"].(map[string]any)["accessPolicy"])
	assert.Equal(t, "opaque", admin.Object["spec"].(map[string]any)["proxyProtocol"])
}

// manifestAsWritten re-reads an object's document without defaults, as
// kubectl would send it: the decoder's copy has the defaults filled in.
func manifestAsWritten(o manifest.Object) (*unstructured.Unstructured, error) {
	objs, err := rawDocuments(o.Source)
	if err != nil {
		return nil, err
	}
	return objs[o.Document-1][max(o.Item-1, 0)], nil
}

func rejectsWhatTheDecoderRejects(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	servers := schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"misspelled field", map[string]any{"podSelectr": map[string]any{}, "podSelector": map[string]any{}, "port": int64(80)}, `unknown field "spec.podSelectr"`},
		{"both selectors", map[string]any{"podSelector": map[string]any{}, "externalWorkloadSelector": map[string]any{}, "port": int64(80)}, "exactly one of the fields in [podSelector externalWorkloadSelector] must be set"},
		{"unknown access policy", map[string]any{"podSelector": map[string]any{}, "port": int64(80), "accessPolicy": "allow"}, `Unsupported value: "allow"`},
		{"no port", map[string]any{"podSelector": map[string]any{}}, "spec.port: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
				"metadata": map[string]any{"name": "web", "namespace": "default"},
				"spec":     tc.spec,
			}}
			_, err := dyn.Resource(servers).Namespace("default").Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)

			js, err := obj.MarshalJSON()
			require.NoError(t, err)
			_, err = manifest.Decode("server.json", js)
			assert.Error(t, err, "the decoder rejects it too")
		})
	}
}
