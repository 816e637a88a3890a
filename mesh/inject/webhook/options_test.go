package webhook_test

import (
	"net/http"
	"testing"
	"time"

	kitprometheus "github.com/go-kit/kit/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

func TestWithMaxBodyBytesLowersTheBodyLimit(t *testing.T) {
	v, err := webhook.NewValidator(webhook.WithMaxBodyBytes(256))
	require.NoError(t, err)
	url, client := serveTLS(t, v)
	body := objectReview(t, admissionv1.Create, `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes: [{name: a-route-with-a-long-enough-name, condition: {method: GET, pathRegex: "/books/[^/]*/chapters/[^/]*"}}]
`)
	require.Greater(t, len(body), 256)
	status, _ := post(t, client, url, body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
}

func TestWithClockTimesEachReview(t *testing.T) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "validator_request_duration_seconds", Buckets: []float64{1, 2, 4}}, []string{"outcome"})
	clock := testutil.NewStepClock(time.Unix(0, 0), 3*time.Second)
	v, err := webhook.NewValidator(webhook.WithClock(clock.Now), webhook.WithMetrics(webhook.Metrics{Duration: kitprometheus.NewHistogram(hist)}))
	require.NoError(t, err)
	url, client := serveTLS(t, v)
	status, _ := post(t, client, url, objectReview(t, admissionv1.Create, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"))
	require.Equal(t, http.StatusOK, status)

	reg := prometheus.NewRegistry()
	reg.MustRegister(hist)
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	h := families[0].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(1), h.GetSampleCount())
	assert.Equal(t, 3.0, h.GetSampleSum(), "one step of the injected clock between start and end")
}
