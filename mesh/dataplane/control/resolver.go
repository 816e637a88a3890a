package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/discovery/model"
)

// Resolver is a dataplane.Resolver over the discovery client.
type Resolver struct {
	c          *client.Client
	meshedPort uint16
}

// ResolverOption tunes NewResolver.
type ResolverOption func(*Resolver)

// WithMeshedInboundPort makes endpoints that carry an identity but no
// opaque transport port reachable through port, their proxy's inbound
// port (explicit mode: nothing redirects a peer's connection to the
// proxy). 0, the default, leaves endpoints as discovery sent them.
func WithMeshedInboundPort(port uint16) ResolverOption {
	return func(r *Resolver) { r.meshedPort = port }
}

// NewResolver wraps a discovery client. The caller keeps owning c and
// closes it.
func NewResolver(c *client.Client, opts ...ResolverOption) (*Resolver, error) {
	if c == nil {
		return nil, errors.New("control: discovery client is nil")
	}
	r := &Resolver{c: c}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Resolve implements dataplane.Resolver: it waits for discovery's first
// answer (or the end of ctx), then streams complete endpoint sets until
// ctx ends. A destination that does not exist is an error wrapping
// dataplane.ErrNotFound.
func (r *Resolver) Resolve(ctx context.Context, target string) (<-chan []dataplane.Endpoint, error) {
	w, err := r.c.Watch(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("control: resolving %s: %w", target, err)
	}
	if err := w.Wait(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("control: resolving %s: %w", target, err)
	}
	set, _ := w.Endpoints()
	if !set.Exists {
		w.Close()
		return nil, fmt.Errorf("control: resolving %s: %w", target, dataplane.ErrNotFound)
	}
	out := make(chan []dataplane.Endpoint, 1)
	out <- r.translate(set)
	go follow(ctx, w, out, func() ([]dataplane.Endpoint, bool) {
		set, ok := w.Endpoints()
		if !ok {
			return nil, false
		}
		return r.translate(set), true
	})
	return out, nil
}

// discoveryWatch is what follow needs of a discovery client's watch
// (client.Watch, client.ProfileWatch).
type discoveryWatch interface {
	Updated() <-chan struct{}
	Done() <-chan struct{}
	Close()
}

// follow sends what next makes of w after each update on out, keeping
// only the latest value, until ctx ends or w stops; it then closes out and
// w. next returns false to send nothing for an update (no value yet, or
// nothing changed).
func follow[T any](ctx context.Context, w discoveryWatch, out chan T, next func() (T, bool)) {
	defer close(out)
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Done():
			return
		case <-w.Updated():
		}
		if v, ok := next(); ok && !replace(ctx, out, v) {
			return
		}
	}
}

// translate turns a discovery set into the proxy's endpoints. A set that
// no longer exists has none.
func (r *Resolver) translate(set model.EndpointSet) []dataplane.Endpoint {
	if !set.Exists {
		return []dataplane.Endpoint{}
	}
	eps := make([]dataplane.Endpoint, 0, len(set.Endpoints))
	for _, e := range set.Endpoints {
		ep := TranslateEndpoint(e, r.meshedPort)
		ep.MetricLabels = mergeLabels(set.MetricLabels, e.MetricLabels)
		eps = append(eps, ep)
	}
	return eps
}

// mergeLabels combines a set's metric labels with an endpoint's (the
// endpoint's win), sharing a map when one side is empty.
func mergeLabels(set, ep map[string]string) map[string]string {
	switch {
	case len(set) == 0:
		return ep
	case len(ep) == 0:
		return set
	}
	out := make(map[string]string, len(set)+len(ep))
	for k, v := range set {
		out[k] = v
	}
	for k, v := range ep {
		out[k] = v
	}
	return out
}

// TranslateEndpoint converts one discovery endpoint (its own metric labels
// included; the set's labels are merged by the resolver). meshedInboundPort, when
// not 0, becomes the opaque transport port of a meshed endpoint (one with an
// identity) that has none. An opaque transport port outside 1..65535 is
// dropped.
func TranslateEndpoint(e model.Endpoint, meshedInboundPort uint16) dataplane.Endpoint {
	out := dataplane.Endpoint{
		Addr:         e.Addr,
		Identity:     e.Identity,
		Weight:       e.Weight,
		MetricLabels: e.MetricLabels,
	}
	switch e.Hint {
	case model.HintH2:
		out.Protocol = dataplane.HintH2
	case model.HintOpaque:
		out.Protocol = dataplane.HintOpaque
	}
	if e.OpaqueTransportPort > 0 && e.OpaqueTransportPort <= 65535 {
		out.OpaqueTransportPort = uint16(e.OpaqueTransportPort)
	}
	if out.OpaqueTransportPort == 0 && out.Identity != "" && meshedInboundPort != 0 {
		out.OpaqueTransportPort = meshedInboundPort
	}
	return out
}
