package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/discovery/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxAuthorityLen bounds an authority a watch accepts.
const maxAuthorityLen = 512

// Option tunes New.
type Option func(*config)

type config struct {
	token      string
	minBackoff time.Duration
	maxBackoff time.Duration
	logger     *slog.Logger
}

// WithContextToken sets the context token sent with every request, such
// as {"ns":"shop","nodeName":"node-1","pod":"web-1"} (the injector puts it
// in WEFT_PROXY_DESTINATION_CONTEXT).
func WithContextToken(tok string) Option { return func(c *config) { c.token = tok } }

// WithBackoff sets the reconnection backoff: the first wait and the
// largest (defaults 100ms and 5s). Each wait is jittered by up to half.
func WithBackoff(first, max time.Duration) Option {
	return func(c *config) { c.minBackoff, c.maxBackoff = first, max }
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Client resolves authorities through a Destination server.
type Client struct {
	dst    pb.DestinationClient
	cfg    config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a client using conn, which the caller keeps owning. ctx
// bounds the start only (New starts nothing, and fails if ctx has already
// ended); the client lives until Close, and each watch until its own
// context ends or Close is called.
func New(ctx context.Context, conn grpc.ClientConnInterface, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if conn == nil {
		return nil, errors.New("client: New needs a connection")
	}
	cfg := config{minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.minBackoff <= 0 || cfg.maxBackoff < cfg.minBackoff {
		return nil, fmt.Errorf("client: backoff %s..%s: want 0 < first <= max", cfg.minBackoff, cfg.maxBackoff)
	}
	if _, err := model.ParseContextToken(cfg.token); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	return &Client{dst: pb.NewDestinationClient(conn), cfg: cfg, ctx: cctx, cancel: cancel}, nil
}

// Close stops every watch and waits for their goroutines. It is
// idempotent.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

func checkAuthority(a string) error {
	if a == "" || len(a) > maxAuthorityLen {
		return fmt.Errorf("client: authority %.40q: want 1 to %d bytes", a, maxAuthorityLen)
	}
	return nil
}

// state is what watches share: the value, the last error, and the
// signals.
type state[T any] struct {
	mu      sync.Mutex
	value   T
	known   bool
	err     error
	fatal   bool
	updated chan struct{}
	ready   chan struct{}
	readyOK sync.Once
	cancel  context.CancelFunc
	done    chan struct{}
}

func newState[T any](cancel context.CancelFunc) *state[T] {
	return &state[T]{updated: make(chan struct{}, 1), ready: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
}

func (s *state[T]) get() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.known
}

func (s *state[T]) set(v T) {
	s.mu.Lock()
	s.value, s.known, s.err = v, true, nil
	s.mu.Unlock()
	s.notify()
	s.readyOK.Do(func() { close(s.ready) })
}

func (s *state[T]) fail(err error, fatal bool) {
	s.mu.Lock()
	s.err, s.fatal = err, fatal
	s.mu.Unlock()
	s.notify()
	if fatal {
		s.readyOK.Do(func() { close(s.ready) })
	}
}

func (s *state[T]) notify() {
	select {
	case s.updated <- struct{}{}:
	default:
	}
}

func (s *state[T]) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *state[T]) wait(ctx context.Context) error {
	select {
	case <-s.ready:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fatal {
			return s.err
		}
		return nil
	case <-ctx.Done():
		if err := s.lastErr(); err != nil {
			return fmt.Errorf("client: no answer yet (last error: %v): %w", err, ctx.Err())
		}
		return fmt.Errorf("client: no answer yet: %w", ctx.Err())
	}
}

func (s *state[T]) close() {
	s.cancel()
	<-s.done
}

// run keeps one stream open for a watch: it opens the stream, hands every
// message to onMsg (first is true for the first message of each stream),
// and on failure records the error and reconnects after a jittered,
// growing backoff. InvalidArgument ends the watch.
func run[M any](ctx context.Context, c *Client, what string, open func(context.Context) (func() (M, error), error), onMsg func(m M, first bool), fail func(error, bool)) {
	backoff := c.cfg.minBackoff
	for {
		recv, err := open(ctx)
		if err == nil {
			first := true
			for {
				var m M
				if m, err = recv(); err != nil {
					break
				}
				onMsg(m, first)
				first = false
				backoff = c.cfg.minBackoff
			}
		}
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.InvalidArgument {
			fail(fmt.Errorf("client: %s: %w", what, err), true)
			return
		}
		fail(fmt.Errorf("client: %s: stream broken, keeping the last known state: %w", what, err), false)
		wait := backoff/2 + rand.N(backoff/2+1)
		c.cfg.logger.Debug("client: reconnecting", "what", what, "in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, c.cfg.maxBackoff)
	}
}

// Watch is a live endpoint set for one authority.
type Watch struct {
	st *state[model.EndpointSet]
}

// Watch starts watching authority (as a proxy would send it, such as
// web.shop.svc.cluster.local:80 or 10.0.0.1:8080) and returns at once;
// use Wait for the first answer. The watch runs until ctx ends, Close is
// called, or the client closes.
func (c *Client) Watch(ctx context.Context, authority string) (*Watch, error) {
	if err := checkAuthority(authority); err != nil {
		return nil, err
	}
	wctx, cancel := mergeCancel(ctx, c.ctx)
	w := &Watch{st: newState[model.EndpointSet](cancel)}
	req := &pb.GetDestination{Scheme: "k8s", Path: authority, ContextToken: c.cfg.token}
	eps := map[netip.AddrPort]model.Endpoint{}
	var labels map[string]string
	exists := false
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(w.st.done)
		run(wctx, c, "Get "+authority,
			func(ctx context.Context) (func() (*pb.Update, error), error) {
				s, err := c.dst.Get(ctx, req)
				if err != nil {
					return nil, err
				}
				return s.Recv, nil
			},
			func(u *pb.Update, first bool) {
				if first {
					clear(eps)
					exists = false
				}
				switch v := u.GetUpdate().(type) {
				case *pb.Update_Add:
					exists = true
					labels = v.Add.GetMetricLabels()
					for _, wa := range v.Add.GetAddrs() {
						e, err := model.EndpointFromProto(wa)
						if err != nil {
							c.cfg.logger.Warn("client: skipping bad address", "authority", authority, "error", err)
							continue
						}
						eps[e.Addr] = e
					}
				case *pb.Update_Remove:
					for _, a := range v.Remove.GetAddrs() {
						if ap, err := model.TCPAddressFromProto(a); err == nil {
							delete(eps, ap)
						}
					}
				case *pb.Update_NoEndpoints:
					clear(eps)
					exists = v.NoEndpoints.GetExists()
				default:
					return
				}
				set := model.EndpointSet{Exists: exists, MetricLabels: labels, Endpoints: make([]model.Endpoint, 0, len(eps))}
				for _, e := range eps {
					set.Endpoints = append(set.Endpoints, e)
				}
				slices.SortFunc(set.Endpoints, func(a, b model.Endpoint) int { return a.Addr.Compare(b.Addr) })
				w.st.set(set)
			},
			w.st.fail)
	}()
	return w, nil
}

// Endpoints returns the current endpoint set and whether any answer has
// arrived yet. While the server is away it is the last known set.
func (w *Watch) Endpoints() (model.EndpointSet, bool) { return w.st.get() }

// Updated receives a signal after the set or the error changes; signals
// coalesce, so read Endpoints after each.
func (w *Watch) Updated() <-chan struct{} { return w.st.updated }

// Wait blocks until the first answer (nil), a permanent error (a
// malformed authority) or the end of ctx.
func (w *Watch) Wait(ctx context.Context) error { return w.st.wait(ctx) }

// Err returns the last stream error, nil while the stream is healthy.
func (w *Watch) Err() error { return w.st.lastErr() }

// Done is closed when the watch has stopped: after Close, the end of its
// context, or a permanent error.
func (w *Watch) Done() <-chan struct{} { return w.st.done }

// Close stops the watch and waits for its goroutine. It is idempotent.
func (w *Watch) Close() { w.st.close() }

// ProfileWatch is a live profile for one authority.
type ProfileWatch struct {
	st *state[model.Profile]
}

// WatchProfile starts watching authority's profile and returns at once;
// see Watch.
func (c *Client) WatchProfile(ctx context.Context, authority string) (*ProfileWatch, error) {
	if err := checkAuthority(authority); err != nil {
		return nil, err
	}
	wctx, cancel := mergeCancel(ctx, c.ctx)
	w := &ProfileWatch{st: newState[model.Profile](cancel)}
	req := &pb.GetDestination{Scheme: "k8s", Path: authority, ContextToken: c.cfg.token}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(w.st.done)
		run(wctx, c, "GetProfile "+authority,
			func(ctx context.Context) (func() (*pb.DestinationProfile, error), error) {
				s, err := c.dst.GetProfile(ctx, req)
				if err != nil {
					return nil, err
				}
				return s.Recv, nil
			},
			func(p *pb.DestinationProfile, _ bool) { w.st.set(model.ProfileFromProto(p)) },
			w.st.fail)
	}()
	return w, nil
}

// Profile returns the current profile and whether any answer has arrived.
func (w *ProfileWatch) Profile() (model.Profile, bool) { return w.st.get() }

// Updated receives a signal after the profile or the error changes.
func (w *ProfileWatch) Updated() <-chan struct{} { return w.st.updated }

// Wait blocks until the first answer, a permanent error or the end of ctx.
func (w *ProfileWatch) Wait(ctx context.Context) error { return w.st.wait(ctx) }

// Err returns the last stream error, nil while the stream is healthy.
func (w *ProfileWatch) Err() error { return w.st.lastErr() }

// Done is closed when the watch has stopped.
func (w *ProfileWatch) Done() <-chan struct{} { return w.st.done }

// Close stops the watch and waits for its goroutine. It is idempotent.
func (w *ProfileWatch) Close() { w.st.close() }

// mergeCancel returns a context cancelled when either parent is.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
