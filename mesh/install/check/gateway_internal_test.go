package check

import (
	"testing"

	"github.com/stretchr/testify/assert"

	policyk8s "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// The versions check accepts are the ones the policy controller reads.
func TestGatewayReadVersionsAreThePolicyControllers(t *testing.T) {
	assert.Equal(t, []string{policyk8s.GatewayHTTPRoutesResource.Version}, gatewayReadVersions["HTTPRoute"])
	assert.Equal(t, []string{policyk8s.GRPCRoutesResource.Version}, gatewayReadVersions["GRPCRoute"])
	assert.Equal(t, []string{policyk8s.TCPRoutesV1Resource.Version, policyk8s.TCPRoutesResource.Version}, gatewayReadVersions["TCPRoute"])
	assert.Equal(t, []string{policyk8s.TLSRoutesV1Resource.Version, policyk8s.TLSRoutesResource.Version}, gatewayReadVersions["TLSRoute"])
}
