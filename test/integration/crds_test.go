//go:build kubeintegration

package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/manifest"
)

// installed is the outcome of installing the CRDs, once per package.
var installed struct {
	once  sync.Once
	err   error
	names []string
	took  time.Duration
}

// requireCRDs installs Weft's CRDs (apis/crds) and the Gateway API HTTPRoute,
// GRPCRoute, TCPRoute and TLSRoute CRDs (from the sigs.k8s.io/gateway-api module Weft builds
// against), waits until each is Established, and fails t if that did not
// work. The first caller does the work; the others reuse the outcome.
func requireCRDs(t *testing.T, c clients) {
	t.Helper()
	installed.once.Do(func() {
		began := time.Now()
		installed.names, installed.err = installCRDs(c)
		installed.took = time.Since(began)
	})
	require.NoError(t, installed.err, "installing CRDs")
}

func installCRDs(c clients) ([]string, error) {
	ours, err := crds.All()
	if err != nil {
		return nil, err
	}
	gw, err := gatewayRouteCRDs()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var names []string
	for _, crd := range append(ours, gw...) {
		if _, err := c.apiext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return nil, fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		if err := waitEstablished(ctx, c, name); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// gatewayRouteCRDs reads the standard-channel HTTPRoute and GRPCRoute CRDs
// and the experimental-channel TCPRoute and TLSRoute CRDs shipped in the
// gateway-api module this repository requires.
func gatewayRouteCRDs() ([]*apiextv1.CustomResourceDefinition, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return nil, fmt.Errorf("locate the sigs.k8s.io/gateway-api module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	var list []*apiextv1.CustomResourceDefinition
	for _, f := range []string{
		"standard/gateway.networking.k8s.io_httproutes.yaml", "standard/gateway.networking.k8s.io_grpcroutes.yaml",
		"experimental/gateway.networking.k8s.io_tcproutes.yaml", "experimental/gateway.networking.k8s.io_tlsroutes.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		list = append(list, crd)
	}
	return list, nil
}

// waitEstablished polls the CRD until the API server reports it
// Established with its names accepted.
func waitEstablished(ctx context.Context, c clients, name string) error {
	for {
		crd, err := c.apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil && crdCondition(crd, apiextv1.Established) && crdCondition(crd, apiextv1.NamesAccepted) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %w (last get error: %v)", name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func crdCondition(crd *apiextv1.CustomResourceDefinition, typ apiextv1.CustomResourceDefinitionConditionType) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == typ {
			return cond.Status == apiextv1.ConditionTrue
		}
	}
	return false
}

func TestCRDsInstallCleanlyAndBecomeEstablished(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	t.Logf("installed %d CRDs and saw them Established in %s", len(installed.names), installed.took.Round(time.Millisecond))

	ours, err := crds.All()
	require.NoError(t, err)
	ctx := timeout(t, 30*time.Second)
	for _, want := range ours {
		got, err := c.apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(t, err, want.Name)
		assert.True(t, crdCondition(got, apiextv1.Established), "%s Established", want.Name)
		assert.True(t, crdCondition(got, apiextv1.NamesAccepted), "%s NamesAccepted", want.Name)
		for _, cond := range got.Status.Conditions {
			// A structural-schema or other complaint would show up as an
			// extra condition set to True.
			if cond.Type != apiextv1.Established && cond.Type != apiextv1.NamesAccepted {
				assert.NotEqual(t, apiextv1.ConditionTrue, cond.Status, "%s: condition %s: %s", want.Name, cond.Type, cond.Message)
			}
		}
		var served []string
		storage := ""
		for _, v := range got.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
			if v.Storage {
				storage = v.Name
			}
		}
		var wantServed []string
		for _, v := range want.Spec.Versions {
			wantServed = append(wantServed, v.Name)
		}
		assert.ElementsMatch(t, wantServed, served, "%s served versions", want.Name)
		assert.Equal(t, []string{storage}, got.Status.StoredVersions, "%s stored versions", want.Name)
	}

	// The API server now serves every kind the CRDs declare.
	mapper := newMapper(c)
	for _, crd := range ours {
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if assert.NoError(t, err, "%s is served", gvk) {
				assert.Equal(t, crd.Spec.Names.Plural, m.Resource.Resource)
			}
		}
	}
}

