package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/weftmesh/weft/mesh/inject"
)

// Namespaces is an inject.NamespaceLookup backed by a namespace informer.
// The returned namespaces are shared with the cache: do not modify them.
type Namespaces struct {
	client  kubernetes.Interface
	lister  corelisters.NamespaceLister
	factory informers.SharedInformerFactory
	stop    chan struct{}
	once    sync.Once
}

// NewNamespaces starts a namespace informer and returns once its cache is
// filled, or with an error when ctx ends first. ctx bounds the start only
// (that wait); the informer runs until Close.
func NewNamespaces(ctx context.Context, client kubernetes.Interface) (*Namespaces, error) {
	if client == nil {
		return nil, errors.New("kubernetes: no client")
	}
	n := &Namespaces{client: client, stop: make(chan struct{})}
	n.factory = informers.NewSharedInformerFactory(client, 0)
	inf := n.factory.Core().V1().Namespaces()
	n.lister = inf.Lister()
	informer := inf.Informer()
	n.factory.Start(n.stop)

	// Stop waiting when ctx ends; the helper goroutine exits as soon as
	// the wait is over, whichever way.
	abort := make(chan struct{})
	waited := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			close(abort)
		case <-waited:
		}
	}()
	synced := cache.WaitForCacheSync(abort, informer.HasSynced)
	close(waited)
	<-exited
	if !synced {
		n.Close()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kubernetes: waiting for the namespace cache: %w", err)
		}
		return nil, errors.New("kubernetes: namespace cache did not sync")
	}
	return n, nil
}

// Namespace returns the named namespace from the cache, falling back to
// the API server; a namespace that does not exist yields an error wrapping
// inject.ErrNamespaceNotFound.
func (n *Namespaces) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := n.lister.Get(name)
	if err == nil {
		return ns, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubernetes: namespace %q: %w", name, err)
	}
	ns, err = n.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: %q", inject.ErrNamespaceNotFound, name)
	case err != nil:
		return nil, fmt.Errorf("kubernetes: namespace %q: %w", name, err)
	}
	return ns, nil
}

// Close stops the informer and waits for its goroutines. It is idempotent.
func (n *Namespaces) Close() error {
	n.once.Do(func() {
		close(n.stop)
		n.factory.Shutdown()
	})
	return nil
}
