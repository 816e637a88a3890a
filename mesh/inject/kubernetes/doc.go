// Package kubernetes feeds the injector from a Kubernetes API server: it
// provides the inject.NamespaceLookup the mutating webhook uses to read
// namespace annotations and labels.
//
// Namespaces are served from an informer cache. A namespace that is not in
// the cache yet (created a moment before its first pod) is read with a
// direct GET, so a new namespace's annotations are never missed.
//
//	nss, err := kubernetes.NewNamespaces(ctx, clientset)
//	if err != nil { ... }
//	defer nss.Close()
//	injector, err := webhook.NewInjector(values, nss)
//
// NewNamespaces returns once the cache is filled (or ctx ends); Close stops
// the informer and is idempotent. The namespaces returned are shared with
// the cache and must not be modified; inject.Render only reads them.
package kubernetes
