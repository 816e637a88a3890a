package tapapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// Backend finds the meshed pods and taps their proxies.
type Backend interface {
	// Targets lists the meshed pods of namespace.
	Targets(ctx context.Context, namespace string) ([]viz.Target, error)
	// Tap opens a tap of t's proxy, naming peers with ix. The stream
	// ends when ctx ends; Close releases it.
	Tap(ctx context.Context, t viz.Target, req viz.TapRequest, ix *viz.Addresses) (Stream, error)
}

// Stream is an open tap of one proxy.
type Stream interface {
	viz.EventStream
	Close() error
}

// Limits bound what the server does for its users.
type Limits struct {
	// TapsPerUser bounds the taps one user holds open at once.
	TapsPerUser int
	// PodsPerTap bounds the proxies one tap opens; the rest are named in
	// a warning.
	PodsPerTap int
	// EventsPerSecond bounds the events one tap sends; more are dropped
	// and counted.
	EventsPerSecond int
	// Queue bounds the events waiting to be written on one tap; more are
	// dropped and counted.
	Queue int
	// MaxEvents ends a tap after this many events, whatever it asked.
	MaxEvents uint64
	// WriteTimeout ends a tap whose reader has not taken a write within
	// it.
	WriteTimeout time.Duration
}

// DefaultLimits are the limits of New.
func DefaultLimits() Limits {
	return Limits{TapsPerUser: 8, PodsPerTap: 100, EventsPerSecond: 1000, Queue: 1024, MaxEvents: 10_000_000, WriteTimeout: 30 * time.Second}
}

// Validate refuses limits that are not all positive.
func (l Limits) Validate() error {
	if l.TapsPerUser <= 0 || l.PodsPerTap <= 0 || l.EventsPerSecond <= 0 || l.Queue <= 0 || l.MaxEvents == 0 || l.WriteTimeout <= 0 {
		return fmt.Errorf("tapapi: limits %+v: every limit must be positive", l)
	}
	return nil
}

// Option tunes New.
type Option func(*Server)

// WithLimits replaces DefaultLimits.
func WithLimits(l Limits) Option { return func(s *Server) { s.limits = l } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// Server is the tap API's http.Handler.
type Server struct {
	backend Backend
	authn   Authenticator
	authz   Authorizer
	limits  Limits
	log     *slog.Logger

	mu   sync.Mutex
	taps map[string]int // open taps per user
}

// New returns the API over backend, accepting requests authn
// authenticates and authz allows.
func New(backend Backend, authn Authenticator, authz Authorizer, opts ...Option) (*Server, error) {
	s := &Server{backend: backend, authn: authn, authz: authz, limits: DefaultLimits(),
		log: slog.New(slog.DiscardHandler), taps: map[string]int{}}
	for _, o := range opts {
		o(s)
	}
	if backend == nil || authn == nil || authz == nil {
		return nil, errors.New("tapapi: New needs a backend, an authenticator and an authorizer")
	}
	if err := s.limits.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// ServeHTTP answers discovery (the API group, for the aggregator and
// kubectl) and health without authentication, and taps with it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveDiscovery(w, r) {
		return
	}
	t, isTap, err := ParsePath(r.URL.Path)
	switch {
	case !isTap:
		writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("tapapi: no such path %q", r.URL.Path))
		return
	case err != nil:
		writeStatus(w, http.StatusNotFound, "NotFound", err.Error())
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "tapapi: a tap is a POST")
		return
	}
	user, err := s.authn.Authenticate(r)
	if err != nil {
		s.log.Info("tap refused", "path", r.URL.Path, "remote", r.RemoteAddr, "error", err)
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", err.Error())
		return
	}
	attrs := Attributes{User: user, Namespace: t.Namespace, Resource: t.Resource, Name: t.Name}
	allowed, reason, err := s.authz.Authorize(r.Context(), attrs)
	if err != nil {
		s.log.Warn("tap authorization failed", "user", user.Name, "target", t.String(), "error", err)
		writeStatus(w, http.StatusInternalServerError, "InternalError", "tapapi: authorizing the tap: "+err.Error())
		return
	}
	if !allowed {
		s.log.Info("tap forbidden", "user", user.Name, "target", t.String())
		writeStatus(w, http.StatusForbidden, "Forbidden", forbidden(attrs, reason))
		return
	}
	req, err := readRequest(r)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	release, ok := s.acquire(user.Name)
	if !ok {
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests",
			fmt.Sprintf("tapapi: user %q holds %d taps open, the most one user may", user.Name, s.limits.TapsPerUser))
		return
	}
	defer release()
	s.log.Info("tap", "user", user.Name, "target", t.String())
	s.tap(w, r, t, req)
}

