package dataplane

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
)

func TestAReplayedPrefixIsReadFirstAndThenLetGo(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	hello := []byte("a replayed ClientHello")
	rc := &replayConn{Conn: server, prefix: hello}

	go func() { _, _ = client.Write([]byte(" and then the socket")) }()
	buf := make([]byte, 10)
	got := []byte{}
	for len(got) < len(hello) {
		n, err := rc.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	assert.Equal(t, hello, got)
	assert.Nil(t, rc.prefix, "the prefix's array is released once it has been read, not held for the connection's life")

	rest := make([]byte, len(" and then the socket"))
	_, err := io.ReadFull(rc, rest)
	require.NoError(t, err)
	assert.Equal(t, " and then the socket", string(rest))
}

func TestBodyBuffersAreSizedByTheKnownLength(t *testing.T) {
	for _, c := range []struct {
		length int64
		want   int
	}{{0, smallBufSize}, {27, smallBufSize}, {smallBufSize, smallBufSize}, {smallBufSize + 1, relay.BufSize}, {-1, relay.BufSize}} {
		b, put := getBodyBuf(c.length)
		assert.Len(t, *b, c.want, "length %d", c.length)
		put(b)
	}
}
