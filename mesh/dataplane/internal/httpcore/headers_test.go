package httpcore

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMeshHeadersAreRecognisedInAnyCase(t *testing.T) {
	h := http.Header{"L5d-Client-Id": {"x"}, "Weft-Deny-Reason": {"y"}, "X-L5d": {"keep"}, "L5d": {"keep"}}
	RemoveMeshHeaders(h)
	assert.Equal(t, http.Header{"X-L5d": {"keep"}, "L5d": {"keep"}}, h)
	assert.True(t, IsMeshHeader("l5d-dst-override"))
	assert.True(t, IsMeshHeader("WEFT-x"))
	assert.False(t, IsMeshHeader("l5d"))
}
