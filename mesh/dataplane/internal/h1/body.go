package h1

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Body is the body of a request read by ReadRequest: a Content-Length or
// chunked framing over the connection. It is safe to close while another
// goroutine reads; reads after Close fail.
type Body struct {
	mu        sync.Mutex
	src       io.Reader
	sized     bool
	remaining int64
	trailer   http.Header // the request's Trailer map, filled at EOF
	eof       bool
	closed    bool
	err       error
	onRead    func()      // before the first read (100 Continue)
	onEOF     func()      // once, when the end was read
	failed    atomic.Bool // a read failed: the connection cannot carry another request
}

// Read reads the body. At the end of a chunked body the request's Trailer
// map holds the trailers that were received.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.eof:
		return 0, io.EOF
	case b.err != nil:
		return 0, b.err
	}
	if f := b.onRead; f != nil {
		b.onRead = nil
		f()
	}
	n, err := b.src.Read(p)
	if b.sized {
		b.remaining -= int64(n)
		switch {
		case b.remaining == 0:
			err = io.EOF
		case err == io.EOF:
			err = io.ErrUnexpectedEOF
		}
	}
	if err == io.EOF {
		if cr, ok := b.src.(*ChunkedReader); ok {
			for k, v := range cr.Trailer() {
				if b.trailer != nil {
					b.trailer[k] = v
				}
			}
		}
		b.eof = true
		if f := b.onEOF; f != nil {
			b.onEOF = nil
			f()
		}
	} else if err != nil {
		b.err = err
		b.failed.Store(true)
	}
	return n, err
}

