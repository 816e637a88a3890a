// Command proxyapi-facts prints the wire facts (package, imports,
// services, methods, messages, fields, oneofs, enums, reserved ranges) of
// the io.linkerd.proxy.* files in a protoc descriptor set, one per line,
// sorted: the format of apis/proxy/testdata/*.facts.
//
//	protoc -I proto -I /usr/include --include_imports -o /tmp/set.pb proto/*.proto
//	go run ./hack/proxyapi-facts /tmp/set.pb > apis/proxy/testdata/linkerd2-proxy-api-vX.Y.Z.facts
package main

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/weftmesh/weft/internal/protofacts"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: proxyapi-facts DESCRIPTOR_SET")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxyapi-facts:", err)
		os.Exit(1)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(data, &set); err != nil {
		fmt.Fprintln(os.Stderr, "proxyapi-facts: not a descriptor set:", err)
		os.Exit(1)
	}
	for _, l := range protofacts.Render(set.GetFile(), "io.linkerd.proxy.") {
		fmt.Println(l)
	}
}
