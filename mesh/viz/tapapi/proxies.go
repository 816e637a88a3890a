package tapapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weftmesh/weft/mesh/viz"
)

// Credentials returns the transport credentials that dial a proxy whose
// mesh identity is identity: the tapper's certificate, and verification
// that the server proves identity.
type Credentials func(identity string) (credentials.TransportCredentials, error)

// TargetLister lists the meshed pods of a namespace.
type TargetLister func(ctx context.Context, namespace string) ([]viz.Target, error)

// Proxies is the Backend that taps proxies directly: each tap dials the
// target's tap address (Target.Tap) over mutual TLS with the credentials
// and is closed with its stream.
type Proxies struct {
	list  TargetLister
	creds Credentials
}

// NewProxies returns a backend listing pods with list and dialling with
// creds.
func NewProxies(list TargetLister, creds Credentials) (*Proxies, error) {
	if list == nil || creds == nil {
		return nil, errors.New("tapapi: NewProxies needs a lister and credentials")
	}
	return &Proxies{list: list, creds: creds}, nil
}

// Targets lists the namespace's meshed pods.
func (p *Proxies) Targets(ctx context.Context, namespace string) ([]viz.Target, error) {
	return p.list(ctx, namespace)
}

// Tap dials t's tap server and starts observing.
func (p *Proxies) Tap(ctx context.Context, t viz.Target, req viz.TapRequest, ix *viz.Addresses) (Stream, error) {
	if t.Tap == "" {
		return nil, fmt.Errorf("tapapi: %s serves no tap (its proxy lists no tapper identity)", t)
	}
	if t.Identity == "" {
		return nil, fmt.Errorf("tapapi: %s has no identity to verify its tap server against", t)
	}
	creds, err := p.creds(t.Identity)
	if err != nil {
		return nil, fmt.Errorf("tapapi: %s: %w", t, err)
	}
	conn, err := grpc.NewClient("passthrough:///"+t.Tap, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("tapapi: %s: %w", t, err)
	}
	s, err := viz.GRPCTap(ctx, conn, t, req, ix)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &connStream{EventStream: s, conn: conn}, nil
}

type connStream struct {
	viz.EventStream
	conn *grpc.ClientConn
}

func (c *connStream) Close() error { return c.conn.Close() }
