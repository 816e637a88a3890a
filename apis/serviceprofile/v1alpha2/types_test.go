package v1alpha2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

func TestDeepCopyOfNestedConditionsSharesNothingWithTheOriginal(t *testing.T) {
	orig := &v1alpha2.ServiceProfile{
		Spec: v1alpha2.ServiceProfileSpec{
			Routes: []v1alpha2.RouteSpec{{
				Name: "r",
				Condition: &v1alpha2.RequestMatch{Any: []v1alpha2.RequestMatch{
					{Not: &v1alpha2.RequestMatch{Method: "DELETE"}},
				}},
				ResponseClasses: []v1alpha2.ResponseClass{{
					Condition: &v1alpha2.ResponseMatch{Status: &v1alpha2.Range{Min: 500}},
					IsFailure: true,
				}},
			}},
			DstOverrides: []v1alpha2.WeightedDst{{Authority: "a:80", Weight: resource.MustParse("1")}},
		},
	}
	cp := orig.DeepCopyObject().(*v1alpha2.ServiceProfile)
	require.Equal(t, orig, cp)
	cp.Spec.Routes[0].Condition.Any[0].Not.Method = "GET"
	cp.Spec.Routes[0].ResponseClasses[0].Condition.Status.Min = 400
	assert.Equal(t, "DELETE", orig.Spec.Routes[0].Condition.Any[0].Not.Method)
	assert.Equal(t, uint32(500), orig.Spec.Routes[0].ResponseClasses[0].Condition.Status.Min)
}

func TestUnstructuredFromADynamicClientConvertsToServiceProfile(t *testing.T) {
	u := map[string]any{
		"apiVersion": "linkerd.io/v1alpha2",
		"kind":       "ServiceProfile",
		"metadata":   map[string]any{"name": "web.my-app.svc.cluster.local", "namespace": "my-app"},
		"spec": map[string]any{
			"routes": []any{map[string]any{
				"name":      "GET /",
				"condition": map[string]any{"method": "GET", "not": map[string]any{"pathRegex": "/admin.*"}},
			}},
			"retryBudget":  map[string]any{"retryRatio": 0.2, "minRetriesPerSecond": int64(10), "ttl": "10s"},
			"dstOverrides": []any{map[string]any{"authority": "web-v2:80", "weight": "500m"}},
		},
	}
	var sp v1alpha2.ServiceProfile
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, &sp))
	assert.Equal(t, "/admin.*", sp.Spec.Routes[0].Condition.Not.PathRegex)
	assert.InDelta(t, 0.2, sp.Spec.RetryBudget.RetryRatio, 1e-6)
	assert.Equal(t, uint32(10), sp.Spec.RetryBudget.MinRetriesPerSecond)
	assert.Equal(t, "500m", sp.Spec.DstOverrides[0].Weight.String())
}
