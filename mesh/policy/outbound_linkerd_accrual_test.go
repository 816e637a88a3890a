package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

// The cases of Linkerd's policy-test outbound_api_failure_accrual.rs (at
// version-2.20, the release on linkerd2-proxy-api v0.20), for a Service
// parent, as a Linkerd user would annotate it. The EgressNetwork parent's
// run is TestLinkerdFailureAccrualCasesForAnEgressNetworkParent
// (egress_test.go) and the shared source suite's
// egress_network_ignores_balancer_toggles.

const (
	annAccrual     = "balancer.linkerd.io/failure-accrual"
	annMaxFailures = "balancer.linkerd.io/failure-accrual-consecutive-max-failures"
	annMinPenalty  = "balancer.linkerd.io/failure-accrual-consecutive-min-penalty"
	annMaxPenalty  = "balancer.linkerd.io/failure-accrual-consecutive-max-penalty"
	annJitter      = "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio"
	annSRThreshold = "balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold"
	annSRWindow    = "balancer.alpha.linkerd.io/failure-accrual-success-rate-window"
	annSRMin       = "balancer.alpha.linkerd.io/failure-accrual-success-rate-min-requests"
	annHonor       = "balancer.alpha.linkerd.io/failure-accrual-honor-retry-after"
	annPenalize    = "balancer.alpha.linkerd.io/penalize-failures"
)

// defaultLoad is the estimator of the Service's own (default) backend.
func defaultLoad(p *outbound.OutboundPolicy) *outbound.Backend_BalanceP2C {
	return p.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetBalancer()
}

func assertDefaultBackoff(t *testing.T, b *outbound.ExponentialBackoff) {
	t.Helper()
	assert.Equal(t, time.Second, b.GetMinBackoff().AsDuration())
	assert.Equal(t, time.Minute, b.GetMaxBackoff().AsDuration())
	assert.Equal(t, float32(0.5), b.GetJitterRatio())
}

func assertPlainEstimator(t *testing.T, p *outbound.OutboundPolicy) {
	t.Helper()
	assert.NotNil(t, defaultLoad(p).GetPeakEwma(), "plain peak EWMA")
	assert.Nil(t, defaultLoad(p).GetPenaltyPeakEwma(), "no penalty and no Retry-After cap")
}

func assertDefaultPenaltyEstimator(t *testing.T, p *outbound.OutboundPolicy) {
	t.Helper()
	pe := defaultLoad(p).GetPenaltyPeakEwma()
	require.NotNil(t, pe, "penalised peak EWMA")
	assert.Equal(t, 5*time.Second, pe.GetPenalty().AsDuration())
	assert.Equal(t, 5*time.Minute, pe.GetMaxRetryAfter().AsDuration(), "the default Retry-After cap")
}

