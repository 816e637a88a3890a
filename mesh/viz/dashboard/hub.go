package dashboard

import (
	"sync"
	"sync/atomic"

	"github.com/weftmesh/weft/mesh/viz"
)

// hub fans tap events out to the live streams. Publishing never blocks:
// a subscriber whose buffer is full loses the event (counted), so a slow
// browser never slows the taps or the other browsers.
type hub struct {
	mu        sync.Mutex
	subs      map[*subscriber]struct{}
	recent    []viz.Event
	maxRecent int

	published, dropped atomic.Int64
}

type subscriber struct {
	ch      chan viz.Event
	dropped atomic.Int64
}

// subscriberBuffer bounds the events queued for one stream.
const subscriberBuffer = 256

func newHub(recent int) *hub { return &hub{subs: map[*subscriber]struct{}{}, maxRecent: recent} }

func (h *hub) publish(e viz.Event) {
	h.published.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent = append(h.recent, e)
	if len(h.recent) > h.maxRecent {
		h.recent = h.recent[len(h.recent)-h.maxRecent:]
	}
	for s := range h.subs {
		select {
		case s.ch <- e:
		default:
			s.dropped.Add(1)
			h.dropped.Add(1)
		}
	}
}

// subscribe returns a subscriber and the recent events.
func (h *hub) subscribe() (*subscriber, []viz.Event) {
	s := &subscriber{ch: make(chan viz.Event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	return s, append([]viz.Event(nil), h.recent...)
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}
