// Package net holds the generated Go types for the proto package
// io.linkerd.proxy.net (IP addresses, networks and socket addresses).
//
// The code in *.pb.go is generated from apis/proto by hack/gen-proto.sh; do
// not edit it. See the parent package github.com/weftmesh/weft/apis/proxy
// for the layout and how to regenerate.
package net
