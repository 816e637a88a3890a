package h2client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func (cc *Conn) onHeaders(f *h2hdr.Block) error {
	id := f.StreamID
	cs, idle := cc.lookup(id)
	if idle {
		return cc.connError(http2.ErrCodeProtocol, "headers_idle_stream", "HEADERS on a stream never opened")
	}
	if cs == nil {
		return nil // a stream we reset
	}
	if f.Truncated {
		cc.streamError(id, http2.ErrCodeCancel, "header_list_too_large",
			fmt.Errorf("h2client: response header list over the limit of %d bytes", cc.cfg.maxHeaderBytes))
		return nil
	}
	cc.mu.Lock()
	got, ended := cs.resp != nil, cs.recvEnded
	cc.mu.Unlock()
	switch {
	case ended:
		cc.streamError(id, http2.ErrCodeStreamClosed, "headers_after_end", errors.New("h2client: HEADERS after the end of the stream"))
	case got:
		cc.onTrailers(cs, f)
	default:
		cc.onResponse(cs, f)
	}
	return nil
}

// onResponse handles the response head (or an informational one).
func (cc *Conn) onResponse(cs *stream, f *h2hdr.Block) {
	status := f.PseudoValue("status")
	code, err := strconv.Atoi(status)
	if len(status) != 3 || err != nil || code < 100 {
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "bad_status", fmt.Errorf("h2client: malformed response status %q", status))
		return
	}
	if cs.freq != nil {
		cc.onFieldResponse(cs, f, code) // fields.go
		return
	}
	header := cc.toHeader(f.RegularFields())
	if code < 200 {
		cc.onInformational(cs, f, code, header)
		return
	}
	resp := &cs.respVal
	*resp = http.Response{
		Status:        statusLine(code, status),
		StatusCode:    code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		ContentLength: -1,
		Request:       cs.req,
		TLS:           cc.tlsState,
	}
	if cls := header["Content-Length"]; len(cls) == 1 {
		if n, err := strconv.ParseInt(cls[0], 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	} else if f.StreamEnded() {
		resp.ContentLength = 0
	}
	for _, v := range header["Trailer"] {
		for v != "" {
			var k string
			k, v, _ = strings.Cut(v, ",")
			if k = textproto.TrimString(k); k != "" {
				if resp.Trailer == nil {
					resp.Trailer = http.Header{}
				}
				resp.Trailer[http.CanonicalHeaderKey(k)] = nil
			}
		}
	}
	if f.StreamEnded() || cs.head {
		resp.Body = http.NoBody
	} else {
		cs.respBody = body{cs: cs, trailer: &resp.Trailer}
		resp.Body = &cs.respBody
	}
	cc.mu.Lock()
	cs.resp = resp
	if f.StreamEnded() {
		cs.recvEnded = true
		cc.maybeRemoveLocked(cs)
	}
	if cs.head {
		cs.bodyDone = true
	}
	cs.cond.Broadcast()
	cc.mu.Unlock()
}

// onInformational handles a 1xx response: passed to the request's
// httptrace hooks, and counted.
func (cc *Conn) onInformational(cs *stream, f *h2hdr.Block, code int, header http.Header) {
	cc.mu.Lock()
	cs.n1xx++
	n := cs.n1xx
	cc.mu.Unlock()
	switch {
	case f.StreamEnded():
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "bad_1xx", errors.New("h2client: informational response ends the stream"))
		return
	case code == http.StatusSwitchingProtocols:
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "bad_1xx", errors.New("h2client: 101 Switching Protocols over HTTP/2"))
		return
	case n > max1xx:
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "too_many_1xx", fmt.Errorf("h2client: more than %d informational responses", max1xx))
		return
	}
	if cs.req == nil {
		return // a RoundTripFields request: counted only
	}
	trace := httptrace.ContextClientTrace(cs.req.Context())
	if trace == nil {
		return
	}
	if trace.Got1xxResponse != nil {
		if err := trace.Got1xxResponse(code, textproto.MIMEHeader(header)); err != nil {
			cc.failStream(cs, err, http2.ErrCodeCancel)
			return
		}
	}
	if code == http.StatusContinue && trace.Got100Continue != nil {
		trace.Got100Continue()
	}
}

// onTrailers handles the trailing header block.
func (cc *Conn) onTrailers(cs *stream, f *h2hdr.Block) {
	if !f.StreamEnded() {
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "bad_trailers", errors.New("h2client: trailers without END_STREAM"))
		return
	}
	if len(f.PseudoFields()) > 0 {
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, "bad_trailers", errors.New("h2client: pseudo-header field in trailers"))
		return
	}
	var tr http.Header
	var fields []hpack.HeaderField
	if cs.freq != nil {
		// The block is the Reader's until its next frame.
		fields = append([]hpack.HeaderField(nil), f.RegularFields()...)
	} else {
		tr = cc.toHeader(f.RegularFields())
	}
	cc.mu.Lock()
	cs.trailer, cs.trailerFields = tr, fields
	cs.recvEnded = true
	cc.maybeRemoveLocked(cs)
	cs.cond.Broadcast()
	cc.mu.Unlock()
}

// maxCanonCache bounds the names a connection remembers in canonical
// form: a server cannot grow the map further.
const maxCanonCache = 256

