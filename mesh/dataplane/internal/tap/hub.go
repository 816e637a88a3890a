package tap

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

// The hub: the proxy reports the requests it handles, as they happen, to
// observers that opened a Tap.Observe stream (server.go). The data
// path pays one atomic load per request while no tap is open. With taps
// open, a request is matched against each, on the handler's stack and
// without allocating. A matched request then asks the tap's budget for its
// three events (request head, response head, response end): a request the
// budget refuses costs a clock read and a counter increment, nothing is
// built for it. An admitted request gets one Request, which holds what
// its events say; each step hands the tap's goroutine a small item through
// a bounded channel, never waiting (a full channel drops and counts). The
// tap's goroutine encodes the event from the Request and sends it
// (wire.go), so marshalling and writing are off the request's path.
// Requests are reused (requestPool): each counts the items that
// still point at it and the request's own hold, and goes back to the pool
// when the last one is done, so that a tap of every request allocates
// nothing per request once warm.

// Hub holds the open taps.
type Hub struct {
	open     atomic.Int32               // taps open: the data path's cheap check
	sessions atomic.Pointer[[]*session] // copy on write
	mu       sync.Mutex
	nextBase atomic.Uint32

	maxTaps      int
	eventsPerSec int
	buffer       int
	epoch        time.Time // the budgets' clock counts from here (monotonic)

	sent, dropRate, dropBuffer prometheus.Counter
	refused                    *prometheus.CounterVec
	openGauge                  prometheus.GaugeFunc

	// The tap listener's gate (gate.go): handshakes under way, and
	// tapper connections holding a slot.
	handshakes, conns          atomic.Int32
	handshakeGauge, connsGauge prometheus.GaugeFunc
}

// Defaults of the tap limits (WEFT_PROXY_TAP_*).
const (
	DefaultMaxTaps      = 16
	DefaultEventsPerSec = 1000
	eventBuffer         = 1024 // events held per tap before dropping
	maxConns            = 64   // tapper connections the tap listener holds at once (gate.go)
)

func NewHub(maxTaps, eventsPerSec int) *Hub {
	h := &Hub{maxTaps: maxTaps, eventsPerSec: eventsPerSec, buffer: eventBuffer, epoch: time.Now()}
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
	h.handshakeGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tap_handshakes_pending",
		Help: "Connections to the tap listener in their TLS handshake now; none of them holds a connection slot."},
		func() float64 { return float64(h.handshakes.Load()) })
	h.connsGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tap_connections_open",
		Help: "Connections of accepted tappers open on the tap listener now, each holding one of its slots."},
		func() float64 { return float64(h.conns.Load()) })
	return h
}

func (h *Hub) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.sent, h.dropRate, h.dropBuffer, h.refused, h.openGauge, h.handshakeGauge, h.connsGauge}
}

// On reports whether any tap is open.
func (h *Hub) On() bool { return h.open.Load() > 0 }

// add registers a session; false when maxTaps are open.
func (h *Hub) add(s *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cur []*session
	if p := h.sessions.Load(); p != nil {
		cur = *p
	}
	if len(cur) >= h.maxTaps {
		return false
	}
	next := append(append(make([]*session, 0, len(cur)+1), cur...), s)
	h.sessions.Store(&next)
	h.open.Store(int32(len(next)))
	return true
}

func (h *Hub) remove(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.sessions.Load()
	if p == nil {
		return
	}
	next := make([]*session, 0, len(*p))
	for _, o := range *p {
		if o != s {
			next = append(next, o)
		}
	}
	h.sessions.Store(&next)
	h.open.Store(int32(len(next)))
}

// session is one open Observe stream.
type session struct {
	hub     *Hub
	base    uint32
	match   *matcher
	headers bool
	limit   uint64

	taken    atomic.Uint64 // requests this tap took (ids)
	inflight atomic.Int64  // taken requests whose end was not handed over yet
	closed   atomic.Bool
	events   chan item
	kick     chan struct{} // signalled when batchMax events wait
	idle     chan struct{} // signalled when the last in-flight request ends after the limit

	// The events-per-second budget, as a virtual clock (the generic cell
	// rate algorithm, equivalent to a bucket of eventsPerSec tokens
	// refilled continuously): spent is the time, in nanoseconds since the
	// hub's epoch, up to which the budget is used. An admission moves it
	// forward by the events' cost; it is refused when that would put spent
	// more than a second ahead of now.
	spent    atomic.Int64
	perEvent int64 // nanoseconds of budget one event costs
}

