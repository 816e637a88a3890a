package dataplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
)

// Access log formats, as Linkerd's proxy names them.
const (
	AccessLogApache = "apache"
	AccessLogJSON   = "json"
)

// accessLog writes one line per inbound HTTP request, in the formats of
// Linkerd's proxy (LINKERD2_PROXY_ACCESS_LOG), so tools that parse those
// logs keep working:
//
//   - apache: `CLIENT_ADDR CLIENT_ID - [TIMESTAMP] "METHOD URI VERSION" STATUS`,
//     where CLIENT_ID is the client's mesh identity or "-", and TIMESTAMP
//     is RFC 3339 in UTC with as many fractional digits as needed;
//   - json: an object with the keys client.addr, client.id, host, method,
//     processing_ns, request_bytes, response_bytes (only when the response
//     declares its length), status (a number), timestamp, total_ns,
//     trace_id, uri, user_agent and version; every value but status is a
//     string, and keys are sorted.
//
// total_ns runs from the request's arrival to the response head;
// processing_ns is total_ns minus the time spent waiting for the
// application's response head. request_bytes and response_bytes are the
// Content-Length headers, as in Linkerd (empty when absent); trace_id is
// the first of x-b3-traceid, x-request-id and x-amzn-trace-id.
type accessLog struct {
	format string
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
}

// accessRecord is one request's entry, filled as the exchange proceeds.
type accessRecord struct {
	log      *accessLog
	start    time.Time
	fields   accessFields
	status   int
	respLen  string
	headAt   time.Time
	upWait   time.Duration
	upSince  time.Time
	upMu     sync.Mutex
	finished bool
}

type accessFields struct {
	clientAddr, clientID, timestamp, method, uri, version string
	traceID, requestBytes, userAgent, host                string
}

// serveInboundLogged serves an inbound request through inbound.HTTP.Serve and
// writes its access-log line when the exchange ends, even if the handler
// aborts the response.
func (p *Proxy) serveInboundLogged(w http.ResponseWriter, r *http.Request, info *connInfo) {
	rec := p.access.start(r, info)
	defer rec.finish()
	p.in.Serve(wrapAccessWriter(w, rec), r, &info.Conn)
}

// upstreamTimer marks the start of waiting for the application's response
// head; the returned function marks its end. w is the writer the handler
// got: without an access log it is not ours, and the timer does nothing.
func upstreamTimer(w http.ResponseWriter) func() {
	var rec *accessRecord
	switch aw := w.(type) {
	case *accessWriter:
		rec = aw.rec
	case accessHijacker:
		rec = aw.rec
	}
	if rec == nil {
		return func() {}
	}
	rec.upMu.Lock()
	rec.upSince = rec.log.now()
	rec.upMu.Unlock()
	return func() {
		rec.upMu.Lock()
		if !rec.upSince.IsZero() {
			rec.upWait += rec.log.now().Sub(rec.upSince)
			rec.upSince = time.Time{}
		}
		rec.upMu.Unlock()
	}
}

func (l *accessLog) start(r *http.Request, info *connInfo) *accessRecord {
	now := l.now()
	id := info.Peer.Identity
	if id == "" {
		id = "-"
	}
	client := r.RemoteAddr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		client = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	} else if info.Peer.IP.IsValid() {
		client = info.Peer.IP.String()
	}
	uri, version := r.RequestURI, r.Proto
	if orig := inboundhttp.OrigProto(r.Header.Get(httpcore.HeaderOrigProto)); info.FromProxy && r.ProtoMajor == 2 && orig != "" {
		// An HTTP/1 request the client's proxy carried over HTTP/2: log
		// it as the client sent it.
		version = orig
	} else if r.ProtoMajor == 2 {
		// An HTTP/2 request carries scheme and authority; Linkerd prints
		// its URI in absolute form.
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		uri = scheme + "://" + r.Host + r.RequestURI
	}
	trace := r.Header.Get("X-B3-Traceid")
	if trace == "" {
		trace = r.Header.Get("X-Request-Id")
	}
	if trace == "" {
		trace = r.Header.Get("X-Amzn-Trace-Id")
	}
	return &accessRecord{log: l, start: now, fields: accessFields{
		clientAddr:   client,
		clientID:     id,
		timestamp:    now.UTC().Format(time.RFC3339Nano),
		method:       r.Method,
		uri:          uri,
		version:      version,
		traceID:      trace,
		requestBytes: r.Header.Get("Content-Length"),
		userAgent:    r.Header.Get("User-Agent"),
		host:         r.Host,
	}}
}

