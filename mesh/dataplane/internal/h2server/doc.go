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
// A connection may also serve requests at frame level (Config.Streams,
// [StreamHandler]): a request its Accept takes (say, gRPC) is handed to
// the handler as its decoded header fields and a body, and the handler
// writes the response's fields, DATA and trailers; no http.Request, header
// map or ResponseWriter is built. Such a request passes the same checks
// and limits as any other (everything below), and its body and response
// use the same windows, buffers and output queue.
//
// What the server does not do: server push, the extended CONNECT
// protocol (RFC 8441), h2c upgrade from HTTP/1.1, priorities (PRIORITY
// frames are validated and ignored), Content-Type sniffing and a default
// Date header (the proxy forwards the upstream's).
//
// # Threat model
//
// Every HTTP/2 connection the proxy serves may be hostile, meshed or
// not: an application on the same pod, a peer proxy over mesh TLS (an
// authenticated identity is not a well-behaved one) and an unmeshed
// client redirected by iptables all reach the same server. The server
// therefore owns its limits: each is counted in the frame loop as a
// frame is read, or where the server decides to send a frame of its own,
// so that TLS record framing and a client that does not read change
// nothing. Nothing in the accounting allocates per frame.
//
// What a client can hold or provoke is capped, per connection:
//
//   - streams: MaxConcurrentStreams (default 100), beyond which new
//     streams are refused with REFUSED_STREAM; running handlers: twice
//     that;
//   - header lists: MaxHeaderBytes (431 for a list over it,
//     COMPRESSION_ERROR for one field over it), HPACK tables of 4096
//     bytes, and at most 64 CONTINUATION frames in one header block
//     ("http2-continuation-flood");
//   - buffered request body: a stream's unread bytes are bounded by
//     its window (StreamWindow), in a buffer of at most twice that; the
//     connection window is given back as bytes arrive, so a handler
//     that does not read holds back its own stream only, never the
//     other uploads on the connection; all streams' unread bytes
//     together are bounded by BufferLimit (default twice
//     ConnectionWindow): past it the stream read least recently loses
//     its unread bytes, its handler's Read fails with the reason and
//     the stream is reset (CANCEL) unless the client had finished
//     sending (counted as the error class "buffer_limit", and as a
//     premature reset when the stream is younger than a second);
//   - premature resets: streams reset less than a second after they
//     opened, by the client (rapid reset, CVE-2023-44487) or by the
//     server because of the client's frames (MadeYouReset,
//     CVE-2025-8671), counted when the server decides the reset; past
//     ResetBudget (default 100), a connection on which at least half of
//     the streams were reset prematurely ends ("http2-rapid-reset").
//     Cancelling long-lived streams does not count. A stream's handler
//     starts once the read loop has taken the frames already received
//     with its HEADERS (at most a 4 KiB read, or 32 new streams), so a
//     stream opened and reset in one write never reaches the handler
//     (workers.go);
//   - control frames: SETTINGS, PRIORITY, PING acknowledgements, PINGs
//     sent while an earlier PING's acknowledgement is still unwritten,
//     unknown frame types, and WINDOW_UPDATEs that restore no window the
//     server used share a leaky bucket of 1000 frames draining at 1000
//     a second ("http2-control-flood"). A WINDOW_UPDATE that gives back
//     window the server's DATA used is free, on an open stream, on the
//     connection, or on a stream already closed (the window closed
//     streams used and the client had not yet given back is kept as one
//     sum per connection: readers return a stream's window after its
//     last frame); steps under 1 KiB that leave window in flight are
//     free while DATA frames earned them (two per DATA frame sent, at
//     most 4096 kept), else control frames. So free WINDOW_UPDATEs are
//     bounded by the DATA the server sent;
//   - paced PINGs (sent once every earlier one is answered, as grpc-go's
//     bandwidth estimator does): a bucket of 256, drained by one for
//     every DATA frame the server sends and by 100 a second
//     ("http2-control-flood"). Past 32 in the bucket, acknowledgements
//     that are all the server has to write wait up to 2 ms for the next
//     ones (PINGs arriving meanwhile stay paced), so that a flood over
//     TLS, one PING per record, is answered in a few writes rather than
//     one write per PING;
//   - empty frames (DATA without END_STREAM, HEADERS and CONTINUATION
//     without payload): a bucket of 100 draining at 10 a second
//     ("http2-empty-frames");
//   - connection-specific header fields (Connection, Keep-Alive,
//     Proxy-Connection, Transfer-Encoding, Upgrade, TE other than
//     "trailers") end the connection with PROTOCOL_ERROR
//     ("http2-connection-header");
//   - queued output: handlers wait for the socket once 64 KiB are
//     queued, and write frames of at most 16 KiB; the server's own
//     frames (resets, acknowledgements, window updates, GOAWAY) queued
//     while another goroutine is writing are capped at 1024 frames and
//     32 KiB, past which the connection ends ("http2-output-queue-full");
//     QueueBound states the whole bound;
//   - time: one write that does not complete within WriteTimeout
//     (default 10 s) ends the connection, releasing every handler
//     waiting to write; a silent client is pinged after PingInterval and
//     closed after PingTimeout more; IdleTimeout closes a connection
//     without streams; the client preface must arrive within 10 s.
//
// A connection ended for abuse gets GOAWAY ENHANCE_YOUR_CALM (or
// PROTOCOL_ERROR for connection-specific fields), written within one
// second at most, and is closed; Config.OnAbuse is told the reason in
// quotes above, once.
package h2server
