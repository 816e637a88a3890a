package dataplane

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

func TestRecordingARequestOnResolvedSeriesDoesNotAllocate(t *testing.T) {
	st := metricstore.NewStore(prometheus.NewCounter(prometheus.CounterOpts{Name: "overflow_total", Help: "x"}))
	h := newHTTPMetrics(st)
	ep := h.reqSeries(&h.ep, (&metricstore.Labels{}).Add("direction", "outbound"))
	rt := h.reqSeries(&h.route, (&metricstore.Labels{}).Add("direction", "outbound").Add("rt_route", "r"))
	record := func() {
		var s reqStats
		s.begin(rt, time.Now())
		s.attempt(ep)
		s.head(200)
		s.done(200, "", false, "")
	}
	record() // resolves the status and outcome series
	allocs := testing.AllocsPerRun(1000, record)
	assert.Zero(t, allocs, "a request adds to counters it already holds")
}
