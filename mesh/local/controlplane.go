package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/weftmesh/weft/mesh/discovery"
	discoverystatic "github.com/weftmesh/weft/mesh/discovery/static"
	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/localca"
	idstatic "github.com/weftmesh/weft/mesh/identity/static"
	"github.com/weftmesh/weft/mesh/policy"
	policystatic "github.com/weftmesh/weft/mesh/policy/static"
)

// ControlPlane is the addresses of the in-process control plane.
type ControlPlane struct {
	Identity    string
	Destination string
	Policy      string
}

// controlPlane runs identity, destination and policy on 127.0.0.1
// ephemeral ports until stop is called.
type controlPlane struct {
	addrs   ControlPlane
	servers []*grpclimit.Server
	closers []func() error
	wg      sync.WaitGroup
	errc    chan error
}

// startControlPlane builds the three services from the files in dir
// (identity/, tokens.yaml, manifests/) plus policyPaths, and serves them.
func startControlPlane(ctx context.Context, dir string, f *File, policyPaths []string, limits grpclimit.Limits, log *slog.Logger) (_ *controlPlane, err error) {
	cp := &controlPlane{errc: make(chan error, 3)}
	defer func() {
		if err != nil {
			cp.stop()
		}
	}()

	// Identity: the local issuer over the generated issuer pair, static
	// tokens, the Certify service.
	anchors, err := os.ReadFile(filepath.Join(dir, "identity", "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	bundle, err := identity.ParseBundle(anchors)
	if err != nil {
		return nil, fmt.Errorf("local: trust anchor: %w", err)
	}
	issuer, err := localca.New(ctx, filepath.Join(dir, "identity", "issuer"), bundle, localca.WithLogger(log.With("component", "identity")))
	if err != nil {
		return nil, fmt.Errorf("local: identity issuer: %w", err)
	}
	cp.closers = append(cp.closers, issuer.Close)
	tokens, err := idstatic.New(ctx, filepath.Join(dir, "tokens.yaml"), idstatic.WithLogger(log.With("component", "identity")))
	if err != nil {
		return nil, fmt.Errorf("local: identity tokens: %w", err)
	}
	cp.closers = append(cp.closers, tokens.Close)
	svc, err := identity.NewService(ctx, tokens, issuer, identity.WithDomain(Domain),
		identity.WithRequestTimeout(limits.RequestTimeout), identity.WithLogger(log.With("component", "identity")))
	if err != nil {
		return nil, fmt.Errorf("local: identity service: %w", err)
	}
	idSrv, err := grpclimit.NewServer(limits)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	svc.Register(idSrv)
	if cp.addrs.Identity, err = cp.serve(idSrv); err != nil {
		return nil, err
	}

	// Destination: the static source over the generated manifests.
	dlog := log.With("component", "destination")
	idx, err := discovery.NewIndex(
		discovery.WithClusterDomain(ClusterDomain),
		discovery.WithTrustDomain(Domain.TrustDomain),
		discovery.WithControlPlaneNamespace(Domain.ControlPlaneNamespace),
		discovery.WithLogger(dlog))
	if err != nil {
		return nil, fmt.Errorf("local: destination index: %w", err)
	}
	cp.closers = append(cp.closers, idx.Close)
	dsrc, err := discoverystatic.New(ctx, idx, []string{filepath.Join(dir, "manifests")}, discoverystatic.WithLogger(dlog))
	if err != nil {
		return nil, fmt.Errorf("local: destination source: %w", err)
	}
	cp.closers = append(cp.closers, dsrc.Close)
	dsvc, err := discovery.NewServer(idx, discovery.WithLogger(dlog))
	if err != nil {
		return nil, fmt.Errorf("local: destination service: %w", err)
	}
	dstSrv, err := grpclimit.NewServer(limits)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	dsvc.Register(dstSrv)
	if cp.addrs.Destination, err = cp.serve(dstSrv); err != nil {
		return nil, err
	}

	// Policy: the static source over the generated manifests and the
	// user's policy files.
	plog := log.With("component", "policy")
	psrc, err := policystatic.New(ctx, append([]string{filepath.Join(dir, "manifests")}, policyPaths...), policystatic.WithLogger(plog))
	if err != nil {
		return nil, fmt.Errorf("local: policy source: %w", err)
	}
	cp.closers = append(cp.closers, psrc.Close)
	x, err := policy.NewIndexer(ctx, psrc,
		policy.WithDefaultPolicy(f.DefaultInboundPolicy),
		policy.WithTrustDomain(Domain.TrustDomain),
		policy.WithControlPlaneNamespace(Domain.ControlPlaneNamespace),
		policy.WithClusterDomain(ClusterDomain),
		policy.WithClusterNetworks("127.0.0.0/8"),
		policy.WithLogger(plog))
	if err != nil {
		return nil, fmt.Errorf("local: policy index: %w", err)
	}
	for _, p := range x.Index().Problems() {
		plog.Info("policy problem", "problem", fmt.Sprint(p))
	}
	in, err := policy.NewInboundServer(x)
	if err != nil {
		return nil, fmt.Errorf("local: policy service: %w", err)
	}
	out, err := policy.NewOutboundServer(x)
	if err != nil {
		return nil, fmt.Errorf("local: policy service: %w", err)
	}
	xctx, cancel := context.WithCancel(ctx)
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		if err := x.Run(xctx); err != nil && !errors.Is(err, context.Canceled) {
			cp.errc <- fmt.Errorf("local: policy index: %w", err)
		}
	}()
	cp.closers = append(cp.closers, func() error { in.Drain(); out.Drain(); cancel(); return nil })
	polSrv, err := grpclimit.NewServer(limits)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	in.Register(polSrv)
	out.Register(polSrv)
	if cp.addrs.Policy, err = cp.serve(polSrv); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *controlPlane) serve(s *grpclimit.Server) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Stop()
		return "", fmt.Errorf("local: control plane listener: %w", err)
	}
	cp.servers = append(cp.servers, s)
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		if err := s.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			cp.errc <- fmt.Errorf("local: control plane: %w", err)
		}
	}()
	return lis.Addr().String(), nil
}

// stop ends the streams, stops the servers (gracefully for up to 5s) and
// closes the sources, in reverse order of creation.
func (cp *controlPlane) stop() {
	for i := len(cp.closers) - 1; i >= 0; i-- {
		_ = cp.closers[i]()
	}
	var wg sync.WaitGroup
	for _, s := range cp.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { s.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				s.Stop()
			}
		}()
	}
	wg.Wait()
	cp.wg.Wait()
}
