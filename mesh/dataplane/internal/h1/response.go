package h1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// response is the http.ResponseWriter of one exchange.
type response struct {
	sc       *serverConn
	req      *http.Request
	header   http.Header
	draining bool

	wroteHeader bool
	status      int
	noBody      bool
	chunked     bool
	cl          int64 // -1: not sized
	written     int64
	closeAfter  bool
	hijacked    bool
	sent100     bool
	err         error
}

// Header returns the response header.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sends the status line and header. A 1xx status other than
// 101 sends an informational response and may be followed by others.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader || w.hijacked {
		return
	}
	if code < 100 || code > 999 {
		code = http.StatusInternalServerError
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if code >= 100 && code < 200 {
		if code == http.StatusSwitchingProtocols {
			return // only through Hijack
		}
		if code == http.StatusContinue {
			if w.sent100 {
				return
			}
			w.sent100 = true
		}
		writeStatus(sc.bw, code)
		w.err = writeFields(sc.bw, w.header, nil)
		if err := sc.bw.Flush(); err != nil {
			w.err = err
		}
		return
	}
	w.wroteHeader, w.status = true, code
	w.cl = -1
	if v := w.header["Content-Length"]; len(v) == 1 {
		if n, ok := parseContentLength(v[0]); ok {
			w.cl = n
		}
	}
	if w.cl < 0 {
		delete(w.header, "Content-Length")
	}
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	closeAsked := false
	for _, t := range ConnectionTokens(w.header) {
		closeAsked = closeAsked || t == "close"
	}
	if b, ok := w.req.Body.(*Body); ok && b.failed.Load() {
		// The request body broke off or was malformed: the connection
		// cannot carry another request, and the answer says so.
		closeAsked = true
	}
	w.closeAfter = w.req.Close || w.draining || closeAsked
	switch {
	case w.noBody:
	case w.cl >= 0:
	case w.req.ProtoMinor == 1:
		w.chunked = true
	default:
		w.closeAfter = true
	}
	if code == http.StatusNoContent || code == http.StatusNotModified {
		delete(w.header, "Content-Length")
		w.cl = -1
	}

	writeStatus(sc.bw, code)
	var extra []string
	if w.chunked {
		extra = append(extra, "Transfer-Encoding: chunked")
		if tr := w.declaredTrailers(); len(tr) > 0 {
			extra = append(extra, "Trailer: "+strings.Join(tr, ", "))
		}
	}
	switch {
	case w.closeAfter:
		extra = append(extra, "Connection: close")
	case w.req.ProtoMinor == 0:
		extra = append(extra, "Connection: keep-alive")
	}
	w.err = writeFields(sc.bw, w.header, extra)
}

func writeStatus(bw *bufio.Writer, code int) {
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(code))
	bw.WriteByte(' ')
	bw.WriteString(text)
	bw.WriteString("\r\n")
}

// writeFields writes h without hop-by-hop, trailer-announcement and
// invalid fields, then the extra lines and the blank line.
func writeFields(bw *bufio.Writer, h http.Header, extra []string) error {
	for k, vs := range h {
		if skipOnWrite(k) {
			continue
		}
		for _, v := range vs {
			if !ValidHeader(k, v) {
				continue
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	for _, e := range extra {
		bw.WriteString(e)
		bw.WriteString("\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

func skipOnWrite(k string) bool {
	if strings.HasPrefix(k, http.TrailerPrefix) {
		return true
	}
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Http2-Settings":
		return true
	}
	return false
}

func (w *response) declaredTrailers() []string {
	var out []string
	for _, v := range w.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" && ValidName(k) {
				out = append(out, http.CanonicalHeaderKey(k))
			}
		}
	}
	return out
}

// ErrBodyNotAllowed is returned by Write for responses that have no body.
var ErrBodyNotAllowed = errors.New("h1: response to this request or with this status has no body")

// ErrContentLength is returned by Write beyond the declared length.
var ErrContentLength = errors.New("h1: wrote more than the declared Content-Length")

// Write writes body bytes, framed as the header announced.
func (w *response) Write(p []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		return 0, ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	var err error
	switch {
	case w.cl >= 0:
		if left := w.cl - w.written; int64(len(p)) > left {
			n, _ := sc.bw.Write(p[:left])
			w.written += int64(n)
			return n, ErrContentLength
		}
		_, err = sc.bw.Write(p)
	case w.chunked:
		sc.bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		sc.bw.WriteString("\r\n")
		sc.bw.Write(p)
		_, err = sc.bw.WriteString("\r\n")
	default:
		_, err = sc.bw.Write(p)
	}
	if err != nil {
		w.err = err
		return 0, err
	}
	w.written += int64(len(p))
	return len(p), nil
}

// Flush sends what is buffered.
func (w *response) Flush() {
	if w.hijacked {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sc.wmu.Lock()
	if err := w.sc.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	w.sc.wmu.Unlock()
}

// FlushError is Flush reporting the write error.
func (w *response) FlushError() error {
	w.Flush()
	return w.err
}

// sendContinue answers Expect: 100-continue when the handler first reads
// the body, unless the final response already started.
func (w *response) sendContinue() {
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if w.wroteHeader || w.sent100 || w.hijacked {
		return
	}
	w.sent100 = true
	sc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	_ = sc.bw.Flush()
}

// finish ends the response: the last chunk with trailers, or a check that
// a sized body was complete.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if w.chunked && w.err == nil {
		sc.bw.WriteString("0\r\n")
		tr := http.Header{}
		for _, k := range w.declaredTrailers() {
			if vs := w.header[k]; len(vs) > 0 {
				tr[k] = vs
			}
		}
		for k, vs := range w.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && name != "" {
				tr[http.CanonicalHeaderKey(name)] = vs
			}
		}
		for k := range tr {
			if forbiddenTrailer(k) {
				delete(tr, k)
			}
		}
		w.err = writeFields(sc.bw, tr, nil)
	}
	if w.cl >= 0 && !w.noBody && w.written < w.cl {
		w.closeAfter = true
	}
	if err := sc.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

// Hijack hands the connection to the caller (for a protocol switch). The
// ReadWriter's reader holds bytes the client already sent.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		return nil, nil, errors.New("h1: hijack after the response started")
	}
	sc := w.sc
	sc.stopBackgroundRead()
	w.hijacked = true
	sc.wmu.Lock()
	err := sc.bw.Flush()
	sc.wmu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return sc.pc, bufio.NewReadWriter(sc.br, sc.bw), nil
}

// WriteResponseHead writes a status line and header fields (without
// hop-by-hop or invalid ones, plus the extra lines given verbatim), for a
// hijacked connection such as a 101 Switching Protocols answer.
func WriteResponseHead(w io.Writer, code int, h http.Header, extra ...string) error {
	bw := bufio.NewWriter(w)
	writeStatus(bw, code)
	if err := writeFields(bw, h, extra); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteRequestHead writes an HTTP/1.1 request line and header fields for
// a request without a body (an upgrade), with Host first. Hop-by-hop and
// invalid fields are skipped; extra lines are written verbatim.
func WriteRequestHead(w io.Writer, method, target, host string, h http.Header, extra ...string) error {
	if !validMethod(method) || checkTarget(method, target) != nil || !validHost(host) {
		return errors.New("h1: invalid request line or host")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if err := writeFields(bw, h, extra); err != nil {
		return err
	}
	return bw.Flush()
}