func (h *Hub) newSession(m *matcher, headers bool, limit uint32) *session {
	return &session{
		hub: h, base: h.nextBase.Add(1), match: m, headers: headers, limit: uint64(limit),
		events: make(chan item, h.buffer), idle: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		perEvent: int64(time.Second) / int64(max(h.eventsPerSec, 1)),
	}
}

// allow spends n events of the tap's per-second budget at now (nanoseconds
// since the hub's epoch). A refusal only reads.
func (s *session) allow(n int64, now int64) bool {
	cost := n * s.perEvent
	for {
		spent := s.spent.Load()
		next := max(spent, now) + cost
		if next-now > int64(time.Second) {
			return false
		}
		if s.spent.CompareAndSwap(spent, next) {
			return true
		}
	}
}

// done reports whether the tap took its limit and every taken request
// ended: the stream is complete.
func (s *session) done() bool {
	return s.taken.Load() >= s.limit && s.inflight.Load() <= 0
}

// send hands an item over without waiting; false when it was dropped.
func (s *session) send(it item) bool {
	if s.closed.Load() {
		return false
	}
	select {
	case s.events <- it:
		s.hub.sent.Inc()
		if len(s.events) == batchMax {
			select { // a full batch waits: the tap's goroutine need not
			case s.kick <- struct{}{}:
			default:
			}
		}
		return true
	default:
		s.hub.dropBuffer.Inc()
		return false
	}
}

// take receives a waiting item without waiting.
func (s *session) take() (item, bool) {
	select {
	case it := <-s.events:
		return it, true
	default:
		return item{}, false
	}
}

