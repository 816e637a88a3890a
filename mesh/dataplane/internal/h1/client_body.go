package h1

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientBody reads a response body and gives the connection back to the
// pool at its end when it can carry another exchange.
type clientBody struct {
	cl       *Client
	cc       *clientConn
	r        io.Reader
	resp     *http.Response
	reusable bool
	stop     func() bool
	async    *bodyWriter      // the request body's writer, when it runs on its own
	lim      io.LimitedReader // r for a body of known length
	mu       sync.Mutex
	done     bool
}

func newClientBody(cl *Client, cc *clientConn, req *http.Request, resp *http.Response, stop func() bool, async *bodyWriter) (io.ReadCloser, error) {
	b := &clientBody{cl: cl, cc: cc, resp: resp, stop: stop, async: async}
	h := resp.Header
	te, cls := h["Transfer-Encoding"], h["Content-Length"]
	closeAsked := req.Close || resp.ProtoMinor == 0
	for _, t := range ConnectionTokens(h) {
		switch t {
		case "close":
			closeAsked = true
		case "keep-alive":
			if resp.ProtoMinor == 0 {
				closeAsked = false
			}
		}
	}
	resp.ContentLength = -1
	noBody := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusSwitchingProtocols
	if len(te) > 0 && resp.ProtoMinor == 0 {
		// RFC 9112 section 6.1: faulty framing. net/http ignores the
		// field and reads to the end; a chunked reader would not.
		return nil, errors.New("h1: invalid response: Transfer-Encoding on an HTTP/1.0 response")
	}
	if len(te) > 0 && (len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked")) {
		// Another coding, alone or before chunked: the proxy could only
		// hand it on as body bytes, their coding lost with the hop-by-hop
		// Transfer-Encoding field.
		return nil, errors.New("h1: invalid response: unsupported Transfer-Encoding")
	}
	length, lengthOK := singleLength(cls)
	if len(cls) > 0 && !lengthOK {
		// Refused even where the response has no body (HEAD, 204, 304):
		// the field would be handed on to the client as it is.
		return nil, errors.New("h1: response with an invalid Content-Length")
	}
	switch {
	case len(te) > 0 && len(cls) > 0:
		return nil, errors.New("h1: response with both Content-Length and Transfer-Encoding")
	case noBody:
		b.r = eofReader{}
		if lengthOK {
			resp.ContentLength = length
		}
		if req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
	case len(te) > 0:
		cr := NewChunkedReader(cc.br, 0)
		b.r = &trailerReader{cr: cr, resp: resp}
		if tr := h["Trailer"]; len(tr) > 0 {
			names, err := trailerNames(tr, true)
			if err != nil {
				return nil, responseError(err)
			}
			resp.Trailer = names
		}
	case len(cls) > 0:
		resp.ContentLength = length
		b.lim = io.LimitedReader{R: cc.br, N: length}
		b.r = &b.lim
	default:
		b.r = cc.br
		closeAsked = true
	}
	delete(h, "Transfer-Encoding")
	if len(te) > 0 {
		resp.TransferEncoding = []string{"chunked"}
	}
	resp.Close = closeAsked
	b.reusable = !closeAsked
	if noBody || resp.ContentLength == 0 {
		b.finish(true)
	}
	return b, nil
}

