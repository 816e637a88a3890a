package httpcore

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wrapped stands for the dataplane package's connection wrappers
// (replayConn, countedConn): it hides CloseWrite and says what it wraps.
type wrapped struct{ net.Conn }

func (w *wrapped) NetConn() net.Conn { return w.Conn }

// opaque wraps a connection without saying what it wraps.
type opaque struct{ net.Conn }

func TestTheTunnelFindsTheHalfCloserThroughEveryWrapperThatNamesWhatItWraps(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	if s := <-accepted; s != nil {
		defer s.Close()
	}

	tcp := c.(*net.TCPConn)
	assert.Same(t, tcp, halfCloserOf(&bufferedConn{Conn: &wrapped{&wrapped{tcp}}}))
	assert.Nil(t, halfCloserOf(&bufferedConn{Conn: &opaque{tcp}}), "a wrapper that hides what it wraps has no half-closer")
}

func TestUpgradeAnswerAnswersOnlyTheUpgradesCauses(t *testing.T) {
	refused := errors.New("connection refused")
	for _, c := range []struct {
		err    error
		status int
		class  string
	}{
		{ErrUpgradeBody, 400, "upgrade-with-body"},
		{ErrBadUpgrade, 502, "bad-upgrade"},
		{ErrNoHijack, 500, "upgrade"},
		{&UpgradeError{Err: &DialError{Err: refused}, Dial: true}, 502, "connect"},
		{&UpgradeError{Err: refused}, 502, "upstream"},
	} {
		a, ok := UpgradeAnswer(c.err)
		require.True(t, ok, "%v", c.err)
		assert.Equal(t, c.status, a.Status, "%v", c.err)
		assert.Equal(t, c.class, a.Class, "%v", c.err)
	}
	_, ok := UpgradeAnswer(&DialError{Err: refused})
	assert.False(t, ok, "a dial error of a request, not of an upgrade, is the caller's to answer")
}
