// Package kubernetes feeds a discovery index from a Kubernetes API server.
//
// New starts client-go informers on the objects discovery reads and
// applies every event to a Sink (a *discovery.Index):
//
//   - Services (core/v1), for ports, cluster IPs and opaque-ports
//     annotations;
//   - EndpointSlices (discovery.k8s.io/v1), for endpoint addresses and
//     their ready, serving and terminating conditions. The legacy v1
//     Endpoints API is never read;
//   - Pods (core/v1), for service accounts (identities), mesh membership,
//     opaque and skipped ports, owners and pod-IP lookups. Pods are
//     trimmed by an informer transform to the fields discovery reads,
//     which keeps the cache small in large clusters;
//   - Namespaces (core/v1), for namespace-wide opaque-ports annotations;
//   - ServiceProfiles (linkerd.io/v1alpha2), through the dynamic client
//     and a dynamic informer, converted from unstructured to the typed
//     apis/serviceprofile/v1alpha2 object. A ServiceProfile that does not
//     convert (unknown field, wrong type) is logged, counted and ignored:
//     the previous version stays in effect.
//
// New returns once every informer has delivered its initial list, so a
// server started afterwards answers from a complete view. Close stops the
// informers and waits for their goroutines.
//
//	idx, _ := discovery.NewIndex()
//	src, err := kubernetes.New(ctx, idx, clientset, dynamicClient)
//	if err != nil { ... }
//	defer src.Close()
//	srv, _ := discovery.NewServer(idx)
//	srv.Register(grpcServer)
//
// The same behaviour suite (mesh/discovery/discoverytest) runs against
// this source, with client-go's fake clientset and fake dynamic client,
// and against the static file source.
package kubernetes
