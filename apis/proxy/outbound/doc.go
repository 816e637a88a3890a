// Package outbound holds the generated Go types for the proto package
// io.linkerd.proxy.outbound (the OutboundPolicies service: routing and balancing policy).
//
// The code in *.pb.go is generated from apis/proto by hack/gen-proto.sh; do
// not edit it. See the parent package github.com/weftmesh/weft/apis/proxy
// for the layout and how to regenerate.
package outbound