// head records the response head the first time it is written.
func (rec *accessRecord) head(code int, h http.Header) {
	if rec.status != 0 || code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	rec.status = code
	rec.respLen = h.Get("Content-Length")
	rec.headAt = rec.log.now()
}

// finish writes the line once.
func (rec *accessRecord) finish() {
	if rec.finished {
		return
	}
	rec.finished = true
	end := rec.headAt
	if end.IsZero() {
		end = rec.log.now()
	}
	total := end.Sub(rec.start)
	rec.upMu.Lock()
	processing := total - rec.upWait
	rec.upMu.Unlock()
	processing = max(processing, 0)
	var line []byte
	if rec.log.format == AccessLogJSON {
		line = rec.json(total, processing)
	} else {
		line = rec.apache()
	}
	rec.log.mu.Lock()
	_, _ = rec.log.w.Write(line)
	rec.log.mu.Unlock()
}

func (rec *accessRecord) apache() []byte {
	f := rec.fields
	var b strings.Builder
	b.Grow(96 + len(f.uri))
	b.WriteString(clean(f.clientAddr))
	b.WriteByte(' ')
	b.WriteString(clean(f.clientID))
	b.WriteString(" - [")
	b.WriteString(f.timestamp)
	b.WriteString("] \"")
	b.WriteString(clean(f.method))
	b.WriteByte(' ')
	b.WriteString(clean(f.uri))
	b.WriteByte(' ')
	b.WriteString(clean(f.version))
	b.WriteByte('"')
	if rec.status != 0 {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(rec.status))
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

// json writes the object with its keys sorted, as Linkerd's proxy does.
func (rec *accessRecord) json(total, processing time.Duration) []byte {
	f := rec.fields
	b := make([]byte, 0, 320+len(f.uri)+len(f.userAgent))
	field := func(key, val string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, key)
		b = append(b, ':')
		b = appendJSONString(b, val)
	}
	b = append(b, '{')
	field("client.addr", f.clientAddr)
	field("client.id", f.clientID)
	field("host", f.host)
	field("method", f.method)
	field("processing_ns", strconv.FormatInt(processing.Nanoseconds(), 10))
	field("request_bytes", f.requestBytes)
	if rec.respLen != "" {
		field("response_bytes", rec.respLen)
	}
	if rec.status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(rec.status), 10)
	}
	field("timestamp", f.timestamp)
	field("total_ns", strconv.FormatInt(total.Nanoseconds(), 10))
	field("trace_id", f.traceID)
	field("uri", f.uri)
	field("user_agent", f.userAgent)
	field("version", f.version)
	return append(b, '}', '\n')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// clean makes a field safe for one space-separated line: control
// characters, spaces, quotes and backslashes become \xHH, so a crafted
// request cannot forge or split log lines.
func clean(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '"' || c == '\\' || c >= 0x7f {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '"' || c == '\\' || c >= 0x7f {
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// accessWriter records the response head for the access log.
type accessWriter struct {
	http.ResponseWriter
	rec *accessRecord
}

func (w *accessWriter) WriteHeader(code int) {
	w.rec.head(code, w.ResponseWriter.Header())
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	w.rec.head(http.StatusOK, w.ResponseWriter.Header())
	return w.ResponseWriter.Write(b)
}

// Flush passes through when the underlying writer can flush.
func (w *accessWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessHijacker is an accessWriter over a writer that can be hijacked
// (HTTP/1 upgrades); the switch is logged as 101.
type accessHijacker struct{ *accessWriter }

func (w accessHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.rec.head(http.StatusSwitchingProtocols, http.Header{})
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func wrapAccessWriter(w http.ResponseWriter, rec *accessRecord) http.ResponseWriter {
	aw := &accessWriter{ResponseWriter: w, rec: rec}
	if _, ok := w.(http.Hijacker); ok {
		return accessHijacker{aw}
	}
	return aw
}