func (s *session) release() {
	if s.inflight.Add(-1) <= 0 && s.taken.Load() >= s.limit {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// View is what a request is matched on. The data path builds it on the
// handler's stack only while a tap is open (Hub.On), and matching it
// allocates nothing.
type View struct {
	Direction ptap.TapEvent_ProxyDirection
	Src, Dst  netip.AddrPort
	R         *http.Request
	Scheme    string
	Method    string
	Authority string
	Path      string
	Route     string // the route's name, "" without one

	// What the destination's labels are made of. Outbound: the identity
	// and discovery labels of the endpoint the request is sent to (empty
	// when the proxy answers it itself). Inbound: the client's connection
	// and the policy that decided on the request.
	DstIdentity string
	DstLabels   map[string]string // discovery's; never modified
	Peer        authz.Conn
	Server      *authz.Server
	Result      *authz.Result
}

// label is one label of an event's endpoint metadata.
type label struct{ k, v string }

// Request is one tapped request: the taps that took it and what its
// events say. The request's goroutine writes each step's fields once,
// before handing that step's items over (the channel orders the write
// before the tap goroutine's read); no field is written after its step.
//
// refs counts the holds on it: the request's own until responseEnd, and
// one per item handed to a tap and not yet encoded. The last release puts
// it back in requestPool; nothing may touch it after its own release.
type Request struct {
	refs    atomic.Int32
	subs    []sub
	subsBuf [1]sub // the usual single tap, without a second allocation
	ended   bool

	// Every event.
	direction ptap.TapEvent_ProxyDirection
	src, dst  netip.AddrPort
	srcMeta   []label
	dstMeta   []label // its array is kept for the next request
	srcBuf    [2]label
	route     string
	start     time.Time

	// Request init.
	method, scheme, authority, path string
	reqH2                           bool
	reqHeader                       http.Header // nil unless a tap extracts headers

	// Response init.
	headAt     time.Time
	status     int
	respH2     bool
	respHeader http.Header

	// Response end (response init's own latency is headAt - start).
	sinceRequest, sinceResponse time.Duration
	bytes                       uint64
	grpcStatus                  int64 // -1 when none
	resetCode                   int64 // -1 when none
	trailers                    http.Header
}

type sub struct {
	s  *session
	id uint64
}

// eventKind is the step an event reports.
type eventKind uint8

const (
	kindRequestInit eventKind = iota
	kindResponseInit
	kindResponseEnd
)

// item is what the request's goroutine hands a tap's goroutine: which
// step of which request, under the tap's stream id.
type item struct {
	tr   *Request
	id   uint64
	kind eventKind
}

// requestPool holds Requests no item or request points at any more.
var requestPool = sync.Pool{New: func() any { return new(Request) }}

// unref releases one hold on tr; the last puts it back in the pool,
// holding no request's strings, headers or endpoint.
func (tr *Request) unref() {
	if tr.refs.Add(-1) != 0 {
		return
	}
	dst := tr.dstMeta
	clear(dst[:cap(dst)])
	if cap(dst) > 64 {
		dst = nil // an endpoint with many labels does not keep a big array
	}
	*tr = Request{dstMeta: dst[:0]}
	requestPool.Put(tr)
}

// done is called by a tap's goroutine once it encoded the item's event.
func (it item) done() { it.tr.unref() }

// Start matches a request against the open taps and, when one or more
// take it within their budgets, sends their request-init events. It
// returns nil when no tap takes the request.
func (h *Hub) Start(v *View) *Request {
	p := h.sessions.Load()
	if p == nil {
		return nil
	}
	var tr *Request
	var now int64 = -1
	for _, s := range *p {
		if s.closed.Load() || s.taken.Load() >= s.limit || !s.match.matches(v) {
			continue
		}
		if now < 0 {
			now = int64(time.Since(h.epoch))
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
			tr = newRequest(v, h.epoch.Add(time.Duration(now)))
		}
		tr.subs = append(tr.subs, sub{s: s, id: id - 1})
	}
	if tr == nil {
		return nil
	}
	for _, sub := range tr.subs {
		if sub.s.headers { // written before any tap can read the request
			tr.reqHeader = v.R.Header.Clone()
			break
		}
	}
	kept := tr.subs[:0]
	for _, sub := range tr.subs {
		if tr.send(sub, kindRequestInit) {
			kept = append(kept, sub)
		} else {
			// Not reported at all rather than in part: its other two
			// events are counted as dropped too.
			h.dropBuffer.Add(2)
			sub.s.release()
		}
	}
	if len(kept) == 0 {
		tr.unref()
		return nil
	}
	tr.subs = kept
	return tr
}

// send hands sub's tap the item of step kind, holding tr for it.
func (tr *Request) send(sub sub, kind eventKind) bool {
	tr.refs.Add(1) // before the tap's goroutine can see the item
	if sub.s.send(item{tr: tr, id: sub.id, kind: kind}) {
		return true
	}
	tr.refs.Add(-1) // not the last hold: the request's own remains
	return false
}

// newRequest holds what the events of an admitted request say, in a
// Request from the pool, held by the request.
func newRequest(v *View, now time.Time) *Request {
	tr := requestPool.Get().(*Request)
	tr.refs.Store(1)
	tr.direction, tr.src, tr.dst, tr.route, tr.start = v.Direction, v.Src, v.Dst, v.Route, now
	tr.method, tr.scheme, tr.authority, tr.path, tr.reqH2 = v.Method, v.Scheme, v.Authority, v.Path, v.R.ProtoMajor == 2
	tr.grpcStatus, tr.resetCode = -1, -1
	tr.subs = tr.subsBuf[:0]
	tr.srcMeta, tr.dstMeta = v.meta(tr.srcBuf[:0], tr.dstMeta[:0])
	return tr
}

// ResponseInit reports the response head. It is safe on a nil request.
func (tr *Request) ResponseInit(status int, header http.Header, h2 bool) {
	if tr == nil || !tr.headAt.IsZero() {
		return
	}
	tr.headAt = time.Now()
	tr.status, tr.respH2 = status, h2
	for _, sub := range tr.subs {
		if sub.s.headers && header != nil {
			tr.respHeader = header.Clone()
			break
		}
	}
	for _, sub := range tr.subs {
		tr.send(sub, kindResponseInit)
	}
}

// End reports the end of the response of *trp (responseEnd) and
// clears *trp: the request gives up its hold on the Request, which may
// be reused at once. It is safe on a nil *trp.
func End(trp **Request, bytes uint64, grpcStatus, resetCode int64, trailers http.Header) {
	tr := *trp
	if tr == nil {
		return
	}
	*trp = nil
	tr.responseEnd(bytes, grpcStatus, resetCode, trailers)
}

// responseEnd reports the end of the response: its body bytes, the gRPC
// status (from trailers, or the head of a trailers-only response; -1 when
// none), the HTTP/2 reset code when the stream was reset (-1 when not) and
// the trailers (kept only for a tap that extracts headers). It releases
// the request's taps and its hold on tr: callers go through End, which
// forgets tr.
func (tr *Request) responseEnd(bytes uint64, grpcStatus, resetCode int64, trailers http.Header) {
	if tr.ended {
		return
	}
	tr.ended = true
	now := time.Now()
	tr.sinceRequest = now.Sub(tr.start)
	if !tr.headAt.IsZero() {
		tr.sinceResponse = now.Sub(tr.headAt)
	}
	tr.bytes, tr.grpcStatus, tr.resetCode = bytes, grpcStatus, resetCode
	for _, sub := range tr.subs {
		if sub.s.headers {
			tr.trailers = trailers
			break
		}
	}
	for _, sub := range tr.subs {
		tr.send(sub, kindResponseEnd)
		sub.s.release()
	}
	tr.unref()
}