func TestLinkerdFailureAccrualOutboundAPICases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		port  int
		check func(t *testing.T, p *outbound.OutboundPolicy)
	}{
		{"consecutive_failure_accrual", map[string]string{annAccrual: "consecutive", annMaxFailures: "8", annMinPenalty: "10s", annMaxPenalty: "10m", annJitter: "1.0"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				cf := accrualOf(p).GetConsecutiveFailures()
				require.NotNil(t, cf)
				assert.Equal(t, uint32(8), cf.GetMaxFailures())
				assert.Equal(t, 10*time.Second, cf.GetBackoff().GetMinBackoff().AsDuration())
				assert.Equal(t, 10*time.Minute, cf.GetBackoff().GetMaxBackoff().AsDuration())
				assert.Equal(t, float32(1.0), cf.GetBackoff().GetJitterRatio())
			}},
		{"consecutive_failure_accrual_defaults_no_config", map[string]string{annAccrual: "consecutive"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				cf := accrualOf(p).GetConsecutiveFailures()
				require.NotNil(t, cf)
				assert.Equal(t, uint32(7), cf.GetMaxFailures())
				assertDefaultBackoff(t, cf.GetBackoff())
			}},
		{"consecutive_failure_accrual_defaults_max_fails", map[string]string{annAccrual: "consecutive", annMaxFailures: "8"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				cf := accrualOf(p).GetConsecutiveFailures()
				require.NotNil(t, cf)
				assert.Equal(t, uint32(8), cf.GetMaxFailures())
				assertDefaultBackoff(t, cf.GetBackoff())
			}},
		{"consecutive_failure_accrual_defaults_jitter", map[string]string{annAccrual: "consecutive", annJitter: "1.0"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				cf := accrualOf(p).GetConsecutiveFailures()
				require.NotNil(t, cf)
				assert.Equal(t, uint32(7), cf.GetMaxFailures())
				assert.Equal(t, time.Second, cf.GetBackoff().GetMinBackoff().AsDuration())
				assert.Equal(t, time.Minute, cf.GetBackoff().GetMaxBackoff().AsDuration())
				assert.Equal(t, float32(1.0), cf.GetBackoff().GetJitterRatio())
			}},
		{"default_failure_accrual", map[string]string{annMaxFailures: "8"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.Nil(t, accrualOf(p), "parameters without a mode turn nothing on")
			}},
		{"unified_failure_accrual", map[string]string{annAccrual: "unified", annSRThreshold: "0.9", annSRWindow: "30s", annSRMin: "100",
			annMaxFailures: "8", annMinPenalty: "10s", annMaxPenalty: "10m", annJitter: "1.0"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				u := accrualOf(p).GetUnified()
				require.NotNil(t, u)
				assert.InDelta(t, 0.9, u.GetSuccessRateThreshold(), 1e-12)
				assert.Equal(t, 30*time.Second, u.GetDecay().AsDuration())
				assert.Equal(t, uint32(100), u.GetMinRequests())
				assert.Equal(t, uint32(8), u.GetMaxConsecutiveFailures())
				assert.Equal(t, 10*time.Second, u.GetBackoff().GetMinBackoff().AsDuration())
				assert.Equal(t, 10*time.Minute, u.GetBackoff().GetMaxBackoff().AsDuration())
				assert.Equal(t, float32(1.0), u.GetBackoff().GetJitterRatio())
			}},
		{"unified_failure_accrual_defaults_no_config", map[string]string{annAccrual: "unified"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				u := accrualOf(p).GetUnified()
				require.NotNil(t, u)
				assert.InDelta(t, 0.8, u.GetSuccessRateThreshold(), 1e-12)
				assert.Equal(t, 10*time.Second, u.GetDecay().AsDuration())
				assert.Equal(t, uint32(5), u.GetMinRequests())
				assert.Equal(t, uint32(7), u.GetMaxConsecutiveFailures())
				assertDefaultBackoff(t, u.GetBackoff())
			}},
		{"unified_honor_retry_after_sets_hint", map[string]string{annAccrual: "unified", annHonor: "true"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.True(t, accrualOf(p).GetUnified().GetBackoff().GetRespectRetryAfterHint())
				assertPlainEstimator(t, p)
			}},
		{"success_rate_annotations_ignored_under_consecutive", map[string]string{annAccrual: "consecutive", annSRThreshold: "0.9"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.NotNil(t, accrualOf(p).GetConsecutiveFailures(), "the consecutive breaker stays")
			}},
		{"penalize_failures_emits_penalty_estimator", map[string]string{annPenalize: "true"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) { assertDefaultPenaltyEstimator(t, p) }},
		{"opaque_service_keeps_plain_estimator_on_default_backend", map[string]string{annPenalize: "true"}, 4191,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				lb := p.GetProtocol().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetBalancer()
				assert.NotNil(t, lb.GetPeakEwma())
				assert.Nil(t, lb.GetPenaltyPeakEwma())
			}},
		{"honor_retry_after_keeps_plain_estimator", map[string]string{annAccrual: "consecutive", annHonor: "true"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.False(t, accrualOf(p).GetConsecutiveFailures().GetBackoff().GetRespectRetryAfterHint())
				assertPlainEstimator(t, p)
			}},
		{"penalize_and_honor_retry_after_combined", map[string]string{annAccrual: "consecutive", annPenalize: "true", annHonor: "true"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.False(t, accrualOf(p).GetConsecutiveFailures().GetBackoff().GetRespectRetryAfterHint())
				assertDefaultPenaltyEstimator(t, p)
			}},
		{"invalid_penalize_failures_value_produces_default", map[string]string{annPenalize: "invalid"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) { assertPlainEstimator(t, p) }},
		{"unannotated_service_has_no_new_config", nil, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.Nil(t, accrualOf(p))
				assertPlainEstimator(t, p)
			}},
		{"consecutive_accrual_pipeline_unchanged", map[string]string{annAccrual: "consecutive"}, 80,
			func(t *testing.T, p *outbound.OutboundPolicy) {
				assert.NotNil(t, accrualOf(p).GetConsecutiveFailures())
				assert.Nil(t, accrualOf(p).GetUnified())
				assertPlainEstimator(t, p)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := outboundFor(t, tc.ann, tc.port)
			tc.check(t, p)
		})
	}
}