// singleLength reads Content-Length values that are all the same
// text. Equal numbers written differently ("02" and "2") are refused: a
// reader that compares the text, as net/http does, refuses them, and the
// proxy must not read a framing another reader would not.
func singleLength(vs []string) (int64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	var n int64 = -1
	first := ""
	for _, v := range vs {
		for more := true; more; {
			var part string
			part, v, more = strings.Cut(v, ",")
			part = strings.TrimSpace(part)
			m, ok := parseContentLength(part)
			if !ok || (n >= 0 && part != first) {
				return 0, false
			}
			n, first = m, part
		}
	}
	return n, true
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// trailerReader copies the chunked body's trailers into the response at
// its end.
type trailerReader struct {
	cr   *ChunkedReader
	resp *http.Response
}

func (t *trailerReader) Read(p []byte) (int, error) {
	n, err := t.cr.Read(p)
	if err == io.EOF {
		for k, v := range t.cr.Trailer() {
			if t.resp.Trailer == nil {
				t.resp.Trailer = http.Header{}
			}
			t.resp.Trailer[k] = v
		}
	}
	return n, err
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, io.EOF
	}
	b.mu.Unlock()
	n, err := b.r.Read(p)
	if err == io.EOF {
		if lr, ok := b.r.(*io.LimitedReader); ok && lr.N > 0 {
			err = io.ErrUnexpectedEOF
		} else if b.r == io.Reader(b.cc.br) {
			b.finish(false) // read to the end of the connection
			return n, io.EOF
		} else {
			b.finish(true)
			return n, io.EOF
		}
	}
	if lr, ok := b.r.(*io.LimitedReader); ok && lr.N == 0 && err == nil {
		b.finish(true)
		return n, io.EOF
	}
	if err != nil {
		b.finish(false)
	}
	return n, err
}

// finish ends the exchange: the connection goes back to the pool when the
// response was read whole, the request body written whole and nothing
// asked to close it.
func (b *clientBody) finish(complete bool) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.mu.Unlock()
	stopped := b.stop()
	reuse := complete && b.reusable && stopped
	if b.async != nil {
		b.async.responded(reuse)
		return
	}
	if reuse {
		b.cl.put(b.cc)
		return
	}
	b.cc.c.Close()
}

// bodyWriter is a request body written on a goroutine of its own while
// the response is read. The connection goes back to the pool only when
// both ended cleanly, whichever ends last deciding.
type bodyWriter struct {
	cl       *Client
	cc       *clientConn
	failed   atomic.Pointer[RequestBodyError]
	eof      atomic.Bool   // the whole body was read from its source
	finished chan struct{} // closed when writing ended

	mu        sync.Mutex
	writeDone bool
	writeErr  error
	respDone  bool
	respReuse bool
	settled   bool
}

// lastChunkWait bounds how long a response that ended cleanly waits for
// the end of a body already read whole to be written (a few bytes the
// upstream, which has answered, reads at once); past it the connection is
// closed instead of reused.
const lastChunkWait = time.Second

// failure returns the request body's read error, if reading it failed.
func (w *bodyWriter) failure() *RequestBodyError {
	if w == nil {
		return nil
	}
	return w.failed.Load()
}

// written records the end of the body.
func (w *bodyWriter) written(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeDone, w.writeErr = true, err
	close(w.finished)
	if w.respDone {
		w.settle(w.respReuse && err == nil)
	}
}

// responded records the end of the response and whether it leaves the
// connection reusable. When only the end of the body remains to be
// written, it waits for it, so that the next request finds the connection
// in the pool.
func (w *bodyWriter) responded(reuse bool) {
	if reuse && w.eof.Load() {
		select {
		case <-w.finished:
		default:
			_ = w.cc.c.SetWriteDeadline(time.Now().Add(lastChunkWait))
			<-w.finished
			_ = w.cc.c.SetWriteDeadline(time.Time{})
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.respDone, w.respReuse = true, reuse
	switch {
	case w.writeDone:
		w.settle(reuse && w.writeErr == nil)
	case !reuse:
		// The writer, still running, fails on the closed connection.
		w.settle(false)
	}
	// Otherwise the writer, still reading the body, decides when it ends.
}

func (w *bodyWriter) settle(reuse bool) {
	if w.settled {
		return
	}
	w.settled = true
	if reuse {
		w.cl.put(w.cc)
		return
	}
	w.cc.c.Close()
}

// Close ends the body; unread bytes make the connection unusable.
func (b *clientBody) Close() error {
	b.finish(false)
	return nil
}
