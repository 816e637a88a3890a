package static_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"github.com/weftmesh/weft/mesh/discovery/static"
	"go.uber.org/goleak"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const revAnnotation = "discoverytest.weft.dev/rev"

type harness struct {
	idx *discovery.Index
	src *static.Source
	dir string
	rev atomic.Int64
}

func newHarness(t *testing.T, opts ...discovery.Option) *harness {
	t.Helper()
	idx, err := discovery.NewIndex(opts...)
	require.NoError(t, err)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := static.New(ctx, idx, []string{dir}, static.WithDebounce(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, src.Close())
		require.NoError(t, idx.Close())
	})
	return &harness{idx: idx, src: src, dir: dir}
}

func (h *harness) Index() *discovery.Index { return h.idx }

func fileName(o runtime.Object) (string, string, metav1.Object) {
	m, _ := meta.Accessor(o)
	kind := o.GetObjectKind().GroupVersionKind().Kind
	return fmt.Sprintf("%s-%s-%s.yaml", strings.ToLower(kind), m.GetNamespace(), strings.ReplaceAll(m.GetName(), ".", "_")), kind, m
}

// writeAtomic writes data under a hidden temporary name (which the loader
// skips) and renames it into place, as editors and tools do.
func writeAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// Apply writes each object to its own file, stamped with a revision
// annotation, and waits until the index holds that revision.
func (h *harness) Apply(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		o = o.DeepCopyObject()
		name, kind, m := fileName(o)
		rev := strconv.FormatInt(h.rev.Add(1), 10)
		ann := m.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[revAnnotation] = rev
		m.SetAnnotations(ann)
		data, err := yaml.Marshal(o)
		require.NoError(t, err)
		writeAtomic(t, filepath.Join(h.dir, name), data)
		testutil.Eventually(t, 0, func() bool {
			got, ok := h.idx.Object(kind, m.GetNamespace(), m.GetName())
			if !ok {
				return false
			}
			gm, _ := meta.Accessor(got)
			return gm.GetAnnotations()[revAnnotation] == rev
		}, fmt.Sprintf("index holds %s rev %s (last reload error: %v)", name, rev, h.src.Err()))
	}
}

// Delete removes each object's file and waits until the index drops it.
func (h *harness) Delete(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		name, kind, m := fileName(o)
		require.NoError(t, os.Remove(filepath.Join(h.dir, name)))
		testutil.Eventually(t, 0, func() bool {
			_, ok := h.idx.Object(kind, m.GetNamespace(), m.GetName())
			return !ok
		}, fmt.Sprintf("index drops %s", name))
	}
}

func TestStaticSourcePassesTheSourceSuite(t *testing.T) {
	discoverytest.RunSuite(t, func(t *testing.T, opts ...discovery.Option) discoverytest.Harness {
		return newHarness(t, opts...)
	})
}

const webManifests = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-a
  namespace: shop
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints:
- addresses: ["10.0.0.1"]
  conditions: {ready: true}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: web:1
