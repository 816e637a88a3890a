package reqmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

func TestRecordingARequestOnResolvedSeriesDoesNotAllocate(t *testing.T) {
	st := metricstore.NewStore(prometheus.NewCounter(prometheus.CounterOpts{Name: "overflow_total", Help: "x"}))
	h := New(st)
	ep := h.Series(&h.EP, (&metricstore.Labels{}).Add("direction", "outbound"))
	rt := h.Series(&h.Route, (&metricstore.Labels{}).Add("direction", "outbound").Add("rt_route", "r"))
	record := func() {
		var s Stats
		s.Begin(rt, time.Now())
		s.Attempt(ep)
		s.Head(200)
		s.Done(200, "", false, "")
	}
	record() // resolves the status and outcome series
	allocs := testing.AllocsPerRun(1000, record)
	assert.Zero(t, allocs, "a request adds to counters it already holds")
}
