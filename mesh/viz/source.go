package viz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Source finds the meshed pods and reads their proxies' metrics. A local
// mesh reaches each proxy's admin server directly (Static); a cluster
// reaches it through the Kubernetes API server's pod proxy (package
// mesh/viz/kubernetes).
type Source interface {
	// Targets lists the meshed pods now.
	Targets(ctx context.Context) ([]Target, error)
	// Metrics returns the body of t's /metrics. The caller closes it and
	// reads at most MaxMetricsBytes.
	Metrics(ctx context.Context, t Target) (io.ReadCloser, error)
}

// TapSource is a Source whose proxies can be tapped.
type TapSource interface {
	Source
	// Tap starts observing t's proxy. The stream ends when ctx ends.
	Tap(ctx context.Context, t Target, req TapRequest) (EventStream, error)
}

// ResourceTapSource is a TapSource that taps all the pods of a resource
// in one call: a cluster's tap API, which authorizes a user per resource
// (deployments/tap on deploy/web) rather than per pod.
type ResourceTapSource interface {
	TapSource
	// TapResource taps r's pods; warn, when not nil, receives warnings
	// about pods that could not be tapped. The stream ends when ctx ends.
	TapResource(ctx context.Context, r Resource, req TapRequest, warn func(string)) (EventStream, error)
}

// TapRequest is what a tap asks a proxy for.
type TapRequest struct {
	// Filter selects requests (the proxy matches on method, authority and
	// path prefix).
	Filter Filter
	// Limit bounds the requests the proxy reports on this tap (0: no
	// bound of the tap's own, sent as the largest limit; the proxy still
	// caps the events per second).
	Limit uint32
	// Headers asks the proxy to include request and response headers.
	Headers bool
}

// EventStream yields tap events until it fails or its context ends.
type EventStream interface {
	Recv() (Event, error)
}

// Static is a Source over a fixed list of targets whose Admin addresses
// are reached over plain HTTP: the proxies of a local mesh (weft demo,
// weft dev), or hosts whose admin port the caller can reach.
type Static struct {
	List   []Target
	Client *http.Client
}

// Targets returns the list.
func (s *Static) Targets(context.Context) ([]Target, error) {
	return append([]Target(nil), s.List...), nil
}

// Metrics GETs http://ADMIN/metrics.
func (s *Static) Metrics(ctx context.Context, t Target) (io.ReadCloser, error) {
	if t.Admin == "" {
		return nil, fmt.Errorf("viz: %s has no admin address", t)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+t.Admin+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("viz: %s: %w", t, err)
	}
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("viz: %s: %w", t, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("viz: %s: /metrics answered %s", t, resp.Status)
	}
	return resp.Body, nil
}

// Round is one scrape of every target at about the same moment.
type Round struct {
	At      time.Time
	Scrapes map[string]*Scrape
	Failed  []TargetStatus
}

// ScrapeTimeout bounds one target's scrape.
const ScrapeTimeout = 5 * time.Second

// maxParallelScrapes bounds the scrapes in flight.
const maxParallelScrapes = 8

// ScrapeAll scrapes every target of src once, in parallel (bounded), each
// under ScrapeTimeout. A target that fails is listed in Failed; only a
// failure to list the targets is an error.
func ScrapeAll(ctx context.Context, src Source, now func() time.Time) (*Round, error) {
	if now == nil {
		now = time.Now
	}
	ts, err := src.Targets(ctx)
	if err != nil {
		return nil, err
	}
	r := &Round{At: now(), Scrapes: map[string]*Scrape{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelScrapes)
	for _, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sc, err := scrapeOne(ctx, src, t, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.Failed = append(r.Failed, TargetStatus{Target: t, Err: err})
				return
			}
			r.Scrapes[t.Key()] = sc
		}()
	}
	wg.Wait()
	sort.Slice(r.Failed, func(i, j int) bool { return r.Failed[i].Target.Key() < r.Failed[j].Target.Key() })
	return r, nil
}

func scrapeOne(ctx context.Context, src Source, t Target, now func() time.Time) (*Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	body, err := src.Metrics(ctx, t)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return ParseMetrics(body, t, now())
}

// Between returns the window from prev to cur (prev nil: since the
// targets started).
func Between(prev, cur *Round) Window {
	var p map[string]*Scrape
	if prev != nil {
		p = prev.Scrapes
	}
	w := NewWindow(p, cur.Scrapes, cur.Failed)
	if prev != nil && w.Duration == 0 {
		w.Duration = cur.At.Sub(prev.At)
	}
	return w
}

// Sample scrapes src, waits for d (or until ctx ends, whichever comes
// first), scrapes again and returns the window between the two scrapes.
// started, when not nil, is called after the first scrape. With d == 0 it
// scrapes once and returns the counts since each proxy started. The last
// scrape runs even when ctx has ended, under its own timeout, so that
// Ctrl-C ends the sampling early instead of losing it.
func Sample(ctx context.Context, src Source, d time.Duration, started func()) (Window, error) {
	first, err := ScrapeAll(ctx, src, nil)
	if err != nil {
		return Window{}, err
	}
	if d <= 0 {
		return Between(nil, first), nil
	}
	if started != nil {
		started()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	last, err := ScrapeAll(context.WithoutCancel(ctx), src, nil)
	if err != nil {
		return Window{}, err
	}
	if last.At.Sub(first.At) <= 0 {
		return Window{}, errors.New("viz: the sampling window is empty")
	}
	return Between(first, last), nil
}
