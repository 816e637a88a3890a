//go:build kubeintegration

package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/internal/testutil/kubeenv"
)

// env is the control plane shared by every test; nil when it could not be
// started outside CI (startErr says why).
var (
	env      *kubeenv.Env
	startErr error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ci := os.Getenv("CI") == "true"
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []kubeenv.Option{kubeenv.WithLogger(logger)}
	if os.Getenv("WEFT_KUBE_LOGS") != "" {
		opts = append(opts, kubeenv.WithProcessOutput(&lockedWriter{w: os.Stderr}))
	}
	// Generous: the first run may build the binaries (about 15 minutes on
	// two cores); afterwards starting takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	began := time.Now()
	e, err := kubeenv.Start(ctx, opts...)
	cancel()
	switch {
	case err == nil:
		fmt.Fprintf(os.Stderr, "integration: control plane ready in %s at %s\n", time.Since(began).Round(time.Millisecond), e.Host())
	case ci:
		fmt.Fprintf(os.Stderr, "integration: FAIL: CI=true and the control plane did not start:\n%v\n", err)
		return 1
	case errors.Is(err, kubeenv.ErrNoBinaries):
		startErr = err
		return m.Run()
	default:
		// The binaries are there but do not work: that is a failure
		// wherever it happens.
		fmt.Fprintf(os.Stderr, "integration: FAIL: the control plane did not start:\n%v\n", err)
		return 1
	}
	env = e

	code := m.Run()

	etcdPID, apiPID := e.PIDs()
	dir := e.Dir()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: FAIL: stopping the control plane: %v\n", err)
		code = 1
	}
	// Stop must leave nothing behind.
	for name, pid := range map[string]int{"etcd": etcdPID, "kube-apiserver": apiPID} {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			fmt.Fprintf(os.Stderr, "integration: FAIL: %s (pid %d) still running after Stop\n", name, pid)
			code = 1
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "integration: FAIL: %s still exists after Stop (%v)\n", dir, err)
		code = 1
	}
	return code
}

// clients are the admin clients of the shared control plane.
type clients struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	apiext apiextclient.Interface
}

// cluster returns admin clients, skipping the test when there is no
// control plane outside CI.
func cluster(t *testing.T) clients {
	t.Helper()
	// go test caches a package's result keyed on the environment variables
	// and files its tests read, but only from m.Run on: read again here
	// what TestMain read before, so a change invalidates a cached result.
	for _, v := range []string{"CI", kubeenv.EnvAPIServer, kubeenv.EnvEtcd, "WEFT_KUBE_CACHE", "WEFT_KUBE_NO_BUILD", "KUBE_VERSION", "ETCD_VERSION"} {
		_ = os.Getenv(v)
	}
	if env == nil {
		t.Skipf("no kube-apiserver/etcd (CI=true makes this a failure; `bash hack/kube-testenv.sh env` builds them): %v", startErr)
	}
	cfg := env.Config()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	ext, err := apiextclient.NewForConfig(cfg)
	require.NoError(t, err)
	return clients{kube: kube, dyn: dyn, apiext: ext}
}

// timeout returns a context that ends after d or with the test.
func timeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace with a unique name starting with prefix,
// and its "default" service account (no controller manager runs here to
// create it, and the ServiceAccount admission plugin wants it for pods).
// Namespaces are not deleted: without a controller manager they would stay
// Terminating, and etcd is thrown away at the end anyway.
func newNamespace(t *testing.T, c clients, prefix string, labels, annotations map[string]string) string {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := prefix + "-" + hex.EncodeToString(suffix)
	ensureNamespace(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}})
	return name
}

// ensureNamespace creates ns (unless it exists) and its default service
// account.
func ensureNamespace(t *testing.T, c clients, ns *corev1.Namespace) {
	t.Helper()
	ctx := timeout(t, 30*time.Second)
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "create namespace %s", ns.Name)
	}
	_, err = c.kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "create service account %s/default", ns.Name)
	}
}

// lockedWriter serializes the two processes' log copies to stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
