package crds_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/crds"
)

// gatewayAPIModuleVersion reads the version of sigs.k8s.io/gateway-api
// that the repository's go.mod requires.
func gatewayAPIModuleVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "sigs.k8s.io/gateway-api" {
			return f[1]
		}
	}
	t.Fatal("go.mod does not require sigs.k8s.io/gateway-api")
	return ""
}

func TestGatewayAPICRDsAreTheRoutesWeftReadsAtTheModuleVersion(t *testing.T) {
	all, err := crds.GatewayAPI()
	require.NoError(t, err)
	var names []string
	for _, crd := range all {
		names = append(names, crd.Name)
	}
	assert.Equal(t, []string{"grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io",
		"tcproutes.gateway.networking.k8s.io", "tlsroutes.gateway.networking.k8s.io"}, names)
	// HTTPRoute and GRPCRoute are standard; TCPRoute and TLSRoute come
	// from the experimental channel, whose CRDs still serve v1alpha2,
	// the version Linkerd's manifests (and its controller) use.
	channel := map[string]string{
		"grpcroutes.gateway.networking.k8s.io": "standard", "httproutes.gateway.networking.k8s.io": "standard",
		"tcproutes.gateway.networking.k8s.io": "experimental", "tlsroutes.gateway.networking.k8s.io": "experimental",
	}
	version := gatewayAPIModuleVersion(t)
	assert.Equal(t, version, crds.GatewayAPIVersion())
	for _, crd := range all {
		assert.Equal(t, version, crd.Annotations["gateway.networking.k8s.io/bundle-version"], "%s: pinned to go.mod's sigs.k8s.io/gateway-api", crd.Name)
		assert.Equal(t, channel[crd.Name], crd.Annotations["gateway.networking.k8s.io/channel"], crd.Name)
		served := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			served[v.Name] = v.Served
		}
		assert.True(t, served["v1"], "%s serves v1, the version the policy controller reads", crd.Name)
		if channel[crd.Name] == "experimental" {
			assert.True(t, served["v1alpha2"], "%s serves v1alpha2, the version Linkerd's manifests use", crd.Name)
		}
	}
	// Weft's own list never includes them.
	ours, err := crds.All()
	require.NoError(t, err)
	for _, crd := range ours {
		assert.NotEqual(t, "gateway.networking.k8s.io", crd.Spec.Group, crd.Name)
	}
}

func TestGatewayAPICRDsPassTheAPIServersValidation(t *testing.T) {
	all, err := crds.GatewayAPI()
	require.NoError(t, err)
	for _, crd := range all {
		assertTheAPIServerAccepts(t, crd)
	}
}
