package dataplane

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
)

// The proxy's caches of its control-plane watches live in
// internal/watch: one discovery watch per outbound target, one policy
// watch per inbound port. This file gives them the proxy's sources,
// settings, logger and metrics, and names what the proxy hangs on a
// destination.

// destination is an outbound target's discovery watch, with the
// proxy's outbound state for it (destExt).
type destination = watch.Destination[destExt]

// destinations is the proxy's discovery cache.
type destinations = watch.Destinations[destExt]

// endpointSet and balanced are a destination's endpoints as discovery
// last sent them, each with its count of open connections.
type (
	endpointSet = watch.Set
	balanced    = watch.Balanced
)

// destExt is the outbound state of a destination, owned by this package
// and kept by internal/watch as the destination's Ext: it lives as long
// as the destination's watch.
type destExt struct {
	svcMu sync.Mutex
	svc   *service // HTTP state, created on first HTTP use (outbound_services.go)

	egress     bool                                    // an address no Service has, under an EgressNetwork (outbound_egress.go)
	egressRead atomic.Pointer[outbound.OutboundPolicy] // its last policy the proxy could read (outbound_egress.go)
}

// portState is a port's current policy (internal/inbound reads it, and
// the L4 inbound path).
type portState = inboundhttp.Policy

// policyCache is the proxy's cache of inbound policies by port.
type policyCache = watch.Ports[portState]

// runContext is the context the caches' watches run under: Run sets
// it before it accepts any connection, and the caches start watches
// only for connections.
func (p *Proxy) runContext() context.Context { return p.runCtx }

func newDestinations(p *Proxy) *destinations {
	return watch.NewDestinations[destExt](watch.DestinationSettings{
		Resolver:       p.resolver,
		Lifetime:       p.runContext,
		ResolveTimeout: p.cfg.ResolveTimeout,
		Idle:           p.destIdle,
		Sweep: func() {
			if p.http != nil {
				p.http.pool.Sweep()
				p.http.peerH1.Sweep()
				p.http.appH1.Sweep()
				p.http.extH1.Sweep()
			}
		},
		Log: p.log,
	})
}

func newPolicyCache(p *Proxy) *policyCache {
	s := watch.PortSettings[portState]{
		Policies:    p.policies,
		Lifetime:    p.runContext,
		Timeout:     p.cfg.PolicyTimeout,
		Default:     p.defaultState,
		DefaultName: p.cfg.DefaultInboundPolicy,
		NotFound:    ErrNotFound,
		// A policy the shared evaluator refuses (a newer control plane's
		// matchers, a malformed message) is not applied.
		Read: func(prev *portState, pol *inbound.Server) (*portState, error) {
			srv, err := compilePolicy(pol)
			if err != nil {
				return nil, err
			}
			lim, err := inboundhttp.LimitFor(prev, srv, p.now)
			if err != nil {
				return nil, err
			}
			return &portState{Proto: pol, Srv: srv, Limit: lim}, nil
		},
		Refuse: func(pol *inbound.Server) *portState {
			p.m.PolicyRefused.Inc()
			return &portState{Proto: pol, Srv: denyAllPolicy("invalid-policy")}
		},
		Log: p.log,
	}
	return watch.NewPorts(s)
}
