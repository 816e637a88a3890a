package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	netpb "github.com/weftmesh/weft/apis/proxy/net"
	tappb "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/dashboard"
)

// tapServer is a gRPC Tap service that reports n requests to /items and
// then holds the stream open until the client leaves.
type tapServer struct {
	tappb.UnimplementedTapServer
	n   int
	got chan *tappb.ObserveRequest
}

func (s *tapServer) Observe(req *tappb.ObserveRequest, stream grpc.ServerStreamingServer[tappb.TapEvent]) error {
	s.got <- req
	src := &netpb.TcpAddress{Ip: &netpb.IPAddress{Ip: &netpb.IPAddress_Ipv4{Ipv4: 0x7f000103}}, Port: 40000}
	dst := &netpb.TcpAddress{Ip: &netpb.IPAddress{Ip: &netpb.IPAddress_Ipv4{Ipv4: 0x7f000102}}, Port: 8080}
	for i := 0; i < s.n; i++ {
		id := &tappb.TapEvent_Http_StreamId{Base: 1, Stream: uint64(i)}
		for _, h := range []*tappb.TapEvent_Http{
			{Event: &tappb.TapEvent_Http_RequestInit_{RequestInit: &tappb.TapEvent_Http_RequestInit{Id: id, Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}, Authority: "api:8080", Path: "/items<script>"}}},
			{Event: &tappb.TapEvent_Http_ResponseInit_{ResponseInit: &tappb.TapEvent_Http_ResponseInit{Id: id, HttpStatus: 200, SinceRequestInit: durationpb.New(time.Millisecond)}}},
			{Event: &tappb.TapEvent_Http_ResponseEnd_{ResponseEnd: &tappb.TapEvent_Http_ResponseEnd{Id: id, SinceRequestInit: durationpb.New(2 * time.Millisecond), ResponseBytes: 10}}},
		} {
			ev := &tappb.TapEvent{Source: src, Destination: dst, ProxyDirection: tappb.TapEvent_INBOUND,
				SourceMeta: &tappb.TapEvent_EndpointMeta{Labels: map[string]string{"tls": "true"}}, Event: &tappb.TapEvent_Http_{Http: h}}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
	<-stream.Context().Done()
	return nil
}

// tapSource is fakeSource plus a tap of each proxy over real gRPC.
type tapSource struct {
	fakeSource
	conn *grpc.ClientConn
}

func (s *tapSource) Tap(ctx context.Context, t viz.Target, req viz.TapRequest) (viz.EventStream, error) {
	ts, _ := s.Targets(ctx)
	return viz.GRPCTap(ctx, s.conn, t, req, viz.NewAddresses(ts))
}

func TestDashboardTapsEveryProxyAndStreamsRequestsAndTopPaths(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	ts := &tapServer{n: 5, got: make(chan *tappb.ObserveRequest, 4)}
	tappb.RegisterTapServer(srv, ts)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	src := &tapSource{conn: conn}
	d, err := dashboard.New(src, dashboard.WithInterval(100*time.Millisecond), dashboard.WithWindow(200*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Both proxies are tapped, and their 2 x 5 requests reach the top table.
	testutil.Eventually(t, 0, func() bool {
		f := d.Latest()
		return f != nil && f.Tap.Streams == 2 && len(f.Top) == 1 && f.Top[0].Count == 10
	}, "two taps and the top path")
	f := d.Latest()
	assert.True(t, f.Tap.Enabled)
	assert.Equal(t, "/items<script>", f.Top[0].Path)
	assert.Equal(t, 1.0, f.Top[0].SuccessRate)
	req := <-ts.got
	assert.NotNil(t, req.GetMatch().GetAll(), "an empty conjunction: every request")

	// A new stream gets the recent tap events.
	hs := http.Server{Handler: d.Handler()}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = hs.Serve(hl) }()
	defer hs.Close()
	r, err := http.NewRequestWithContext(testutil.Context(t, 0), http.MethodGet, "http://"+hl.Addr().String()+"/api/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line != "event: tap\n" {
			continue
		}
		data, err := br.ReadString('\n')
		require.NoError(t, err)
		var events []viz.Event
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &events))
		require.NotEmpty(t, events)
		assert.Equal(t, "inbound", events[0].Direction)
		break
	}
}

// resourceTapSource is fakeSource plus a tap API that taps whole
// resources, as a cluster's does; it records what was tapped.
type resourceTapSource struct {
	fakeSource
	conn *grpc.ClientConn
	mu   sync.Mutex
	asks []string
}

func (s *resourceTapSource) Tap(context.Context, viz.Target, viz.TapRequest) (viz.EventStream, error) {
	return nil, errors.New("taps whole resources only")
}

func (s *resourceTapSource) TapResource(ctx context.Context, r viz.Resource, req viz.TapRequest, _ func(string)) (viz.EventStream, error) {
	s.mu.Lock()
	s.asks = append(s.asks, r.String()+" in "+r.Namespace)
	s.mu.Unlock()
	ts, _ := s.Targets(ctx)
	return viz.GRPCTap(ctx, s.conn, ts[0], req, viz.NewAddresses(ts))
}

func TestDashboardTapsANamespaceOnceThroughAResourceTapSource(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	ts := &tapServer{n: 3, got: make(chan *tappb.ObserveRequest, 4)}
	tappb.RegisterTapServer(srv, ts)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	src := &resourceTapSource{conn: conn}
	d, err := dashboard.New(src, dashboard.WithInterval(100*time.Millisecond), dashboard.WithWindow(200*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	testutil.Eventually(t, 0, func() bool {
		f := d.Latest()
		return f != nil && f.Tap.Streams == 1 && len(f.Top) == 1 && f.Top[0].Count == 3
	}, "one tap for the namespace of both pods, and its requests in the top table")
	src.mu.Lock()
	defer src.mu.Unlock()
	assert.Equal(t, []string{"namespace in shop"}, src.asks, "the two pods of shop share one tap (a cluster bounds the taps per user)")
}
