package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// uninstallCluster is a fake cluster holding some of the install's
// objects (every other one, in deletion order) and one object of
// someone else's; it serves every kind of the install but the Prometheus
// Operator's PodMonitor.
type uninstallCluster struct {
	dyn     *dynamicfake.FakeDynamicClient
	clients uninstallClients
	present []install.Object // in deletion order
	all     []install.Object
}

func newUninstallCluster(t *testing.T) *uninstallCluster {
	t.Helper()
	all, err := installedObjects(inject.DefaultValues(), false)
	require.NoError(t, err)
	mapper := meta.NewDefaultRESTMapper(nil)
	var present []install.Object
	var stored []runtime.Object
	for i, o := range all {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "PodMonitor" {
			continue
		}
		scope := meta.RESTScopeRoot
		if o.GetNamespace() != "" {
			scope = meta.RESTScopeNamespace
		}
		mapper.Add(gvk, scope)
		if i%2 == 0 {
			present = append(present, o)
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			u.SetName(o.GetName())
			u.SetNamespace(o.GetNamespace())
			stored = append(stored, u)
		}
	}
	other := &unstructured.Unstructured{}
	other.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	other.SetName("not-weft")
	other.SetNamespace("weft")
	stored = append(stored, other)
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), stored...)
	return &uninstallCluster{dyn: dyn, clients: uninstallClients{dyn: dyn, mapper: mapper}, present: present, all: all}
}

func (c *uninstallCluster) run(t *testing.T, args ...string) (int, []byte, string) {
	t.Helper()
	cmd := uninstallCommand(func(string, string, time.Duration) (uninstallClients, error) { return c.clients, nil })
	var out, errb bytes.Buffer
	st := cmd.Run(testutil.Context(t, 0), args, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return st, out.Bytes(), errb.String()
}

func (c *uninstallCluster) deletes() int {
	n := 0
	for _, a := range c.dyn.Actions() {
		if a.GetVerb() == "delete" {
			n++
		}
	}
	return n
}

// objectRef is all a document of the manifest may hold.
type objectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
}

// parseManifest decodes every YAML document of data strictly (an unknown
// field fails) and as kubectl would, into unstructured objects.
func parseManifest(t *testing.T, data []byte) []objectRef {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var refs []objectRef
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var ref objectRef
		require.NoError(t, yaml.UnmarshalStrict(doc, &ref), "document %q", doc)
		u := &unstructured.Unstructured{}
		require.NoError(t, utilyaml.Unmarshal(doc, &u.Object))
		assert.Equal(t, ref.Kind, u.GetKind())
		assert.Equal(t, ref.Metadata.Name, u.GetName())
		refs = append(refs, ref)
	}
	return refs
}

func refOf(o install.Object) objectRef {
	var r objectRef
	gvk := o.GetObjectKind().GroupVersionKind()
	r.APIVersion, r.Kind = gvk.GroupVersion().String(), gvk.Kind
	r.Metadata.Name, r.Metadata.Namespace = o.GetName(), o.GetNamespace()
	return r
}

func TestUninstallPrintsOnlyAManifestOfTheObjectsThatExistAndDeletesNothing(t *testing.T) {
	c := newUninstallCluster(t)
	require.NotEmpty(t, c.present)
	st, out, errs := c.run(t)
	require.Equal(t, ExitOK, st, errs)

	var want []objectRef
	for _, o := range c.present {
		want = append(want, refOf(o))
	}
	got := parseManifest(t, out)
	assert.Equal(t, want, got, "exactly the objects found, in deletion order")
	assert.Contains(t, []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, got[0].Kind, "webhooks first")
	assert.Equal(t, "CustomResourceDefinition", got[len(got)-1].Kind, "CRDs last")
	for _, r := range got {
		if r.Kind == "Namespace" || r.Kind == "CustomResourceDefinition" || strings.HasPrefix(r.Kind, "Cluster") || strings.HasSuffix(r.Kind, "WebhookConfiguration") {
			assert.Empty(t, r.Metadata.Namespace, "%s %s is cluster-scoped", r.Kind, r.Metadata.Name)
		} else {
			assert.Equal(t, "weft", r.Metadata.Namespace, "%s %s", r.Kind, r.Metadata.Name)
		}
	}
	assert.NotContains(t, string(out), "not-weft")
	assert.Zero(t, c.deletes(), "weft uninstall deletes nothing")

	// The report is on stderr: the absent objects, the kind not served.
	assert.Contains(t, errs, "absent  PodMonitor weft/weft-proxies (kind not served)")
	assert.Equal(t, len(c.all)-len(c.present), strings.Count(errs, "absent  "))

	// --keep-crds leaves the CRDs out.
	st, out, errs = c.run(t, "--keep-crds")
	require.Equal(t, ExitOK, st, errs)
	refs := parseManifest(t, out)
	assert.Len(t, refs, len(got)-countKind(got, "CustomResourceDefinition"))
	assert.Zero(t, countKind(refs, "CustomResourceDefinition"))
}

func countKind(refs []objectRef, kind string) int {
	n := 0
	for _, r := range refs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

func TestUninstallPrintsNoManifestWhenALookupFails(t *testing.T) {
	c := newUninstallCluster(t)
	c.dyn.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "weft-identity-issuer", errors.New("RBAC says no"))
	})
	st, out, errs := c.run(t)
	assert.Equal(t, ExitFailure, st)
	assert.Empty(t, out, "half a manifest piped into kubectl delete would remove half a control plane")
	assert.Contains(t, errs, "forbidden")
	assert.Contains(t, errs, "no manifest printed")
}

func TestUninstallDeleteDeletesInOrderAndReportsOnStdout(t *testing.T) {
	c := newUninstallCluster(t)
	st, out, errs := c.run(t, "--delete", "--dry-run")
	require.Equal(t, ExitOK, st, errs)
	assert.Zero(t, c.deletes())
	assert.Equal(t, len(c.all)-1, strings.Count(string(out), "would delete "))

	st, out, errs = c.run(t, "--delete")
	require.Equal(t, ExitOK, st, errs)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	assert.Len(t, lines, len(c.all))
	assert.Equal(t, len(c.present), strings.Count(string(out), "deleted "))
	assert.True(t, strings.HasPrefix(lines[0], "deleted MutatingWebhookConfiguration") || strings.HasPrefix(lines[0], "deleted ValidatingWebhookConfiguration"), lines[0])
	assert.Equal(t, len(c.all), c.deletes()+1, "every served kind asked once (PodMonitor is not served)")

	// Nothing of the install is left, and the manifest is now empty.
	st, out, errs = c.run(t)
	require.Equal(t, ExitOK, st, errs)
	assert.Empty(t, out)
	assert.Contains(t, errs, "nothing to delete")
	_, err := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("weft").Get(testutil.Context(t, 0), "not-weft", metav1.GetOptions{})
	assert.NoError(t, err, "an object the install did not create stays")
}

func TestUninstallRefusesFlagsThatNeedDelete(t *testing.T) {
	c := newUninstallCluster(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait"}, "--wait goes with --delete"},
		{[]string{"--dry-run"}, "--dry-run goes with --delete"},
		{[]string{"now"}, `unexpected argument "now"`},
	} {
		st, out, errs := c.run(t, tc.args...)
		assert.Equal(t, ExitUsage, st, tc.args)
		assert.Empty(t, out)
		assert.Contains(t, errs, tc.want)
	}
	assert.Empty(t, c.dyn.Actions())
}
