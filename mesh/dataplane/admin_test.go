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
	assert.GreaterOrEqual(t, refusedByAdmin(t, r), float64(1))

	held[0].Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		c := adminConn(t, r)
		defer c.Close()
		return liveOn(c, bufio.NewReader(c)) != nil
	}, "a closed connection frees its slot")
}

// refusedByAdmin reads the admin refusal counter through a slot of its
// own (the cap may be full): from the registry, not over HTTP.
func refusedByAdmin(t *testing.T, r *running) float64 {
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
			if labels["direction"] == "admin" && labels["reason"] == "too-many-connections" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
