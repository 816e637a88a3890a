// Package discoverytest holds what tests of discovery sources share: the
// behaviour suite every source must pass (RunSuite, driven through a
// Harness that applies and deletes objects the source's own way), builders
// for the Kubernetes objects discovery reads (Service, EndpointSlice,
// Endpoint, Pod, Namespace, ServiceProfile), and helpers that serve a
// Source on a loopback gRPC server (Serve) and read Destination streams
// with a real generated client (Get, GetProfile), folding the messages
// into the state a proxy would hold.
//
// The suite checks, over real gRPC: the first message of every
// subscription and the no_endpoints rules; add/remove deltas; identities,
// protocol hints, opaque transport and metric labels from pods and
// namespaces; EndpointSlice conditions; duplicate addresses across slices;
// pods and services deleted while subscribed; pod-IP, cluster-IP and
// hostname lookups; malformed paths (InvalidArgument) and bad context
// tokens (tolerated); GetProfile with the default profile, updates,
// client-namespace profiles, pod endpoints and opaque services.
//
// Nothing here is for production use.
package discoverytest
