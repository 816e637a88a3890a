package outbound

import (
	"errors"
	"io"
	"sync"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
)

// ReplayBody lets a request body be sent more than once, for retries,
// while it streams: what the client sent is kept (up to max bytes) as the
// first attempt reads it, and a later attempt reads the kept bytes first,
// then the rest from the client. Once more than max bytes were read the
// body can no longer be replayed and only the current attempt reads on.
// An attempt that was superseded stops reading.
type ReplayBody struct {
	mu       sync.Mutex
	readMu   sync.Mutex // one read from the client at a time
	src      io.ReadCloser
	buf      []byte
	max      int64
	overflow bool
	srcDone  bool
	srcErr   error
	gen      int
}

var errStaleAttempt = errors.New("dataplane: request body taken by a later attempt")

func newReplayBody(src io.ReadCloser, max int64) *ReplayBody {
	return &ReplayBody{src: src, max: max}
}

// Replayable reports whether a new attempt could send the whole body;
// always true of a nil ReplayBody (a request whose body is not kept has
// none to send again).
func (rb *ReplayBody) Replayable() bool {
	if rb == nil {
		return true
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return !rb.overflow && rb.srcErr == nil
}

// attempt returns the body reader of a new attempt; earlier attempts'
// readers stop.
func (rb *ReplayBody) attempt() io.ReadCloser {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.gen++
	return &attemptBody{rb: rb, gen: rb.gen}
}

// Again returns the reader of the same attempt sent once more (the
// HTTP/2 pool's second try of a request the upstream refused
// unprocessed): the kept bytes first, then the rest from the client;
// the reader it replaces stops. Only while Replayable.
func (rb *ReplayBody) Again() io.ReadCloser { return rb.attempt() }

// close closes the client's body.
func (rb *ReplayBody) close() error { return rb.src.Close() }

type attemptBody struct {
	rb  *ReplayBody
	gen int
	pos int
}

func (a *attemptBody) Read(p []byte) (int, error) {
	rb := a.rb
	for {
		rb.mu.Lock()
		if a.gen != rb.gen {
			rb.mu.Unlock()
			return 0, errStaleAttempt
		}
		if a.pos < len(rb.buf) {
			n := copy(p, rb.buf[a.pos:])
			a.pos += n
			rb.mu.Unlock()
			return n, nil
		}
		if rb.srcDone {
			err := rb.srcErr
			rb.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		passThrough := rb.overflow
		rb.mu.Unlock()

		rb.readMu.Lock()
		rb.mu.Lock()
		// Another reader may have read while this one waited.
		if a.gen != rb.gen || a.pos < len(rb.buf) || rb.srcDone {
			rb.mu.Unlock()
			rb.readMu.Unlock()
			continue
		}
		rb.mu.Unlock()
		if passThrough {
			n, err := rb.src.Read(p)
			rb.readMu.Unlock()
			if err != nil {
				rb.mu.Lock()
				rb.srcDone = true
				if err != io.EOF {
					rb.srcErr = err
				}
				rb.mu.Unlock()
			}
			return n, err
		}
		chunk := make([]byte, min(len(p), 32<<10))
		n, err := rb.src.Read(chunk)
		rb.mu.Lock()
		rb.buf = append(rb.buf, chunk[:n]...)
		if int64(len(rb.buf)) > rb.max {
			rb.overflow = true
		}
		if err != nil {
			rb.srcDone = true
			if err != io.EOF {
				rb.srcErr = err
			}
		}
		rb.mu.Unlock()
		rb.readMu.Unlock()
		if n == 0 && err == nil {
			continue
		}
	}
}

func (a *attemptBody) Close() error { return nil }

// ReadReady reports whether Read would return without waiting for the
// client: kept bytes are there, the body ended, this attempt is stale, or
// the client's body says so.
func (a *attemptBody) ReadReady() bool {
	rb := a.rb
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if a.gen != rb.gen || a.pos < len(rb.buf) || rb.srcDone {
		return true
	}
	return httpcore.ReadReady(rb.src)
}