// canonical is http.CanonicalHeaderKey(name), remembered per connection
// for the first maxCanonCache names, so that a name outside net/http's
// common set (grpc-status, grpc-message) is not built again per response
// (read loop only).
func (cc *Conn) canonical(name string) string {
	if k, ok := cc.canon[name]; ok {
		return k
	}
	k := http.CanonicalHeaderKey(name)
	if len(cc.canon) < maxCanonCache {
		cc.canon[name] = k
	}
	return k
}

// statusLine is the response's Status ("200 OK"), without building the
// string for a 200.
func statusLine(code int, status string) string {
	if code == http.StatusOK {
		return "200 OK"
	}
	return status + " " + http.StatusText(code)
}

// toHeader builds a header from decoded fields, the values of all keys
// sharing one backing array (read loop only).
func (cc *Conn) toHeader(fields []hpack.HeaderField) http.Header {
	h := make(http.Header, len(fields))
	strs := make([]string, len(fields))
	for i, hf := range fields {
		k := cc.canonical(hf.Name)
		if vv, ok := h[k]; ok {
			h[k] = append(vv, hf.Value)
			continue
		}
		strs[i] = hf.Value
		h[k] = strs[i : i+1 : i+1]
	}
	return h
}

// body is a response body. Read returns io.EOF with the last bytes when
// the stream has ended; ReadReady tells whether a Read would not block.
type body struct {
	cs      *stream
	trailer *http.Header // the response's Trailer, filled at EOF
	closed  bool
	eof     bool
}

// ReadReady reports whether Read would return at once: bytes are
// buffered, or the stream ended or failed.
func (b *body) ReadReady() bool {
	cs := b.cs
	cs.cc.mu.Lock()
	defer cs.cc.mu.Unlock()
	return cs.off < len(cs.buf) || cs.recvEnded || cs.rerr != nil || b.closed
}

func (b *body) Read(p []byte) (int, error) {
	cs := b.cs
	cc := cs.cc
	cc.mu.Lock()
	for cs.off == len(cs.buf) && !cs.recvEnded && cs.rerr == nil && !b.closed {
		cs.cond.Wait()
	}
	if b.closed {
		cc.mu.Unlock()
		return 0, errors.New("h2client: read on a closed response body")
	}
	if cs.dropped {
		// Never an EOF: the body lost bytes.
		err := cs.rerr
		cc.mu.Unlock()
		return 0, err
	}
	n := copy(p, cs.buf[cs.off:])
	cs.off += n
	if n > 0 {
		cc.buffered -= int64(n)
		cc.readClock++
		cs.lastRead = cc.readClock
	}
	if cs.off == len(cs.buf) {
		cs.buf, cs.off = cs.buf[:0], 0
		cc.unholdLocked(cs)
	}
	var err error
	switch {
	case cs.off == len(cs.buf) && cs.recvEnded:
		err = io.EOF
		if !b.eof {
			b.eof = true
			if cs.trailer != nil && b.trailer != nil {
				if *b.trailer == nil {
					*b.trailer = cs.trailer
				} else {
					for k, vv := range cs.trailer {
						(*b.trailer)[k] = vv
					}
				}
			}
		}
	case n == 0:
		err = cs.rerr
	}
	var winc uint32
	if n > 0 {
		winc = cs.consumedLocked(int64(n))
	}
	cc.mu.Unlock()
	if winc > 0 {
		_ = cc.writeControl(func() error { return cc.fr.WriteWindowUpdate(cs.id, winc) })
	}
	return n, err
}

// Close discards the rest of the body; before the end of the response it
// resets the stream (CANCEL).
func (b *body) Close() error {
	cs := b.cs
	cc := cs.cc
	cc.mu.Lock()
	if b.closed {
		cc.mu.Unlock()
		return nil
	}
	b.closed = true
	cs.bodyDone = true
	ended := cs.recvEnded
	cc.dropBufLocked(cs)
	cs.cond.Broadcast()
	cc.mu.Unlock()
	if !ended {
		cc.failStream(cs, errors.New("h2client: response body closed"), http2.ErrCodeCancel)
	}
	return nil
}

// growAfter is how many windows' worth of body a stream's reader consumes
// before its window doubles. A relay whose client stopped reading still
// consumes what the sockets and buffers downstream of it take (a few
// hundred KiB); only a reader that keeps reading gets past this, so a
// response nobody reads holds the initial window at each proxy it
// crosses, and a download that is read grows to the full window within
// its first few MiB.
const growAfter = 4

// consumedLocked accounts n bytes read from the stream's body and returns
// the WINDOW_UPDATE increment to send (0: none yet). Read bytes go back
// to the server once half the window is owed; the window grows, doubling
// up to the stream window, after its reader consumed growAfter windows
// since it last grew.
func (cs *stream) consumedLocked(n int64) uint32 {
	cs.unacked += n
	cs.sinceGrow += n
	if cs.recvEnded || cs.reset || cs.unacked < cs.window/2 {
		return 0
	}
	inc := cs.unacked
	if limit := int64(cs.cc.cfg.streamWindow); cs.window < limit && cs.sinceGrow >= growAfter*cs.window {
		grow := min(cs.window, limit-cs.window)
		cs.window += grow
		inc += grow
		cs.sinceGrow = 0
	}
	cs.inflow += inc
	cs.unacked = 0
	return uint32(inc)
}
