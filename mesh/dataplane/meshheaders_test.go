package dataplane

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMeshHeadersAreRecognisedInAnyCase(t *testing.T) {
	h := http.Header{"L5d-Client-Id": {"x"}, "Weft-Deny-Reason": {"y"}, "X-L5d": {"keep"}, "L5d": {"keep"}}
	removeMeshHeaders(h)
	assert.Equal(t, http.Header{"X-L5d": {"keep"}, "L5d": {"keep"}}, h)
	assert.True(t, isMeshHeader("l5d-dst-override"))
	assert.True(t, isMeshHeader("WEFT-x"))
	assert.False(t, isMeshHeader("l5d"))
}
