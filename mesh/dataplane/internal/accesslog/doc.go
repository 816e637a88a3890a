// Package accesslog is the proxy's HTTP access log: one line per inbound
// request, in the two formats of Linkerd's proxy (LINKERD2_PROXY_ACCESS_LOG),
// apache and json, so that tools reading those logs keep working. [Log]
// describes the fields.
//
// A request's entry is a [Record]: [Log.Start] reads the request line and
// headers when the request arrives, the handler writes its response
// through [Record.Writer] (which notes the status and Content-Length of
// the response head, and keeps the http.Flusher and http.Hijacker of the
// writer it wraps: an upgrade is logged as 101), [UpstreamTimer] marks
// the time spent waiting for the application's response head (the
// difference between total_ns and processing_ns), and [Record.Finish]
// writes the line once, with one Write, whether or not a head was
// written.
//
// # What it trusts
//
// Nothing the client sent. The method, target, version, Host, User-Agent,
// the trace id headers and Content-Length are the peer's bytes, and an
// HTTP/2 peer's pseudo-headers are not bound by the HTTP/1 request line's
// grammar. They are escaped so that no value can forge or split a line:
//
//   - apache: each field is cleaned, every control character, space,
//     quote, backslash and byte from 0x7f up written as \xHH, so a field
//     stays one space-separated token and its bytes stay recoverable;
//   - json: every value is a JSON string with quotes, backslashes and
//     control characters (and DEL) escaped, and each byte that is not
//     valid UTF-8 replaced by U+FFFD, so the line is always one valid
//     object.
//
// The client's identity (Client.Identity) is the verified mesh identity
// of the connection, and the l5d-orig-proto header is believed only when
// Client.FromProxy says a peer proxy sent the request. The size of a line
// is bounded by the request head limits of the proxy's HTTP servers.
//
// # Seams
//
// The dataplane package builds the [Log] from Config.AccessLog and the
// writer given with WithAccessLog; the connection paths wrap each
// inbound request with it (internal/l4, http.go: serveInboundLogged) and
// give UpstreamTimer to the inbound HTTP side (internal/inbound), which
// calls it around its round trip to the application. The clock is injected ([New]'s now). Lines are
// serialised by a mutex, one Write each; the writer's errors are dropped
// (a log that cannot be written does not fail requests).
package accesslog
