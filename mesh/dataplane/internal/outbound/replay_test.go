package outbound

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestANilReplayBodyIsReplayable(t *testing.T) {
	var rb *ReplayBody
	assert.True(t, rb.Replayable(), "a request without a kept body has nothing to send again")
}

func TestALaterAttemptReadsTheKeptBytesThenTheRestFromTheClient(t *testing.T) {
	rb := newReplayBody(io.NopCloser(strings.NewReader("hello world")), 64)
	first := rb.attempt()
	buf := make([]byte, 5)
	n, err := io.ReadFull(first, buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf[:n]))
	assert.True(t, rb.Replayable())

	second := rb.attempt()
	_, err = first.Read(buf)
	assert.ErrorIs(t, err, errStaleAttempt, "the superseded attempt stops reading")
	all, err := io.ReadAll(second)
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(all))
	assert.True(t, rb.Replayable())
}

func TestABodyLongerThanItsBoundIsNoLongerReplayable(t *testing.T) {
	rb := newReplayBody(io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), 10)
	all, err := io.ReadAll(rb.attempt())
	require.NoError(t, err)
	assert.Len(t, all, 100, "the current attempt reads on past the bound")
	assert.False(t, rb.Replayable())
}

func TestABodyTheClientBrokeIsNoLongerReplayable(t *testing.T) {
	broken := errors.New("client reset")
	rb := newReplayBody(io.NopCloser(io.MultiReader(strings.NewReader("part"), errReader{broken})), 64)
	_, err := io.ReadAll(rb.attempt())
	assert.ErrorIs(t, err, broken)
	assert.False(t, rb.Replayable())
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Again (the HTTP/2 pool's second try of a request the upstream never
// processed) reads from the start even though the first reader was
// partly read and closed, and the first reader stops.
func TestAgainReadsTheKeptBodyFromItsStart(t *testing.T) {
	rb := newReplayBody(io.NopCloser(strings.NewReader("hello world")), 64)
	first := rb.attempt()
	buf := make([]byte, 5)
	_, err := io.ReadFull(first, buf)
	require.NoError(t, err)
	require.NoError(t, first.Close())

	again := rb.Again()
	_, err = first.Read(buf)
	assert.ErrorIs(t, err, errStaleAttempt)
	all, err := io.ReadAll(again)
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(all))
}
