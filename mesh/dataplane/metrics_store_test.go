package dataplane

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestStore(t *testing.T) (*store, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	st := newStore(prometheus.NewCounter(prometheus.CounterOpts{Name: "overflow_total", Help: "x"}))
	require.NoError(t, reg.Register(st))
	return st, reg
}

func TestStoreExportsEachSeriesWithItsOwnLabelSet(t *testing.T) {
	st, reg := newTestStore(t)
	f := newFamily("request_total", "Total count of HTTP requests.", kindCounter)
	in := st.group((&labels{}).add("direction", "inbound").add("tls", "true").add("client_id", "a.ns.serviceaccount.identity.weft.cluster.local"))
	out := st.group((&labels{}).add("direction", "outbound").add("tls", "no_identity").add("no_tls_reason", "not_provided_by_service_discovery"))
	in.series(f, nil).inc()
	out.series(f, nil).add(2)

	const want = `
# HELP request_total Total count of HTTP requests.
# TYPE request_total counter
request_total{client_id="a.ns.serviceaccount.identity.weft.cluster.local",direction="inbound",tls="true"} 1
request_total{direction="outbound",no_tls_reason="not_provided_by_service_discovery",tls="no_identity"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "request_total"))
}

func TestStoreHistogramsUseLinkerdsLatencyBuckets(t *testing.T) {
	st, reg := newTestStore(t)
	f := newFamily("response_latency_ms", "latency", kindHistogram)
	s := st.group((&labels{}).add("direction", "inbound")).series(f, (&labels{}).add("status_code", "200"))
	s.observe(500 * time.Microsecond) // le 1
	s.observe(time.Millisecond)       // le 1 (bounds are inclusive)
	s.observe(7 * time.Millisecond)   // le 10
	s.observe(time.Minute)            // +Inf

	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	h := mfs[0].GetMetric()[0].GetHistogram()
	var bounds []float64
	cum := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	assert.Equal(t, latencyBoundsMs, bounds)
	assert.Equal(t, uint64(2), cum[1])
	assert.Equal(t, uint64(2), cum[5])
	assert.Equal(t, uint64(3), cum[10])
	assert.Equal(t, uint64(3), cum[50000])
	assert.Equal(t, uint64(4), h.GetSampleCount())
	assert.InDelta(t, 0.5+1+7+60000, h.GetSampleSum(), 1e-6)
}

func TestStoreDropsGroupsIdleForTheRetentionPeriodButNeverPinnedOnes(t *testing.T) {
	st, reg := newTestStore(t)
	st.retainIdle = time.Hour
	f := newFamily("tcp_open_total", "x", kindCounter)
	idle := st.group((&labels{}).add("target_addr", "10.0.0.1:80"))
	idle.series(f, nil).inc()
	pinned := st.group((&labels{}).add("target_addr", "10.0.0.2:80"))
	pinned.series(f, nil).inc()
	pinned.pins.Add(1)
	fresh := st.group((&labels{}).add("target_addr", "10.0.0.3:80"))
	fresh.series(f, nil).inc()

	old := time.Now().Add(-2 * time.Hour).Unix()
	idle.lastUsed.Store(old)
	pinned.lastUsed.Store(old)

	n, err := testutil.GatherAndCount(reg, "tcp_open_total")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the idle group is dropped at the next scrape")
	assert.False(t, idle.alive(), "its holders learn it is gone")
	assert.True(t, pinned.alive(), "an open connection keeps its series")
	assert.True(t, fresh.alive())

	again := st.group((&labels{}).add("target_addr", "10.0.0.1:80"))
	assert.NotSame(t, idle, again, "a dropped label set comes back as a new group")
	assert.True(t, again.alive())
}

func TestStoreFoldsLabelSetsPastItsCapIntoOneOverflowGroup(t *testing.T) {
	st, reg := newTestStore(t)
	st.maxGroups = 10
	f := newFamily("request_total", "x", kindCounter)
	for i := 0; i < 50; i++ {
		st.group((&labels{}).add("direction", "outbound").add("target_addr", strings.Repeat("x", i))).series(f, nil).inc()
	}
	assert.LessOrEqual(t, st.size(), 11, "the cap plus one overflow group")
	n, err := testutil.GatherAndCount(reg, "request_total")
	require.NoError(t, err)
	assert.LessOrEqual(t, n, 11)
	assert.Equal(t, 40.0, testutil.ToFloat64(st.overflow))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var folded float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "overflow" {
					folded += m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, 40.0, folded, "nothing is lost: the overflow series counts the rest")
}

func TestLabelValuesFromPeersAreMadeValidAndBounded(t *testing.T) {
	st, reg := newTestStore(t)
	f := newFamily("request_total", "x", kindCounter)
	l := dstLabels(&labels{}, map[string]string{
		"pod":       "web-\xff\xfe",
		"namespace": strings.Repeat("n", 10000),
		"evil":      "never a label",
	})
	st.group(l).series(f, nil).inc()
	mfs, err := reg.Gather()
	require.NoError(t, err, "invalid UTF-8 from a control plane must not break the scrape")
	got := map[string]string{}
	for _, lp := range mfs[0].GetMetric()[0].GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	assert.Equal(t, "web-\uFFFD", got["dst_pod"])
	assert.Len(t, got["dst_namespace"], maxLabelValue)
	assert.NotContains(t, got, "dst_evil", "only known discovery keys become labels")
}

func TestRecordingARequestOnResolvedSeriesDoesNotAllocate(t *testing.T) {
	st, _ := newTestStore(t)
	h := newHTTPMetrics(st)
	ep := h.reqSeries(&h.ep, (&labels{}).add("direction", "outbound"))
	rt := h.reqSeries(&h.route, (&labels{}).add("direction", "outbound").add("rt_route", "r"))
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
