package dataplane_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// adminConn opens a connection to the admin server.
func adminConn(t *testing.T, r *running) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.ls.Admin.Addr().String(), 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// liveOn sends GET /live on c and reads the answer (nil when the server
// closed the connection instead).
func liveOn(c net.Conn, br *bufio.Reader) *http.Response {
	if _, err := io.WriteString(c, "GET /live HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
		return nil
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestTheAdminServerClosesSilentSlowAndIdleConnections(t *testing.T) {
	// Admin connections used to stay open forever once idle.
	pk := newPKI(t)
	cfg := testConfig()
	cfg.AdminHeaderTimeout = 300 * time.Millisecond
	cfg.AdminIdleTimeout = 300 * time.Millisecond
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})

	silent := adminConn(t, r)
	_, err := silent.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a connection that sends nothing is closed")

	slow := adminConn(t, r)
	_, err = io.WriteString(slow, "GET /live HTTP/1.1\r\n")
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, slow)
	assert.NoError(t, err, "a request head that never ends is cut (read until EOF)")

	idle := adminConn(t, r)
	br := bufio.NewReader(idle)
	resp := liveOn(idle, br)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "an idle keep-alive connection is closed")
}

func TestTheAdminServerCapsItsConnections(t *testing.T) {
	pk := newPKI(t)
	cfg := testConfig()
	cfg.AdminMaxConnections = 3
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c := adminConn(t, r)
		resp := liveOn(c, bufio.NewReader(c))
		require.NotNil(t, resp, "connection %d is within the cap", i)
		held = append(held, c)
	}
	over := adminConn(t, r)
	assert.Nil(t, liveOn(over, bufio.NewReader(over)), "one past the cap is closed at once")
	assert.GreaterOrEqual(t, refusedByAdmin(t, r, "too-many-connections"), float64(1))

	held[0].Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		c := adminConn(t, r)
		defer c.Close()
		return liveOn(c, bufio.NewReader(c)) != nil
	}, "a closed connection frees its slot")
}

func TestTheAdminServerCapsEachClientAddress(t *testing.T) {
	// One address cannot take the slots probes from elsewhere need.
	pk := newPKI(t)
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})
	from := func(ip string) net.Conn {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", r.ls.Admin.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	for i := 0; i < 16; i++ {
		c := from("127.0.0.1")
		require.NotNil(t, liveOn(c, bufio.NewReader(c)), "connection %d from one address is within its cap", i)
	}
	c := from("127.0.0.1")
	assert.Nil(t, liveOn(c, bufio.NewReader(c)), "the 17th from the same address is closed")
	assert.Equal(t, float64(1), refusedByAdmin(t, r, "too-many-from-client"))
	c = from("127.0.0.2")
	assert.NotNil(t, liveOn(c, bufio.NewReader(c)), "another address is served")
}

// refusedByAdmin reads an admin refusal counter through a slot of its
// own (the cap may be full): from the registry, not over HTTP.
func refusedByAdmin(t *testing.T, r *running, reason string) float64 {
	mfs, err := r.proxy.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "tcp_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["direction"] == "admin" && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
