package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
)

// Victims: well-behaved clients whose latency through the proxies is the
// measure. Each request-level victim runs open loop at a fixed rate (a
// request is started on schedule whatever the earlier ones are doing, and
// its latency counts from its scheduled start); the tap victim takes one
// sample after the other.

type victimKind string

const (
	victimH1     victimKind = "HTTP/1.1 GET"
	victimH2     victimKind = "h2c GET"
	victimH2Big  victimKind = "h2c GET 64 KiB"
	victimGRPC   victimKind = "gRPC unary"
	victimTapper victimKind = "tapper (Observe to first event)"
)

// victimTimeout bounds one victim request; a request that takes longer
// fails with this latency.
const victimTimeout = 5 * time.Second

// victims holds the clients, created once per proxy pair.
type victims struct {
	e    *attackEnv
	h1   *http.Client
	h2   *http.Client
	grpc *grpc.ClientConn
}

func newVictims(e *attackEnv) (*victims, error) {
	h1 := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: victimTimeout}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
	}
	h2p := new(http.Protocols)
	h2p.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{
		DialContext: (&net.Dialer{Timeout: victimTimeout}).DialContext,
		Protocols:   h2p,
	}
	gc, err := grpc.NewClient(addr(e.cH1), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &victims{e: e, h1: &http.Client{Transport: h1}, h2: &http.Client{Transport: h2}, grpc: gc}, nil
}

func (v *victims) close() {
	v.h1.CloseIdleConnections()
	v.h2.CloseIdleConnections()
	v.grpc.Close()
}

// get fetches url and reads the whole body, which must be want bytes
// (any length when want < 0).
func get(ctx context.Context, c *http.Client, url string, want int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if want >= 0 && n != want {
		return fmt.Errorf("body of %d bytes, want %d", n, want)
	}
	return nil
}

// request returns the function one request of kind makes.
func (v *victims) request(kind victimKind) func(ctx context.Context) error {
	base := "http://" + addr(v.e.cH1)
	switch kind {
	case victimH1:
		return func(ctx context.Context) error { return get(ctx, v.h1, base+"/victim", int64(len(body))) }
	case victimH2:
		return func(ctx context.Context) error { return get(ctx, v.h2, base+"/victim", int64(len(body))) }
	case victimH2Big:
		return func(ctx context.Context) error { return get(ctx, v.h2, base+"/victim?bytes=65536", 65536) }
	case victimGRPC:
		hc := healthpb.NewHealthClient(v.grpc)
		return func(ctx context.Context) error {
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}
	}
	return nil
}

// warm makes one request of each kind so that every pool is filled
// before a measure.
func (v *victims) warm(ctx context.Context, kinds []victimKind) error {
	for _, k := range kinds {
		if k == victimTapper {
			if _, err := v.tapOnce(ctx); err != nil {
				return fmt.Errorf("tapper: %w", err)
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, victimTimeout)
		err := v.request(k)(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// run measures every kind at once for d: request victims at rate
// requests a second each, the tapper sample after sample. It returns the
// samples of each kind and the first error each kind saw.
func (v *victims) run(ctx context.Context, kinds []victimKind, rate int, d time.Duration) (map[victimKind][]sample, map[victimKind]string) {
	out := make(map[victimKind][]sample, len(kinds))
	firstErr := map[victimKind]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Go(func() {
			var once sync.Once
			onErr := func(err error) {
				once.Do(func() {
					mu.Lock()
					firstErr[k] = err.Error()
					mu.Unlock()
				})
			}
			var s []sample
			if k == victimTapper {
				s = v.tapLoop(ctx, d, onErr)
			} else {
				do := v.request(k)
				s = openLoop(ctx, rate, d, func(ctx context.Context) error {
					err := do(ctx)
					if err != nil {
						onErr(err)
					}
					return err
				})
			}
			mu.Lock()
			out[k] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, firstErr
}

// maxInFlight bounds one victim's requests in flight; a request due while
// that many wait is counted as failed at victimTimeout.
const maxInFlight = 2048

// openLoop starts rate*d requests, one every 1/rate, each under
// victimTimeout, and returns their samples.
func openLoop(ctx context.Context, rate int, d time.Duration, do func(context.Context) error) []sample {
	n := max(1, int(float64(rate)*d.Seconds()))
	interval := time.Second / time.Duration(rate)
	out := make([]sample, n)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return out[:i]
			case <-time.After(w):
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			out[i] = sample{lat: victimTimeout, err: true}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithDeadline(ctx, at.Add(victimTimeout))
			err := do(rctx)
			cancel()
			out[i] = sample{lat: time.Since(at), err: err != nil}
		})
	}
	wg.Wait()
	return out
}

// tapLoop takes tap samples one after the other for d (at least one).
func (v *victims) tapLoop(ctx context.Context, d time.Duration, onErr func(error)) []sample {
	var out []sample
	end := time.Now().Add(d)
	for len(out) == 0 || time.Now().Before(end) {
		lat, err := v.tapOnce(ctx)
		if err != nil {
			onErr(err)
		}
		out = append(out, sample{lat: lat, err: err != nil})
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// tapTimeout bounds one tap sample.
const tapTimeout = 10 * time.Second

// tapOnce is one tap sample: a new connection to the server proxy's tap
// port with the tapper's certificate, Observe of requests under
// /tapvictim/, requests sent through the proxies every 50 ms until the
// first event arrives. Its latency is from the dial to that event.
func (v *victims) tapOnce(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, tapTimeout)
	defer cancel()
	start := time.Now()
	conn, err := grpc.NewClient(addr(v.e.sTap), grpc.WithTransportCredentials(credentials.NewTLS(v.e.meshTLS("tapper", "h2"))))
	if err != nil {
		return tapTimeout, err
	}
	defer conn.Close()
	stream, err := ptap.NewTapClient(conn).Observe(ctx, &ptap.ObserveRequest{Limit: 1, Match: &ptap.ObserveRequest_Match{
		Match: &ptap.ObserveRequest_Match_Http_{Http: &ptap.ObserveRequest_Match_Http{
			Match: &ptap.ObserveRequest_Match_Http_Path{Path: &ptap.ObserveRequest_Match_Http_StringMatch{
				Match: &ptap.ObserveRequest_Match_Http_StringMatch_Prefix{Prefix: "/tapvictim/"}}}}}}})
	if err != nil {
		return time.Since(start), err
	}
	got := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		got <- err
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	url := "http://" + addr(v.e.cH1) + "/tapvictim/x"
	for {
		select {
		case err := <-got:
			if err != nil {
				return time.Since(start), err
			}
			return time.Since(start), nil
		case <-ctx.Done():
			cancel()
			<-got
			return time.Since(start), errors.New("no tap event within the sample's bound")
		case <-t.C:
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			_ = get(rctx, v.h1, url, -1)
			rcancel()
		}
	}
}
