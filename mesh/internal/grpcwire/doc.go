// Package grpcwire is the server side of gRPC's wire format over Go's
// HTTP/2 server, for the few methods Weft serves without grpc-go's
// transport (the proxy's tap, the identity service's Certify): what a
// request must look like (content-type, grpc-timeout, the 5-byte message
// prefix), how a call ends (grpc-status and a percent-encoded
// grpc-message, in trailers or in a trailers-only response), and the
// statuses grpc-go 1.85's HTTP/2 server gives for each kind of bad
// request, word for word, so that a client cannot tell the two apart.
//
// It reads at most one message per call (unary requests, and the one
// request of a server-streaming call) and frames any number of replies.
// It knows no service: callers route by path and say which service they
// serve. Compression is not supported: a compressed request is refused as
// grpc-go refuses one with no decompressor registered.
//
// It is internal to mesh/ and imports nothing of Weft.
package grpcwire
