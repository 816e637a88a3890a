package client_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
)

func newClient(t *testing.T, m mesh, sa string) *client.Client {
	t.Helper()
	c, err := client.New(testutil.Context(t, 0), client.Config{Name: name(t, sa), Bundle: m.bundle, Certifier: m.service},
		client.WithToken(token(sa+"-token")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tlsServer accepts one connection at a time, completes the handshake and
// reports the peer identity (or the handshake error).
func tlsServer(t *testing.T, cfg *tls.Config) (addr string, results <-chan error, peers <-chan identity.Name) {
	t.Helper()
	lis := testutil.Listen(t)
	errs := make(chan error, 16)
	names := make(chan identity.Name, 16)
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func(conn net.Conn) {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(testutil.DefaultTimeout))
				tc := tls.Server(conn, cfg)
				if err := tc.Handshake(); err != nil {
					errs <- err
					return
				}
				n, err := client.PeerName(tc.ConnectionState())
				errs <- err
				if err == nil {
					names <- n
				}
				_, _ = tc.Write([]byte("hi"))
			}(conn)
		}
	}()
	return lis.Addr().String(), errs, names
}

func dial(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	d := &net.Dialer{Timeout: testutil.DefaultTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testutil.DefaultTimeout))
	buf := make([]byte, 2)
	_, err = io.ReadFull(conn, buf) // TLS 1.3 client auth failures surface on the first read
	return err
}

func TestMutualTLSBetweenTwoWorkloads(t *testing.T) {
	m := newMesh(t)
	web, db := newClient(t, m, "web"), newClient(t, m, "db")
	addr, results, peers := tlsServer(t, db.ServerTLSConfig(nil))

	require.NoError(t, dial(t, addr, web.ClientTLSConfig(db.Name())))
	require.NoError(t, <-results)
	assert.Equal(t, web.Name(), <-peers, "the server learns the client's identity")
}

func TestClientTLSRefusesAServerWithAnotherIdentity(t *testing.T) {
	m := newMesh(t)
	web, db := newClient(t, m, "web"), newClient(t, m, "db")
	addr, _, _ := tlsServer(t, db.ServerTLSConfig(nil))
	err := dial(t, addr, web.ClientTLSConfig(name(t, "payments")))
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrPeerRejected)
}

func TestServerTLSRefusesUnfitClients(t *testing.T) {
	m := newMesh(t)
	web, db := newClient(t, m, "web"), newClient(t, m, "db")
	other := newMesh(t)
	stranger := newClient(t, other, "web")
	addr, results, _ := tlsServer(t, db.ServerTLSConfig(func(peer identity.Name) error {
		if peer.ServiceAccount == "db" {
			return errors.New("db may not call itself")
		}
		return nil
	}))

	noCert := web.ClientTLSConfig(db.Name())
	noCert.GetClientCertificate = nil
	tls12 := web.ClientTLSConfig(db.Name())
	tls12.MinVersion, tls12.MaxVersion = tls.VersionTLS12, tls.VersionTLS12

	cases := map[string]*tls.Config{
		"no client certificate":            noCert,
		"TLS 1.2":                          tls12,
		"a client from another trust root": stranger.ClientTLSConfig(db.Name()),
		"a client the authorizer refuses":  db.ClientTLSConfig(db.Name()),
	}
	for label, cfg := range cases {
		t.Run(label, func(t *testing.T) {
			assert.Error(t, dial(t, addr, cfg))
			assert.Error(t, <-results)
		})
	}
}

func TestTLSHooksServeTheRenewedCertificate(t *testing.T) {
	m := newMesh(t)
	db := newClient(t, m, "db")
	cfg := db.ServerTLSConfig(nil)
	got, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	cur, err := db.Certificate()
	require.NoError(t, err)
	assert.Same(t, cur, got)
}

func TestGRPCCredentialsCarryMutualTLS(t *testing.T) {
	ctx := testutil.Context(t, 0)
	m := newMesh(t)
	web, db := newClient(t, m, "web"), newClient(t, m, "db")

	lis := testutil.Listen(t)
	srv := grpc.NewServer(grpc.Creds(db.ServerCredentials(nil)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	call := func(expected identity.Name) error {
		conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(web.ClientCredentials(expected)))
		require.NoError(t, err)
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	assert.NoError(t, call(db.Name()))
	assert.Error(t, call(name(t, "payments")))
}
