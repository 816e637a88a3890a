package bodybuf_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/bodybuf"
)

// TestAReaderThatLagsKeepsTheBufferWithinTwiceTheWindow: a reader that
// always leaves some bytes unread must not keep the bytes it read; what
// it reads comes out in order and whole.
func TestAReaderThatLagsKeepsTheBufferWithinTwiceTheWindow(t *testing.T) {
	const window = 64 << 10
	var buf []byte
	off := 0
	var in, out bytes.Buffer
	frame := make([]byte, 16<<10)
	for i := range 200 {
		for j := range frame {
			frame[j] = byte(i + j)
		}
		// Flow control: never more than the window unread.
		for len(buf)-off+len(frame) > window {
			out.Write(buf[off : off+1000])
			off += 1000
		}
		in.Write(frame)
		buf, off = bodybuf.Append(buf, off, frame, window)
		require.LessOrEqual(t, cap(buf), 2*window, "frame %d", i)
		// The reader takes a little less than arrives.
		n := min(len(frame)-100, len(buf)-off)
		out.Write(buf[off : off+n])
		off += n
	}
	out.Write(buf[off:])
	assert.Equal(t, in.Bytes(), out.Bytes())
}

// TestASmallBodyTakesWhatItNeeds: a body that fits is held as sent, and
// a buffer read to its end starts over.
func TestASmallBodyTakesWhatItNeeds(t *testing.T) {
	buf, off := bodybuf.Append(nil, 0, []byte("hello"), 1<<20)
	assert.Equal(t, "hello", string(buf[off:]))
	assert.Equal(t, 5, cap(buf))
	buf, off = bodybuf.Append(buf, len(buf), []byte("again"), 1<<20)
	assert.Equal(t, "again", string(buf[off:]))
	assert.Equal(t, 0, off)
}
