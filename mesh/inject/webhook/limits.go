package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
)

// Limiter caps the AdmissionReviews handled at once by the handlers that
// share it. A review beyond the cap is answered at once with 429 Too Many
// Requests and "Retry-After: 1", before its body is read: the API server
// retries such an answer within the webhook's timeout, then applies the
// webhook's failurePolicy. Give the injector and the validator of one
// process the same Limiter (WithLimiter) so that the cap bounds the
// process; without one, each handler has its own of DefaultMaxInFlight.
type Limiter struct {
	slots   chan struct{}
	refused atomic.Uint64
}

// NewLimiter returns a Limiter admitting n reviews at once.
func NewLimiter(n int) (*Limiter, error) {
	if n < 1 {
		return nil, fmt.Errorf("webhook: a limiter of %d reviews at once admits nothing", n)
	}
	return &Limiter{slots: make(chan struct{}, n)}, nil
}

// InFlight returns the number of reviews being handled now.
func (l *Limiter) InFlight() int { return len(l.slots) }

// Refused returns how many reviews were refused with 429 since the start.
func (l *Limiter) Refused() uint64 { return l.refused.Load() }

// acquire takes a slot without waiting; release gives it back.
func (l *Limiter) acquire() (release func(), ok bool) {
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, true
	default:
		l.refused.Add(1)
		return nil, false
	}
}

// WithLimiter makes the handler share l (default: a Limiter of
// DefaultMaxInFlight of its own).
func WithLimiter(l *Limiter) Option {
	return func(o *options) {
		if l != nil {
			o.limiter = l
		}
	}
}

// httpError is a failure answered with an HTTP status instead of an
// AdmissionReview.
type httpError struct {
	status int
	msg    string
	// closeHTTP1 ends an HTTP/1 connection after the answer, when the
	// body was not read.
	closeHTTP1 bool
}

// overloaded answers a review refused by the Limiter.
func overloaded(r *http.Request) *httpError {
	return &httpError{status: http.StatusTooManyRequests, msg: "webhook: too many AdmissionReviews in flight; retry", closeHTTP1: r.ProtoMajor == 1}
}

// checkRequest checks what can be checked before the body is read:
// method, content type, declared length.
func checkRequest(r *http.Request, maxBody int64) *httpError {
	if r.Method != http.MethodPost {
		return &httpError{status: http.StatusMethodNotAllowed, msg: "webhook: only POST is accepted"}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &httpError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("webhook: content type %q is not application/json", ct)}
		}
	}
	if r.ContentLength > maxBody {
		e := tooLarge(maxBody)
		e.closeHTTP1 = r.ProtoMajor == 1
		return e
	}
	return nil
}

func tooLarge(maxBody int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("webhook: AdmissionReview body exceeds the limit of %d bytes", maxBody)}
}

// readBody reads the whole body, at most maxBody bytes, into one buffer of
// its exact size when the length is declared, so that a review costs its
// size once while it is decoded.
func readBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, *httpError) {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	var buf []byte
	var err error
	if n := r.ContentLength; n >= 0 {
		buf = make([]byte, n)
		if _, err = io.ReadFull(body, buf); err == nil {
			// net/http ends the body at Content-Length; this only catches
			// a reader that does not.
			var one [1]byte
			if m, _ := body.Read(one[:]); m > 0 {
				return nil, &httpError{status: http.StatusBadRequest, msg: "webhook: body longer than its Content-Length"}
			}
		}
	} else {
		var b bytes.Buffer
		_, err = b.ReadFrom(body)
		buf = b.Bytes()
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(maxBody)
		}
		return nil, &httpError{status: http.StatusBadRequest, msg: "webhook: reading body: " + err.Error()}
	}
	return buf, nil
}

// readRequest does the HTTP part of a review: checks, a slot of the
// limiter, the body, the decoding. On success the caller must call
// release when done with the review. record gets the outcome of a
// failure.
func readRequest[O any](w http.ResponseWriter, r *http.Request, o options, record func(string)) (*request[O], func(), *httpError) {
	if herr := checkRequest(r, o.maxBody); herr != nil {
		record(outcomeOf(herr))
		return nil, nil, herr
	}
	release, ok := o.limiter.acquire()
	if !ok {
		record("overloaded")
		return nil, nil, overloaded(r)
	}
	// The slot goes back on every way out but success, a panic included.
	done := false
	defer func() {
		if !done {
			release()
		}
	}()
	body, herr := readBody(w, r, o.maxBody)
	if herr != nil {
		record(outcomeOf(herr))
		return nil, nil, herr
	}
	req, err := decodeRequest[O](body)
	if err != nil {
		record("bad_request")
		return nil, nil, &httpError{status: http.StatusBadRequest, msg: err.Error()}
	}
	done = true
	return req, release, nil
}

func outcomeOf(e *httpError) string {
	if e.status == http.StatusRequestEntityTooLarge {
		return "too_large"
	}
	return "bad_request"
}
