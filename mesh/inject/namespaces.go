package inject

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ErrNamespaceNotFound is wrapped by a [NamespaceLookup] that has no
// namespace of the requested name.
var ErrNamespaceNotFound = errors.New("inject: namespace not found")

// NamespaceLookup finds a namespace by name, so the injector can read the
// namespace's annotations and labels. The Kubernetes implementation lives in
// mesh/inject/kubernetes; [StaticNamespaces] is the in-memory one.
type NamespaceLookup interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// StaticNamespaces is a fixed set of namespaces keyed by name.
type StaticNamespaces map[string]*corev1.Namespace

// Namespace returns the named namespace or an error wrapping
// [ErrNamespaceNotFound].
func (s StaticNamespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := s[name]; ok && ns != nil {
		return ns, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNamespaceNotFound, name)
}

// NewStaticNamespaces indexes namespaces by name.
func NewStaticNamespaces(nss ...*corev1.Namespace) StaticNamespaces {
	s := make(StaticNamespaces, len(nss))
	for _, ns := range nss {
		s[ns.Name] = ns
	}
	return s
}
