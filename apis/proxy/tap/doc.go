// Package tap holds the generated Go types for the proto package
// io.linkerd.proxy.tap (the Tap service, which streams the requests a proxy
// handles to an authorized observer).
//
// The code in *.pb.go is generated from apis/proto by hack/gen-proto.sh; do
// not edit it. See the parent package github.com/weftmesh/weft/apis/proxy
// for the layout and how to regenerate.
package tap