// Close marks the body closed; later reads fail.
func (b *Body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// sawEOF reports whether the body was read to its end.
func (b *Body) sawEOF() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// drain reads what is left of the body, up to limit bytes, and reports
// whether it reached the end.
func (b *Body) drain(limit int64) bool {
	b.mu.Lock()
	if b.eof {
		b.mu.Unlock()
		return true
	}
	if b.err != nil {
		b.mu.Unlock()
		return false
	}
	b.closed = false // the server may drain what the handler closed
	b.mu.Unlock()
	_, err := io.Copy(io.Discard, io.LimitReader(readerFunc(b.Read), limit))
	if err != nil {
		return false
	}
	return b.sawEOF()
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// ChunkedReader reads an HTTP/1.1 chunked body strictly (RFC 9112 section
// 7.1): chunk sizes are hexadecimal digits only, every line ends in CRLF,
// chunk extensions must be well formed (tokens or complete quoted
// strings) and are discarded, and a sender may not add more than 16 KiB
// of framing overhead beyond a small allowance per chunk. After the last
// chunk the trailer section is read; Trailer returns it.
type ChunkedReader struct {
	lr      lineReader
	n       int64
	state   uint8
	excess  int64
	trailer http.Header
	maxTr   int
	err     error
}

const (
	chunkHeader = iota
	chunkData
	chunkCRLF
	chunkDone
)

// maxChunkLine bounds a chunk-size line with its extensions.
const maxChunkLine = 4096

// NewChunkedReader reads a chunked body from br. maxTrailerBytes bounds
// the trailer section (0: 16 KiB).
func NewChunkedReader(br *bufio.Reader, maxTrailerBytes int) *ChunkedReader {
	if maxTrailerBytes <= 0 {
		maxTrailerBytes = DefaultMaxTrailerBytes
	}
	return &ChunkedReader{lr: lineReader{br: br, budget: 1 << 62}, maxTr: maxTrailerBytes}
}

// Trailer returns the trailers, valid once Read returned io.EOF.
func (cr *ChunkedReader) Trailer() http.Header { return cr.trailer }

var (
	errChunkOverhead = errors.New("h1: chunked encoding holds too much framing overhead")
	errChunkCRLF     = errors.New("h1: chunk data not followed by CRLF")
)

// Read implements io.Reader.
func (cr *ChunkedReader) Read(p []byte) (int, error) {
	for cr.err == nil {
		switch cr.state {
		case chunkDone:
			return 0, io.EOF
		case chunkHeader:
			line, err := cr.lr.line(maxChunkLine, http.StatusBadRequest)
			if err != nil {
				cr.fail(err)
				break
			}
			size, err := parseChunkLine(line)
			if err != nil {
				cr.fail(err)
				break
			}
			cr.excess += int64(len(line)) + 2
			if size == 0 {
				cr.readTrailers()
				if cr.err == nil {
					cr.state = chunkDone
				}
				break
			}
			cr.excess -= 16 + 2*size
			if cr.excess < 0 {
				cr.excess = 0
			}
			if cr.excess > 16<<10 {
				cr.fail(errChunkOverhead)
				break
			}
			cr.n, cr.state = size, chunkData
		case chunkData:
			if len(p) == 0 {
				return 0, nil
			}
			if int64(len(p)) > cr.n {
				p = p[:cr.n]
			}
			m, err := cr.lr.br.Read(p)
			cr.n -= int64(m)
			if cr.n == 0 {
				cr.state = chunkCRLF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				cr.fail(err)
			}
			if m > 0 || err != nil {
				return m, err
			}
		case chunkCRLF:
			a, err1 := cr.lr.br.ReadByte()
			b, err2 := cr.lr.br.ReadByte()
			switch {
			case err1 != nil || err2 != nil:
				cr.fail(io.ErrUnexpectedEOF)
			case a != '\r' || b != '\n':
				cr.fail(errChunkCRLF)
			default:
				cr.state = chunkHeader
			}
		}
	}
	return 0, cr.err
}

func (cr *ChunkedReader) fail(err error) {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	cr.err = err
}

func (cr *ChunkedReader) readTrailers() {
	lr := lineReader{br: cr.lr.br, budget: cr.maxTr}
	h, err := readFields(&lr, fieldRules{maxLine: cr.maxTr, maxFields: 64, tooLarge: http.StatusBadRequest})
	if err != nil {
		cr.fail(err)
		return
	}
	for k := range h {
		if forbiddenTrailer(k) {
			delete(h, k)
		}
	}
	cr.trailer = h
}

// parseChunkLine reads "1*HEXDIG *( BWS ; BWS name [ BWS = BWS value ] )".
func parseChunkLine(line []byte) (int64, error) {
	i := 0
	var size int64
	for i < len(line) && isHex(line[i]) {
		if i >= 15 {
			return 0, bad("chunk size too large")
		}
		size = size<<4 | int64(unhex(line[i]))
		i++
	}
	if i == 0 {
		return 0, bad("chunk line without a hexadecimal size")
	}
	rest := line[i:]
	for len(rest) > 0 {
		rest = skipBWS(rest)
		if len(rest) == 0 || rest[0] != ';' {
			return 0, bad("malformed chunk extension")
		}
		rest = skipBWS(rest[1:])
		n := tokenLen(rest)
		if n == 0 {
			return 0, bad("chunk extension without a name")
		}
		rest = rest[n:]
		after := skipBWS(rest)
		if len(after) > 0 && after[0] == '=' {
			rest = skipBWS(after[1:])
			if len(rest) > 0 && rest[0] == '"' {
				q, ok := quotedLen(rest)
				if !ok {
					return 0, bad("unterminated quoted chunk extension")
				}
				rest = rest[q:]
			} else {
				n := tokenLen(rest)
				if n == 0 {
					return 0, bad("chunk extension without a value")
				}
				rest = rest[n:]
			}
		}
	}
	return size, nil
}

func skipBWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func tokenLen(b []byte) int {
	n := 0
	for n < len(b) && isTokenChar(b[n]) {
		n++
	}
	return n
}

// quotedLen returns the length of the quoted string at the start of b.
func quotedLen(b []byte) (int, bool) {
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) || !(b[i+1] == '\t' || b[i+1] >= ' ' && b[i+1] != 0x7f) {
				return 0, false
			}
			i++
		case c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || c >= 0x80:
		default:
			return 0, false
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
