package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
)

func TestDeepCopyOfAuthorizationPolicySharesNothingWithTheOriginal(t *testing.T) {
	ns := "linkerd"
	orig := &v1alpha1.AuthorizationPolicy{
		Spec: v1alpha1.AuthorizationPolicySpec{
			TargetRef: v1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"},
			RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{
				{Group: "policy.linkerd.io", Kind: "NetworkAuthentication", Name: "cluster", Namespace: &ns},
			},
		},
	}
	cp := orig.DeepCopyObject().(*v1alpha1.AuthorizationPolicy)
	require.Equal(t, orig, cp)
	*cp.Spec.RequiredAuthenticationRefs[0].Namespace = "other"
	cp.Spec.RequiredAuthenticationRefs[0].Kind = gatewayv1.Kind("ServiceAccount")
	assert.Equal(t, "linkerd", *orig.Spec.RequiredAuthenticationRefs[0].Namespace)
	assert.Equal(t, gatewayv1.Kind("NetworkAuthentication"), orig.Spec.RequiredAuthenticationRefs[0].Kind)
}
