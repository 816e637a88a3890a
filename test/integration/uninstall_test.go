//go:build kubeintegration

package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/restmapper"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/install"
)

// TestUninstallDeletesExactlyWhatInstallCreated installs a control plane
// (CRDs aside: the suite shares them) and runs `weft uninstall
// --keep-crds`, which lists exactly those objects and deletes nothing,
// then `weft uninstall --delete --keep-crds`: every object of the install is then gone (the namespace at
// least Terminating: no controller manager runs here to finish it), the
// CRDs and an unrelated object are still there, and a second run finds
// nothing to delete.
func TestUninstallDeletesExactlyWhatInstallCreated(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 3*time.Minute)
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := "weft-uninstall-" + hex.EncodeToString(suffix)
	values := filepath.Join(t.TempDir(), "values.yaml")
	testutil.WriteFile(t, values, []byte("controlPlaneNamespace: "+ns+"\n"))
	st, manifest, errs := installCLI(t, cli.InstallCommand(), "--values", values)
	require.Equal(t, cli.ExitOK, st, errs)
	objs, err := install.Decode(manifest)
	require.NoError(t, err)
	mapper := newMapper(c)
	var created []install.Object
	for _, o := range objs {
		if _, ok := o.(*apiextv1.CustomResourceDefinition); ok {
			continue
		}
		require.NoError(t, installApply(ctx, t, c, mapper, o, false), "create %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
		created = append(created, o)
	}
	// Something of someone else's in the same namespace stays.
	_, err = c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-weft"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	args := []string{"--values", values, "--keep-crds", "--kubeconfig", env.KubeconfigPath()}

	// Without --delete: a manifest of exactly the objects created (by
	// kind, name and namespace, in deletion order), nothing deleted.
	st, out, errs := installCLI(t, cli.UninstallCommand(), args...)
	require.Equal(t, cli.ExitOK, st, "%s %s", out, errs)
	t.Logf("weft uninstall:\n%s\nits report:\n%s", out, errs)
	listed := manifestRefs(t, out)
	var want []string
	for _, o := range created {
		want = append(want, fmt.Sprint(o.GetObjectKind().GroupVersionKind().GroupVersion(), " ", o.GetObjectKind().GroupVersionKind().Kind, " ", o.GetNamespace(), "/", o.GetName()))
	}
	assert.ElementsMatch(t, want, listed)
	require.NotEmpty(t, listed)
	assert.True(t, strings.Contains(listed[0], "WebhookConfiguration"), "webhooks go first: %s", listed[0])
	for _, o := range created {
		require.NoError(t, getCreated(ctx, t, c, mapper, o), "weft uninstall without --delete deleted %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
	}

	st, out, errs = installCLI(t, cli.UninstallCommand(), append([]string{"--delete"}, args...)...)
	require.Equal(t, cli.ExitOK, st, "%s %s", out, errs)
	t.Logf("weft uninstall --delete:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	assert.Len(t, lines, len(created)+countHAOnly(t, values, manifest), "one line per object of the install (HA's included)")
	assert.True(t, strings.HasPrefix(lines[0], "deleted MutatingWebhookConfiguration") || strings.HasPrefix(lines[0], "deleted ValidatingWebhookConfiguration"), "webhooks go first: %s", lines[0])

	for _, o := range created {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		ri, err := resourceFor(mapper, &unstructured.Unstructured{Object: m}, c.dyn)
		require.NoError(t, err)
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if o.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
			require.NoError(t, err)
			assert.NotNil(t, got.GetDeletionTimestamp(), "namespace %s is being deleted", ns)
			continue
		}
		assert.True(t, apierrors.IsNotFound(err), "%s %s still there (%v)", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	_, err = c.kube.CoreV1().ConfigMaps(ns).Get(ctx, "not-weft", metav1.GetOptions{})
	assert.NoError(t, err, "an object the install did not create is not deleted by name")
	for _, o := range objs {
		if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok {
			_, err := c.apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			assert.NoError(t, err, "--keep-crds keeps %s", crd.Name)
		}
	}

	st, out, errs = installCLI(t, cli.UninstallCommand(), append([]string{"--delete"}, args...)...)
	require.Equal(t, cli.ExitOK, st, "%s %s", out, errs)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "deleted ") {
			assert.Equal(t, "deleted Namespace "+ns, l, "a second run finds nothing left but the terminating namespace")
		}
	}
}

// manifestRefs reads weft uninstall's manifest strictly, document by
// document, as "apiVersion Kind namespace/name".
func manifestRefs(t *testing.T, data []byte) []string {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var refs []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return refs
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var ref struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace,omitempty"`
			} `json:"metadata"`
		}
		require.NoError(t, sigyaml.UnmarshalStrict(doc, &ref), "document %q", doc)
		refs = append(refs, fmt.Sprint(ref.APIVersion, " ", ref.Kind, " ", ref.Metadata.Namespace, "/", ref.Metadata.Name))
	}
}

// getCreated reads o back from the API server.
func getCreated(ctx context.Context, t *testing.T, c clients, mapper *restmapper.DeferredDiscoveryRESTMapper, o install.Object) error {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	ri, err := resourceFor(mapper, &unstructured.Unstructured{Object: m}, c.dyn)
	require.NoError(t, err)
	_, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	return err
}

// countHAOnly counts the objects only the --ha and --prometheus-operator
// rendering has (uninstall --delete looks for those too, reporting them
// absent here).
func countHAOnly(t *testing.T, values string, manifest []byte) int {
	t.Helper()
	st, ha, errs := installCLI(t, cli.InstallCommand(), "--values", values, "--ha", "--prometheus-operator")
	require.Equal(t, cli.ExitOK, st, errs)
	plain, err := install.Decode(manifest)
	require.NoError(t, err)
	haObjs, err := install.Decode(ha)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, o := range plain {
		have[fmt.Sprint(o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName())] = true
	}
	n := 0
	for _, o := range haObjs {
		if _, ok := o.(*apiextv1.CustomResourceDefinition); ok {
			continue
		}
		if !have[fmt.Sprint(o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName())] {
			n++
		}
	}
	return n
}
