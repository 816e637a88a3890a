// Package h1 is the proxy's HTTP/1.1 wire codec: a strict request parser,
// a strict chunked body reader, the header hygiene rules every hop applies,
// and a small connection server that turns an HTTP/1.1 byte stream into
// [net/http.Request] values handled by an [net/http.Handler].
//
// The proxy parses HTTP/1 itself, instead of letting net/http do it,
// because a proxy must refuse what a lenient server would repair: request
// smuggling lives in the gap between two parsers that read the same bytes
// differently. [ReadRequest] therefore refuses, with the status to answer:
//
//   - Content-Length together with Transfer-Encoding, several
//     Content-Length fields (or a list), a Content-Length that is not
//     digits (400);
//   - any Transfer-Encoding other than exactly "chunked" (400 when it
//     mentions chunked in another spelling or list, 501 otherwise), and
//     Transfer-Encoding on an HTTP/1.0 request (400);
//   - obs-fold continuation lines, bare LF or CR line endings, NUL, CR, LF
//     and other control characters in names or values, header names that
//     are not tokens or contain "_", whitespace before the colon (400);
//   - a request line that is not METHOD SP TARGET SP HTTP/1.x with an upper
//     case token method and a target without controls, spaces or "#"
//     (400), HTTP/0.9 lines (400), other versions (505);
//   - a missing or repeated Host on HTTP/1.1, or an invalid one (400);
//   - a Trailer field without a chunked body, or announcing a name that is
//     not a valid field name or one a trailer may not carry (400);
//   - a request line over [Limits.MaxRequestLine] (414) and a head over
//     [Limits.MaxHeaderBytes] or [Limits.MaxHeaders] fields (431).
//
// differential_test.go reads every input with net/http too; each
// difference is listed there with its reason.
//
// Chunked bodies are read by [NewChunkedReader], which also refuses bare
// LF or CR in chunk lines, malformed or unterminated chunk extensions and
// trailers, and bounds the overhead a sender may add per byte of data.
//
// # Header hygiene
//
// [RemoveHopByHop] drops every header a Connection field names (all of its
// lines and list items, empty ones included) and every hop-by-hop header
// (Connection, Keep-Alive, Proxy-Connection, TE except "trailers",
// Transfer-Encoding, Upgrade, Proxy-Authenticate, Proxy-Authorization,
// HTTP2-Settings). [ValidHeader] re-checks names and values when a message
// crosses from HTTP/2 to HTTP/1. The mesh's own headers (l5d-*, weft-*)
// are the data plane's rule, not the codec's: mesh/dataplane strips them,
// and tells the client which trailers never to send ([Client.OmitTrailer]).
//
// # Sending
//
// [Client.RoundTrip] sends a request over kept-alive connections. It reads
// responses with the same field reader (names may hold "_"), and refuses
// ambiguous framing: Content-Length with Transfer-Encoding, an invalid or
// conflicting Content-Length (even on a response without a body),
// Transfer-Encoding on HTTP/1.0 or other than a single chunked, and
// announced trailer names that are not field names. A body of
// unknown or large size is written by a second goroutine while the
// response is read; when reading that body fails (the sender went away or
// sent a malformed chunk) the exchange ends at once with a
// [RequestBodyError], the upstream connection closed and never reused,
// and an answer read after the failure (the upstream's reaction to it) is
// discarded. The connection returns to the pool only when the response
// and the body both ended cleanly. [Client.MaxConnsPerAddr] bounds the
// connections open to one address and [Client.MaxConnsPerClient] those
// one downstream client's requests hold ([Client.RoundTripFrom] names
// the client), so that one client cannot take the whole pool; a request
// that meets either bound waits within its context and
// [Client.WaitTimeout] ([PoolTimeoutError] after it; a request whose
// context ends leaves no waiter behind), and [Client.Reusable] vets an
// idle connection before reuse.
//
// # Serving
//
// [Server.ServeConn] reads requests from one connection, hands each to its
// handler with an [net/http.ResponseWriter] that writes HTTP/1.1 (content
// length or chunked framing, trailers through [net/http.TrailerPrefix],
// informational 1xx responses, automatic 100 Continue, and Hijack for
// protocol upgrades), and keeps the connection alive between requests
// until the client, an error or the drain context ends it.
package h1
