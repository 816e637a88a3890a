package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
)

// Identity is the local workload's identity as the proxy consumes it: its
// name, its current certificate and the trust roots peers are verified
// against. The identity client satisfies it; StaticIdentity is the
// in-memory implementation.
type Identity interface {
	// Name is the workload's identity name (the DNS SAN of its certificate).
	Name() string
	// Certificate returns the current certificate chain and key, or an
	// error while none is available. Its Leaf must be set.
	Certificate() (*tls.Certificate, error)
	// Roots returns the current trust bundle.
	Roots() *x509.CertPool
}

// ProtocolHint is what discovery knows about an endpoint's protocol. It is
// defined in package endpoint, below dataplane, so that the proxy's own
// packages can name it.
type ProtocolHint = endpoint.ProtocolHint

// Protocol hints.
const (
	HintUnknown ProtocolHint = endpoint.HintUnknown
	HintH2      ProtocolHint = endpoint.HintH2
	HintOpaque  ProtocolHint = endpoint.HintOpaque
)

// Endpoint is one address a destination resolves to (its fields are
// documented in package endpoint, below dataplane, so that the proxy's own
// packages can name it).
type Endpoint = endpoint.Endpoint

// ErrNotFound is wrapped by Resolver and InboundPolicies implementations
// when they know nothing about what was asked.
var ErrNotFound = errors.New("dataplane: not found")

// Resolver watches the endpoints of a destination. The target is an
// authority ("web.shop.svc.cluster.local:8080") or an IP:port.
//
// Resolve returns a channel of complete endpoint sets: the first arrives
// promptly; a later one replaces the previous; an empty set means the
// destination exists but has no endpoints. The channel is closed when ctx
// ends (or the source gives up; the proxy then keeps the last set and asks
// again). An error wrapping ErrNotFound means the target is unknown: the
// proxy then forwards a transparent connection to its original destination
// unchanged.
type Resolver interface {
	Resolve(ctx context.Context, target string) (<-chan []Endpoint, error)
}

// InboundPolicies watches the inbound policy of each application port, in
// the proxy API's own form. Watch follows the same contract as
// Resolver.Resolve: snapshots on a channel, closed when ctx ends.
type InboundPolicies interface {
	Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error)
}

// StaticIdentity is an in-memory Identity: a certificate and roots set by
// hand, replaceable at any time.
type StaticIdentity struct {
	mu    sync.RWMutex
	name  string
	cert  *tls.Certificate
	roots *x509.CertPool
}

// NewStaticIdentity checks that cert's leaf carries name as its DNS SAN.
func NewStaticIdentity(name string, cert tls.Certificate, roots *x509.CertPool) (*StaticIdentity, error) {
	s := &StaticIdentity{name: name, roots: roots}
	if err := s.SetCertificate(cert); err != nil {
		return nil, err
	}
	if roots == nil {
		return nil, errors.New("dataplane: static identity needs trust roots")
	}
	return s, nil
}

// Name returns the identity name.
func (s *StaticIdentity) Name() string { return s.name }

// Certificate returns the current certificate.
func (s *StaticIdentity) Certificate() (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cert == nil {
		return nil, errors.New("dataplane: no certificate")
	}
	return s.cert, nil
}

// Roots returns the trust roots.
func (s *StaticIdentity) Roots() *x509.CertPool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.roots
}

// SetCertificate replaces the certificate (it must carry the same name).
func (s *StaticIdentity) SetCertificate(cert tls.Certificate) error {
	if len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return errors.New("dataplane: certificate without chain or key")
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return fmt.Errorf("dataplane: parsing certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	if len(cert.Leaf.DNSNames) != 1 || !strings.EqualFold(cert.Leaf.DNSNames[0], s.name) {
		return fmt.Errorf("dataplane: certificate names %v, want exactly %q", cert.Leaf.DNSNames, s.name)
	}
	s.mu.Lock()
	s.cert = &cert
	s.mu.Unlock()
	return nil
}

// SetRoots replaces the trust roots.
func (s *StaticIdentity) SetRoots(roots *x509.CertPool) {
	s.mu.Lock()
	s.roots = roots
	s.mu.Unlock()
}

// watchers is the shared fan-out of the in-memory sources: every watcher
// holds a one-slot channel that always carries the latest value.
type watchers[K comparable, V any] struct {
	mu    sync.Mutex
	vals  map[K]V
	subs  map[K]map[chan V]chan struct{}
	fallb *V
}

func (w *watchers[K, V]) set(k K, v V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vals == nil {
		w.vals = map[K]V{}
	}
	w.vals[k] = v
	for ch := range w.subs[k] {
		offer(ch, v)
	}
}

func (w *watchers[K, V]) setFallback(v V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fallb = &v
	for k, subs := range w.subs {
		if _, ok := w.vals[k]; ok {
			continue
		}
		for ch := range subs {
			offer(ch, v)
		}
	}
}

// offer replaces whatever the one-slot channel holds with v.
func offer[V any](ch chan V, v V) {
	select {
	case <-ch:
	default:
	}
	ch <- v
}

func (w *watchers[K, V]) watch(ctx context.Context, k K, what string) (<-chan V, error) {
	w.mu.Lock()
	v, ok := w.vals[k]
	if !ok && w.fallb != nil {
		v, ok = *w.fallb, true
	}
	if !ok {
		w.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	ch := make(chan V, 1)
	ch <- v
	kill := make(chan struct{})
	if w.subs == nil {
		w.subs = map[K]map[chan V]chan struct{}{}
	}
	if w.subs[k] == nil {
		w.subs[k] = map[chan V]chan struct{}{}
	}
	w.subs[k][ch] = kill
	w.mu.Unlock()
	// The channel is only handed out here and only written under w.mu, so
	// closing it after removal is safe.
	out := make(chan V)
	go func() {
		defer close(out)
		defer func() {
			w.mu.Lock()
			delete(w.subs[k], ch)
			w.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kill:
				return
			case v := <-ch:
				select {
				case out <- v:
				case <-ctx.Done():
					return
				case <-kill:
					return
				}
			}
		}
	}()
	return out, nil
}

