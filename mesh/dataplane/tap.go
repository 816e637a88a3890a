package dataplane

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Tap: the proxy reports the requests it handles, as they happen, to
// observers that opened a Tap.Observe stream (tap_server.go). The data
// path pays one atomic load per request while no tap is open. With taps
// open, a request is matched against each; a matched request gets a
// tapRequest that hands its events (request head, response head, response
// end) to the tap's goroutine through a bounded channel, never waiting: a
// full channel or a spent rate budget drops the event and counts it.

// tapHub holds the open taps.
type tapHub struct {
	open     atomic.Int32                  // taps open: the data path's cheap check
	sessions atomic.Pointer[[]*tapSession] // copy on write
	mu       sync.Mutex
	nextBase atomic.Uint32

	maxTaps      int
	eventsPerSec int
	buffer       int

	sent, dropRate, dropBuffer prometheus.Counter
	refused                    *prometheus.CounterVec
	openGauge                  prometheus.GaugeFunc
}

// Defaults of the tap limits (WEFT_PROXY_TAP_*).
const (
	defaultTapMaxTaps      = 16
	defaultTapEventsPerSec = 1000
	tapBuffer              = 1024 // events held per tap before dropping
	tapMaxConns            = 64   // connections the tap listener holds at once
)

func newTapHub(maxTaps, eventsPerSec int) *tapHub {
	h := &tapHub{maxTaps: maxTaps, eventsPerSec: eventsPerSec, buffer: tapBuffer}
	h.nextBase.Store(rand.Uint32())
	h.sent = prometheus.NewCounter(prometheus.CounterOpts{Name: "tap_events_sent_total", Help: "Tap events handed to tap streams."})
	h.dropRate = prometheus.NewCounter(prometheus.CounterOpts{Name: "tap_events_dropped_total",
		Help:        "Tap events dropped: over the tap's events-per-second budget (reason=rate) or its buffer full because the tapper reads too slowly (reason=buffer).",
		ConstLabels: prometheus.Labels{"reason": "rate"}})
	h.dropBuffer = prometheus.NewCounter(prometheus.CounterOpts{Name: "tap_events_dropped_total",
		Help:        "Tap events dropped: over the tap's events-per-second budget (reason=rate) or its buffer full because the tapper reads too slowly (reason=buffer).",
		ConstLabels: prometheus.Labels{"reason": "buffer"}})
	h.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tap_streams_refused_total",
		Help: "Tap streams refused: the client identity is not an accepted tapper (identity), too many taps are open (limit), or the request is invalid (invalid)."},
		[]string{"reason"})
	h.openGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tap_streams_open", Help: "Tap streams open now."},
		func() float64 { return float64(h.open.Load()) })
	return h
}

func (h *tapHub) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.sent, h.dropRate, h.dropBuffer, h.refused, h.openGauge}
}

// on reports whether any tap is open.
func (h *tapHub) on() bool { return h.open.Load() > 0 }

// add registers a session; false when maxTaps are open.
func (h *tapHub) add(s *tapSession) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cur []*tapSession
	if p := h.sessions.Load(); p != nil {
		cur = *p
	}
	if len(cur) >= h.maxTaps {
		return false
	}
	next := append(append(make([]*tapSession, 0, len(cur)+1), cur...), s)
	h.sessions.Store(&next)
	h.open.Store(int32(len(next)))
	return true
}

func (h *tapHub) remove(s *tapSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.sessions.Load()
	if p == nil {
		return
	}
	next := make([]*tapSession, 0, len(*p))
	for _, o := range *p {
		if o != s {
			next = append(next, o)
		}
	}
	h.sessions.Store(&next)
	h.open.Store(int32(len(next)))
}

