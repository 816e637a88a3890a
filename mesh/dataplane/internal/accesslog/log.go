package accesslog

import (
	"bufio"
	"fmt"
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
)

// The formats, as Linkerd's proxy names them (the dataplane package's
// AccessLogApache and AccessLogJSON).
const (
	Apache = "apache"
	JSON   = "json"
)

// Log writes one line per inbound HTTP request, in the formats of
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
type Log struct {
	format string
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
}

// New returns a log in format (Apache or JSON) that writes each line
// with one Write to w, one line at a time; now is the clock of its
// timestamps and durations.
func New(format string, w io.Writer, now func() time.Time) (*Log, error) {
	if format != Apache && format != JSON {
		return nil, fmt.Errorf("accesslog: format %q is not apache or json", format)
	}
	return &Log{format: format, w: w, now: now}, nil
}

// Client is what the proxy knows of the connection a request came on.
type Client struct {
	// Identity is the client's verified mesh identity ("" for none).
	Identity string
	// IP is the client's address, logged when the request's RemoteAddr
	// is not an address and port.
	IP netip.Addr
	// FromProxy is set for mesh TLS with the transport header (a peer
	// proxy): only then is l5d-orig-proto believed.
	FromProxy bool
}

// Record is one request's entry, filled as the exchange proceeds.
type Record struct {
	log      *Log
	start    time.Time
	fields   fields
	status   int
	respLen  string
	headAt   time.Time
	upWait   time.Duration
	upSince  time.Time
	upMu     sync.Mutex
	finished bool
}

type fields struct {
	clientAddr, clientID, timestamp, method, uri, version string
	traceID, requestBytes, userAgent, host                string
}

// UpstreamTimer marks the start of waiting for the application's response
// head; the returned function marks its end. w is the writer the handler
// got: without an access log it is not ours, and the timer does nothing.
func UpstreamTimer(w http.ResponseWriter) func() {
	var rec *Record
	switch aw := w.(type) {
	case *recWriter:
		rec = aw.rec
	case hijackWriter:
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

// Start begins the entry of request r from client c; the caller serves
// the request through Writer and then calls Finish.
func (l *Log) Start(r *http.Request, c Client) *Record {
	now := l.now()
	id := c.Identity
	if id == "" {
		id = "-"
	}
	client := r.RemoteAddr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		client = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	} else if c.IP.IsValid() {
		client = c.IP.String()
	}
	uri, version := r.RequestURI, r.Proto
	if orig := httpcore.OrigProto(r.Header.Get(httpcore.HeaderOrigProto)); c.FromProxy && r.ProtoMajor == 2 && orig != "" {
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
	return &Record{log: l, start: now, fields: fields{
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
func (rec *Record) head(code int, h http.Header) {
	if rec.status != 0 || code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	rec.status = code
	rec.respLen = h.Get("Content-Length")
	rec.headAt = rec.log.now()
}

// Finish writes the line, once: with the status of the response head,
// or without one when the handler ended before writing any.
func (rec *Record) Finish() {
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
	if rec.log.format == JSON {
		line = rec.json(total, processing)
	} else {
		line = rec.apache()
	}
	rec.log.mu.Lock()
	_, _ = rec.log.w.Write(line)
	rec.log.mu.Unlock()
}

func (rec *Record) apache() []byte {
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
func (rec *Record) json(total, processing time.Duration) []byte {
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

// recWriter records the response head for the access log.
type recWriter struct {
	http.ResponseWriter
	rec *Record
}

func (w *recWriter) WriteHeader(code int) {
	w.rec.head(code, w.ResponseWriter.Header())
	w.ResponseWriter.WriteHeader(code)
}

func (w *recWriter) Write(b []byte) (int, error) {
	w.rec.head(http.StatusOK, w.ResponseWriter.Header())
	return w.ResponseWriter.Write(b)
}

// Flush passes through when the underlying writer can flush.
func (w *recWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *recWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// hijackWriter is an recWriter over a writer that can be hijacked
// (HTTP/1 upgrades); the switch is logged as 101.
type hijackWriter struct{ *recWriter }

func (w hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.rec.head(http.StatusSwitchingProtocols, http.Header{})
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// Writer wraps w so that the response head is recorded: the handler
// writes through it. It keeps w's http.Hijacker (an HTTP/1 upgrade is
// logged as 101) and http.Flusher.
func (rec *Record) Writer(w http.ResponseWriter) http.ResponseWriter {
	aw := &recWriter{ResponseWriter: w, rec: rec}
	if _, ok := w.(http.Hijacker); ok {
		return hijackWriter{aw}
	}
	return aw
}
