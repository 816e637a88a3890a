package local_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/local"
)

func TestDefaultServerLimitsTreatLoopbackAsOnePeer(t *testing.T) {
	l := local.DefaultServerLimits()
	require.NoError(t, l.Validate())
	assert.Equal(t, l.MaxConnections, l.MaxConnectionsPerPeer, "every local proxy connects from 127.0.0.1")
	assert.Equal(t, l.MaxWatches, l.MaxWatchesPerPeer, "every local proxy connects from 127.0.0.1")
	assert.Equal(t, l.MaxRequests, l.MaxRequestsPerPeer, "every local proxy connects from 127.0.0.1")
}

// TestTheLocalControlPlaneEnforcesItsServerLimits attacks the local
// mesh's controllers as a local client could: connections past the cap
// are closed at once, a half-sent Certify is answered DEADLINE_EXCEEDED at
// the request timeout, and the mesh keeps carrying traffic.
func TestTheLocalControlPlaneEnforcesItsServerLimits(t *testing.T) {
	const maxConns, timeout = 16, 300 * time.Millisecond
	l := local.DefaultServerLimits()
	l.MaxConnections, l.MaxConnectionsPerPeer, l.RequestTimeout = maxConns, maxConns, timeout
	r, _, _ := startMesh(t, twoWorkloads, local.WithApp("api", echoApp), local.WithServerLimits(l))
	st := r.State()

	// Fill the policy controller's connections; the proxies hold some.
	refused := false
	for i := 0; i <= maxConns && !refused; i++ {
		conn, err := net.DialTimeout("tcp", st.ControlPlane.Policy, testutil.DefaultTimeout)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(testutil.DefaultTimeout)))
		n, err := conn.Read(make([]byte, 1))
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection %d: the server neither spoke nor closed", i)
		refused = n == 0
	}
	assert.True(t, refused, "the policy controller held more than %d connections", maxConns)

	res := testutil.HalfSentGRPC(t, st.ControlPlane.Identity, "/io.linkerd.proxy.identity.Identity/Certify", 200, []byte{0x0a, 0x05, 'w', 'e'}, testutil.DefaultTimeout)
	assert.Equal(t, int(codes.DeadlineExceeded), res.Status, res.String())
	assert.GreaterOrEqual(t, res.Elapsed, timeout, res.String())

	web, ok := st.Plan.Pod("shop", "web-0")
	require.True(t, ok)
	got, err := exchange(web.Mappings[0].Listen.String(), "still there")
	require.NoError(t, err)
	assert.Equal(t, "api-0: still there", got)
}
