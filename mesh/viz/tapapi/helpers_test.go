package tapapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

// frontProxy is the cluster side of the trust boundary: the requestheader
// client CA and the certificate the API server presents as front proxy.
type frontProxy struct {
	ca     *testutil.CA
	client *testutil.Leaf
	header *tapapi.RequestHeader
}

func newFrontProxy(t *testing.T) *frontProxy {
	ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "front-proxy-ca"})
	return &frontProxy{
		ca:     ca,
		client: ca.Leaf(t, testutil.CertOptions{Name: "front-proxy-client"}),
		header: &tapapi.RequestHeader{
			ClientCAs:           testutil.Pool(ca),
			AllowedNames:        []string{"front-proxy-client"},
			UsernameHeaders:     []string{"X-Remote-User"},
			GroupHeaders:        []string{"X-Remote-Group"},
			ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		},
	}
}

// authz records what it was asked and answers with allow.
type authz struct {
	mu    sync.Mutex
	asked []tapapi.Attributes
	allow func(tapapi.Attributes) (bool, string, error)
}

func (a *authz) Authorize(_ context.Context, at tapapi.Attributes) (bool, string, error) {
	a.mu.Lock()
	a.asked = append(a.asked, at)
	a.mu.Unlock()
	if a.allow == nil {
		return true, "", nil
	}
	return a.allow(at)
}

func (a *authz) calls() []tapapi.Attributes {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]tapapi.Attributes(nil), a.asked...)
}

// memBackend serves fixed targets; each tap yields events from next
// until it returns false, then ends with io.EOF (or blocks until ctx ends
// when hold is set).
type memBackend struct {
	targets []viz.Target
	next    func(t viz.Target, i int) (viz.Event, bool)
	hold    bool
	mu      sync.Mutex
	tapped  []string
	opened  chan string
	closed  chan string
}

func (b *memBackend) Targets(_ context.Context, ns string) ([]viz.Target, error) {
	var out []viz.Target
	for _, t := range b.targets {
		if t.Namespace == ns {
			out = append(out, t)
		}
	}
	return out, nil
}

func (b *memBackend) Tap(ctx context.Context, t viz.Target, _ viz.TapRequest, _ *viz.Addresses) (tapapi.Stream, error) {
	b.mu.Lock()
	b.tapped = append(b.tapped, t.Key())
	b.mu.Unlock()
	if b.opened != nil {
		b.opened <- t.Key()
	}
	return &memStream{b: b, t: t, ctx: ctx}, nil
}

func (b *memBackend) tappedPods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tapped...)
}

type memStream struct {
	b    *memBackend
	t    viz.Target
	ctx  context.Context
	i    int
	once sync.Once
}

func (s *memStream) Recv() (viz.Event, error) {
	if err := s.ctx.Err(); err != nil {
		return viz.Event{}, err // as a gRPC stream ends with its context
	}
	if s.b.next != nil {
		if e, ok := s.b.next(s.t, s.i); ok {
			s.i++
			return e, nil
		}
	}
	if s.b.hold {
		<-s.ctx.Done()
		return viz.Event{}, s.ctx.Err()
	}
	return viz.Event{}, io.EOF
}

func (s *memStream) Close() error {
	s.once.Do(func() {
		if s.b.closed != nil {
			s.b.closed <- s.t.Key()
		}
	})
	return nil
}

// requests makes n requests' worth of events (req, rsp, end) per tap.
func requests(n int) func(t viz.Target, i int) (viz.Event, bool) {
	return func(t viz.Target, i int) (viz.Event, bool) {
		if i >= 3*n {
			return viz.Event{}, false
		}
		kinds := []viz.EventKind{viz.RequestInit, viz.ResponseInit, viz.ResponseEnd}
		e := viz.Event{Kind: kinds[i%3], Proxy: t.Key(), Direction: "inbound", Stream: uint64(i / 3),
			Source: netip.MustParseAddrPort("10.0.0.9:40000"), Destination: netip.MustParseAddrPort(t.IP.String() + ":8080")}
		switch e.Kind {
		case viz.RequestInit:
			e.Method, e.Path = "GET", fmt.Sprintf("/items/%d", i/3)
		case viz.ResponseInit:
			e.Status = 200
		}
		return e, true
	}
}

func target(ns, pod, workload, ip string) viz.Target {
	return viz.Target{Namespace: ns, Pod: pod, WorkloadKind: "deployment", Workload: workload,
		IP: netip.MustParseAddr(ip), Identity: workload + "." + ns + ".serviceaccount.identity.weft.cluster.local", Tap: ip + ":4190"}
}

// apiServer starts the tap API on a real TLS listener that requests
// client certificates, as weft-controller tap serves it.
func apiServer(t *testing.T, s http.Handler) *httptest.Server {
	ts := httptest.NewUnstartedServer(s)
	ts.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// client dials ts presenting cert (none when nil), trusting ts.
func client(t *testing.T, ts *httptest.Server, cert *tls.Certificate) *http.Client {
	tr := ts.Client().Transport.(*http.Transport).Clone()
	if cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post sends a tap request as the API server would, with the user and
// group headers.
func post(t *testing.T, ctx context.Context, c *http.Client, url string, body any, user string, groups ...string) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("X-Remote-User", user)
	}
	for _, g := range groups {
		req.Header.Add("X-Remote-Group", g)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	return resp
}

// status reads a Kubernetes Status answer.
func status(t *testing.T, resp *http.Response) (code int, message string) {
	t.Helper()
	defer resp.Body.Close()
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Equal(t, "Status", st.Kind)
	require.Equal(t, resp.StatusCode, st.Code)
	return st.Code, st.Message
}

// messages reads a tap's answer to its end.
func messages(t *testing.T, r io.Reader) []tapapi.Message {
	t.Helper()
	var out []tapapi.Message
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, tapapi.MaxMessageBytes)
	for sc.Scan() {
		var m tapapi.Message
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		out = append(out, m)
	}
	require.NoError(t, sc.Err())
	return out
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

func peerTLS(ctx context.Context) (tls.ConnectionState, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return tls.ConnectionState{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return tls.ConnectionState{}, false
	}
	return ti.State, true
}
