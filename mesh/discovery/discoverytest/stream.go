package discoverytest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/discovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Timeout bounds every wait in this package.
const Timeout = 10 * time.Second

// Serve mounts a Destination server for src on a gRPC server listening on
// a free loopback port and returns a client connection to it. Both stop
// when the test ends.
func Serve(t testing.TB, src discovery.Source, opts ...discovery.Option) *grpc.ClientConn {
	t.Helper()
	srv, err := discovery.NewServer(src, opts...)
	if err != nil {
		t.Fatalf("discoverytest: new server: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("discoverytest: listen: %v", err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("discoverytest: dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-done
	})
	return conn
}

// State is what a client knows of a destination after applying the
// messages of a Get stream.
type State struct {
	// Messages counts the messages applied.
	Messages int
	// Exists is the last no_endpoints.exists, or true after any add.
	Exists bool
	// Endpoints are the current endpoints by address.
	Endpoints map[netip.AddrPort]discovery.Endpoint
}

// Has reports whether the state holds an endpoint at addr ("ip:port").
func (s State) Has(addr string) bool {
	_, ok := s.Endpoints[netip.MustParseAddrPort(addr)]
	return ok
}

// Get returns the endpoint at addr ("ip:port").
func (s State) Get(addr string) (discovery.Endpoint, bool) {
	e, ok := s.Endpoints[netip.MustParseAddrPort(addr)]
	return e, ok
}

// EndpointStream reads a Destination.Get stream in the background.
type EndpointStream struct {
	msgs   chan *pb.Update
	errc   chan error
	cancel context.CancelFunc
	state  State
}

// Get opens a Destination.Get stream for path with a context token.
func Get(t testing.TB, conn grpc.ClientConnInterface, path, token string) *EndpointStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: path, ContextToken: token})
	if err != nil {
		cancel()
		t.Fatalf("discoverytest: Get %s: %v", path, err)
	}
	s := &EndpointStream{msgs: make(chan *pb.Update, 64), errc: make(chan error, 1), cancel: cancel,
		state: State{Endpoints: map[netip.AddrPort]discovery.Endpoint{}}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := st.Recv()
			if err != nil {
				s.errc <- err
				return
			}
			select {
			case s.msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// Next returns the next message, applied to the state, failing the test
// if none comes within Timeout or the stream fails.
func (s *EndpointStream) Next(t testing.TB) *pb.Update {
	t.Helper()
	select {
	case m := <-s.msgs:
		s.apply(m)
		return m
	case err := <-s.errc:
		t.Fatalf("discoverytest: stream failed: %v", err)
	case <-time.After(Timeout):
		t.Fatalf("discoverytest: no message within %s", Timeout)
	}
	return nil
}

// Quiet fails the test if a message arrives within d.
func (s *EndpointStream) Quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case m := <-s.msgs:
		t.Fatalf("discoverytest: unexpected message %v", m)
	case <-time.After(d):
	}
}

// Err waits for the stream to fail and returns the error.
func (s *EndpointStream) Err(t testing.TB) error {
	t.Helper()
	for {
		select {
		case m := <-s.msgs:
			s.apply(m)
		case err := <-s.errc:
			return err
		case <-time.After(Timeout):
			t.Fatalf("discoverytest: stream did not fail within %s", Timeout)
			return nil
		}
	}
}

// State returns what the messages read so far add up to.
func (s *EndpointStream) State() State { return s.state }

// WaitFor reads messages until cond holds for the state, failing the test
// after Timeout with what.
func (s *EndpointStream) WaitFor(t testing.TB, what string, cond func(State) bool) State {
	t.Helper()
	deadline := time.After(Timeout)
	for !cond(s.state) {
		select {
		case m := <-s.msgs:
			s.apply(m)
		case err := <-s.errc:
			t.Fatalf("discoverytest: stream failed waiting for %s: %v (state %s)", what, err, s.state)
		case <-deadline:
			t.Fatalf("discoverytest: timed out after %s waiting for %s (state %s)", Timeout, what, s.state)
		}
	}
	return s.state
}

func (s *EndpointStream) apply(m *pb.Update) {
	s.state.Messages++
	switch u := m.GetUpdate().(type) {
	case *pb.Update_Add:
		s.state.Exists = true
		for _, wa := range u.Add.GetAddrs() {
			if e, err := discovery.EndpointFromProto(wa); err == nil {
				s.state.Endpoints[e.Addr] = e
			}
		}
	case *pb.Update_Remove:
		for _, a := range u.Remove.GetAddrs() {
			if ap, err := discovery.TCPAddressFromProto(a); err == nil {
				delete(s.state.Endpoints, ap)
			}
		}
	case *pb.Update_NoEndpoints:
		s.state.Exists = u.NoEndpoints.GetExists()
		s.state.Endpoints = map[netip.AddrPort]discovery.Endpoint{}
	}
}

func (s State) String() string {
	return fmt.Sprintf("{messages: %d, exists: %v, endpoints: %d}", s.Messages, s.Exists, len(s.Endpoints))
}

// ProfileStream reads a Destination.GetProfile stream in the background.
type ProfileStream struct {
	msgs   chan *pb.DestinationProfile
	errc   chan error
	cancel context.CancelFunc
	last   *pb.DestinationProfile
}

// GetProfile opens a Destination.GetProfile stream for path with a
// context token.
func GetProfile(t testing.TB, conn grpc.ClientConnInterface, path, token string) *ProfileStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pb.NewDestinationClient(conn).GetProfile(ctx, &pb.GetDestination{Scheme: "k8s", Path: path, ContextToken: token})
	if err != nil {
		cancel()
		t.Fatalf("discoverytest: GetProfile %s: %v", path, err)
	}
	s := &ProfileStream{msgs: make(chan *pb.DestinationProfile, 64), errc: make(chan error, 1), cancel: cancel}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := st.Recv()
			if err != nil {
				s.errc <- err
				return
			}
			select {
			case s.msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// Next returns the next profile, failing the test if none comes within
// Timeout.
func (s *ProfileStream) Next(t testing.TB) *pb.DestinationProfile {
	t.Helper()
	select {
	case m := <-s.msgs:
		s.last = m
		return m
	case err := <-s.errc:
		t.Fatalf("discoverytest: profile stream failed: %v", err)
	case <-time.After(Timeout):
		t.Fatalf("discoverytest: no profile within %s", Timeout)
	}
	return nil
}

// Err waits for the stream to fail and returns the error.
func (s *ProfileStream) Err(t testing.TB) error {
	t.Helper()
	for {
		select {
		case m := <-s.msgs:
			s.last = m
		case err := <-s.errc:
			return err
		case <-time.After(Timeout):
			t.Fatalf("discoverytest: profile stream did not fail within %s", Timeout)
			return nil
		}
	}
}

// WaitFor reads profiles until cond holds for the latest, failing the
// test after Timeout with what.
func (s *ProfileStream) WaitFor(t testing.TB, what string, cond func(*pb.DestinationProfile) bool) *pb.DestinationProfile {
	t.Helper()
	deadline := time.After(Timeout)
	for s.last == nil || !cond(s.last) {
		select {
		case m := <-s.msgs:
			s.last = m
		case err := <-s.errc:
			t.Fatalf("discoverytest: profile stream failed waiting for %s: %v", what, err)
		case <-deadline:
			t.Fatalf("discoverytest: timed out after %s waiting for %s (last %v)", Timeout, what, s.last)
		}
	}
	return s.last
}
