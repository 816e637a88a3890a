package reqmetrics

import (
	"sync/atomic"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// Retryable counts a retryable response on the route (route_retryable_total),
// with skipped="no_budget" when the budget refused the retry.
func (s *Stats) Retryable(hasBudget bool) {
	if s.rt == nil {
		return
	}
	s.rt.retryable(hasBudget).Inc()
}

// retryable returns the route_retryable_total series of a route.
func (r *Series) retryable(hasBudget bool) *metricstore.Series {
	p := &r.retry
	if !hasBudget {
		p = &r.retryNoBudget
	}
	if s := p.Load(); s != nil {
		return s
	}
	var extra *metricstore.Labels
	if !hasBudget {
		extra = (&metricstore.Labels{}).Add("skipped", "no_budget")
	}
	s := r.g.Series(r.fam.Retryable, extra)
	p.Store(s)
	return s
}

// retrySeries are the route_retryable_total series of a route.
type retrySeries struct {
	retry, retryNoBudget atomic.Pointer[metricstore.Series]
}
