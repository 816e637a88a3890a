// Package destination holds the generated Go types for the proto package
// io.linkerd.proxy.destination (the Destination service: endpoints and profiles).
//
// The code in *.pb.go is generated from apis/proto by hack/gen-proto.sh; do
// not edit it. See the parent package github.com/weftmesh/weft/apis/proxy
// for the layout and how to regenerate.
package destination
