package v1beta3_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1beta3"
)

func TestDeepCopyOfServerSharesNothingWithTheOriginal(t *testing.T) {
	orig := &v1beta3.Server{
		ObjectMeta: metav1.ObjectMeta{Name: "web-http", Labels: map[string]string{"a": "b"}},
		Spec: v1beta3.ServerSpec{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Port:        intstr.FromInt32(8080),
		},
	}
	cp := orig.DeepCopyObject().(*v1beta3.Server)
	require.Equal(t, orig, cp)
	cp.Spec.PodSelector.MatchLabels["app"] = "other"
	cp.Labels["a"] = "c"
	assert.Equal(t, "web", orig.Spec.PodSelector.MatchLabels["app"])
	assert.Equal(t, "b", orig.Labels["a"])
}

func TestHTTPRouteMarshalsWithLinkerdFieldNames(t *testing.T) {
	kind := gatewayv1.Kind("Server")
	route := v1beta3.HTTPRoute{
		Spec: v1beta3.HTTPRouteSpec{
			ParentRefs: []v1beta3.ParentReference{{Name: "web-http", Kind: &kind}},
			Rules: []v1beta3.HTTPRouteRule{{
				Filters: []v1beta3.HTTPRouteFilter{{
					Type:                   v1beta3.HTTPRouteFilterResponseHeaderModifier,
					ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"server"}},
				}},
				BackendRefs: []v1beta3.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web"},
				}}},
			}},
		},
	}
	js, err := json.Marshal(route.Spec)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"parentRefs": [{"name": "web-http", "kind": "Server"}],
		"rules": [{
			"filters": [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": ["server"]}}],
			"backendRefs": [{"name": "web"}]
		}]
	}`, string(js))

	cp := route.DeepCopy()
	cp.Spec.Rules[0].Filters[0].ResponseHeaderModifier.Remove[0] = "x"
	assert.Equal(t, "server", route.Spec.Rules[0].Filters[0].ResponseHeaderModifier.Remove[0])
}

func TestUnstructuredFromADynamicClientConvertsToServer(t *testing.T) {
	// What a dynamic informer hands over: JSON numbers as int64.
	u := map[string]any{
		"apiVersion": "policy.linkerd.io/v1beta3",
		"kind":       "Server",
		"metadata":   map[string]any{"name": "web-http", "namespace": "my-app"},
		"spec": map[string]any{
			"podSelector":   map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"port":          int64(8080),
			"proxyProtocol": "HTTP/2",
			"accessPolicy":  "audit",
		},
	}
	var srv v1beta3.Server
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, &srv))
	assert.Equal(t, intstr.FromInt32(8080), srv.Spec.Port)
	assert.Equal(t, v1beta3.ProxyProtocolHTTP2, srv.Spec.ProxyProtocol)
	assert.Equal(t, v1beta3.AccessPolicyAudit, srv.Spec.AccessPolicy)
	assert.Equal(t, "web", srv.Spec.PodSelector.MatchLabels["app"])
	assert.Equal(t, "Server", srv.Kind)
}
