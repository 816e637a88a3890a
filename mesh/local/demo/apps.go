package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/weftmesh/weft/mesh/local"
)

// apps are the demo's programs. Servers signal when they listen so that
// the clients' first requests do not race them.
type apps struct {
	stats     *Stats
	rate      float64
	serversUp sync.WaitGroup

	// mu guards the callers' requests in flight, for quiesce.
	mu       sync.Mutex
	quiet    bool          // callers send no new request
	inflight int           // callers' requests sent and not yet recorded
	idle     chan struct{} // closed when inflight drops to 0 once quiet
}

// quiesce stops the callers' new requests and waits, up to timeout, for
// those in flight to be answered and recorded. The demo's final figures
// are read after it, so that the callers and the proxies count the same
// requests: without it a request a proxy had answered could still be on
// its way back to its caller.
func (a *apps) quiesce(timeout time.Duration) {
	a.mu.Lock()
	a.quiet = true
	if a.inflight == 0 {
		a.mu.Unlock()
		return
	}
	a.idle = make(chan struct{})
	idle := a.idle
	a.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// startRequest counts a caller's request in flight; false once quiesce
// has begun, when the request is not to be sent.
func (a *apps) startRequest() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.quiet {
		return false
	}
	a.inflight++
	return true
}

// endRequest is called once a started request has been recorded (or cut
// short by the demo's end).
func (a *apps) endRequest() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	if a.inflight == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

func listen(pod local.Pod) (net.Listener, error) {
	return net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(pod.Ports[0].Port)).String())
}

func serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// backend answers every request with a short JSON document.
func (a *apps) backend(ctx context.Context, pod local.Pod) error {
	l, err := listen(pod)
	a.serversUp.Done()
	if err != nil {
		return err
	}
	return serve(ctx, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"served_by\":%q,\"path\":%q}\n", pod.Name, r.URL.Path)
		a.stats.Record("backend", time.Since(start), Success)
	}))
}

// frontend answers each request after calling the backend through its
// proxy.
func (a *apps) frontend(ctx context.Context, pod local.Pod) error {
	l, err := listen(pod)
	a.serversUp.Done()
	if err != nil {
		return err
	}
	backend := "http://" + pod.Mappings[0].Listen.String() + "/items"
	client := &http.Client{Timeout: 5 * time.Second}
	return serve(ctx, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, backend, nil)
		resp, err := client.Do(req)
		if err != nil {
			a.stats.Record("frontend", time.Since(start), Failure)
			http.Error(w, "backend unreachable", http.StatusBadGateway)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			a.stats.Record("frontend", time.Since(start), classify(resp.StatusCode, nil))
			http.Error(w, "backend said "+resp.Status, http.StatusBadGateway)
			return
		}
		fmt.Fprintf(w, "frontend %s got: %s", pod.Name, body)
		a.stats.Record("frontend", time.Since(start), Success)
	}))
}

// classify turns a caller's view of a request into an outcome: a 403, or a
// connection the server side closed without an answer, is a denial.
func classify(status int, err error) Outcome {
	switch {
	case err == nil && status >= 200 && status < 400:
		return Success
	case err == nil && status == http.StatusForbidden:
		return Denied
	case err != nil && deniedConnection(err):
		return Denied
	default:
		return Failure
	}
}

func deniedConnection(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne *net.OpError
	if errors.As(err, &ne) && !ne.Timeout() && ne.Op == "read" {
		return true // connection reset while reading the answer
	}
	return false
}

// callerTimeout bounds each of the callers' requests.
const callerTimeout = 5 * time.Second

// caller sends GET requests to the pod's first outbound mapping at rate
// per second (or one per permit of gate, when not nil), recording each
// under name.
func (a *apps) caller(name string, rate float64, keepAlive bool, gate *Gate) local.App {
	return func(ctx context.Context, pod local.Pod) error {
		waitServers(ctx, &a.serversUp)
		url := "http://" + pod.Mappings[0].Listen.String() + "/"
		client := &http.Client{Timeout: callerTimeout, Transport: &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 4}}
		defer client.CloseIdleConnections()
		var next <-chan time.Time
		var permits <-chan struct{}
		if gate != nil {
			permits = gate.permits
		} else {
			tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer tick.Stop()
			next = tick.C
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		inflight := make(chan struct{}, 16)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-next:
				select {
				case inflight <- struct{}{}:
				default:
					continue // too many requests outstanding: skip this tick
				}
			case <-permits:
				// A permitted request waits for a free slot rather
				// than being skipped.
				select {
				case inflight <- struct{}{}:
				case <-ctx.Done():
					return nil
				}
			}
			if !a.startRequest() {
				<-inflight
				continue // the demo is ending: no new request
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-inflight }()
				defer a.endRequest()
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				status := 0
				if err == nil {
					status = resp.StatusCode
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
					resp.Body.Close()
				}
				if ctx.Err() != nil {
					return // stopping: the request was cut short, not failed
				}
				a.stats.Record(name, time.Since(start), classify(status, err))
			}()
		}
	}
}

func waitServers(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Gate paces a demo client for tests and reproducible runs: a client
// given a Gate sends one request per permit instead of at its rate.
type Gate struct{ permits chan struct{} }

// NewGate returns a gate with no permits.
func NewGate() *Gate { return &Gate{permits: make(chan struct{}, maxPermits)} }

// maxPermits bounds the permits a gate holds.
const maxPermits = 1 << 16

// Allow lets n more requests go. Permits beyond maxPermits outstanding
// are dropped.
func (g *Gate) Allow(n int) {
	for i := 0; i < n; i++ {
		select {
		case g.permits <- struct{}{}:
		default:
			return
		}
	}
}
