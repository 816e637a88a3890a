// Package trace is the proxy's side of distributed tracing: it reads the
// trace context a request carries, writes the proxy's own span into the
// context sent on, and names the seam (Tracer, Span) through which the
// proxy records its spans.
//
// # Formats
//
// Four propagation formats are read, in this order (Linkerd's proxy's
// order, with B3's single header added), and the first that parses wins:
//
//   - W3C Trace Context: traceparent (version-traceid-parentid-flags);
//     tracestate is passed on untouched.
//   - grpc-trace-bin: OpenCensus's binary context, base64, as gRPC
//     libraries send it.
//   - B3 single header: b3 (traceid-spanid[-sampling[-parentspanid]]).
//   - B3 multiple headers: X-B3-TraceId, X-B3-SpanId, X-B3-Sampled,
//     X-B3-Flags (X-B3-ParentSpanId is written, not read).
//
// A header that does not parse is as good as absent: the next format is
// tried, and a request with none is not traced (the proxy joins traces,
// it never starts one). Write sends the context on in the format it came
// in, with the proxy's span as the parent.
//
// # What is trusted
//
// The trace context comes from the client (the application or a peer
// proxy) and is trusted for correlation only: it never influences
// routing, policy or metrics. Every field has a fixed length, so a value
// is rejected by its length before any of it is decoded (grpc-trace-bin
// is decoded, into a fixed buffer, only when at most 64 characters long); a header sent
// twice is ambiguous and rejected; ids of all zeros are invalid. The
// sampled flag is the client's to set, so a client can ask for its
// requests to be recorded; what that costs is bounded by the exporter's
// queue (see mesh/dataplane/tracing), never by the client.
//
// The package imports only the standard library: the OpenTelemetry SDK
// behind the seam lives in mesh/dataplane/tracing, which only the proxy
// binary links.
package trace
