package demo

import (
	"slices"
	"sync"
	"time"
)

// Outcome classifies one request as its caller saw it.
type Outcome int

// Outcomes.
const (
	Success Outcome = iota
	// Denied: the server's proxy refused the caller (the connection was
	// closed after the handshake, or a 403 answered).
	Denied
	Failure
)

// sample is one finished request.
type sample struct {
	at      time.Time
	latency time.Duration
	outcome Outcome
}

// Stats records the requests each workload's program made or served. It is
// safe for concurrent use and bounded in memory.
type Stats struct {
	mu    sync.Mutex
	now   func() time.Time
	per   map[string]*series
	order []string
}

type series struct {
	total    [3]int64
	recent   []sample // the last window of samples, oldest first
	all      []time.Duration
	allNext  int
	allCount int64
}

const (
	window     = 5 * time.Second
	maxRecent  = 4096
	maxAllKept = 8192
)

// NewStats returns empty stats using now as its clock.
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	return &Stats{now: now, per: map[string]*series{}}
}

// Record adds one request of workload.
func (s *Stats) Record(workload string, latency time.Duration, o Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.per[workload]
	if se == nil {
		se = &series{}
		s.per[workload] = se
		s.order = append(s.order, workload)
	}
	now := s.now()
	se.total[o]++
	se.recent = append(se.recent, sample{at: now, latency: latency, outcome: o})
	se.trim(now)
	if o == Success {
		if len(se.all) < maxAllKept {
			se.all = append(se.all, latency)
		} else {
			se.all[se.allNext] = latency
			se.allNext = (se.allNext + 1) % maxAllKept
		}
		se.allCount++
	}
}

func (se *series) trim(now time.Time) {
	cut := 0
	for cut < len(se.recent) && (now.Sub(se.recent[cut].at) > window || len(se.recent)-cut > maxRecent) {
		cut++
	}
	se.recent = se.recent[cut:]
}

// Figures are one workload's request figures.
type Figures struct {
	Workload string
	// Totals since the start.
	Requests, Succeeded, Denied, Failed int64
	// RPS, SuccessRate, P50 and P99 cover the last few seconds (Window).
	RPS         float64
	SuccessRate float64 // 0..1; NaN-free: 0 with no requests
	P50, P99    time.Duration
	// TotalP50 and TotalP99 cover every successful request (bounded sample).
	TotalP50, TotalP99 time.Duration
}

// Window is the span the live figures cover.
const Window = window

// Snapshot returns the figures of every workload, in the order they first
// recorded something. elapsed caps the rate's window at the start.
func (s *Stats) Snapshot(elapsed time.Duration) []Figures {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Figures, 0, len(s.order))
	for _, w := range s.order {
		se := s.per[w]
		se.trim(now)
		f := Figures{Workload: w, Succeeded: se.total[Success], Denied: se.total[Denied], Failed: se.total[Failure]}
		f.Requests = f.Succeeded + f.Denied + f.Failed
		span := window
		if elapsed > 0 && elapsed < span {
			span = elapsed
		}
		var ok int
		var lat []time.Duration
		for _, r := range se.recent {
			if r.outcome == Success {
				ok++
				lat = append(lat, r.latency)
			}
		}
		if n := len(se.recent); n > 0 {
			f.RPS = float64(n) / span.Seconds()
			f.SuccessRate = float64(ok) / float64(n)
		}
		f.P50, f.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
		f.TotalP50, f.TotalP99 = percentile(se.all, 0.50), percentile(se.all, 0.99)
		out = append(out, f)
	}
	return out
}

// percentile returns the q-quantile (nearest rank) of ds, 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	c := slices.Clone(ds)
	slices.Sort(c)
	i := int(q*float64(len(c))+0.999999) - 1
	return c[max(0, min(i, len(c)-1))]
}
