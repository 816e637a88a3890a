package resolver

import (
	"context"
	"errors"
	"sync"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	"google.golang.org/grpc/attributes"
	grpcresolver "google.golang.org/grpc/resolver"
)

// Scheme is the default target scheme: weft:///<authority>.
const Scheme = "weft"

// Option tunes NewBuilder.
type Option func(*Builder)

// WithScheme sets the scheme the builder answers to (default Scheme).
func WithScheme(s string) Option { return func(b *Builder) { b.scheme = s } }

// Builder builds resolvers that watch authorities through a discovery
// client.
type Builder struct {
	c      *client.Client
	scheme string
}

// NewBuilder returns a builder using c, which the caller keeps owning.
func NewBuilder(c *client.Client, opts ...Option) *Builder {
	b := &Builder{c: c, scheme: Scheme}
	for _, o := range opts {
		if o != nil {
			o(b)
		}
	}
	return b
}

// Scheme implements resolver.Builder.
func (b *Builder) Scheme() string { return b.scheme }

// Build implements resolver.Builder: it starts watching the target's
// authority (the path of weft:///<authority>).
func (b *Builder) Build(target grpcresolver.Target, cc grpcresolver.ClientConn, _ grpcresolver.BuildOptions) (grpcresolver.Resolver, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.c.Watch(ctx, target.Endpoint())
	if err != nil {
		cancel()
		return nil, err
	}
	r := &resolver{w: w, cancel: cancel, done: make(chan struct{})}
	go r.run(ctx, cc)
	return r, nil
}

type resolver struct {
	w      *client.Watch
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *resolver) run(ctx context.Context, cc grpcresolver.ClientConn) {
	defer close(r.done)
	var last discovery.EndpointSet
	sent := false
	for {
		stopped := false
		select {
		case <-ctx.Done():
			return
		case <-r.w.Updated():
		case <-r.w.Done():
			stopped = true
		}
		set, known := r.w.Endpoints()
		switch {
		case !known:
			// No answer yet: tell gRPC why, so calls fail fast instead of
			// hanging (a malformed authority stops the watch for good).
			if err := r.w.Err(); err != nil {
				// Flatten the error: gRPC turns resolver errors that carry
				// a status code such as InvalidArgument into Internal.
				cc.ReportError(errors.New("resolver: " + err.Error()))
			}
		case !sent || !set.Equal(last):
			last, sent = set, true
			addrs := make([]grpcresolver.Address, 0, len(set.Endpoints))
			for _, e := range set.Endpoints {
				addrs = append(addrs, grpcresolver.Address{
					Addr:       e.Addr.String(),
					Attributes: attributes.New(endpointKey{}, endpointValue{e}),
				})
			}
			// An empty list makes the balancer fail requests fast, which
			// is right for a service without endpoints or one that is gone.
			_ = cc.UpdateState(grpcresolver.State{Addresses: addrs})
		}
		if stopped {
			return
		}
	}
}

// ResolveNow implements resolver.Resolver; the watch is already live.
func (r *resolver) ResolveNow(grpcresolver.ResolveNowOptions) {}

// Close implements resolver.Resolver.
func (r *resolver) Close() {
	r.once.Do(func() {
		r.cancel()
		r.w.Close()
		<-r.done
	})
}

type endpointKey struct{}

// endpointValue compares by content, so unchanged endpoints keep their
// gRPC subchannels across updates.
type endpointValue struct{ e discovery.Endpoint }

func (v endpointValue) Equal(o any) bool {
	ov, ok := o.(endpointValue)
	return ok && v.e.Equal(ov.e)
}

// Endpoint returns the discovery data attached to an address this
// package produced.
func Endpoint(addr grpcresolver.Address) (discovery.Endpoint, bool) {
	v, ok := addr.Attributes.Value(endpointKey{}).(endpointValue)
	return v.e, ok
}
