package upstream_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// The HTTP/1.1 pool's idle check looks through the Count wrapper (its
// NetConn) at the mesh TLS connection: one the peer closed (its
// close_notify and FIN waiting) is not reused once idle past the check's
// threshold; an open one is; one reused within microseconds is not
// checked at all.
func TestAPeerConnectionThePeerClosedIsNotReusable(t *testing.T) {
	peer := startH1Peer(t)
	d := &dials{tls: peer.client}
	dl := d.dialer()
	ep := endpoint.Endpoint{Addr: netip.AddrPortFrom(peer.addr.Addr(), 8080), Identity: peerIdentity, OpaqueTransportPort: peer.addr.Port()}
	raw, err := dl.Peer(testutil.Context(t, 0), ep, transport.HTTP1)
	require.NoError(t, err)
	c := dl.Count(raw, upstream.Labels{Endpoint: ep})
	defer c.Close()

	assert.True(t, upstream.PeerConnReusableForTest(c, time.Hour), "open, nothing to read")

	// The server answers and closes ("Connection: close"); the response
	// is read to its end, the close is left unread.
	_, err = io.WriteString(c, "GET /now HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(io.LimitReader(resp.Body, 2))
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	select {
	case <-peer.closed:
	case <-testutil.Context(t, 0).Done():
		t.Fatal("the server did not close the connection")
	}

	assert.True(t, upstream.PeerConnReusableForTest(c, time.Microsecond), "reused at once: not checked")
	assert.False(t, upstream.PeerConnReusableForTest(c, time.Hour), "the peer closed it")
	assert.True(t, upstream.PeerConnReusableForTest(raw, time.Hour), "no Count wrapper: not checked")
}

// The plaintext check, used by the proxy's HTTP/1 clients to the
// application and to unmeshed endpoints: a connection the server closed
// is not reused.
func TestAPlainConnectionTheServerClosedIsNotReusable(t *testing.T) {
	l := testutil.Listen(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	var nd net.Dialer
	c, err := nd.DialContext(context.Background(), "tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s := <-accepted
	assert.True(t, upstream.PlainConnReusable(c, time.Hour), "open, nothing to read")
	require.NoError(t, s.Close())
	testutil.Eventually(t, 0, func() bool { return !upstream.PlainConnReusable(c, time.Hour) }, "the server's FIN to be seen")
	assert.True(t, upstream.PlainConnReusable(c, time.Microsecond), "reused at once: not checked")
}
