// Package kubernetes is the cluster backend of mesh/policy: a
// policy.Source fed by client-go informers.
//
// Core kinds (Namespaces, Pods, ServiceAccounts, Services) come from
// typed shared informers. Linkerd's policy resources and the Gateway API
// routes come from dynamic informers (no generated clientset is needed)
// and are converted from unstructured objects into the typed structs of
// apis/policy and sigs.k8s.io/gateway-api with
// runtime.DefaultUnstructuredConverter, strictly: an object with a field
// this build does not know is skipped and reported by Errors, never read
// as if the field were absent.
//
//	client, _ := kubernetes.NewForConfig(cfg)      // k8s.io/client-go
//	dyn, _ := dynamic.NewForConfig(cfg)
//	src, err := policyk8s.New(ctx, client, dyn)    // waits for the first lists
//	if err != nil { ... }
//	defer src.Close()
//	x, _ := policy.NewIndexer(ctx, src)
//
// New returns once every informer has listed (bounded by WithSyncTimeout,
// 60s by default; a CRD that is not installed makes it fail with the
// resource's name). Changes are debounced (WithDebounce, 50ms) and
// published as a fresh policy.Objects snapshot; the snapshot shares the
// informers' cached objects, which nothing may modify. Servers are read
// at their storage version v1beta3.
//
// The Gateway API routes follow their CRDs (WithGatewayAPI, default
// GatewayAPIAuto): the source watches the CustomResourceDefinitions
// httproutes.gateway.networking.k8s.io and
// grpcroutes.gateway.networking.k8s.io by name, starts a kind's route
// informer when its CRD is Established and serves v1, and stops it, taking
// its routes out of the snapshot, when the CRD is deleted. A kind's routes
// enter the snapshot only once its informer has listed them all.
// GatewayAPIWatched and the gauge policy.Metrics.GatewayAPIWatched
// (WithMetrics) tell which kinds are in. GatewayAPIRequired makes New fail
// without the CRDs; GatewayAPIOff (WithoutGatewayAPI) reads neither CRDs
// nor routes.
//
// Tests use client-go's fake clientset and fake dynamic client with
// ListKinds.
package kubernetes