// penalize_failures_watch_update: a watch sees the estimator change when
// the annotation is added.
func TestLinkerdPenalizeFailuresWatchUpdate(t *testing.T) {
	svc := func(ann string) string {
		return `---
apiVersion: v1
kind: Service
metadata:
  name: web-canary
  namespace: my-app
` + ann + `spec:
  selector: {app: web-canary}
  ports: [{name: http, port: 80}]
`
	}
	s := startServers(t, seedDoc(true)+svc(""))
	defer s.stop()
	ctx := testutil.Context(t, 10*time.Second)
	st, err := s.out.Watch(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: "web-canary.my-app.svc.cluster.local:80"}})
	require.NoError(t, err)
	first, err := st.Recv()
	require.NoError(t, err)
	assertPlainEstimator(t, first)
	s.src.Set(objectsFrom(t, seedDoc(true)+svc("  annotations: {balancer.alpha.linkerd.io/penalize-failures: \"true\"}\n")))
	next, err := st.Recv()
	require.NoError(t, err)
	assertDefaultPenaltyEstimator(t, next)
}

// outbound_api_http's and outbound_api_grpc's load-bias cases: a route's
// backends take the parent Service's estimator, never their own
// Service's annotation.
func TestLinkerdRouteBackendsInheritTheParentsLoadBias(t *testing.T) {
	doc := func(parentAnn, backendAnn string) string {
		return `apiVersion: v1
kind: Namespace
metadata: {name: my-app}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: my-app
  annotations: {` + parentAnn + `}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: web-canary
  namespace: my-app
  annotations: {` + backendAnn + `}
spec:
  selector: {app: web-canary}
  ports: [{name: http, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: split, namespace: my-app}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules:
  - backendRefs: [{name: web-canary, port: 80}]
`
	}
	routeBackend := func(t *testing.T, d string) *outbound.Backend_BalanceP2C {
		t.Helper()
		ix := policy.Build(objectsFrom(t, d), nil)
		p, err := ix.OutboundPolicy(policy.OutboundTarget{Namespace: "my-app", Name: "web", Port: 80})
		require.NoError(t, err)
		rs := p.GetProtocol().GetDetect().GetHttp1().GetRoutes()
		require.Len(t, rs, 1)
		wbs := rs[0].GetRules()[0].GetBackends().GetRandomAvailable().GetBackends()
		require.Len(t, wbs, 1)
		return wbs[0].GetBackend().GetBackend().GetBalancer()
	}
	on := `balancer.alpha.linkerd.io/penalize-failures: "true"`
	t.Run("http_route_backend_inherits_load_bias", func(t *testing.T) {
		assert.NotNil(t, routeBackend(t, doc(on, on)).GetPenaltyPeakEwma())
	})
	t.Run("http_penalize_failures_annotated_parent_unannotated_backend", func(t *testing.T) {
		assert.NotNil(t, routeBackend(t, doc(on, "")).GetPenaltyPeakEwma())
	})
	t.Run("http_penalize_failures_unannotated_parent_annotated_backend", func(t *testing.T) {
		lb := routeBackend(t, doc("", on))
		assert.Nil(t, lb.GetPenaltyPeakEwma(), "the backend's own annotation does not select the penalty")
		assert.NotNil(t, lb.GetPeakEwma())
	})
}