func readRequest(r *http.Request) (Request, error) {
	var req Request
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return req, fmt.Errorf("tapapi: reading the request: %w", err)
	}
	if len(body) > MaxRequestBytes {
		return req, fmt.Errorf("tapapi: request body over %d bytes", MaxRequestBytes)
	}
	if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, fmt.Errorf("tapapi: request body: %w", err)
		}
		if dec.More() {
			return req, errors.New("tapapi: request body: more than one JSON value")
		}
	}
	return req, req.Validate()
}

func (s *Server) acquire(user string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taps[user] >= s.limits.TapsPerUser {
		return nil, false
	}
	s.taps[user]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.taps[user]--; s.taps[user] <= 0 {
			delete(s.taps, user)
		}
	}, true
}

// tap runs one authorized tap until the reader goes, the proxies' taps
// all end, or the tap has sent its events.
func (s *Server) tap(w http.ResponseWriter, r *http.Request, t Target, req Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	all, err := s.backend.Targets(ctx, t.Namespace)
	if err != nil {
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "tapapi: listing the meshed pods: "+err.Error())
		return
	}
	sel := t.Select().Select(all)
	if len(sel) == 0 {
		writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("tapapi: no meshed pods match %s", t))
		return
	}
	var warnings []string
	if len(sel) > s.limits.PodsPerTap {
		warnings = append(warnings, fmt.Sprintf("%d pods match %s; tapping the first %d", len(sel), t, s.limits.PodsPerTap))
		sel = sel[:s.limits.PodsPerTap]
	}
	ix := viz.NewAddresses(all)
	tr := req.TapRequest()
	events := make(chan viz.Event, s.limits.Queue)
	notes := make(chan string, 16)
	var dropped atomic.Uint64
	var wg sync.WaitGroup
	for _, pod := range sel {
		st, err := s.backend.Tap(ctx, pod, tr, ix)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("cannot tap %s: %v", pod, err))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			for {
				e, err := st.Recv()
				if err != nil {
					// io.EOF: the proxy ended the tap (its limit).
					if ctx.Err() == nil && !errors.Is(err, io.EOF) {
						select {
						case notes <- fmt.Sprintf("tap of %s ended: %v", pod, err):
						default:
						}
					}
					return
				}
				if e.Kind == viz.RequestInit && req.To != "" && !tr.Filter.Matches(e) {
					continue
				}
				select {
				case events <- e:
				default:
					dropped.Add(1)
				}
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	defer func() { cancel(); <-done }()

	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: s.limits.WriteTimeout}
	sw.bw = bufio.NewWriter(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for _, m := range warnings {
		sw.write(Message{Warning: m})
	}
	if sw.flush() != nil {
		return
	}
	maxEvents := s.limits.MaxEvents
	if req.MaxEvents > 0 && req.MaxEvents < maxEvents {
		maxEvents = req.MaxEvents
	}
	bucket := newBucket(s.limits.EventsPerSecond, time.Now())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sent uint64
	for {
		select {
		case e := <-events:
			if !bucket.take(time.Now()) {
				dropped.Add(1)
				continue
			}
			sw.write(Message{Event: &e})
			sent++
			if sent >= maxEvents {
				s.flushDropped(sw, &dropped)
				_ = sw.flush()
				return
			}
			if len(events) == 0 && sw.flush() != nil {
				return
			}
		case m := <-notes:
			sw.write(Message{Warning: m})
			if sw.flush() != nil {
				return
			}
		case <-tick.C:
			if s.flushDropped(sw, &dropped) && sw.flush() != nil {
				return
			}
		case <-done:
			for len(events) > 0 {
				e := <-events
				sw.write(Message{Event: &e})
			}
			for len(notes) > 0 {
				sw.write(Message{Warning: <-notes})
			}
			s.flushDropped(sw, &dropped)
			_ = sw.flush()
			return
		case <-ctx.Done():
			return
		}
	}
}

func (s *Server) flushDropped(sw *streamWriter, dropped *atomic.Uint64) bool {
	if n := dropped.Swap(0); n > 0 {
		sw.write(Message{Dropped: n})
		return true
	}
	return false
}

// streamWriter writes messages as JSON lines, each flush bounded by a
// write deadline, so a reader that stops reading ends the tap.
type streamWriter struct {
	w       http.ResponseWriter
	bw      *bufio.Writer
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

func (s *streamWriter) write(m Message) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		return // an event is plain data; nothing to send if it fails
	}
	if s.bw.Available() < len(b)+1 {
		if s.err = s.flush(); s.err != nil {
			return
		}
	}
	_, _ = s.bw.Write(append(b, '\n'))
}

func (s *streamWriter) flush() error {
	if s.err != nil {
		return s.err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if err := s.bw.Flush(); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	return nil
}

// bucket is a token bucket of rate tokens per second, holding at most
// rate.
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate int, now time.Time) *bucket {
	return &bucket{rate: float64(rate), tokens: float64(rate), last: now}
}

func (b *bucket) take(now time.Time) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.rate, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
