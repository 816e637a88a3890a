package viz_test

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/viz"
)

const (
	webID      = "web.shop.serviceaccount.identity.weft.cluster.local"
	apiID      = "api.shop.serviceaccount.identity.weft.cluster.local"
	intruderID = "intruder.shop.serviceaccount.identity.weft.cluster.local"
)

var (
	webPod      = viz.Target{Namespace: "shop", Pod: "web-0", WorkloadKind: "deployment", Workload: "web", ServiceAccount: "web", Identity: webID}
	apiPod      = viz.Target{Namespace: "shop", Pod: "api-0", WorkloadKind: "deployment", Workload: "api", ServiceAccount: "api", Identity: apiID}
	intruderPod = viz.Target{Namespace: "shop", Pod: "intruder-0", WorkloadKind: "deployment", Workload: "intruder", ServiceAccount: "intruder", Identity: intruderID}
)

func parse(t *testing.T, target viz.Target, text string, at time.Time) *viz.Scrape {
	t.Helper()
	s, err := viz.ParseMetrics(strings.NewReader(text), target, at)
	require.NoError(t, err)
	return s
}

// webText is web's proxy: it calls api (outbound) and serves callers.
func webText(n int) string {
	return strings.NewReplacer("N", itoa(n), "H", itoa(n/2)).Replace(`# TYPE response_total counter
response_total{direction="outbound",authority="api.shop.svc.cluster.local:8080",dst_namespace="shop",dst_deployment="api",dst_pod="api-0",tls="true",server_id="` + apiID + `",status_code="200",classification="success"} N
response_total{direction="outbound",authority="api.shop.svc.cluster.local:8080",dst_namespace="shop",dst_deployment="api",dst_pod="api-0",tls="true",server_id="` + apiID + `",status_code="500",classification="failure"} H
# TYPE tcp_open_total counter
tcp_open_total{direction="outbound",peer="dst",dst_namespace="shop",dst_deployment="api",tls="true",server_id="` + apiID + `"} 3
# TYPE tcp_open_connections gauge
tcp_open_connections{direction="inbound",peer="src",tls="true",client_id="x"} 2
tcp_open_connections{direction="outbound",peer="dst",tls="true",server_id="` + apiID + `"} 5
`)
}

func apiText(allowed, denied, latencyFast, latencySlow int) string {
	total := allowed
	return strings.NewReplacer("ALLOW", itoa(allowed), "DENY", itoa(denied), "FAST", itoa(latencyFast), "SLOW", itoa(latencyFast+latencySlow), "TOTAL", itoa(total)).Replace(`# HELP response_total responses
# TYPE response_total counter
response_total{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200",classification="success"} ALLOW
# TYPE response_latency_ms histogram
response_latency_ms_bucket{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200",le="1"} 0
response_latency_ms_bucket{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200",le="10"} FAST
response_latency_ms_bucket{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200",le="100"} SLOW
response_latency_ms_bucket{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200",le="+Inf"} SLOW
response_latency_ms_sum{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200"} 1000
response_latency_ms_count{direction="inbound",authority="api.shop.svc.cluster.local:8080",tls="true",client_id="` + webID + `",status_code="200"} SLOW
# TYPE route_response_total counter
route_response_total{direction="inbound",dst="api.shop.svc.cluster.local:8080",rt_route="GET /items",status_code="200",classification="success"} ALLOW
# TYPE inbound_http_authz_allow_total counter
inbound_http_authz_allow_total{srv_kind="server",srv_name="api-http",route_kind="default",route_name="default",authz_kind="authorizationpolicy",authz_name="api-web",target_port="8080",tls="true",client_id="` + webID + `"} ALLOW
# TYPE inbound_http_authz_deny_total counter
inbound_http_authz_deny_total{srv_kind="server",srv_name="api-http",route_kind="default",route_name="default",target_port="8080",tls="true",client_id="` + intruderID + `"} DENY
# TYPE tcp_open_connections gauge
tcp_open_connections{direction="inbound",peer="src",tls="true",client_id="` + webID + `"} 4
`)
}

