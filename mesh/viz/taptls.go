package viz

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSTap adds tap to a Source whose targets name their tap address
// (Target.Tap): it dials each proxy's tap server over mutual TLS with a
// tapper certificate (the proxies accept only the identities they are
// configured with), verifying that the server holds the target's mesh
// identity. Connections are kept per target and closed by Close.
type TLSTap struct {
	Source
	// Config carries the tapper's certificate and the mesh's trust roots
	// (RootCAs); ServerName is set per target to its identity.
	Config *tls.Config

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// Tap observes t's proxy.
func (s *TLSTap) Tap(ctx context.Context, t Target, req TapRequest) (EventStream, error) {
	if t.Tap == "" {
		return nil, fmt.Errorf("viz: %s serves no tap", t)
	}
	if t.Identity == "" {
		return nil, fmt.Errorf("viz: %s has no identity to verify its tap server against", t)
	}
	if s.Config == nil || len(s.Config.Certificates) == 0 && s.Config.GetClientCertificate == nil {
		return nil, errors.New("viz: tap needs a tapper certificate")
	}
	conn, err := s.conn(t)
	if err != nil {
		return nil, err
	}
	ts, err := s.Targets(ctx)
	if err != nil {
		return nil, err
	}
	return GRPCTap(ctx, conn, t, req, NewAddresses(ts))
}

func (s *TLSTap) conn(t Target) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := t.Key() + "|" + t.Tap
	if c := s.conns[key]; c != nil {
		return c, nil
	}
	cfg := s.Config.Clone()
	cfg.ServerName = t.Identity
	cfg.MinVersion = tls.VersionTLS13
	cfg.NextProtos = []string{"h2"}
	c, err := grpc.NewClient(t.Tap, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return nil, fmt.Errorf("viz: tap %s: %w", t, err)
	}
	if s.conns == nil {
		s.conns = map[string]*grpc.ClientConn{}
	}
	s.conns[key] = c
	return c, nil
}

// Close closes the tap connections.
func (s *TLSTap) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, c := range s.conns {
		errs = append(errs, c.Close())
		delete(s.conns, k)
	}
	return errors.Join(errs...)
}
