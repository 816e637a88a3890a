package l4

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
