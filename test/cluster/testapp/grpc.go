package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// The demo application's gRPC side (the cluster suite's demo: a load
// generator calls a web frontend over HTTP/1.1, the frontend calls an API
// over gRPC, and one of the API's methods fails on purpose, so that the
// mesh's golden metrics have something to show).
//
// A backend with --grpc serves gRPC's test service, grpc.testing.TestService:
// EmptyCall always succeeds; UnaryCall fails with INTERNAL on every
// --fail-every'th call (0: never), a fixed share that a success rate
// can be checked against.
//
// A frontend with --grpc-upstream answers its HTTP requests by calling
// the upstream: /empty calls EmptyCall, any other path UnaryCall; a
// failed call is a 502 naming the gRPC status.

// testService is the gRPC backend.
type testService struct {
	testpb.UnimplementedTestServiceServer
	name      string
	failEvery int64
	calls     atomic.Int64
}

func (s *testService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (s *testService) UnaryCall(_ context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n := s.calls.Add(1)
	if s.failEvery > 0 && n%s.failEvery == 0 {
		return nil, status.Errorf(codes.Internal, "%s: call %d fails on purpose (every %d)", s.name, n, s.failEvery)
	}
	return &testpb.SimpleResponse{Username: s.name}, nil
}

// serveGRPC serves the test service on ln until the listener fails.
func serveGRPC(ln net.Listener, name string, failEvery int, errc chan<- error) *grpc.Server {
	s := grpc.NewServer(grpc.ConnectionTimeout(10 * time.Second))
	testpb.RegisterTestServiceServer(s, &testService{name: name, failEvery: int64(failEvery)})
	go func() { errc <- s.Serve(ln) }()
	return s
}

// grpcUpstream is a frontend's client of the gRPC backend.
type grpcUpstream struct {
	target string
	cc     *grpc.ClientConn
	client testpb.TestServiceClient
}

// dialUpstream connects lazily to target (host:port), as a Kubernetes
// client of a Service name does: through the pod's proxy, which balances
// the requests over the endpoints.
func dialUpstream(target string) (*grpcUpstream, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("--grpc-upstream %q: want host:port", target)
	}
	cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &grpcUpstream{target: target, cc: cc, client: testpb.NewTestServiceClient(cc)}, nil
}

// serve answers an HTTP request with one call to the upstream.
func (u *grpcUpstream) serve(name string, w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	marker := r.Header.Get("X-Marker")
	var method, who string
	var err error
	if strings.TrimSuffix(r.URL.Path, "/") == "/empty" {
		method = "EmptyCall"
		_, err = u.client.EmptyCall(ctx, &testpb.Empty{})
	} else {
		method = "UnaryCall"
		var resp *testpb.SimpleResponse
		resp, err = u.client.UnaryCall(ctx, &testpb.SimpleRequest{FillUsername: true})
		if err == nil {
			who = resp.GetUsername()
		}
	}
	if err != nil {
		st := status.Convert(err)
		http.Error(w, fmt.Sprintf("%s %s -> %s: %s: %s", name, marker, method, st.Code(), st.Message()), http.StatusBadGateway)
		return
	}
	fmt.Fprintf(w, "%s %s -> %s %s ok\n", name, marker, method, who)
}

// startupLoad is the load generator: requests to urls in turn, one every
// interval, from start until the process ends. Its counts are served on
// the control port's /load/counts.
func (a *app) startupLoad(ctx context.Context, urls []string, interval time.Duration) {
	a.mu.Lock()
	run := &loadRun{cancel: func() {}, done: make(chan struct{})}
	a.startup = run
	a.mu.Unlock()
	log.Printf("testapp %s: load on %s, one request every %s", a.name, strings.Join(urls, ", "), interval)
	go func() {
		defer close(run.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			code, body, err := get(ctx, a.client, urls[i%len(urls)], "load")
			if ctx.Err() != nil {
				return
			}
			a.mu.Lock()
			run.counts.add(code, body, err)
			a.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
}

// loadCounts serves the startup load's counts so far.
func (a *app) loadCounts(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.startup == nil {
		http.Error(w, "no load was started with --load", http.StatusConflict)
		return
	}
	c := a.startup.counts
	c.Codes = map[string]int{}
	for k, v := range a.startup.counts.Codes {
		c.Codes[k] = v
	}
	c.Errors = append([]string(nil), c.Errors...)
	writeJSON(w, c)
}

// parseLoad checks --load's URLs and --load-interval.
func parseLoad(list string, interval time.Duration) ([]string, error) {
	var urls []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if _, err := parseCall(map[string][]string{"url": {u}}); err != nil {
			return nil, fmt.Errorf("--load: %w", err)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("--load %q: want one or more http:// URLs, comma-separated", list)
	}
	if interval < 10*time.Millisecond || interval > time.Minute {
		return nil, fmt.Errorf("--load-interval %s: want 10ms..1m", interval)
	}
	return urls, nil
}
