// Package model holds the values discovery and its clients share: an
// Endpoint (address, weight, TLS identity, protocol hint, opaque transport
// port, zone, metric labels), an EndpointSet, a Profile (ServiceProfile
// routes with their request and response conditions, retry budget,
// timeouts, traffic split, opaque protocol), the ContextToken a proxy
// sends about itself, and the conversions of each to and from the proxy
// API's messages (linkerd2-proxy-api v0.20).
//
// It is split from mesh/discovery so that a proxy's discovery client
// (mesh/discovery/client, mesh/dataplane/control) links nothing of
// Kubernetes: mesh/discovery translates Kubernetes objects, and the
// k8s.io packages' initialisation and code pages cost every proxy about
// 2.7 to 2.9 MB of resident memory (docs/benchmarks.md). internal/depstest keeps
// it so. mesh/discovery names every type and function here under its old
// name, so code written against mesh/discovery keeps compiling.
//
// Conversions from the wire check what a peer may get wrong: an address
// without an IP or with a port out of range is an error; a context token
// is bounded in size and its namespace must be an RFC 1123 label.
package model
