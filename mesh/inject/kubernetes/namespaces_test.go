package kubernetes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/kubernetes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ns(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestNamespacesServesAnnotationsFromTheCache(t *testing.T) {
	ctx := testutil.Context(t, 10*time.Second)
	client := fake.NewClientset(ns("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	nss, err := kubernetes.NewNamespaces(ctx, client)
	require.NoError(t, err)
	defer nss.Close()

	got, err := nss.Namespace(ctx, "shop")
	require.NoError(t, err)
	assert.Equal(t, "enabled", got.Annotations[vocab.AnnotationInject])

	_, err = nss.Namespace(ctx, "missing")
	require.Error(t, err)
	assert.True(t, errors.Is(err, inject.ErrNamespaceNotFound))
}

func TestNamespacesFindsANamespaceCreatedAfterStart(t *testing.T) {
	ctx := testutil.Context(t, 10*time.Second)
	client := fake.NewClientset()
	nss, err := kubernetes.NewNamespaces(ctx, client)
	require.NoError(t, err)
	defer nss.Close()

	_, err = client.CoreV1().Namespaces().Create(ctx, ns("fresh", map[string]string{vocab.AnnotationProxyLogLevel: "debug"}), metav1.CreateOptions{})
	require.NoError(t, err)
	// Found at once, through the cache or the direct read.
	got, err := nss.Namespace(ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, "debug", got.Annotations[vocab.AnnotationProxyLogLevel])
}

func TestNamespacesCloseIsIdempotentAndNewHonoursCancellation(t *testing.T) {
	ctx := testutil.Context(t, 10*time.Second)
	nss, err := kubernetes.NewNamespaces(ctx, fake.NewClientset())
	require.NoError(t, err)
	require.NoError(t, nss.Close())
	require.NoError(t, nss.Close())

	_, err = kubernetes.NewNamespaces(ctx, nil)
	require.Error(t, err)
}

func TestNewNamespacesGivesUpWhenTheCacheCannotFill(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := kubernetes.NewNamespaces(ctx, client)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}
