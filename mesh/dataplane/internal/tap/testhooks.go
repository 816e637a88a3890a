package tap

import (
	"net/netip"
	"runtime"
	"time"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// The hooks the dataplane package's benchmarks and tests drive a tap's
// stream with (its export_test.go hands them to the external tests).
// They are not used by the proxy itself.

// FeedForTest hands n requests' events (request init, response init,
// response end, as an outbound GET answered 200 with 27 bytes) to every
// tap open on h, waiting for room in a tap's buffer rather than dropping,
// and returns once the taps' buffers are empty (the last batch, at most
// batchMax events, may still be on its way). BenchmarkTapStream uses it
// to measure what a tap's goroutine costs per event.
func (h *Hub) FeedForTest(n int) {
	sessions := h.sessions.Load()
	if sessions == nil {
		return
	}
	tr := feedRequest(time.Now())
	for i := 0; i < n; i++ {
		for _, s := range *sessions {
			for _, kind := range []eventKind{kindRequestInit, kindResponseInit, kindResponseEnd} {
				s.events <- item{tr: tr, id: uint64(i), kind: kind}
				if len(s.events) >= batchMax {
					select { // as send does: a full batch waits
					case s.kick <- struct{}{}:
					default:
					}
				}
			}
		}
	}
	for _, s := range *sessions {
		for len(s.events) > 0 {
			runtime.Gosched()
		}
	}
}

// EncodedForTest returns the encoded events FeedForTest(n) makes for the
// one tap open on h, in order, as its goroutine encodes them.
func (h *Hub) EncodedForTest(n int) [][]byte {
	sessions := h.sessions.Load()
	if sessions == nil || len(*sessions) != 1 {
		return nil
	}
	s := (*sessions)[0]
	tr := feedRequest(time.Now())
	var enc encoder
	var out [][]byte
	for i := 0; i < n; i++ {
		for _, kind := range []eventKind{kindRequestInit, kindResponseInit, kindResponseEnd} {
			out = append(out, append([]byte(nil), enc.encode(s, item{tr: tr, id: uint64(i), kind: kind})...))
		}
	}
	return out
}

// feedRequest is the request FeedForTest reports, started at start.
func feedRequest(start time.Time) *Request {
	tr := &Request{
		direction: ptap.TapEvent_OUTBOUND, src: netip.MustParseAddrPort("127.0.0.1:40000"), dst: netip.MustParseAddrPort("10.0.0.7:8080"),
		dstMeta: []label{{"namespace", "shop"}, {"deployment", "web"}, {"pod", "web-1"}, {"tls", "true"}, {"server_id", "web.shop.serviceaccount.identity.weft.cluster.local"}},
		start:   start, method: "GET", scheme: "http", authority: "web:8080", path: "/",
		headAt: start.Add(time.Millisecond), status: 200,
		sinceRequest: 2 * time.Millisecond, sinceResponse: time.Millisecond, bytes: 27, grpcStatus: -1, resetCode: -1,
	}
	tr.srcMeta = append(tr.srcBuf[:0], label{"tls", metricstore.NoTLSLoopback})
	tr.refs.Store(1 << 30) // shared by every item fed: never back in the pool
	return tr
}

// PaceForTest hands n requests' events to every tap open on h as the
// data path does (session.send: never waiting, dropping when a buffer
// is full), perSecond requests a second, in steps of 10 ms; with no tap
// open it only keeps the pace. It returns once the taps' buffers are
// empty. BenchmarkTapStreamPaced uses it to measure what a tap's stream
// costs per request at a given rate, its per-batch costs included.
func (h *Hub) PaceForTest(n, perSecond int) {
	const step = 10 * time.Millisecond
	perStep := max(perSecond/int(time.Second/step), 1)
	var sessions []*session
	if s := h.sessions.Load(); s != nil {
		sessions = *s
	}
	tr := feedRequest(time.Now())
	next := time.Now()
	for i := 0; i < n; i++ {
		if i%perStep == 0 {
			next = next.Add(step)
			time.Sleep(time.Until(next))
		}
		for _, s := range sessions {
			for _, kind := range []eventKind{kindRequestInit, kindResponseInit, kindResponseEnd} {
				s.send(item{tr: tr, id: uint64(i), kind: kind})
			}
		}
	}
	for _, s := range sessions {
		for len(s.events) > 0 {
			time.Sleep(time.Millisecond) // not spinning: the batch may wait batchWait
		}
	}
}
