package dataplane_test

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// TestConnectionsFromTheApplicationHaveAFixedSendBuffer: a local client
// that stops reading holds what the kernel buffers for it, and Linux
// grows an unset send buffer to 4 MiB for such a client (issue 27: each
// abandoned download pulled that much through both proxies). The
// outbound listeners fix it at Config.OutboundSendBuffer; 0 leaves the
// kernel's autotuning.
func TestConnectionsFromTheApplicationHaveAFixedSendBuffer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int
	}{{"set", 96 << 10}, {"kernel's", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPair(t, pairOptions{cfgA: func(c *dataplane.Config) { c.OutboundSendBuffer = tc.bytes }})
			c, err := net.Dial("tcp", p.clientAddr)
			require.NoError(t, err)
			defer c.Close()
			// The echo's answer means the proxy handled the connection.
			_, err = c.Write([]byte(opaque("ping")))
			require.NoError(t, err)
			buf := make([]byte, len(opaque("ping")))
			_, err = c.Read(buf)
			require.NoError(t, err)

			got := proxySideSendBuffer(t, c)
			if tc.bytes == 0 {
				// Unset, the kernel starts at tcp_wmem's default and may
				// have grown it; it is not locked to a value of ours.
				assert.NotEqual(t, 2*(96<<10), got)
				return
			}
			// Linux doubles the value set, for its bookkeeping.
			assert.Equal(t, 2*tc.bytes, got, "SO_SNDBUF of the proxy's side of the application's connection")
		})
	}
}

// proxySideSendBuffer finds, among this process's sockets, the proxy's
// end of the client connection c (its local address is c's remote one
// and the other way round) and returns its SO_SNDBUF.
func proxySideSendBuffer(t *testing.T, c net.Conn) int {
	t.Helper()
	want := c.RemoteAddr().(*net.TCPAddr)
	peer := c.LocalAddr().(*net.TCPAddr)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		local, err := unix.Getsockname(fd)
		if err != nil || !sameAddr(local, want) {
			continue
		}
		remote, err := unix.Getpeername(fd)
		if err != nil || !sameAddr(remote, peer) {
			continue
		}
		n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		require.NoError(t, err)
		return n
	}
	t.Fatalf("no socket of this process is the proxy's end of %s -> %s", peer, want)
	return 0
}

func sameAddr(sa unix.Sockaddr, a *net.TCPAddr) bool {
	in, ok := sa.(*unix.SockaddrInet4)
	return ok && in.Port == a.Port && net.IP(in.Addr[:]).Equal(a.IP)
}