// breakAll ends every open watch of k, as a broken stream would.
func (w *watchers[K, V]) breakAll(k K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch, kill := range w.subs[k] {
		close(kill)
		delete(w.subs[k], ch)
	}
}

func (w *watchers[K, V]) count(k K) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs[k])
}

// MemoryResolver is an in-memory Resolver whose endpoint sets are set by
// hand; watchers see each change.
type MemoryResolver struct {
	w watchers[string, []Endpoint]
}

// NewMemoryResolver returns an empty resolver.
func NewMemoryResolver() *MemoryResolver { return &MemoryResolver{} }

// Set replaces the endpoints of target (an empty list: no endpoints).
func (r *MemoryResolver) Set(target string, eps ...Endpoint) {
	r.w.set(target, append([]Endpoint{}, eps...))
}

// Resolve implements Resolver.
func (r *MemoryResolver) Resolve(ctx context.Context, target string) (<-chan []Endpoint, error) {
	return r.w.watch(ctx, target, "destination "+target)
}

// Break ends every open watch of target, as a broken stream would; the
// values stay and later watches see them.
func (r *MemoryResolver) Break(target string) { r.w.breakAll(target) }

// Forget removes target, so later lookups fail with ErrNotFound, and ends
// its open watches (like a control plane that went away).
func (r *MemoryResolver) Forget(target string) {
	r.w.mu.Lock()
	delete(r.w.vals, target)
	r.w.mu.Unlock()
	r.w.breakAll(target)
}

// Watchers reports how many watches of target are open.
func (r *MemoryResolver) Watchers(target string) int { return r.w.count(target) }

// MemoryPolicies is an in-memory InboundPolicies.
type MemoryPolicies struct {
	w watchers[uint32, *inbound.Server]
}

// NewMemoryPolicies returns a source with no policies.
func NewMemoryPolicies() *MemoryPolicies { return &MemoryPolicies{} }

// Set replaces the policy of port.
func (p *MemoryPolicies) Set(port uint32, srv *inbound.Server) { p.w.set(port, srv) }

// SetDefault sets the policy of every port without its own.
func (p *MemoryPolicies) SetDefault(srv *inbound.Server) { p.w.setFallback(srv) }

// Break ends every open watch of port, as a broken stream would.
func (p *MemoryPolicies) Break(port uint32) { p.w.breakAll(port) }

// Watch implements InboundPolicies.
func (p *MemoryPolicies) Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error) {
	return p.w.watch(ctx, port, fmt.Sprintf("policy for port %d", port))
}

// OutboundPolicies watches the client-side policy of a destination (its
// routes, backends, timeouts, retries and failure accrual), in the proxy
// API's own io.linkerd.proxy.outbound form. The target is the authority
// or IP:port the proxy resolves. Watch follows the same contract as
// Resolver.Resolve; an error wrapping ErrNotFound means there is no
// policy and requests go to the destination itself. The outbound policy
// client of mesh/policy satisfies it.
type OutboundPolicies interface {
	Watch(ctx context.Context, target string) (<-chan *outbound.OutboundPolicy, error)
}

// Profiles watches the ServiceProfile of a destination as the proxy API's
// DestinationProfile (per-route retryability and timeouts, response
// classes, retry budget, traffic-split overrides). Same contract as
// Resolver.Resolve; ErrNotFound means no profile. The destination client's
// GetProfile stream satisfies it.
type Profiles interface {
	Watch(ctx context.Context, target string) (<-chan *pdst.DestinationProfile, error)
}

// MemoryOutboundPolicies is an in-memory OutboundPolicies.
type MemoryOutboundPolicies struct {
	w watchers[string, *outbound.OutboundPolicy]
}

// NewMemoryOutboundPolicies returns a source with no policies.
func NewMemoryOutboundPolicies() *MemoryOutboundPolicies { return &MemoryOutboundPolicies{} }

// Set replaces the policy of target.
func (m *MemoryOutboundPolicies) Set(target string, pol *outbound.OutboundPolicy) {
	m.w.set(target, pol)
}

// Break ends every open watch of target, as a broken stream would.
func (m *MemoryOutboundPolicies) Break(target string) { m.w.breakAll(target) }

// Watch implements OutboundPolicies.
func (m *MemoryOutboundPolicies) Watch(ctx context.Context, target string) (<-chan *outbound.OutboundPolicy, error) {
	return m.w.watch(ctx, target, "outbound policy for "+target)
}

// MemoryProfiles is an in-memory Profiles.
type MemoryProfiles struct {
	w watchers[string, *pdst.DestinationProfile]
}

// NewMemoryProfiles returns a source with no profiles.
func NewMemoryProfiles() *MemoryProfiles { return &MemoryProfiles{} }

// Set replaces the profile of target.
func (m *MemoryProfiles) Set(target string, p *pdst.DestinationProfile) { m.w.set(target, p) }

// Watch implements Profiles.
func (m *MemoryProfiles) Watch(ctx context.Context, target string) (<-chan *pdst.DestinationProfile, error) {
	return m.w.watch(ctx, target, "profile for "+target)
}
