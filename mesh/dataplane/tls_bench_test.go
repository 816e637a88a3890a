package dataplane_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// BenchmarkMeshTLSHandshake is one mutual TLS 1.3 handshake between the
// data plane's client and server configurations over an in-memory pipe:
// both sides verify the other's chain (the server for clientAuth, the
// client for serverAuth and the expected name), as on every mesh
// connection.
func BenchmarkMeshTLSHandshake(b *testing.B) {
	pk := newPKI(b)
	srvID, cliID := pk.identity(b, idB), pk.identity(b, idA)
	srvCfg := dataplane.ServerTLSConfig(srvID, nil)
	cliCfg := dataplane.ClientTLSConfig(cliID, idB, nil)
	b.ReportAllocs()
	for b.Loop() {
		c, s := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- tls.Server(s, srvCfg).Handshake()
		}()
		tc := tls.Client(c, cliCfg)
		if err := tc.Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if got := dataplane.PeerIdentity(tc.ConnectionState()); got != idB {
			b.Fatalf("peer %q", got)
		}
		// Close the pipe, not the TLS connections: a close_notify would
		// block on an unbuffered pipe that nobody reads any more.
		c.Close()
		s.Close()
	}
}