func itoa(n int) string { return fmtInt(n) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestQuantileInterpolatesInsideTheBucketLikePrometheus(t *testing.T) {
	h := viz.Histogram{{UpperBound: 10, Count: 50}, {UpperBound: 100, Count: 100}, {UpperBound: math.Inf(1), Count: 100}}
	assert.InDelta(t, 10, h.Quantile(0.5), 1e-9)
	assert.InDelta(t, 55, h.Quantile(0.75), 1e-9, "half way through the 10..100 bucket")
	assert.InDelta(t, 5, h.Quantile(0.25), 1e-9, "the first bucket starts at 0")
	assert.InDelta(t, 100, h.Quantile(1), 1e-9)

	inInf := viz.Histogram{{UpperBound: 10, Count: 1}, {UpperBound: math.Inf(1), Count: 10}}
	assert.Equal(t, 10.0, inInf.Quantile(0.99), "a rank in +Inf returns the largest finite bound")

	assert.True(t, math.IsNaN(viz.Histogram{}.Quantile(0.5)))
	assert.True(t, math.IsNaN(viz.Histogram{{UpperBound: 10, Count: 0}, {UpperBound: math.Inf(1), Count: 0}}.Quantile(0.5)))
	assert.True(t, math.IsNaN(h.Quantile(1.5)))
	// A non-monotonic histogram (a scrape taken mid-update) is repaired.
	bad := viz.Histogram{{UpperBound: 10, Count: 60}, {UpperBound: 100, Count: 50}, {UpperBound: math.Inf(1), Count: 100}}
	assert.False(t, math.IsNaN(bad.Quantile(0.9)))
}

func TestDeltaSubtractsCountersHandlesResetsAndKeepsGauges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := parse(t, webPod, webText(10), t0)
	cur := parse(t, webPod, webText(30), t0.Add(10*time.Second))
	w := viz.NewWindow(map[string]*viz.Scrape{webPod.Key(): prev}, map[string]*viz.Scrape{webPod.Key(): cur}, nil)
	assert.Equal(t, 10*time.Second, w.Duration)
	var ok, fail, gauge float64
	for _, s := range w.Series {
		switch {
		case s.Name == "response_total" && s.Labels["classification"] == "success":
			ok = s.Value
		case s.Name == "response_total":
			fail = s.Value
		case s.Name == "tcp_open_connections" && s.Labels["direction"] == "outbound":
			gauge = s.Value
		}
		assert.Equal(t, "web-0", s.Labels["pod"], "the target's labels are added")
		assert.Equal(t, "web", s.Labels["deployment"])
	}
	assert.Equal(t, 20.0, ok)
	assert.Equal(t, 10.0, fail)
	assert.Equal(t, 5.0, gauge, "a gauge keeps its last value")

	// The proxy restarted: its counters are lower than before.
	restarted := parse(t, webPod, webText(4), t0.Add(20*time.Second))
	w = viz.NewWindow(map[string]*viz.Scrape{webPod.Key(): cur}, map[string]*viz.Scrape{webPod.Key(): restarted}, nil)
	for _, s := range w.Series {
		if s.Name == "response_total" && s.Labels["classification"] == "success" {
			assert.Equal(t, 4.0, s.Value, "after a reset the increase is the new value")
		}
	}
}

func TestParseMetricsRefusesOversizedAndMalformedInputAndKeepsTargetLabels(t *testing.T) {
	_, err := viz.ParseMetrics(strings.NewReader("request_total{direction=\"inbound\" 1\n"), webPod, time.Now())
	assert.ErrorContains(t, err, "pod shop/web-0")

	big := strings.NewReader(strings.Repeat("# padding comment line\n", viz.MaxMetricsBytes/20))
	_, err = viz.ParseMetrics(big, webPod, time.Now())
	assert.ErrorIs(t, err, viz.ErrTooLarge)

	var b strings.Builder
	b.WriteString("# TYPE request_total counter\n")
	for i := 0; i <= viz.MaxSeriesPerTarget; i++ {
		b.WriteString("request_total{i=\"" + fmtInt(i) + "\"} 1\n")
	}
	_, err = viz.ParseMetrics(strings.NewReader(b.String()), webPod, time.Now())
	assert.ErrorIs(t, err, viz.ErrTooLarge)

	// A proxy cannot claim to be another pod: the target's labels win.
	s := parse(t, webPod, "# TYPE request_total counter\nrequest_total{pod=\"api-0\",namespace=\"other\",deployment=\"api\"} 1\n", time.Now())
	require.Len(t, s.Series, 1)
	assert.Equal(t, "web-0", s.Series[0].Labels["pod"])
	assert.Equal(t, "shop", s.Series[0].Labels["namespace"])
	assert.Equal(t, "web", s.Series[0].Labels["deployment"])
}

