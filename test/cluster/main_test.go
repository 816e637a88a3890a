//go:build clusterintegration

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/tools/cluster"
)

// images.json as hack/imagebuild writes it.
type builtImages struct {
	Images []struct {
		Name     string `json:"name"`
		Ref      string `json:"ref"`
		Manifest string `json:"manifest"`
		Config   string `json:"config"`
	} `json:"images"`
}

// env is the running cluster, its clients and this tree's images.
type env struct {
	state  *cluster.State
	cfg    *rest.Config
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	apiext apiextclient.Interface
	// images maps an image name (weft-proxy) to its reference and digests.
	images map[string]struct{ Ref, Config string }
	// weft is the CLI binary built with the images.
	weft string
}

// setup finds the cluster and the images, skipping (outside CI) or failing
// (CI=true) when they are not there.
func setup(t *testing.T) *env {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		unavailable("the suite needs root (it enters the node's network namespace)")
	}
	// Read here what decides skipping, so go test's cache keys on it.
	for _, v := range []string{"CI", "WEFT_CLUSTER_NAME", "WEFT_CLUSTER_DIR"} {
		_ = os.Getenv(v)
	}
	s, err := cluster.LoadFromEnv()
	if err != nil {
		unavailable("no cluster: %v (make cluster-up)", err)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, "images", "images.json"))
	if err != nil {
		unavailable("the images are not loaded: %v (make cluster-images)", err)
	}
	var built builtImages
	require.NoError(t, json.Unmarshal(b, &built))
	e := &env{state: s, images: map[string]struct{ Ref, Config string }{}, weft: filepath.Join(s.Dir, "images", "bin", "weft")}
	for _, im := range built.Images {
		e.images[im.Name] = struct{ Ref, Config string }{im.Ref, im.Config}
	}
	e.cfg, err = s.RESTConfig()
	require.NoError(t, err)
	e.cfg.QPS, e.cfg.Burst = 50, 100
	e.kube, err = kubernetes.NewForConfig(e.cfg)
	require.NoError(t, err)
	e.dyn, err = dynamic.NewForConfig(e.cfg)
	require.NoError(t, err)
	e.apiext, err = apiextclient.NewForConfig(e.cfg)
	require.NoError(t, err)
	return e
}

// timeout returns a context that ends after d or with the test.
func timeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// weftCmd runs this tree's weft binary (the one in the weft image) against
// the cluster and returns its exit status, stdout and stderr.
func (e *env) weftCmd(t *testing.T, stdin []byte, args ...string) (int, []byte, string) {
	t.Helper()
	recordRun(args)
	ctx := timeout(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, e.weft, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.state.Kubeconfig)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "weft %s: %v", strings.Join(args, " "), err)
		code = ee.ExitCode()
	}
	return code, out.Bytes(), errb.String()
}

// started is a weft command that runs until the test ends (a server such
// as the dashboard).
type started struct {
	out, errb testutil.SyncBuffer
}

func (s *started) stdout() string { return s.out.String() }
func (s *started) stderr() string { return s.errb.String() }

// weftStart starts this tree's weft binary against the cluster and stops
// it when the test ends.
func (e *env) weftStart(t *testing.T, args ...string) *started {
	t.Helper()
	recordRun(args)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, e.weft, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.state.Kubeconfig)
	s := &started{}
	cmd.Stdout, cmd.Stderr = &s.out, &s.errb
	require.NoError(t, cmd.Start(), "weft %s", strings.Join(args, " "))
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return s
}

// eventually polls check every 250ms until it returns nil, failing the
// test with the last error after d.
func eventually(t *testing.T, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := timeout(t, d)
	var last error
	for {
		if last = check(ctx); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, d, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
