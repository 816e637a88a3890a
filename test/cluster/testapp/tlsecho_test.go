package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTLSEchoAnswersWithItsNameWhateverTheServerName(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	a := &app{name: "backend"}
	require.NoError(t, a.tlsEcho(ln))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sni := range []string{"backend.example", "anything.example"} {
		reply, err := tlsExchange(ctx, ln.Addr().String(), sni, "hello "+sni)
		require.NoError(t, err, sni)
		assert.Equal(t, "backend hello "+sni, reply)
	}
	// Plain bytes are no TLS: the exchange fails instead of echoing.
	_, err = exchange(ctx, ln.Addr().String(), "plain")
	assert.Error(t, err)
}
