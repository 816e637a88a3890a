package dataplane

import (
	"net/netip"
	"runtime"
	"time"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// TapFeedForTest hands n requests' events (request init, response init,
// response end, as an outbound GET answered 200 with 27 bytes) to every
// tap open on p, waiting for room in a tap's buffer rather than dropping,
// and returns once the taps' buffers are empty (the last batch, at most
// tapBatchMax events, may still be on its way). BenchmarkTapStream uses it
// to measure what a tap's goroutine costs per event.
func TapFeedForTest(p *Proxy, n int) {
	sessions := p.tap.sessions.Load()
	if sessions == nil {
		return
	}
	tr := feedRequest(time.Now())
	for i := 0; i < n; i++ {
		for _, s := range *sessions {
			for _, kind := range []tapEventKind{tapRequestInit, tapResponseInit, tapResponseEnd} {
				s.events <- tapItem{tr: tr, id: uint64(i), kind: kind}
				if len(s.events) >= tapBatchMax {
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

// TapEncodedForTest returns the encoded events TapFeedForTest(p, n) makes
// for the one tap open on p, in order, as its goroutine encodes them.
func TapEncodedForTest(p *Proxy, n int) [][]byte {
	sessions := p.tap.sessions.Load()
	if sessions == nil || len(*sessions) != 1 {
		return nil
	}
	s := (*sessions)[0]
	tr := feedRequest(time.Now())
	var enc tapEncoder
	var out [][]byte
	for i := 0; i < n; i++ {
		for _, kind := range []tapEventKind{tapRequestInit, tapResponseInit, tapResponseEnd} {
			out = append(out, append([]byte(nil), enc.encode(s, tapItem{tr: tr, id: uint64(i), kind: kind})...))
		}
	}
	return out
}

// feedRequest is the request TapFeedForTest reports, started at start.
func feedRequest(start time.Time) *tapRequest {
	tr := &tapRequest{
		direction: ptap.TapEvent_OUTBOUND, src: netip.MustParseAddrPort("127.0.0.1:40000"), dst: netip.MustParseAddrPort("10.0.0.7:8080"),
		dstMeta: []tapLabel{{"namespace", "shop"}, {"deployment", "web"}, {"pod", "web-1"}, {"tls", "true"}, {"server_id", "web.shop.serviceaccount.identity.weft.cluster.local"}},
		start:   start, method: "GET", scheme: "http", authority: "web:8080", path: "/",
		headAt: start.Add(time.Millisecond), status: 200,
		sinceRequest: 2 * time.Millisecond, sinceResponse: time.Millisecond, bytes: 27, grpcStatus: -1, resetCode: -1,
	}
	tr.srcMeta = append(tr.srcBuf[:0], tapLabel{"tls", metricstore.NoTLSLoopback})
	tr.refs.Store(1 << 30) // shared by every item fed: never back in the pool
	return tr
}

// TapPaceForTest hands n requests' events to every tap open on p as the
// data path does (tapSession.send: never waiting, dropping when a buffer
// is full), perSecond requests a second, in steps of 10 ms; with no tap
// open it only keeps the pace. It returns once the taps' buffers are
// empty. BenchmarkTapStreamPaced uses it to measure what a tap's stream
// costs per request at a given rate, its per-batch costs included.
func TapPaceForTest(p *Proxy, n, perSecond int) {
	const step = 10 * time.Millisecond
	perStep := max(perSecond/int(time.Second/step), 1)
	var sessions []*tapSession
	if s := p.tap.sessions.Load(); s != nil {
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
			for _, kind := range []tapEventKind{tapRequestInit, tapResponseInit, tapResponseEnd} {
				s.send(tapItem{tr: tr, id: uint64(i), kind: kind})
			}
		}
	}
	for _, s := range sessions {
		for len(s.events) > 0 {
			time.Sleep(time.Millisecond) // not spinning: the batch may wait tapBatchWait
		}
	}
}
