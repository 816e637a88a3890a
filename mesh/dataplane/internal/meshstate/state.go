package meshstate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// OutboundPolicies is the source of outbound policies: the proxy's
// dataplane.OutboundPolicies. Watch sends the target's policy on each
// change and closes the channel when the watch ends; an error wrapping
// Settings.NotFound means the source has none for the target.
type OutboundPolicies interface {
	Watch(ctx context.Context, target string) (<-chan *outbound.OutboundPolicy, error)
}

// Profiles is the source of ServiceProfiles: the proxy's
// dataplane.Profiles, with the same contract as OutboundPolicies.
type Profiles interface {
	Watch(ctx context.Context, target string) (<-chan *pdst.DestinationProfile, error)
}

// Settings is what a State is built from: the proxy's sources (any may
// be nil but Resolver, which only Destinations' Get needs), its run
// context, its timeouts, its policy compilation and its metrics.
type Settings struct {
	Resolver    watch.Resolver
	Policies    watch.Policies
	OutPolicies OutboundPolicies
	Profiles    Profiles

	// Lifetime returns the context watches run under: the proxy's run
	// context, set before it accepts any connection. The caches start
	// watches only for connections, so it is never called before.
	Lifetime func() context.Context

	ResolveTimeout time.Duration // a target's first endpoints, policy and profile
	PolicyTimeout  time.Duration // a port's first inbound policy
	DestIdle       time.Duration // how long an unused destination keeps its watch

	// DefaultPolicy is the state of a port the policy source does not
	// know, or of every port without one; DefaultName names it in logs.
	DefaultPolicy *Policy
	DefaultName   string
	// Compile reads an inbound policy the source sent (an error refuses
	// it); DenyAll stands in for a port whose first policy was refused.
	Compile func(*inbound.Server) (*authz.Server, error)
	DenyAll func(reason string) *authz.Server

	// NotFound is the error the sources wrap when they know nothing of
	// a target or port (dataplane.ErrNotFound).
	NotFound error
	// Sweep is called after each round of the destinations' janitor
	// (the proxy sweeps its pools to upstreams there).
	Sweep func()

	Metrics *connmetrics.Set
	Log     *slog.Logger
	Now     func() time.Time
}

// Destination is an outbound target's discovery watch, with the outbound
// state this package hangs on it (Ext).
type Destination = watch.Destination[Ext]

// Destinations is the proxy's discovery cache.
type Destinations = watch.Destinations[Ext]

// Balanced is an endpoint of a destination's set, with its count of open
// connections.
type Balanced = watch.Balanced

// Ext is the outbound state of a destination, kept by internal/watch as
// the destination's Ext: it lives as long as the destination's watch.
type Ext struct {
	svcMu sync.Mutex
	svc   *Service // HTTP state, created on first use (services.go)

	egress     bool                                    // an address no Service has, under an EgressNetwork (egress.go)
	egressRead atomic.Pointer[outbound.OutboundPolicy] // its last policy the proxy could read (egress.go)
}

// Egress reports whether the destination is an egress address
// (EgressDest made it).
func (x *Ext) Egress() bool { return x.egress }

// Policy is a port's current inbound policy (internal/inbound reads it,
// and the L4 inbound path).
type Policy = inboundhttp.Policy

// Ports is the proxy's cache of inbound policies by port.
type Ports = watch.Ports[Policy]

// State is what the proxy holds of the control plane's answers: the
// destinations it connects to, each with its outbound policy, profile
// and backends; the inbound policy of each port; and the profiles of the
// Services peer proxies name.
type State struct {
	s          Settings
	dests      *Destinations
	ports      *Ports
	inProfiles *inboundProfiles
}

// New builds the caches. Nothing is watched until a connection asks.
func New(s Settings) *State {
	st := &State{s: s}
	st.dests = watch.NewDestinations[Ext](watch.DestinationSettings{
		Resolver:       s.Resolver,
		Lifetime:       s.Lifetime,
		ResolveTimeout: s.ResolveTimeout,
		Idle:           s.DestIdle,
		Sweep:          s.Sweep,
		Log:            s.Log,
	})
	st.ports = watch.NewPorts(watch.PortSettings[Policy]{
		Policies:    s.Policies,
		Lifetime:    s.Lifetime,
		Timeout:     s.PolicyTimeout,
		Default:     s.DefaultPolicy,
		DefaultName: s.DefaultName,
		NotFound:    s.NotFound,
		// A policy the shared evaluator refuses (a newer control plane's
		// matchers, a malformed message) is not applied.
		Read: func(prev *Policy, pol *inbound.Server) (*Policy, error) {
			srv, err := s.Compile(pol)
			if err != nil {
				return nil, err
			}
			lim, err := inboundhttp.LimitFor(prev, srv, s.Now)
			if err != nil {
				return nil, err
			}
			return &Policy{Proto: pol, Srv: srv, Limit: lim}, nil
		},
		Refuse: func(pol *inbound.Server) *Policy {
			s.Metrics.PolicyRefused.Inc()
			return &Policy{Proto: pol, Srv: s.DenyAll("invalid-policy")}
		},
		Log: s.Log,
	})
	st.inProfiles = &inboundProfiles{st: st, m: map[string]*inboundProfile{}}
	return st
}

// Destinations is the discovery cache.
func (st *State) Destinations() *Destinations { return st.dests }

// Ports is the inbound policy cache.
func (st *State) Ports() *Ports { return st.ports }

// HasOutboundPolicies reports whether the proxy has an outbound policy
// source (egress and stream routes need one).
func (st *State) HasOutboundPolicies() bool { return st.s.OutPolicies != nil }

// NotFound reports whether err says a source knows nothing of what it
// was asked (it wraps Settings.NotFound).
func (st *State) NotFound(err error) bool { return errors.Is(err, st.s.NotFound) }