func window(t *testing.T, d time.Duration, pairs ...any) viz.Window {
	t.Helper()
	t0 := time.Unix(1000, 0)
	prev, cur := map[string]*viz.Scrape{}, map[string]*viz.Scrape{}
	for i := 0; i+2 < len(pairs)+1; i += 3 {
		tg := pairs[i].(viz.Target)
		if p := pairs[i+1].(string); p != "" {
			prev[tg.Key()] = parse(t, tg, p, t0)
		}
		cur[tg.Key()] = parse(t, tg, pairs[i+2].(string), t0.Add(d))
	}
	if d == 0 {
		prev = nil
	}
	return viz.NewWindow(prev, cur, nil)
}

func TestStatReportsGoldenMetricsOfWhatEachWorkloadServed(t *testing.T) {
	w := window(t, 10*time.Second,
		webPod, webText(0), webText(40),
		apiPod, apiText(0, 0, 0, 0), apiText(40, 6, 30, 10),
	)
	w.Targets = append(w.Targets, viz.TargetStatus{Target: viz.Target{Namespace: "shop", Pod: "api-1", WorkloadKind: "deployment", Workload: "api"}, Err: assert.AnError})
	rows := viz.Stat(w, viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop"})
	require.Len(t, rows, 2)
	api := rows[0]
	assert.Equal(t, "api", api.Name)
	assert.Equal(t, 2, api.Pods)
	assert.Equal(t, 1, api.Meshed, "api-1 did not answer")
	assert.Equal(t, 46.0, api.Requests(), "40 served and 6 its policy denied")
	assert.Equal(t, 6.0, api.Denied)
	assert.Equal(t, 1.0, api.SuccessRate(), "the denied requests were answered 403, not a failure")
	assert.InDelta(t, 4.6, api.RPS(w.Duration), 1e-9)
	assert.Equal(t, 1.0, api.MTLSShare())
	assert.InDelta(t, 1+9*(20-0)/30.0, api.P(0.5), 1e-9, "latency is that of the served requests")
	assert.InDelta(t, 10+90*(0.95*40-30)/10, api.P(0.95), 1e-9)
	assert.Equal(t, 4.0, api.TCPConnections)
	web := rows[1]
	assert.Equal(t, "web", web.Name)
	assert.Zero(t, web.Requests(), "web served nothing (its outbound calls are not its stats)")
	assert.True(t, math.IsNaN(web.SuccessRate()))
	assert.Equal(t, 2.0, web.TCPConnections)

	one := viz.Stat(w, viz.Resource{Kind: viz.KindPod, Namespace: "shop", Name: "api-0"})
	require.Len(t, one, 1)
	assert.Equal(t, 46.0, one[0].Requests())

	au := viz.Stat(w, viz.Resource{Kind: viz.KindAuthority, Namespace: "shop"})
	require.Len(t, au, 1)
	assert.Equal(t, "api.shop.svc.cluster.local:8080", au[0].Name)
	assert.Equal(t, 60.0, au[0].Requests(), "what web's proxy sent to the authority")
	assert.InDelta(t, 40.0/60, au[0].SuccessRate(), 1e-9)

	ns := viz.Stat(w, viz.Resource{Kind: viz.KindNamespace})
	require.Len(t, ns, 1)
	assert.Equal(t, 3, ns[0].Pods)
	assert.Equal(t, 46.0, ns[0].Requests())

	rt := viz.Stat(w, viz.Resource{Kind: viz.KindRoute, Namespace: "shop"})
	require.Len(t, rt, 1)
	assert.Equal(t, "GET /items", rt[0].Name)
	assert.Equal(t, 40.0, rt[0].Requests())
}

// A workload whose policy denies every caller served nothing, but was
// sent requests: they count in its rate. Linkerd's proxy answers a denied
// HTTP request 403 (not a failure in its classification) and a denied
// gRPC one PERMISSION_DENIED (a failure).
func TestStatCountsDeniedRequestsInTheRateClassifiedByTheProxysAnswer(t *testing.T) {
	denied := func(http, grpc int) string {
		return `# TYPE inbound_http_authz_deny_total counter
inbound_http_authz_deny_total{srv_group="policy.linkerd.io",srv_kind="server",srv_name="api-http",srv_port="8080",route_group="",route_kind="default",route_name="default",target_addr="10.0.0.7:8080",target_ip="10.0.0.7",target_port="8080",tls="true",client_id="` + intruderID + `",reason="unauthorized"} ` + itoa(http) + `
inbound_http_authz_deny_total{srv_group="policy.linkerd.io",srv_kind="server",srv_name="api-grpc",srv_port="9090",route_group="gateway.networking.k8s.io",route_kind="grpcroute",route_name="votes",target_addr="10.0.0.7:9090",target_ip="10.0.0.7",target_port="9090",tls="false",reason="unauthorized"} ` + itoa(grpc) + `
# TYPE inbound_tcp_authz_deny_total counter
inbound_tcp_authz_deny_total{srv_kind="server",srv_name="api-tcp",target_port="7000",tls="true",client_id="` + intruderID + `"} 5
`
	}
	w := window(t, 10*time.Second, apiPod, denied(0, 0), denied(30, 10))
	rows := viz.Stat(w, viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop", Name: "api"})
	require.Len(t, rows, 1)
	api := rows[0]
	assert.Equal(t, 40.0, api.Requests(), "denied connections (TCP) are not requests")
	assert.Equal(t, 40.0, api.Denied)
	assert.InDelta(t, 4.0, api.RPS(w.Duration), 1e-9, "not 0.0rps")
	assert.Equal(t, 30.0, api.Successes, "HTTP 403")
	assert.Equal(t, 10.0, api.Failures, "gRPC PERMISSION_DENIED")
	assert.InDelta(t, 0.75, api.SuccessRate(), 1e-9)
	assert.InDelta(t, 0.75, api.MTLSShare(), 1e-9)
	assert.True(t, math.IsNaN(api.P(0.5)), "no response went through the workload: no latency")

	// Routes and authorities are read from other series: unchanged.
	assert.Empty(t, viz.Stat(w, viz.Resource{Kind: viz.KindRoute, Namespace: "shop"}))
	assert.Empty(t, viz.Stat(w, viz.Resource{Kind: viz.KindAuthority, Namespace: "shop"}))
}

func TestEdgesJoinBothProxiesIdentitiesAndMarkDenials(t *testing.T) {
	w := window(t, 0,
		webPod, "", webText(40),
		apiPod, "", apiText(40, 6, 30, 10),
		intruderPod, "", "# TYPE response_total counter\n",
	)
	edges := viz.Edges(w)
	require.Len(t, edges, 2)
	intr := edges[0]
	assert.Equal(t, "intruder", intr.Src.Name)
	assert.Equal(t, "api", intr.Dst.Name)
	assert.Equal(t, 6.0, intr.Denied)
	assert.Equal(t, intruderID, intr.ClientID)
	web := edges[1]
	assert.Equal(t, viz.Workload{Namespace: "shop", Kind: "deployment", Name: "web"}, web.Src)
	assert.Equal(t, viz.Workload{Namespace: "shop", Kind: "deployment", Name: "api"}, web.Dst)
	assert.Equal(t, webID, web.ClientID, "api's proxy verified web")
	assert.Equal(t, apiID, web.ServerID, "web's proxy verified api")
	assert.True(t, web.Secured())
	assert.Equal(t, 60.0, web.Out.Requests())
	assert.Equal(t, 40.0, web.In.Requests())
	assert.InDelta(t, 40.0/60, web.Golden().SuccessRate(), 1e-9)
	assert.Equal(t, 3.0, web.Connections)
}

func TestAuthzCountsAllowedPerAuthorizationAndNamesDeniedClients(t *testing.T) {
	w := window(t, 0,
		webPod, "", webText(40),
		apiPod, "", apiText(40, 6, 30, 10),
		intruderPod, "", "",
	)
	rows := viz.Authz(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "api"})
	require.Len(t, rows, 2)
	assert.Equal(t, "authorizationpolicy/api-web", rows[0].Authorization)
	assert.Equal(t, "server:api-http", rows[0].Server)
	assert.Equal(t, 40.0, rows[0].Allowed)
	assert.Equal(t, []viz.ClientCount{{Identity: webID, Count: 40}}, rows[0].Clients)
	assert.Empty(t, rows[1].Authorization)
	assert.Equal(t, 6.0, rows[1].Denied)
	require.Len(t, rows[1].Denials, 1)
	d := rows[1].Denials[0]
	assert.Equal(t, "intruder", d.FromWorkload.Name)
	assert.Equal(t, "weft policy explain --manifests m.yaml --to-workload pod/api-0 --to-namespace shop --to-port 8080 --from-identity "+intruderID, d.ExplainCommand("m.yaml"))
	assert.Equal(t, "weft diagnostics policy -n shop po/api-0 8080", d.DiagnosticsCommand())

	assert.Empty(t, viz.Authz(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "web"}))
}

