package v1beta1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/policy/v1beta1"
)

func TestDeepCopyOfServerAuthorizationSharesNothingWithTheOriginal(t *testing.T) {
	orig := &v1beta1.ServerAuthorization{
		Spec: v1beta1.ServerAuthorizationSpec{
			Server: v1beta1.ServerRef{Name: "web-http"},
			Client: v1beta1.Client{
				Networks: []v1beta1.Network{{Cidr: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
				MeshTLS:  &v1beta1.MeshTLS{ServiceAccounts: []v1beta1.ServiceAccountRef{{Name: "api"}}},
			},
		},
	}
	cp := orig.DeepCopyObject().(*v1beta1.ServerAuthorization)
	require.Equal(t, orig, cp)
	cp.Spec.Client.Networks[0].Except[0] = "x"
	cp.Spec.Client.MeshTLS.ServiceAccounts[0].Name = "y"
	assert.Equal(t, "10.1.0.0/16", orig.Spec.Client.Networks[0].Except[0])
	assert.Equal(t, "api", orig.Spec.Client.MeshTLS.ServiceAccounts[0].Name)
}
