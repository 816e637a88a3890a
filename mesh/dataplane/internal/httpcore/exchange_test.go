package httpcore

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
)

func TestBodyBuffersAreSizedByTheKnownLength(t *testing.T) {
	for _, c := range []struct {
		length int64
		want   int
	}{{0, smallBufSize}, {27, smallBufSize}, {smallBufSize, smallBufSize}, {smallBufSize + 1, relay.BufSize}, {-1, relay.BufSize}} {
		b, put := BodyBuf(c.length)
		assert.Len(t, *b, c.want, "length %d", c.length)
		put(b)
	}
}
