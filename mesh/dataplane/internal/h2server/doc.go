// Package h2server serves HTTP/2 connections for the proxy: one
// connection per ServeConn call, handlers run as net/http handlers, one
// goroutine per stream while its handler runs (a goroutine whose handler
// returned waits briefly for the connection's next stream, keeping the
// stack it grew).
//
// It reuses golang.org/x/net/http2's Framer and hpack for the wire
// format (frame parsing and validation, CONTINUATION sequencing), decodes
// header blocks with internal/h2hdr (the Framer's checks and size cap,
// one reused block per connection) and owns the rest: the connection
// state machine, flow control, and the write path. There is no serve
// goroutine: one goroutine reads frames; handlers encode their own frames
// under the connection's lock into one output buffer, and whoever flushes
// writes everything queued meanwhile (group commit). A flush never waits
// for more data, and no goroutine is started per write or per flush.
//
// A response whose handler writes its header and body and returns goes
// out as HEADERS, DATA and trailer HEADERS in one write when the handler
// returns; Flush writes at once. The request body reports whether a Read
// would block (ReadReady) and returns io.EOF with the last data when the
// client's END_STREAM has already arrived.
//
// What the server does not do: server push, the extended CONNECT
// protocol (RFC 8441), h2c upgrade from HTTP/1.1, priorities (PRIORITY
// frames are validated and ignored), Content-Type sniffing and a default
// Date header (the proxy forwards the upstream's).
//
// What a client can hold is capped: streams (MaxConcurrentStreams, beyond
// which new streams are refused with REFUSED_STREAM), running handlers
// (twice that), header list bytes (MaxHeaderBytes: 431 for a list over
// it, COMPRESSION_ERROR for one field over it), buffered request body
// (the receive windows it grants) and queued output (a writer past
// 64 KiB of unsent frames waits for the socket).
package h2server