func TestRoutesSplitServedRoutesByAuthority(t *testing.T) {
	w := window(t, 0, apiPod, "", apiText(12, 0, 12, 0))
	rows := viz.Routes(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "api"}, nil)
	require.Len(t, rows, 1)
	assert.Equal(t, "GET /items", rows[0].Route)
	assert.Equal(t, 12.0, rows[0].Requests())
	backend := viz.RouteTarget{Service: "backend", Namespace: "shop"}
	assert.Empty(t, viz.Routes(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "api"}, &backend))
}

func TestParseResourceAcceptsLinkerdStyleTypes(t *testing.T) {
	r, err := viz.ParseResource("deploy/web", "shop")
	require.NoError(t, err)
	assert.Equal(t, viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop", Name: "web"}, r)
	r, err = viz.ParseResource("ns", "shop")
	require.NoError(t, err)
	assert.Equal(t, viz.Resource{Kind: viz.KindNamespace}, r)
	r, err = viz.ParseResource("ns/shop", "x")
	require.NoError(t, err)
	assert.Equal(t, "shop", r.Namespace)
	for _, bad := range []string{"banana", "deploy/a/b", ""} {
		_, err := viz.ParseResource(bad, "shop")
		assert.Error(t, err, bad)
	}
}

func u32(v uint32) *uint32 { return &v }

func TestTopPairsEventsAndRanksTheHottestPaths(t *testing.T) {
	top := viz.NewTop()
	meta := func(w string) map[string]string { return map[string]string{"deployment": w, "pod": w + "-0"} }
	send := func(stream uint64, path string, status uint32, lat time.Duration, grpc *uint32) {
		base := viz.Event{Proxy: "shop/api-0", StreamBase: 7, Stream: stream, SourceMeta: meta("web"), DestinationMeta: meta("api")}
		req := base
		req.Kind, req.Method, req.Path = viz.RequestInit, "GET", path
		rsp := base
		rsp.Kind, rsp.Status = viz.ResponseInit, status
		end := base
		end.Kind, end.SinceRequest, end.GRPCStatus = viz.ResponseEnd, lat, grpc
		top.Add(req)
		top.Add(rsp)
		top.Add(end)
	}
	send(1, "/a", 200, 3*time.Millisecond, nil)
	send(2, "/a", 503, 9*time.Millisecond, nil)
	send(3, "/a", 200, time.Millisecond, nil)
	send(4, "/b", 200, time.Millisecond, u32(14)) // gRPC Unavailable
	rows := top.Rows()
	require.Len(t, rows, 2)
	assert.Equal(t, viz.TopRow{Source: "web", Destination: "api", Method: "GET", Path: "/a", Count: 3, Successes: 2,
		Best: time.Millisecond, Worst: 9 * time.Millisecond, Last: time.Millisecond}, rows[0])
	assert.Equal(t, 0, rows[1].Successes, "gRPC Unavailable is a failure")

	// An end without a start is ignored; requests never finished are bounded.
	top.Add(viz.Event{Kind: viz.ResponseEnd, Stream: 99})
	for i := 0; i < viz.MaxPending+5; i++ {
		top.Add(viz.Event{Kind: viz.RequestInit, Stream: uint64(1000 + i)})
	}
	assert.Equal(t, 5, top.Dropped)
}

func TestTapLinesShowRequestResponseAndEnd(t *testing.T) {
	src := mustAddrPort("127.0.1.3:40000")
	dst := mustAddrPort("127.0.1.2:4143")
	e := viz.Event{Kind: viz.RequestInit, Direction: "inbound", Source: src, Destination: dst, StreamBase: 1, Stream: 4,
		SourceMeta: map[string]string{"tls": "true", "client_id": webID}, Method: "GET", Authority: "api:8080", Path: "/items"}
	assert.Equal(t, "req id=1:4 proxy=in src=127.0.1.3:40000 dst=127.0.1.2:4143 tls=true client_id="+webID+" :method=GET :authority=api:8080 :path=/items", e.Line())
	e.Kind, e.Status, e.SinceRequest = viz.ResponseInit, 403, 1500*time.Microsecond
	assert.Contains(t, e.Line(), ":status=403 latency=1500µs")
	e.Kind, e.SinceResponse, e.ResponseBytes = viz.ResponseEnd, 20*time.Microsecond, 12
	assert.Contains(t, e.Line(), "duration=20µs response-length=12B")

	f := viz.Filter{Method: "get", PathPrefix: "/it", To: "api"}
	e.Kind = viz.RequestInit
	e.DestinationMeta = map[string]string{"deployment": "api"}
	assert.True(t, f.Matches(e))
	f.PathPrefix = "/x"
	assert.False(t, f.Matches(e))
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestTopBoundsItsRowsWhenClientsSendEndlessPaths(t *testing.T) {
	top := viz.NewTop()
	for i := 0; i < viz.MaxTopRows+50; i++ {
		top.Add(viz.Event{Kind: viz.RequestInit, Stream: uint64(i), Method: "M" + fmtInt(i), Path: "/" + fmtInt(i)})
		top.Add(viz.Event{Kind: viz.ResponseEnd, Stream: uint64(i)})
	}
	rows := top.Rows()
	assert.Len(t, rows, viz.MaxTopRows+1)
	assert.Equal(t, viz.OtherPath, rows[0].Path)
	assert.Equal(t, 50, rows[0].Count)
}

func TestIdentitiesFallBackToTheServiceAccountInTheNameWhenNoTargetHoldsIt(t *testing.T) {
	ix := viz.NewIdentities([]viz.Target{
		{Namespace: "shop", Pod: "web-0", WorkloadKind: "deployment", Workload: "web"},
		{Namespace: "shop", Pod: "api-0", WorkloadKind: "deployment", Workload: "api", ServiceAccount: "backend"},
	})
	assert.Equal(t, "web", ix.ByIdentity(webID).Name, "a workload named like the service account")
	assert.Equal(t, "api", ix.ByIdentity("backend.shop.serviceaccount.identity.weft.cluster.local").Name)
	assert.Equal(t, viz.Workload{Kind: "identity", Name: "ghost.shop"}, ix.ByIdentity("ghost.shop.serviceaccount.identity.weft.cluster.local"))
	assert.Equal(t, viz.Workload{Kind: "identity", Name: "spiffe://x"}, ix.ByIdentity("spiffe://x"))
}
