package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	dclient "github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/identity"
	idclient "github.com/weftmesh/weft/mesh/identity/client"
)

// Sources are the proxy's inputs, connected to the control plane: the
// identity, endpoints and profiles (destination service), inbound and
// outbound policies (policy service). Close them after the proxy has
// stopped.
type Sources struct {
	Identity         *Identity
	Resolver         *Resolver
	Profiles         *Profiles
	Policies         *Policies
	OutboundPolicies *OutboundPolicies

	closeOnce sync.Once
	closers   []func() error
}

// Option tunes Connect.
type Option func(*connectConfig)

type connectConfig struct {
	log        *slog.Logger
	dialOpts   []grpc.DialOption
	idOpts     []idclient.Option
	meshedPort uint16
	token      func() ([]byte, error)
}

// WithLogger sets the logger handed to every client (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *connectConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// WithDialOptions adds gRPC dial options to the three connections, such as
// transport credentials (the default is plaintext).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *connectConfig) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithIdentityOptions passes options to the identity client (renewal
// bounds, backoff, clock).
func WithIdentityOptions(opts ...idclient.Option) Option {
	return func(c *connectConfig) { c.idOpts = append(c.idOpts, opts...) }
}

// WithToken supplies the identity token from a function instead of
// Config.IdentityTokenFile.
func WithToken(f func() ([]byte, error)) Option {
	return func(c *connectConfig) { c.token = f }
}

// WithExplicitMode makes the resolver reach meshed endpoints through their
// proxy's inbound port (see WithMeshedInboundPort). Use it when the
// proxies run in explicit mode, without iptables.
func WithExplicitMode(inboundPort uint16) Option {
	return func(c *connectConfig) { c.meshedPort = inboundPort }
}

// Connect dials the identity, destination and policy services named in
// cfg (IdentityAddr, DestinationAddr, PolicyAddr) and builds the proxy's
// sources for the workload cfg names. It returns once the workload holds its first certificate, or
// fails when ctx ends first. Required: the three addresses,
// TrustAnchorsPEM, IdentityName, IdentityTokenFile (or WithToken),
// Namespace and Pod.
func Connect(ctx context.Context, cfg Config, opts ...Option) (*Sources, error) {
	cc := connectConfig{log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cc)
	}
	var missing []error
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, fmt.Errorf("control: %s is required", what))
		}
	}
	need(cfg.IdentityAddr != "", "WEFT_PROXY_IDENTITY_ADDR")
	need(cfg.DestinationAddr != "", "WEFT_PROXY_DESTINATION_ADDR")
	need(cfg.PolicyAddr != "", "WEFT_PROXY_POLICY_ADDR")
	need(len(cfg.TrustAnchorsPEM) > 0, "WEFT_PROXY_TRUST_ANCHORS")
	need(cfg.IdentityName != "", "WEFT_PROXY_IDENTITY_NAME")
	need(cfg.IdentityTokenFile != "" || cc.token != nil, "WEFT_PROXY_IDENTITY_TOKEN_FILE")
	need(cfg.Namespace != "", "WEFT_PROXY_NAMESPACE")
	need(cfg.Pod != "", "WEFT_PROXY_POD")
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	name, err := identity.ParseName(cfg.IdentityName)
	if err != nil {
		return nil, fmt.Errorf("control: WEFT_PROXY_IDENTITY_NAME=%q: %w", cfg.IdentityName, err)
	}
	bundle, err := identity.ParseBundle(cfg.TrustAnchorsPEM)
	if err != nil {
		return nil, fmt.Errorf("control: WEFT_PROXY_TRUST_ANCHORS: %w", err)
	}

	s := &Sources{}
	fail := func(err error) (*Sources, error) {
		s.Close()
		return nil, err
	}
	dial := func(what, addr string) (*grpc.ClientConn, error) {
		dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, cc.dialOpts...)
		conn, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			return nil, fmt.Errorf("control: %s service %s: %w", what, addr, err)
		}
		s.closers = append(s.closers, conn.Close)
		return conn, nil
	}

	idConn, err := dial("identity", cfg.IdentityAddr)
	if err != nil {
		return fail(err)
	}
	idOpts := append([]idclient.Option{idclient.WithLogger(cc.log)}, cc.idOpts...)
	tokenFile := cfg.IdentityTokenFile
	if cc.token != nil {
		idOpts = append(idOpts, idclient.WithToken(cc.token))
		tokenFile = ""
	} else if _, err := os.Stat(tokenFile); err != nil {
		return fail(fmt.Errorf("control: WEFT_PROXY_IDENTITY_TOKEN_FILE: %w", err))
	}
	idc, err := idclient.New(ctx, idclient.Config{
		Name:      name,
		TokenFile: tokenFile,
		Bundle:    bundle,
		Certifier: idclient.NewGRPCCertifier(idConn),
	}, idOpts...)
	if err != nil {
		return fail(fmt.Errorf("control: identity %s from %s: %w", name, cfg.IdentityAddr, err))
	}
	s.closers = append(s.closers, idc.Close)
	if s.Identity, err = NewIdentity(idc); err != nil {
		return fail(err)
	}

	dstConn, err := dial("destination", cfg.DestinationAddr)
	if err != nil {
		return fail(err)
	}
	var dopts []dclient.Option
	dopts = append(dopts, dclient.WithLogger(cc.log))
	if cfg.DestinationContext != "" {
		dopts = append(dopts, dclient.WithContextToken(cfg.DestinationContext))
	}
	// The discovery client lives until the sources close it; its watches
	// end with their own contexts.
	dc, err := dclient.New(ctx, dstConn, dopts...)
	if err != nil {
		return fail(fmt.Errorf("control: destination client: %w", err))
	}
	s.closers = append(s.closers, dc.Close) // closed before its connection
	if s.Resolver, err = NewResolver(dc, WithMeshedInboundPort(cc.meshedPort)); err != nil {
		return fail(err)
	}
	if s.Profiles, err = NewProfiles(dc); err != nil {
		return fail(err)
	}

	polConn, err := dial("policy", cfg.PolicyAddr)
	if err != nil {
		return fail(err)
	}
	if s.Policies, err = NewPolicies(polConn, Workload(cfg.Namespace, cfg.Pod), WithPolicyLogger(cc.log)); err != nil {
		return fail(err)
	}
	if s.OutboundPolicies, err = NewOutboundPolicies(polConn, Workload(cfg.Namespace, cfg.Pod), WithOutboundLogger(cc.log)); err != nil {
		return fail(err)
	}
	return s, nil
}

// Close stops the clients and closes the connections. It is safe to call
// more than once.
func (s *Sources) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		for i := len(s.closers) - 1; i >= 0; i-- {
			if err := s.closers[i](); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
