// Package conformance runs peers that no Weft engineer wrote against the
// data plane, inside go test:
//
//   - h2spec (github.com/summerwind/h2spec), the HTTP/2 conformance
//     suite, against the outbound listener (prior-knowledge h2c from an
//     application) and the inbound listener (h2c from an unmeshed client),
//     in strict mode. Every failure must be on the allowlist in
//     h2spec_test.go, each entry with its reason (also in
//     docs/dataplane.md).
//   - the gRPC interop client and server (google.golang.org/grpc/interop),
//     as built binaries, through client -> outbound proxy -> mutual TLS ->
//     inbound proxy -> server, for every core test case.
//
// The tools are found through WEFT_H2SPEC (or h2spec on PATH or in
// $(go env GOPATH)/bin) and WEFT_GRPC_INTEROP_DIR (a directory holding
// the client and server binaries; default $(go env GOPATH)/bin/grpc-interop).
// Without them the tests skip, except under CI=true, where they fail.
// Install them with:
//
//	go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
//	GOBIN=$(go env GOPATH)/bin/grpc-interop go install \
//	    google.golang.org/grpc/interop/client@v1.85.0 \
//	    google.golang.org/grpc/interop/server@v1.85.0
package conformance