// tapSession is one open Observe stream.
type tapSession struct {
	hub     *tapHub
	base    uint32
	match   *tapMatch
	headers bool
	limit   uint64

	taken    atomic.Uint64 // requests this tap took (ids)
	inflight atomic.Int64  // taken requests whose end was not handed over yet
	closed   atomic.Bool
	events   chan *tapEvent
	idle     chan struct{} // signalled when the last in-flight request ends after the limit

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (h *tapHub) newSession(m *tapMatch, headers bool, limit uint32) *tapSession {
	return &tapSession{
		hub: h, base: h.nextBase.Add(1), match: m, headers: headers, limit: uint64(limit),
		events: make(chan *tapEvent, h.buffer), idle: make(chan struct{}, 1),
		tokens: float64(h.eventsPerSec), last: time.Now(),
	}
}

// allow spends n events of the tap's per-second budget.
func (s *tapSession) allow(n float64, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rate := float64(s.hub.eventsPerSec)
	s.tokens = min(rate, s.tokens+now.Sub(s.last).Seconds()*rate)
	s.last = now
	if s.tokens < n {
		return false
	}
	s.tokens -= n
	return true
}

// done reports whether the tap took its limit and every taken request
// ended: the stream is complete.
func (s *tapSession) done() bool {
	return s.taken.Load() >= s.limit && s.inflight.Load() <= 0
}

// send hands an event over without waiting; false when it was dropped.
func (s *tapSession) send(e *tapEvent) bool {
	if s.closed.Load() {
		return false
	}
	select {
	case s.events <- e:
		s.hub.sent.Inc()
		return true
	default:
		s.hub.dropBuffer.Inc()
		return false
	}
}

func (s *tapSession) release() {
	if s.inflight.Add(-1) <= 0 && s.taken.Load() >= s.limit {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// tapView is what a request is matched on and described with. It is
// built on the handler's stack only while a tap is open.
type tapView struct {
	direction ptap.TapEvent_ProxyDirection
	src, dst  netip.AddrPort
	r         *http.Request
	scheme    string
	method    string
	authority string
	path      string
	route     string

	// What the labels are made of, only when a tap needs them: the
	// endpoint (outbound), or the connection and the policy decision
	// (inbound). meta renders them; it is a plain function, so building a
	// view allocates nothing.
	ep   *Endpoint
	info *connInfo
	st   *portState
	res  *authz.Result
	meta func(v *tapView) (src, dst map[string]string)

	srcMap, dstMap map[string]string // rendered once
}

// labels renders the source and destination labels once.
func (v *tapView) labels() {
	if v.dstMap == nil && v.meta != nil {
		v.srcMap, v.dstMap = v.meta(v)
		if v.dstMap == nil {
			v.dstMap = map[string]string{}
		}
	}
}

func (v *tapView) dstLabel(k string) (string, bool) {
	v.labels()
	val, ok := v.dstMap[k]
	return val, ok
}

// tapRequest is one tapped request: the taps that took it and the event
// fields every event repeats.
type tapRequest struct {
	subs   []tapSub
	base   tapBase
	start  time.Time
	headAt time.Time
	ended  bool
}

type tapSub struct {
	s  *tapSession
	id uint64
}

// tapBase is what every event of a request carries.
type tapBase struct {
	direction        ptap.TapEvent_ProxyDirection
	src, dst         netip.AddrPort
	srcMeta, dstMeta map[string]string
	route            string
}

// tapEventKind is the step an event reports.
type tapEventKind int

const (
	tapRequestInit tapEventKind = iota
	tapResponseInit
	tapResponseEnd
)

// tapEvent is handed to a tap's goroutine, which turns it into a TapEvent.
type tapEvent struct {
	kind      tapEventKind
	base      *tapBase
	id        tapSub
	method    string
	scheme    string
	authority string
	path      string
	header    http.Header // request or response headers, or trailers at the end; nil unless extracted
	h2        bool        // add HTTP/2 pseudo-headers

	sinceRequest, sinceResponse time.Duration
	status                      int
	bytes                       uint64
	grpcStatus                  int64 // -1 when none
	resetCode                   int64 // -1 when none
}

// start matches a request against the open taps and, when one or more
// take it, sends their request-init events. It returns nil when no tap
// takes the request.
func (h *tapHub) start(v *tapView) *tapRequest {
	p := h.sessions.Load()
	if p == nil {
		return nil
	}
	var tr *tapRequest
	var now time.Time
	for _, s := range *p {
		if s.closed.Load() || s.taken.Load() >= s.limit || !s.match.matches(v) {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		if !s.allow(3, now) { // a request costs its three events up front
			h.dropRate.Add(3)
			continue
		}
		id := s.taken.Add(1)
		if id > s.limit {
			continue
		}
		s.inflight.Add(1)
		if tr == nil {
			tr = &tapRequest{start: now, base: tapBase{direction: v.direction, src: v.src, dst: v.dst, route: v.route}}
			v.labels()
			tr.base.srcMeta, tr.base.dstMeta = v.srcMap, v.dstMap
		}
		tr.subs = append(tr.subs, tapSub{s: s, id: id - 1})
	}
	if tr == nil {
		return nil
	}
	var hdr http.Header
	kept := tr.subs[:0]
	for _, sub := range tr.subs {
		e := &tapEvent{kind: tapRequestInit, base: &tr.base, id: sub, method: v.method, scheme: v.scheme,
			authority: v.authority, path: v.path, h2: v.r.ProtoMajor == 2, grpcStatus: -1, resetCode: -1}
		if sub.s.headers {
			if hdr == nil {
				hdr = v.r.Header.Clone()
			}
			e.header = hdr
		}
		if sub.s.send(e) {
			kept = append(kept, sub)
		} else {
			// Not reported at all rather than in part: its other two
			// events are counted as dropped too.
			h.dropBuffer.Add(2)
			sub.s.release()
		}
	}
	if len(kept) == 0 {
		return nil
	}
	tr.subs = kept
	return tr
}

// responseInit reports the response head. It is safe on a nil request.
func (tr *tapRequest) responseInit(status int, header http.Header, h2 bool) {
	if tr == nil || !tr.headAt.IsZero() {
		return
	}
	tr.headAt = time.Now()
	var hdr http.Header
	for _, sub := range tr.subs {
		e := &tapEvent{kind: tapResponseInit, base: &tr.base, id: sub, status: status, h2: h2,
			sinceRequest: tr.headAt.Sub(tr.start), grpcStatus: -1, resetCode: -1}
		if sub.s.headers && header != nil {
			if hdr == nil {
				hdr = header.Clone()
			}
			e.header = hdr
		}
		sub.s.send(e)
	}
}

// responseEnd reports the end of the response: its body bytes, the gRPC
// status (from trailers, or the head of a trailers-only response; -1 when
// none), the HTTP/2 reset code when the stream was reset (-1 when not) and
// the trailers. It releases the request's taps. It is safe on a nil
// request and runs once.
func (tr *tapRequest) responseEnd(bytes uint64, grpcStatus, resetCode int64, trailers http.Header) {
	if tr == nil || tr.ended {
		return
	}
	tr.ended = true
	now := time.Now()
	var since time.Duration
	if !tr.headAt.IsZero() {
		since = now.Sub(tr.headAt)
	}
	for _, sub := range tr.subs {
		e := &tapEvent{kind: tapResponseEnd, base: &tr.base, id: sub, bytes: bytes, grpcStatus: grpcStatus, resetCode: resetCode,
			sinceRequest: now.Sub(tr.start), sinceResponse: since}
		if sub.s.headers {
			e.header = trailers
		}
		sub.s.send(e)
		sub.s.release()
	}
}
