// Package discovery tells proxies where a destination's endpoints are,
// which identity each must present, and how to talk to it. It serves the
// proxy API's io.linkerd.proxy.destination.Destination service (Get and
// GetProfile), wire-compatible with linkerd2-proxy-api v0.20, so Linkerd
// proxies and Weft proxies can both use it.
//
// # The pieces
//
// A newcomer can read the package in this order:
//
//  1. The model (subpackage model): Endpoint (address, weight, TLS identity,
//     protocol hint, opaque transport port, zone, metric labels),
//     EndpointSet, and Profile (ServiceProfile routes with request
//     conditions and response classes, retry budget, timeouts, opaque
//     protocol, traffic split). These are plain values with no proto or
//     Kubernetes types in them. They, their proxy API conversions and
//     ParseContextToken live in the subpackage model, which links nothing
//     of Kubernetes so that proxies do not carry this package's
//     translators; this package names each under its old name.
//  2. Destination paths (target.go): ParseTarget reads what proxies send,
//     <svc>.<ns>.svc.<cluster-domain>[:port],
//     <hostname>.<svc>.<ns>.svc.<cluster-domain>[:port], a pod IP or a
//     Service cluster IP with a port. Anything else is an error wrapping
//     ErrInvalidTarget, which the server answers with InvalidArgument.
//     ParseContextToken reads the JSON context token ({"ns", "nodeName",
//     "pod"}) proxies send; a bad token is logged and ignored.
//  3. Translation (cluster.go, translate.go): the pure core that turns
//     Kubernetes objects (Services, discovery.k8s.io/v1 EndpointSlices,
//     Pods, Namespaces, ServiceProfiles) into endpoint sets and profiles.
//     ResolveEndpoints and ResolveProfile expose it as functions of values,
//     for tests and tools; TranslateServiceProfile checks and converts one
//     ServiceProfile.
//  4. Fan-out (topic.go, snapshot.go, index.go): Index stores the objects
//     and keeps one Topic per watched destination. A topic's value is an
//     immutable snapshot computed once per change and shared by every
//     subscriber; Publish never blocks; a slow subscriber only ever sees
//     the latest snapshot; the proxy API messages for a change are built
//     once and sent to all. The last subscriber to leave frees the topic.
//  5. The server (server.go): Server implements Destination over any
//     Source (Index is one) and mounts on a caller-owned grpc.Server with
//     Register.
//
// Sources live in subpackages and feed an Index: kubernetes (client-go
// informers, never the legacy v1 Endpoints API) and static (manifest
// files, reloaded on change, keeping the last good state when a file is
// bad). Both pass the same behaviour suite, in discoverytest. The
// proxy-side client is in client, with a gRPC resolver.Builder in
// resolver.
//
// # Semantics
//
// Get follows the proxy API's contract: the first message of every
// subscription is sent at once; no_endpoints{exists:false} answers a
// destination that does not exist (no such Service, an ExternalName
// Service, an IP that is neither a cluster IP nor a live pod);
// no_endpoints{exists:true} only a Service that exists without endpoints;
// afterwards only add/remove deltas are sent, adds first. Adds carry at
// most 1000 addresses each.
//
// Endpoints come from the Service's EndpointSlices of its primary address
// family, on the slice port named like the Service port (a port the
// Service does not declare is used as is, like Linkerd). Endpoints that
// are ready (or whose ready condition is unset) are used; when none is,
// endpoints that are serving while terminating are used instead, as
// kube-proxy does. An address listed by several slices is sent once.
// An endpoint whose pod is unknown is left out rather than sent without
// its identity.
//
// A pod is meshed when it has the label linkerd.io/control-plane-ns. A
// meshed pod's endpoints carry the hint h2 (or opaque, with the proxy's
// inbound port as opaque transport, on opaque ports), and, when the label
// names this control plane, the TLS identity
// <serviceaccount>.<namespace>.serviceaccount.identity.<control-plane-ns>.<trust-domain>.
// Ports listed in config.linkerd.io/skip-inbound-ports get neither.
// Opaque ports come from config.linkerd.io/opaque-ports on the pod, else
// its namespace, else DefaultOpaquePorts; lists take ports, ranges
// (4000-4100) and container port names. Metric labels are namespace and
// service on the set, and pod, serviceaccount, the owner (deployment,
// statefulset, ...) and zone on each endpoint.
//
// GetProfile sends the ServiceProfile named after the service's FQDN,
// from the client's namespace (context token) if there is one, else from
// the service's namespace, or the default profile (no routes, retry
// budget 20% + 10/s over 10s); and again on every change. opaque_protocol
// follows the Service's (then namespace's) opaque-ports annotation. A
// pod-IP or pod-hostname lookup carries the endpoint itself. An invalid
// ServiceProfile is logged and served as the default profile.
//
// # Metrics
//
// See Metrics and NewPrometheusMetrics: subscriptions, topics, snapshots
// published, objects rejected and messages sent.
package discovery
