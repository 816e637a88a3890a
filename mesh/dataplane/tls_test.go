package dataplane_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/identity"
)

// handshake runs one TLS handshake over loopback between a peer
// presenting cert and the data plane's side of mesh TLS for usage: the
// data plane is the server (ServerTLSConfig) when the peer is a client
// (clientAuth), the client (ClientTLSConfig, expecting serverID) when the
// peer is a server (serverAuth). It returns the data plane side's
// handshake error and, on success, the identity it read.
func handshake(t *testing.T, local dataplane.Identity, cert tls.Certificate, usage x509.ExtKeyUsage, serverID string) (string, error) {
	t.Helper()
	ln := testutil.Listen(t)
	peerCfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}
	type result struct {
		cs  tls.ConnectionState
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		cfg := peerCfg
		if usage == x509.ExtKeyUsageClientAuth {
			cfg = dataplane.ServerTLSConfig(local, nil)
		}
		tc := tls.Server(c, cfg)
		err = tc.Handshake()
		accepted <- result{tc.ConnectionState(), err}
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	cfg := peerCfg
	if usage == x509.ExtKeyUsageServerAuth {
		cfg = dataplane.ClientTLSConfig(local, serverID, nil)
	}
	tc := tls.Client(c, cfg)
	cliErr := tc.Handshake()
	var srv result
	select {
	case srv = <-accepted:
	case <-time.After(15 * time.Second):
		t.Fatal("the server side never finished its handshake")
	}
	if usage == x509.ExtKeyUsageClientAuth {
		return dataplane.PeerIdentity(srv.cs), srv.err
	}
	return dataplane.PeerIdentity(tc.ConnectionState()), cliErr
}

// TestMeshTLSRefusesEveryChainTheIdentityRuleRefuses replays, through real
// TLS 1.3 handshakes on loopback, the table of peer chains that also
// drives identity.VerifyPeer and VerifyPeerChain (testutil.NewPeerChains):
// the data plane applies the same rule, as a server to its clients and as
// a client to its servers.
func TestMeshTLSRefusesEveryChainTheIdentityRuleRefuses(t *testing.T) {
	pc := testutil.NewPeerChains(t, idB)
	leaf := pc.Issuer.Leaf(t, testutil.CertOptions{Name: idA})
	local, err := dataplane.NewStaticIdentity(idA, leaf.TLS, testutil.Pool(pc.Anchor))
	require.NoError(t, err)

	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		got, err := handshake(t, local, pc.Good.TLS(), usage, idB)
		require.NoError(t, err, "the good chain %s", testutil.Role(usage))
		assert.Equal(t, idB, got)
	}
	for _, c := range pc.Refused {
		for _, usage := range c.Usages {
			t.Run(c.Case+" "+testutil.Role(usage), func(t *testing.T) {
				if c.NotOverTLS != "" {
					t.Logf("checked on identity.VerifyPeerChain only: %s", c.NotOverTLS)
					_, err := identity.VerifyPeerChain(testutil.Pool(pc.Anchor), c.Certs, time.Now(), usage)
					assert.ErrorIs(t, err, dataplane.ErrPeerIdentity)
					return
				}
				_, err := handshake(t, local, c.TLS(), usage, idB)
				assert.ErrorIs(t, err, dataplane.ErrPeerIdentity)
				assert.ErrorIs(t, err, identity.ErrPeerRejected)
				assert.ErrorContains(t, err, "dataplane: ")
			})
		}
	}
}

// TestClientTLSConfigRefusesAServerOfTheMeshWithAnotherIdentity: a valid
// chain is not enough outbound, it must prove the expected name.
func TestClientTLSConfigRefusesAServerOfTheMeshWithAnotherIdentity(t *testing.T) {
	pc := testutil.NewPeerChains(t, idB)
	local, err := dataplane.NewStaticIdentity(idA, pc.Issuer.Leaf(t, testutil.CertOptions{Name: idA}).TLS, testutil.Pool(pc.Anchor))
	require.NoError(t, err)
	_, err = handshake(t, local, pc.Good.TLS(), x509.ExtKeyUsageServerAuth, idC)
	assert.ErrorIs(t, err, dataplane.ErrPeerIdentity)
	assert.ErrorContains(t, err, "want \""+idC+"\"")
}
