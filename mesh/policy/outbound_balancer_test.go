package policy_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/policy"
)

// outboundFor builds the Outbound API's answer for port 80 of Service
// web in my-app with the given annotations, and the index's warnings.
func outboundFor(t *testing.T, annotations map[string]string, port int) (*outbound.OutboundPolicy, []string) {
	t.Helper()
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ann strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&ann, "    %s: %q\n", k, annotations[k])
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: my-app}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: my-app
  annotations:
    x: "y"
%s
spec:
  clusterIP: 10.96.0.10
  selector: {app: web}
  ports:
  - {name: http, port: 80}
  - {name: db, port: 5432}
  - {name: opaq, port: 4191, appProtocol: linkerd.io/opaque}
---
apiVersion: v1
kind: Service
metadata: {name: web-canary, namespace: my-app}
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
  - matches: [{path: {type: PathPrefix, value: /canary}}]
    backendRefs: [{name: web-canary, port: 80}]
`, ann.String())
	ix := policy.Build(objectsFrom(t, doc), nil)
	var warns []string
	for _, p := range ix.Problems() {
		warns = append(warns, p.String())
	}
	pol, err := ix.OutboundPolicy(policy.OutboundTarget{Namespace: "my-app", Name: "web", Port: uint16(port)})
	require.NoError(t, err)
	return pol, warns
}

func accrualOf(p *outbound.OutboundPolicy) *outbound.FailureAccrual {
	return p.GetProtocol().GetDetect().GetHttp1().GetFailureAccrual()
}

func TestConsecutiveFailureAccrualTakesLinkerdsDefaultsAndNeverRespectsRetryAfter(t *testing.T) {
	pol, warns := outboundFor(t, map[string]string{
		"balancer.linkerd.io/failure-accrual":                         "consecutive",
		"balancer.alpha.linkerd.io/failure-accrual-honor-retry-after": "true",
	}, 80)
	cf := accrualOf(pol).GetConsecutiveFailures()
	require.NotNil(t, cf)
	assert.Equal(t, uint32(7), cf.GetMaxFailures())
	assert.Equal(t, time.Second, cf.GetBackoff().GetMinBackoff().AsDuration())
	assert.Equal(t, time.Minute, cf.GetBackoff().GetMaxBackoff().AsDuration())
	assert.Equal(t, float32(0.5), cf.GetBackoff().GetJitterRatio())
	assert.False(t, cf.GetBackoff().GetRespectRetryAfterHint())
	assert.Nil(t, accrualOf(pol).GetEjection(), "Linkerd's controller sets no ejection floor")
	assert.Contains(t, strings.Join(warns, "\n"), "has effect in unified mode only")
}

func TestUnifiedFailureAccrualCarriesTheSuccessRateAndRetryAfter(t *testing.T) {
	pol, _ := outboundFor(t, map[string]string{"balancer.linkerd.io/failure-accrual": "unified"}, 80)
	u := accrualOf(pol).GetUnified()
	require.NotNil(t, u)
	assert.Equal(t, 0.8, u.GetSuccessRateThreshold())
	assert.Equal(t, 10*time.Second, u.GetDecay().AsDuration())
	assert.Equal(t, uint32(5), u.GetMinRequests())
	assert.Equal(t, uint32(7), u.GetMaxConsecutiveFailures())
	assert.False(t, u.GetBackoff().GetRespectRetryAfterHint())

	pol, warns := outboundFor(t, map[string]string{
		"balancer.linkerd.io/failure-accrual":                                 "unified",
		"balancer.linkerd.io/failure-accrual-consecutive-max-failures":        "0",
		"balancer.linkerd.io/failure-accrual-consecutive-min-penalty":         "2s",
		"balancer.linkerd.io/failure-accrual-consecutive-max-penalty":         "90s",
		"balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio":        "0",
		"balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold":    "0.95",
		"balancer.alpha.linkerd.io/failure-accrual-success-rate-window":       "30s",
		"balancer.alpha.linkerd.io/failure-accrual-success-rate-min-requests": "20",
		"balancer.alpha.linkerd.io/failure-accrual-honor-retry-after":         "True",
	}, 80)
	assert.Empty(t, warns)
	u = accrualOf(pol).GetUnified()
	require.NotNil(t, u)
	assert.Equal(t, 0.95, u.GetSuccessRateThreshold())
	assert.Equal(t, 30*time.Second, u.GetDecay().AsDuration())
	assert.Equal(t, uint32(20), u.GetMinRequests())
	assert.Equal(t, uint32(0), u.GetMaxConsecutiveFailures(), "zero turns the run of failures off")
	assert.Equal(t, 2*time.Second, u.GetBackoff().GetMinBackoff().AsDuration())
	assert.Equal(t, 90*time.Second, u.GetBackoff().GetMaxBackoff().AsDuration())
	assert.True(t, u.GetBackoff().GetRespectRetryAfterHint())
	assert.Same(t, accrualOf(pol), pol.GetProtocol().GetDetect().GetHttp2().GetFailureAccrual(), "one accrual for HTTP/1 and HTTP/2")
}

func TestBadFailureAccrualAnnotationsTurnItOffWithAWarning(t *testing.T) {
	unified := func(k, v string) map[string]string {
		return map[string]string{"balancer.linkerd.io/failure-accrual": "unified", k: v}
	}
	for name, ann := range map[string]map[string]string{
		"unknown mode":              {"balancer.linkerd.io/failure-accrual": "success-rate"},
		"max failures not a number": unified("balancer.linkerd.io/failure-accrual-consecutive-max-failures", "seven"),
		"negative max failures":     unified("balancer.linkerd.io/failure-accrual-consecutive-max-failures", "-1"),
		"min over max":              unified("balancer.linkerd.io/failure-accrual-consecutive-min-penalty", "2m"),
		"zero max penalty":          unified("balancer.linkerd.io/failure-accrual-consecutive-max-penalty", "0"),
		"fractional duration":       unified("balancer.linkerd.io/failure-accrual-consecutive-max-penalty", "1.5s"),
		"bare number":               unified("balancer.linkerd.io/failure-accrual-consecutive-max-penalty", "30"),
		"jitter over 100":           unified("balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio", "101"),
		"threshold over 1":          unified("balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold", "1.5"),
		"threshold NaN":             unified("balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold", "NaN"),
		"zero window":               unified("balancer.alpha.linkerd.io/failure-accrual-success-rate-window", "0"),
		"window under 10ms":         unified("balancer.alpha.linkerd.io/failure-accrual-success-rate-window", "5ms"),
		"too many min requests":     unified("balancer.alpha.linkerd.io/failure-accrual-success-rate-min-requests", "1000001"),
	} {
		pol, warns := outboundFor(t, ann, 80)
		assert.Nil(t, accrualOf(pol), name)
		assert.Contains(t, strings.Join(warns, "\n"), "failure accrual is off", name)
	}
	// With the success rate off, its window and floor are not checked.
	pol, _ := outboundFor(t, map[string]string{"balancer.linkerd.io/failure-accrual": "unified",
		"balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold": "0",
		"balancer.alpha.linkerd.io/failure-accrual-success-rate-window":    "5ms"}, 80)
	assert.NotNil(t, accrualOf(pol).GetUnified())
	// A bad toggle only loses Retry-After.
	pol, warns := outboundFor(t, map[string]string{"balancer.linkerd.io/failure-accrual": "unified",
		"balancer.alpha.linkerd.io/failure-accrual-honor-retry-after": "yes"}, 80)
	require.NotNil(t, accrualOf(pol).GetUnified())
	assert.False(t, accrualOf(pol).GetUnified().GetBackoff().GetRespectRetryAfterHint())
	assert.Contains(t, strings.Join(warns, "\n"), `"yes" is not true or false`)
}

func TestPenalizeFailuresSelectsThePenalisedEstimatorForHTTPBackends(t *testing.T) {
	load := func(b *outbound.Backend) *outbound.Backend_BalanceP2C { return b.GetBalancer() }
	defaultBackend := func(p *outbound.OutboundPolicy) *outbound.Backend {
		return p.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend()
	}
	pol, _ := outboundFor(t, nil, 80)
	assert.NotNil(t, load(defaultBackend(pol)).GetPeakEwma(), "plain peak EWMA by default")

	pol, _ = outboundFor(t, map[string]string{"balancer.alpha.linkerd.io/penalize-failures": "true"}, 80)
	pe := load(defaultBackend(pol)).GetPenaltyPeakEwma()
	require.NotNil(t, pe)
	assert.Equal(t, 30*time.Millisecond, pe.GetDefaultRtt().AsDuration())
	assert.Equal(t, 10*time.Second, pe.GetDecay().AsDuration())
	assert.Equal(t, 5*time.Second, pe.GetPenalty().AsDuration())
	assert.Equal(t, 5*time.Minute, pe.GetMaxRetryAfter().AsDuration())
	assert.Equal(t, 10*time.Second, pe.GetPenaltyDecay().AsDuration())
	// The route's other backend shares the estimator.
	var canary *outbound.Backend
	for _, r := range pol.GetProtocol().GetDetect().GetHttp1().GetRoutes() {
		for _, rule := range r.GetRules() {
			for _, wb := range rule.GetBackends().GetRandomAvailable().GetBackends() {
				canary = wb.GetBackend().GetBackend()
			}
		}
	}
	require.NotNil(t, canary)
	assert.NotNil(t, load(canary).GetPenaltyPeakEwma(), "route backends share the Service's estimator")

	pol, _ = outboundFor(t, map[string]string{"balancer.alpha.linkerd.io/penalize-failures": "1",
		"balancer.alpha.linkerd.io/load-biaser-penalty": "2s", "balancer.alpha.linkerd.io/load-biaser-max-retry-after": "1m"}, 80)
	pe = load(defaultBackend(pol)).GetPenaltyPeakEwma()
	require.NotNil(t, pe)
	assert.Equal(t, 2*time.Second, pe.GetPenalty().AsDuration())
	assert.Equal(t, time.Minute, pe.GetMaxRetryAfter().AsDuration())

	// 5432 is opaque: no response to penalise.
	pol, _ = outboundFor(t, map[string]string{"balancer.alpha.linkerd.io/penalize-failures": "true"}, 5432)
	require.NotNil(t, pol.GetProtocol().GetOpaque())
	assert.NotNil(t, pol.GetProtocol().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetBalancer().GetPeakEwma())

	for _, bad := range []map[string]string{
		{"balancer.alpha.linkerd.io/penalize-failures": "yes"},
		{"balancer.alpha.linkerd.io/penalize-failures": "true", "balancer.alpha.linkerd.io/load-biaser-penalty": "soon"},
		{"balancer.alpha.linkerd.io/penalize-failures": "true", "balancer.alpha.linkerd.io/load-biaser-penalty": "50d"},
	} {
		pol, warns := outboundFor(t, bad, 80)
		assert.NotNil(t, load(defaultBackend(pol)).GetPeakEwma(), "%v", bad)
		assert.Contains(t, strings.Join(warns, "\n"), "failures are not penalised", "%v", bad)
	}
}