`

func TestBadFileKeepsLastGoodStateAndReportsTheError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	writeAtomic(t, file, []byte(webManifests))
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	src, err := static.New(context.Background(), idx, []string{dir}, static.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()
	conn := discoverytest.Serve(t, idx)
	s := discoverytest.Get(t, conn, "web.shop.svc.cluster.local:80", "")
	s.WaitFor(t, "the endpoint", func(st discoverytest.State) bool { return st.Has("10.0.0.1:8080") })

	// A typo in a field name: strict decoding refuses the whole file.
	writeAtomic(t, file, []byte(strings.Replace(webManifests, "addressType: IPv4", "adressType: IPv4", 1)))
	testutil.Eventually(t, 0, func() bool { return src.Err() != nil }, "the condition")
	assert.Contains(t, src.Err().Error(), "web.yaml")
	assert.Contains(t, src.Err().Error(), "adressType")
	s.Quiet(t, 200*time.Millisecond)
	assert.True(t, s.State().Has("10.0.0.1:8080"), "the last good state is still served")
	assert.Equal(t, uint64(1), src.Revision())

	// Fixed, with a second endpoint: the source recovers.
	writeAtomic(t, file, []byte(strings.Replace(webManifests, `- addresses: ["10.0.0.1"]`, "- addresses: [\"10.0.0.2\"]\n- addresses: [\"10.0.0.1\"]", 1)))
	s.WaitFor(t, "the second endpoint", func(st discoverytest.State) bool { return st.Has("10.0.0.2:8080") })
	// The source records the reload's outcome after the index has the
	// objects (and may already have told subscribers): wait for it.
	testutil.Eventually(t, 0, func() bool { return src.Revision() == 2 }, "the second successful load counted")
	assert.NoError(t, src.Err())
}

func TestDuplicateObjectAcrossFilesIsAnErrorNamingBothFiles(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), []byte(webManifests))
	writeAtomic(t, filepath.Join(dir, "b.yaml"), []byte(webManifests))
	_, err := static.Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "b.yaml")
	assert.Contains(t, err.Error(), "already defined in "+filepath.Join(dir, "a.yaml"))

	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	_, err = static.New(context.Background(), idx, []string{dir})
	require.Error(t, err, "a first load that fails is fatal")
	assert.Zero(t, idx.Stats().Objects["Service"], "nothing was applied")
}

func TestInvalidServiceProfileIsRefusedWithFileAndRoute(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "sp.yaml"), []byte(`
apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata:
  name: web.shop.svc.cluster.local
  namespace: shop
spec:
  routes:
  - name: books
    condition:
      pathRegex: "/books/(["
`))
	_, err := static.Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sp.yaml")
	assert.Contains(t, err.Error(), "spec.routes[0].condition.pathRegex")
}

func TestObjectsWithoutNamespaceGoToDefaultAndOtherKindsAreSkipped(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "svc.yaml"), []byte(`
apiVersion: v1
kind: Service
metadata:
  name: api
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data: {a: b}
`))
	objs, err := static.Load(dir)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	m, _ := meta.Accessor(objs[0])
	assert.Equal(t, "default", m.GetNamespace())
}

func TestSingleFilePathIsWatchedThroughRenames(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mesh.yaml")
	writeAtomic(t, file, []byte(webManifests))
	writeAtomic(t, filepath.Join(dir, "unrelated.yaml"), []byte("not: [valid"))
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	src, err := static.New(context.Background(), idx, []string{file}, static.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()
	writeAtomic(t, file, []byte(strings.Replace(webManifests, "10.0.0.1", "10.0.0.7", 1)))
	testutil.Eventually(t, 0, func() bool {
		o, ok := idx.Object("EndpointSlice", "shop", "web-a")
		return ok && o.(*discoveryv1.EndpointSlice).Endpoints[0].Addresses[0] == "10.0.0.7"
	}, "the rewritten file is reloaded")
	assert.Equal(t, uint64(2), src.Revision())
	assert.NoError(t, src.Err(), "files beside the watched one are not read")
}

func TestNewSubdirectoryIsWatched(t *testing.T) {
	dir := t.TempDir()
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	src, err := static.New(context.Background(), idx, []string{dir}, static.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()
	sub := filepath.Join(dir, "team-a")
	require.NoError(t, os.Mkdir(sub, 0o755))
	// The source adds the new directory to its watch before it reloads for
	// it; the reload (revision 2) is the event that says the watch is there.
	testutil.Eventually(t, 0, func() bool { return src.Revision() >= 2 }, "the reload after the new directory")
	writeAtomic(t, filepath.Join(sub, "web.yaml"), []byte(webManifests))
	testutil.Eventually(t, 0, func() bool { return idx.Stats().Objects["Service"] == 1 }, "the condition")
}

func TestNewRefusesMissingPathsAndNoPaths(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	_, err = static.New(context.Background(), idx, nil)
	assert.ErrorContains(t, err, "no manifest paths")
	_, err = static.New(context.Background(), idx, []string{filepath.Join(t.TempDir(), "missing")})
	assert.ErrorContains(t, err, "missing")
}

func TestCloseIsIdempotent(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	src, err := static.New(context.Background(), idx, []string{t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, src.Close())
	require.NoError(t, src.Close())
}