// example is one object of an example manifest, as its author wrote it.
type example struct {
	file string
	obj  *unstructured.Unstructured
}

func (e example) String() string {
	return fmt.Sprintf("%s: %s %s", filepath.Base(e.file), e.obj.GetKind(), key(e.obj.GetNamespace(), e.obj.GetName()))
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func TestEveryExampleManifestDecodesAndIsAcceptedByTheAPIServer(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	files, err := filepath.Glob("../../apis/testdata/*")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no example manifests in apis/testdata")

	// Every file decodes strictly with our types, and the raw documents
	// are what is sent, byte for byte as the author wrote them.
	var examples []example
	for _, f := range files {
		objs, err := manifest.DecodeFile(f)
		require.NoError(t, err, "decode %s", f)
		raw := rawObjects(t, f)
		require.Len(t, raw, len(objs), "%s: the manifest decoder and the raw YAML reader disagree on the number of objects", f)
		for _, u := range raw {
			examples = append(examples, example{file: f, obj: u})
		}
	}

	// Namespaces first (the examples' own, then any other they use), then
	// everything else.
	sort.SliceStable(examples, func(i, j int) bool {
		return examples[i].obj.GetKind() == "Namespace" && examples[j].obj.GetKind() != "Namespace"
	})
	mapper := newMapper(c)
	seen := map[string]string{}
	kinds := map[string]int{}
	for _, ex := range examples {
		t.Run(ex.String(), func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			if ns := ex.obj.GetNamespace(); ns != "" {
				ensureNamespace(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
			id := ex.obj.GroupVersionKind().GroupKind().String() + " " + key(ex.obj.GetNamespace(), ex.obj.GetName())
			ri, err := resourceFor(mapper, ex.obj, c.dyn)
			require.NoError(t, err)

			opts := metav1.CreateOptions{FieldValidation: "Strict"}
			if first, dup := seen[id]; dup {
				// Two examples share a name: the second is checked with a
				// server-side dry run of an update, which validates it
				// exactly like a create.
				t.Logf("%s was already created from %s; dry-run updating it", id, filepath.Base(first))
				cur, err := ri.Get(ctx, ex.obj.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				obj := ex.obj.DeepCopy()
				obj.SetResourceVersion(cur.GetResourceVersion())
				_, err = ri.Update(ctx, obj, metav1.UpdateOptions{FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll}})
				require.NoError(t, err, "the API server rejected the example")
				return
			}
			stored, err := ri.Create(ctx, ex.obj, opts)
			if ex.obj.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
				stored, err = ri.Get(ctx, ex.obj.GetName(), metav1.GetOptions{})
			}
			require.NoError(t, err, "the API server rejected the example")
			seen[id] = ex.file
			kinds[ex.obj.GetKind()]++

			// What the API server stores (with its defaults, managedFields
			// and so on) decodes strictly with our types, as the same kind
			// and name.
			js, err := stored.MarshalJSON()
			require.NoError(t, err)
			back, err := manifest.Decode("stored "+ex.String(), js)
			require.NoError(t, err, "the stored object does not decode strictly")
			require.Len(t, back, 1)
			accessor, err := meta.Accessor(back[0].Object)
			require.NoError(t, err)
			assert.Equal(t, ex.obj.GetName(), accessor.GetName())
			assert.Equal(t, ex.obj.GetKind(), back[0].Object.GetObjectKind().GroupVersionKind().Kind)
		})
	}
	t.Logf("created %d example objects: %v", len(seen), kinds)
	for _, k := range []string{"Server", "ServerAuthorization", "AuthorizationPolicy", "MeshTLSAuthentication", "NetworkAuthentication", "HTTPLocalRateLimitPolicy", "EgressNetwork", "HTTPRoute", "GRPCRoute", "ServiceProfile"} {
		assert.NotZero(t, kinds[k], "the examples hold no %s: this test would not notice it breaking", k)
	}
}

// rawObjects reads a YAML or JSON stream into unstructured objects, with
// Lists expanded into their items.
func rawObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, path)
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			list, err := u.ToList()
			require.NoError(t, err, path)
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}

