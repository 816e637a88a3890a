package dashboard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// Explainer explains why a proxy denied a client (mesh/viz/local's
// Explainer does it with the local mesh's policy).
type Explainer interface {
	Explain(ctx context.Context, d viz.DeniedPair) (string, error)
}

// Option tunes New.
type Option func(*config)

type config struct {
	interval   time.Duration
	window     time.Duration
	points     int
	maxStreams int
	maxReqs    int
	hosts      map[string]bool
	explainer  Explainer
	hint       func(viz.DeniedPair) string
	log        *slog.Logger
	now        func() time.Time
	tapRecent  int
	streamLife time.Duration
}

// WithInterval sets how often the proxies are scraped (default 2s).
func WithInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithWindow sets the span the figures cover (default 10s).
func WithWindow(d time.Duration) Option { return func(c *config) { c.window = d } }

// WithHistory sets how many points the charts keep (default 90).
func WithHistory(n int) Option { return func(c *config) { c.points = n } }

// WithMaxStreams caps the live streams (browser tabs) served at once
// (default 16); more get 503.
func WithMaxStreams(n int) Option { return func(c *config) { c.maxStreams = n } }

// WithMaxRequests caps the requests handled at once, streams included
// (default 64); more get 503.
func WithMaxRequests(n int) Option { return func(c *config) { c.maxReqs = n } }

// WithAllowedHosts adds host names the page may be reached by. IP
// literals and "localhost" are always accepted; any other Host header is
// refused, so a web page on another site cannot reach the dashboard
// through DNS rebinding.
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) {
		for _, h := range hosts {
			c.hosts[h] = true
		}
	}
}

// WithExplainer lets the page show the policy explanation of a denied
// edge.
func WithExplainer(e Explainer) Option { return func(c *config) { c.explainer = e } }

