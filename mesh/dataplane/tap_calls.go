package dataplane

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
)

// The data path's calls into tap. Each is made only when p.tap.On(), so a
// proxy without open taps pays one atomic load per request; with taps open
// and none taking the request, building and matching the view allocates
// nothing (BenchmarkTapDataPath shows it).

// serveTap serves the tap API on l until ctx ends (internal/tap).
func (p *Proxy) serveTap(ctx context.Context, l net.Listener) {
	p.tap.Serve(ctx, l, tap.ServerConfig{
		TLS:              tapServerTLS(p.id, p.now),
		Identities:       p.cfg.TapIdentities,
		Identity:         PeerIdentity,
		HandshakeTimeout: p.cfg.TapHandshakeTimeout,
		Refused:          func(reason string) { p.m.refuse("tap", reason) },
		Log:              p.log,
	})
}

// tapServerTLS is the tap listener's TLS: the proxy's certificate, a
// client certificate required and verified against the mesh roots.
func tapServerTLS(id Identity, now func() time.Time) *tls.Config {
	c := ServerTLSConfig(id, now)
	c.NextProtos = []string{"h2"}
	c.ClientAuth = tls.RequireAnyClientCert // verified in VerifyConnection, against the current roots
	return c
}