func newMapper(c clients) *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))
}

// resourceFor finds the REST resource of obj, refreshing the discovery
// cache once if the kind is unknown (a CRD installed after the cache
// filled).
func resourceFor(mapper *restmapper.DeferredDiscoveryRESTMapper, obj runtime.Object, dyn dynamic.Interface) (dynamic.ResourceInterface, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	u := obj.(*unstructured.Unstructured)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

func TestAPIServerRejectsObjectsThatViolateTheCRDSchemas(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ns := newNamespace(t, c, "schema", nil, nil)
	mapper := newMapper(c)

	for _, tc := range []struct {
		name string
		yaml string
		// want are substrings of the API server's error, naming the field.
		want []string
	}{{
		name: "Server with a proxyProtocol outside the enum",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: bad-protocol}
spec: {podSelector: {matchLabels: {app: web}}, port: 8080, proxyProtocol: HTTP/3}`,
		want: []string{`spec.proxyProtocol: Unsupported value: "HTTP/3"`},
	}, {
		name: "Server with an accessPolicy outside the enum",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: bad-access}
spec: {podSelector: {}, port: 8080, accessPolicy: allow-everything}`,
		want: []string{`spec.accessPolicy: Unsupported value: "allow-everything"`},
	}, {
		name: "Server without a port",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: no-port}
spec: {podSelector: {}}`,
		want: []string{`spec.port: Required value`},
	}, {
		name: "Server with both selectors",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: two-selectors}
spec: {podSelector: {}, externalWorkloadSelector: {}, port: 8080}`,
		want: []string{`exactly one of the fields in [podSelector externalWorkloadSelector] must be set`},
	}, {
		name: "Server with a misspelled field (strict field validation)",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: misspelled}
spec: {podSelectr: {}, port: 8080}`,
		want: []string{`unknown field "spec.podSelectr"`},
	}, {
		name: "ServerAuthorization naming and selecting its server",
		yaml: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: both}
spec:
  server: {name: web, selector: {matchLabels: {app: web}}}
  client: {unauthenticated: true}`,
		want: []string{`exactly one of the fields in [name selector] must be set`},
	}, {
		name: "MeshTLSAuthentication with identities and identityRefs",
		yaml: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: both}
spec:
  identities: ["*"]
  identityRefs: [{kind: ServiceAccount, name: web}]`,
		want: []string{`exactly one of the fields in [identities identityRefs] must be set`},
	}, {
		name: "policy HTTPRoute filter whose body does not match its type",
		yaml: `
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: bad-filter}
spec:
  parentRefs: [{name: web-http, kind: Server, group: policy.linkerd.io}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestRedirect: {statusCode: 302}`,
		want: []string{`filter.requestHeaderModifier must be set`},
	}, {
		name: "ServiceProfile route without a condition",
		yaml: `
apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.default.svc.cluster.local}
spec:
  routes: [{name: GET /}]`,
		want: []string{`spec.routes[0].condition: Required value`},
	}, {
		name: "ServiceProfile retry budget without a ttl",
		yaml: `
apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: api.default.svc.cluster.local}
spec:
  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10}`,
		want: []string{`spec.retryBudget.ttl: Required value`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			u := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal([]byte(tc.yaml), &u.Object))
			u.SetNamespace(ns)
			ri, err := resourceFor(mapper, u, c.dyn)
			require.NoError(t, err)

			_, err = ri.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
			require.Error(t, err, "the API server accepted an object its CRD schema forbids")
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err), "want 422 Invalid or 400 BadRequest, got %v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			_, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "nothing is stored: %v", err)
		})
	}
}
