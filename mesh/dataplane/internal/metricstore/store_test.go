package metricstore

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/meta"
)

func newTestStore(t *testing.T) (*Store, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	st := NewStore(prometheus.NewCounter(prometheus.CounterOpts{Name: "overflow_total", Help: "x"}))
	require.NoError(t, reg.Register(st))
	return st, reg
}

func TestStoreExportsEachSeriesWithItsOwnLabelSet(t *testing.T) {
	st, reg := newTestStore(t)
	f := NewFamily("request_total", "Total count of HTTP requests.", Counter)
	in := st.Group((&Labels{}).Add("direction", "inbound").Add("tls", "true").Add("client_id", "a.ns.serviceaccount.identity.weft.cluster.local"))
	out := st.Group((&Labels{}).Add("direction", "outbound").Add("tls", "no_identity").Add("no_tls_reason", "not_provided_by_service_discovery"))
	in.Series(f, nil).Inc()
	out.Series(f, nil).Add(2)

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
	f := NewFamily("response_latency_ms", "latency", Histogram)
	s := st.Group((&Labels{}).Add("direction", "inbound")).Series(f, (&Labels{}).Add("status_code", "200"))
	s.Observe(500 * time.Microsecond) // le 1
	s.Observe(time.Millisecond)       // le 1 (bounds are inclusive)
	s.Observe(7 * time.Millisecond)   // le 10
	s.Observe(time.Minute)            // +Inf

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
	assert.Equal(t, LatencyBoundsMs, bounds)
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
	f := NewFamily("tcp_open_total", "x", Counter)
	idle := st.Group((&Labels{}).Add("target_addr", "10.0.0.1:80"))
	idle.Series(f, nil).Inc()
	pinned := st.Group((&Labels{}).Add("target_addr", "10.0.0.2:80"))
	pinned.Series(f, nil).Inc()
	pinned.Pin()
	fresh := st.Group((&Labels{}).Add("target_addr", "10.0.0.3:80"))
	fresh.Series(f, nil).Inc()

	old := time.Now().Add(-2 * time.Hour).Unix()
	idle.lastUsed.Store(old)
	pinned.lastUsed.Store(old)

	n, err := testutil.GatherAndCount(reg, "tcp_open_total")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the idle group is dropped at the next scrape")
	assert.False(t, idle.Alive(), "its holders learn it is gone")
	assert.True(t, pinned.Alive(), "an open connection keeps its series")
	assert.True(t, fresh.Alive())

	again := st.Group((&Labels{}).Add("target_addr", "10.0.0.1:80"))
	assert.NotSame(t, idle, again, "a dropped label set comes back as a new group")
	assert.True(t, again.Alive())
}

func TestStoreFoldsLabelSetsPastItsCapIntoOneOverflowGroup(t *testing.T) {
	st, reg := newTestStore(t)
	st.maxGroups = 10
	f := NewFamily("request_total", "x", Counter)
	for i := 0; i < 50; i++ {
		st.Group((&Labels{}).Add("direction", "outbound").Add("target_addr", strings.Repeat("x", i))).Series(f, nil).Inc()
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
	f := NewFamily("request_total", "x", Counter)
	l := Dst(&Labels{}, map[string]string{
		"pod":       "web-\xff\xfe",
		"namespace": strings.Repeat("n", 10000),
		"evil":      "never a label",
	})
	st.Group(l).Series(f, nil).Inc()
	mfs, err := reg.Gather()
	require.NoError(t, err, "invalid UTF-8 from a control plane must not break the scrape")
	got := map[string]string{}
	for _, lp := range mfs[0].GetMetric()[0].GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	assert.Equal(t, "web-\uFFFD", got["dst_pod"])
	assert.Len(t, got["dst_namespace"], MaxLabelValue)
	assert.NotContains(t, got, "dst_evil", "only known discovery keys become labels")
}

func TestPolicyMetaNamesABuiltInRouteAndAResourceAsLinkerdsProxyDoes(t *testing.T) {
	pairs := func(l *Labels) map[string]string {
		m := map[string]string{}
		for i, n := range l.Names {
			m[n] = l.Values[i]
		}
		return m
	}
	builtIn := &meta.Metadata{Kind: &meta.Metadata_Default{Default: "tcp-egress-deny"}}
	assert.Equal(t, map[string]string{"route_group": "", "route_kind": "default", "route_namespace": "", "route_name": "tcp-egress-deny"},
		pairs(PolicyMeta(&Labels{}, "route", builtIn, false)))
	svc := &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "core", Kind: "Service", Namespace: "shop", Name: "db", Port: 7000}}}
	assert.Equal(t, map[string]string{"parent_group": "core", "parent_kind": "Service", "parent_namespace": "shop", "parent_name": "db", "parent_port": "7000", "parent_section_name": ""},
		pairs(PolicyMeta(&Labels{}, "parent", svc, true)))
	noPort := &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "policy.linkerd.io", Kind: "EgressNetwork", Namespace: "shop", Name: "egress"}}}
	assert.Equal(t, "", pairs(PolicyMeta(&Labels{}, "parent", noPort, true))["parent_port"], "no port is an empty label, as in Linkerd's proxy")
}
