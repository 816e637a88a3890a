// Package tapapi is tap for a cluster: an HTTP API, served behind the
// Kubernetes API server's aggregation layer (APIService
// v1alpha1.tap.weftmesh.io), through which a user taps the proxies of a
// namespace, a workload or a pod. The API server authenticates the user;
// this package's Server checks that the request came from the API server,
// asks an Authorizer (a SubjectAccessReview in a cluster) whether that
// user may `watch` RESOURCE/tap in the namespace, then taps the selected
// pods' proxies with its own mesh identity (the only tapper identity the
// proxies accept) and streams their events back.
//
// A request:
//
//	POST /apis/tap.weftmesh.io/v1alpha1/watch/namespaces/NS/tap                 (the whole namespace)
//	POST /apis/tap.weftmesh.io/v1alpha1/watch/namespaces/NS/RESOURCE/tap        (every RESOURCE)
//	POST /apis/tap.weftmesh.io/v1alpha1/watch/namespaces/NS/RESOURCE/NAME/tap   (one)
//
// RESOURCE is pods, deployments, statefulsets, daemonsets or jobs; the
// body is a JSON [Request] (filters and bounds). The answer is a stream of
// JSON [Message] values, one per line: events, counts of events dropped,
// warnings about pods that could not be tapped.
//
// What it trusts (see [RequestHeader]): the user and groups of the
// X-Remote-User and X-Remote-Group headers (the names the cluster
// configures), only on a TLS connection whose client certificate chains to
// the cluster's requestheader client CA and whose common name is one of
// the allowed names; any other request is refused before its headers are
// read. Then only what the Authorizer allows. From the proxies it trusts
// what package viz trusts of them (bounded tap events, over mutual TLS
// with each proxy's identity verified).
//
// Bounds: taps open at once per user, pods per tap, events per second per
// tap, and a fixed queue per tap: a reader slower than its proxies loses
// events (counted in Dropped messages) instead of making the server
// buffer them, and a reader that stops reading is cut off after a write
// timeout.
//
// The Kubernetes pieces (the SubjectAccessReview authorizer, the
// requestheader configuration read from
// kube-system/extension-apiserver-authentication, the client side through
// client-go) live in package mesh/viz/kubernetes; this package links no
// Kubernetes client.
package tapapi