// WithExplainHint sets the `weft policy explain` command line shown for
// a denied pair (default: DeniedPair.ExplainCommand with PATH).
func WithExplainHint(f func(viz.DeniedPair) string) Option { return func(c *config) { c.hint = f } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithStreamLifetime bounds how long one live stream stays open (default
// 1h); the page reconnects.
func WithStreamLifetime(d time.Duration) Option { return func(c *config) { c.streamLife = d } }

// Dashboard collects the views of a mesh and serves them to browsers. Run
// it with Run; serve Handler on a listener the caller opens.
type Dashboard struct {
	src  viz.Source
	tap  viz.TapSource
	cfg  config
	hist history

	latest  atomic.Pointer[Frame]
	changed atomic.Pointer[chan struct{}]

	hub  *hub
	topM sync.Mutex
	top  *viz.Top

	streams atomic.Int64
	reqs    chan struct{}

	rounds, scrapeFails atomic.Int64
	tapStreams          atomic.Int64
	tapErr              atomic.Pointer[string]
	ran                 atomic.Bool
}

// New returns a dashboard over src. When src is a viz.TapSource the
// dashboard also taps every proxy for the live request stream and the
// hottest paths.
func New(src viz.Source, opts ...Option) (*Dashboard, error) {
	if src == nil {
		return nil, errors.New("dashboard: source is nil")
	}
	c := config{interval: 2 * time.Second, window: 10 * time.Second, points: 90, maxStreams: 16, maxReqs: 64,
		hosts: map[string]bool{"localhost": true}, log: slog.New(slog.DiscardHandler), now: time.Now, tapRecent: 100, streamLife: time.Hour}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.interval < 100*time.Millisecond:
		return nil, errors.New("dashboard: interval under 100ms")
	case c.window < c.interval:
		return nil, errors.New("dashboard: window shorter than the interval")
	case c.points < 2 || c.points > 10000:
		return nil, errors.New("dashboard: history must keep 2 to 10000 points")
	case c.maxStreams < 1 || c.maxReqs < c.maxStreams:
		return nil, errors.New("dashboard: need at least one stream and as many requests as streams")
	}
	if c.hint == nil {
		c.hint = func(d viz.DeniedPair) string { return d.ExplainCommand("") }
	}
	d := &Dashboard{src: src, cfg: c, hub: newHub(c.tapRecent), top: viz.NewTop(), reqs: make(chan struct{}, c.maxReqs)}
	d.hist.max = int(c.window/c.interval) + 2
	ch := make(chan struct{})
	d.changed.Store(&ch)
	if ts, ok := src.(viz.TapSource); ok {
		d.tap = ts
	}
	return d, nil
}

// Run scrapes and taps until ctx ends; it returns nil then. A Dashboard
// runs once.
func (d *Dashboard) Run(ctx context.Context) error {
	if !d.ran.CompareAndSwap(false, true) {
		return errors.New("dashboard: already ran")
	}
	var wg sync.WaitGroup
	if d.tap != nil {
		wg.Add(1)
		go func() { defer wg.Done(); d.tapAll(ctx) }()
	}
	scrapeLoop(ctx, d.src, d.cfg.interval, d.cfg.log, d.update)
	wg.Wait()
	return nil
}

// Latest returns the latest frame, nil before the first scrape.
func (d *Dashboard) Latest() *Frame { return d.latest.Load() }

func (d *Dashboard) update(r *viz.Round) {
	d.rounds.Add(1)
	d.scrapeFails.Add(int64(len(r.Failed)))
	d.hist.add(r)
	prev, cur := d.hist.windowBefore(d.cfg.window)
	if prev == cur {
		prev = nil // one round so far: counts since the proxies started
	}
	w := viz.Between(prev, cur)
	f := buildFrame(w, r.At, d.cfg.hint)
	f.History = d.hist.addPoint(point(f), d.cfg.points)
	f.Explain = d.cfg.explainer != nil
	d.topM.Lock()
	for i, row := range d.top.Rows() {
		if i == 20 {
			break
		}
		f.Top = append(f.Top, TopRow{Source: row.Source, Destination: row.Destination, Method: row.Method, Path: row.Path, Count: row.Count,
			SuccessRate: row.SuccessRate(), BestMs: ms(row.Best), WorstMs: ms(row.Worst), LastMs: ms(row.Last)})
	}
	d.topM.Unlock()
	if f.Top == nil {
		f.Top = []TopRow{}
	}
	f.Tap = TapStatus{Enabled: d.tap != nil, Streams: int(d.tapStreams.Load())}
	if e := d.tapErr.Load(); e != nil {
		f.Tap.Error = *e
	}
	f.Stats = StatsCounts{Rounds: d.rounds.Load(), TapEvents: d.hub.published.Load(), TapDropped: d.hub.dropped.Load(), ScrapeFails: d.scrapeFails.Load()}
	d.latest.Store(&f)
	next := make(chan struct{})
	old := d.changed.Swap(&next)
	close(*old)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tapAll keeps one tap open on every target, restarting a broken one with
// backoff, and picks up new targets every 30 seconds. A source that taps
// whole resources (a cluster's tap API, which bounds the taps one user
// holds) gets one tap per namespace instead of one per pod.
func (d *Dashboard) tapAll(ctx context.Context) {
	running := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	relist := time.NewTicker(30 * time.Second)
	defer relist.Stop()
	rs, perNamespace := d.tap.(viz.ResourceTapSource)
	for {
		ts, err := d.src.Targets(ctx)
		if err == nil {
			sort.Slice(ts, func(i, j int) bool { return ts[i].Key() < ts[j].Key() })
			for _, t := range ts {
				key := t.Key()
				open := func(ctx context.Context) (viz.EventStream, error) { return d.tap.Tap(ctx, t, viz.TapRequest{}) }
				if perNamespace {
					key = "namespace " + t.Namespace
					ns := viz.Resource{Kind: viz.KindNamespace, Namespace: t.Namespace}
					open = func(ctx context.Context) (viz.EventStream, error) {
						return rs.TapResource(ctx, ns, viz.TapRequest{}, nil)
					}
				}
				mu.Lock()
				started := running[key]
				running[key] = true
				mu.Unlock()
				if started {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					d.tapOne(ctx, key, open)
					mu.Lock()
					delete(running, key)
					mu.Unlock()
				}()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-relist.C:
		}
	}
}

// tapOne keeps the tap open opens open, restarting it with backoff; key
// names it in errors.
func (d *Dashboard) tapOne(ctx context.Context, key string, open func(context.Context) (viz.EventStream, error)) {
	backoff := time.Second
	for ctx.Err() == nil {
		s, err := open(ctx)
		if err == nil {
			d.tapStreams.Add(1)
			err = d.consume(s)
			d.tapStreams.Add(-1)
			if c, ok := s.(io.Closer); ok {
				_ = c.Close()
			}
		}
		if ctx.Err() != nil {
			return
		}
		msg := key + ": " + err.Error()
		d.tapErr.Store(&msg)
		d.cfg.log.Debug("dashboard: tap ended", "tap", key, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (d *Dashboard) consume(s viz.EventStream) error {
	for {
		e, err := s.Recv()
		if err != nil {
			return err
		}
		d.topM.Lock()
		d.top.Add(e)
		d.topM.Unlock()
		d.hub.publish(e)
	}
}
