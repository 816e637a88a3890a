// Package proxy is the root of Weft's proxy API: the gRPC services and
// messages that proxies and the control plane exchange. The schema is Weft's
// own (apis/proto/*.proto) and is wire-compatible with linkerd2-proxy-api
// v0.20, so a Linkerd proxy can talk to Weft's control plane and a Weft proxy
// can talk to Linkerd's.
//
// This package itself holds no code. The generated Go lives in one
// subpackage per proto package:
//
//	proto package                   Go package                               services
//	io.linkerd.proxy.identity       apis/proxy/identity     (identity)       Identity.Certify
//	io.linkerd.proxy.destination    apis/proxy/destination  (destination)    Destination.Get, Destination.GetProfile
//	io.linkerd.proxy.inbound        apis/proxy/inbound      (inbound)        InboundServerPolicies.GetPort, .WatchPort
//	io.linkerd.proxy.outbound       apis/proxy/outbound     (outbound)       OutboundPolicies.Get, .Watch
//	io.linkerd.proxy.tap            apis/proxy/tap          (tap)            Tap.Observe
//	io.linkerd.proxy.meta           apis/proxy/meta         (meta)           -
//	io.linkerd.proxy.net            apis/proxy/net          (net)            -
//	io.linkerd.proxy.http_types     apis/proxy/httptypes    (httptypes)      -
//	io.linkerd.proxy.http_route     apis/proxy/httproute    (httproute)      -
//	io.linkerd.proxy.grpc_route     apis/proxy/grpcroute    (grpcroute)      -
//	io.linkerd.proxy.opaque_route   apis/proxy/opaqueroute  (opaqueroute)    -
//	io.linkerd.proxy.tls_route      apis/proxy/tlsroute     (tlsroute)       -
//
// Each service package has the usual protoc-gen-go-grpc API: a client
// constructor (for example destination.NewDestinationClient), a server
// interface to implement (destination.DestinationServer, embedding
// destination.UnimplementedDestinationServer), a Register function that takes
// a grpc.ServiceRegistrar, and the full method names as constants (for
// example destination.Destination_Get_FullMethodName).
//
// The net subpackage keeps the name net, like upstream; import it under
// another name (for example proxynet) next to the standard library's net.
//
// # Regenerating
//
// Edit the .proto files, then run
//
//	go generate ./apis/proxy
//
// which runs hack/gen-proto.sh: it builds protoc-gen-go and
// protoc-gen-go-grpc at the versions pinned in go.mod and runs protoc. The
// output is deterministic and checked in; to check that it is current, run
// the script and then git diff --exit-code apis/proxy.
//
// # Compatibility rules
//
// Field numbers, names, types, oneofs, reserved numbers, package, service and
// method names are fixed by the upstream schema. Never renumber or reuse a
// number; wire_test.go decodes hand-built upstream bytes to catch mistakes.
// schema_test.go compares every generated descriptor with a table of the
// v0.20.0 tag's facts; README.md says how the table was made.
package proxy

//go:generate bash ../../hack/gen-proto.sh
