// Package h2client is the proxy's HTTP/2 client connection: requests to
// peer proxies over mesh TLS and to h2c applications are multiplexed on a
// [Conn] the caller dialled (and, for TLS, handshook with "h2").
//
// It exists to make a proxied call cheap. Frames and header blocks are
// encoded and decoded with golang.org/x/net/http2's Framer and hpack
// (header blocks read through internal/h2hdr, which reuses one decoded
// block per connection); the connection logic is its own:
//
//   - Writes are made by the goroutine that has something to send, into one
//     buffer under a write lock, and flushed by "group commit": the
//     goroutine that finds no flush in progress writes everything queued
//     until the buffer is empty, and the others return at once. Nothing
//     waits for more frames to come.
//   - A request whose body is already there (nil, http.NoBody, or a body
//     whose ReadReady method reports that a Read would not block) goes out
//     as HEADERS, DATA and END_STREAM in one write, on the caller's
//     goroutine. Only a body that is not ready is streamed by a goroutine,
//     after the HEADERS are flushed (a bidirectional gRPC client may wait
//     for the response headers before it sends).
//   - One goroutine per connection reads frames. Response bodies implement
//     ReadReady too, and return io.EOF with the last bytes when the stream
//     has already ended, so that a copy loop can skip a flush per chunk.
//
// [Conn.RoundTripFields] is RoundTrip for a relay that holds a request
// as decoded header fields (the proxy's frame-level server side): the
// request goes out from its fields and the response comes back as fields,
// a body and trailer fields, with no http.Request, http.Response or
// header map built; the checks, limits and flow control are RoundTrip's.
//
// Flow control is RFC 9113's both ways: request bodies wait for the
// server's stream and connection windows. Received bytes are returned to
// the stream window once its reader consumed half of it, and to the
// connection window once half of it was received, read or not: a
// connection is shared by many requests, and a response nobody reads
// (its client stopped reading, say) must not hold the window the others
// need. Only its stream window holds it back, so a stream buffers at
// most one stream window of unread body (in a buffer of at most twice
// that). The connection window only bounds the bytes in flight.
//
// A stream's window starts small ([WithInitialStreamWindow], 256 KiB)
// and doubles, up to the stream window of [WithWindows] (1 MiB), each
// time its reader has consumed four windows' worth since the last
// growth. A proxy relays a response to a client that may stop reading:
// until then the relay consumes what the sockets and buffers downstream
// take, which is less than that, so an abandoned response pulls only the
// initial window through each proxy it crosses, while a download that is
// read reaches the full window within its first few MiB.
//
// What a connection holds unread, all its responses together (a
// response that has ended but is not read yet holds no stream slot, so
// the stream limit does not bound them), is bounded by [WithBufferLimit]:
// past it, the response whose reader has gone longest without reading
// (never read: the one opened first) loses its unread bytes, its stream
// is reset with CANCEL if still open, and its body's next Read fails
// (never a short body with io.EOF). A response read all along, however
// slowly, was read more recently than one nobody reads, so the latter
// goes first; the order is kept by a count of reads, not a clock.
//
// What the server may do is bounded: response header lists by
// [WithMaxHeaderBytes] (SETTINGS_MAX_HEADER_LIST_SIZE, enforced on
// decoding), received data by the windows of [WithWindows] (a server that
// overruns them gets FLOW_CONTROL_ERROR) and the buffer limit, frames by a 64 KiB read frame
// size, informational responses by 16 per stream, the server's stream
// limit by 1000, and what waits for the socket by 1 MiB (writers then
// wait, the read loop included, so a server that floods PINGs without
// reading our answers is read no further). A server that breaks the
// protocol gets a GOAWAY or RST_STREAM with the code RFC 9113 names, its
// requests fail with an error naming what was wrong, and the hook of
// [WithCountError] is called with a short class.
//
// Requests the server never processed (the connection closed or closing
// before they were sent, a GOAWAY whose last stream id is below theirs,
// REFUSED_STREAM) fail with an error wrapping [ErrUnprocessed]; a stream
// reset wraps x/net's http2.StreamError with the code.
//
// Not supported: server push (disabled in our SETTINGS), CONNECT and
// extended CONNECT, priorities, response compression (bodies are passed
// as they are), and request bodies over HTTP/1-style "Expect:
// 100-continue" waiting (a 100 is passed to httptrace only).
package h2client
