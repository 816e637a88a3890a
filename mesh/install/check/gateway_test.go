package check_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/mesh/install/check"
)

func TestGatewayAPICRDsAreOptionalButMustServeAVersionWeftReads(t *testing.T) {
	c := healthyCluster(t, "weft")
	r := c.run(t, check.Scope{})
	require.True(t, r.Success, "absent Gateway API CRDs fail nothing")
	for _, res := range r.Results {
		assert.NotContains(t, res.Name, "Gateway API", "an absent Gateway API CRD is not reported")
	}

	gw, err := crds.GatewayAPI()
	require.NoError(t, err)
	established := []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	for _, crd := range gw {
		crd = crd.DeepCopy()
		crd.Status.Conditions = established
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			switch crd.Spec.Names.Kind {
			case "TCPRoute": // an older experimental channel: v1alpha2 only
				v.Served = v.Name == "v1alpha2"
			case "HTTPRoute": // v1beta1 only: not a version Weft reads
				v.Served = v.Name == "v1beta1"
			}
		}
		if crd.Spec.Names.Kind == "GRPCRoute" {
			crd.Status.Conditions = nil
		}
		_, err := c.ext.ApiextensionsV1().CustomResourceDefinitions().Create(bg, crd, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	r = c.run(t, check.Scope{})
	assert.False(t, r.Success)
	tcp := result(t, r, check.CategoryCRDs, "Gateway API CRD tcproutes.gateway.networking.k8s.io")
	assert.Equal(t, check.StatusOK, tcp.Status, tcp.Message)
	assert.Equal(t, "served v1alpha2, TCPRoutes read at v1alpha2", tcp.Message)
	tls := result(t, r, check.CategoryCRDs, "Gateway API CRD tlsroutes.gateway.networking.k8s.io")
	assert.Equal(t, check.StatusOK, tls.Status, tls.Message)
	assert.Contains(t, tls.Message, "TLSRoutes read at v1")
	http := result(t, r, check.CategoryCRDs, "Gateway API CRD httproutes.gateway.networking.k8s.io")
	assert.Equal(t, check.StatusFail, http.Status)
	assert.Equal(t, "serves v1beta1; Weft's policy controller reads HTTPRoutes at v1", http.Message)
	grpc := result(t, r, check.CategoryCRDs, "Gateway API CRD grpcroutes.gateway.networking.k8s.io")
	assert.Equal(t, check.StatusFail, grpc.Status)
	assert.Equal(t, "not Established", grpc.Message)
	assert.Contains(t, grpc.Hint, "weft install --crds --gateway-api")
}
