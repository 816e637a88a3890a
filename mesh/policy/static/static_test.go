package static_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/internal/sourcetest"
	"github.com/weftmesh/weft/mesh/policy/static"
)

// harness keeps one file per object in a directory.
type harness struct {
	dir   string
	src   *static.Source
	files map[string]bool
}

func fileName(o runtime.Object) string {
	m, _ := meta.Accessor(o)
	kind := o.GetObjectKind().GroupVersionKind().Kind
	return strings.ToLower(fmt.Sprintf("%s-%s-%s.yaml", kind, m.GetNamespace(), m.GetName()))
}

func (h *harness) write(t *testing.T, objs []runtime.Object) {
	t.Helper()
	keep := map[string]bool{}
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		require.NoError(t, err)
		name := fileName(o)
		keep[name] = true
		tmp := filepath.Join(h.dir, "."+name+".tmp")
		require.NoError(t, os.WriteFile(tmp, data, 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(h.dir, name)))
	}
	for name := range h.files {
		if !keep[name] {
			require.NoError(t, os.Remove(filepath.Join(h.dir, name)))
		}
	}
	h.files = keep
}

func (h *harness) Source() policy.Source { return h.src }

func (h *harness) Set(t *testing.T, objs ...runtime.Object) { h.write(t, objs) }

func TestStaticSourcePassesTheSharedBehaviourSuite(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, initial ...runtime.Object) sourcetest.Harness {
		h := &harness{dir: t.TempDir()}
		h.write(t, initial)
		src, err := static.New(testutil.Context(t, 0), []string{h.dir}, static.WithPollInterval(50*time.Millisecond), static.WithDebounce(10*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = src.Close() })
		h.src = src
		return h
	})
}

const server = `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
  namespace: my-app
spec:
  podSelector:
    matchLabels:
      app: web
  port: %s
`

// writeAtomic replaces path in one step (a new file renamed over it), as
// tools that manage configuration files do. os.WriteFile truncates first,
// and a reload that lands between the truncation and the write reads an
// empty, valid manifest set.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func TestABadFileKeepsTheLastGoodObjectsAndReportsTheError(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(server, "http")), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := static.New(ctx, []string{dir}, static.WithPollInterval(20*time.Millisecond), static.WithDebounce(5*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()
	require.Len(t, src.Objects().Servers, 1)

	bad := strings.Replace(fmt.Sprintf(server, "http"), "podSelector", "podSelectr", 1)
	writeAtomic(t, path, bad)
	testutil.Eventually(t, 5*time.Second, func() bool { return src.Err() != nil }, "the reload error")
	assert.ErrorContains(t, src.Err(), "server.yaml")
	assert.ErrorContains(t, src.Err(), "podSelectr")
	require.Len(t, src.Objects().Servers, 1, "the last good objects stay")
	assert.Equal(t, "http", src.Objects().Servers[0].Spec.Port.StrVal)

	writeAtomic(t, path, fmt.Sprintf(server, "8080"))
	testutil.Eventually(t, 5*time.Second, func() bool { return src.Err() == nil }, "a good reload")
	require.Len(t, src.Objects().Servers, 1)
	assert.Equal(t, int32(8080), src.Objects().Servers[0].Spec.Port.IntVal)
	assert.Equal(t, 2, src.Loads())
}

func TestWithoutNotifyPollingAloneSeesAChange(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(server, "http")), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := static.New(ctx, []string{dir}, static.WithoutNotify(), static.WithPollInterval(20*time.Millisecond), static.WithDebounce(5*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()

	movePortAndWait(t, src, path, "no reload without notifications")
}

// movePortAndWait rewrites the Server at path from port "http" to 8080 and
// waits for src to publish it.
func movePortAndWait(t *testing.T, src *static.Source, path, failure string) {
	t.Helper()
	writeAtomic(t, path, fmt.Sprintf(server, "8080"))
	select {
	case <-src.Updated():
	case <-time.After(10 * time.Second):
		t.Fatal(failure)
	}
	require.Len(t, src.Objects().Servers, 1)
	assert.Equal(t, int32(8080), src.Objects().Servers[0].Spec.Port.IntVal)
}

func TestNewFailsOnABadFirstLoad(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("apiVersion: v1\nkind: Nodez\nmetadata: {name: a}\n"), 0o600))
	_, err := static.New(testutil.Context(t, 0), []string{dir})
	assert.ErrorContains(t, err, "x.yaml")
	_, err = static.New(testutil.Context(t, 0), nil)
	assert.Error(t, err)
}

func TestCloseIsIdempotentAndStopsTheWatcher(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	src, err := static.New(context.Background(), []string{dir})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, src.Close()) }()
	}
	wg.Wait()
}

// TestNewsContextBoundsTheStartOnly: the source keeps following its files
// after the context New was given ends, until Close.
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(server, "http")), 0o600))
	startCtx, endStart := context.WithCancel(context.Background())
	src, err := static.New(startCtx, []string{dir}, static.WithPollInterval(20*time.Millisecond), static.WithDebounce(5*time.Millisecond))
	require.NoError(t, err)
	endStart()

	movePortAndWait(t, src, path, "no reload after New's context ended")
	require.NoError(t, src.Close()) // goleak checks Close stopped the watcher

	_, err = static.New(startCtx, []string{dir})
	assert.ErrorIs(t, err, context.Canceled, "New with an ended context fails")
}
