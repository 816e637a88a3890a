package dataplane_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

const (
	idA = "client.shop.serviceaccount.identity.linkerd.cluster.local"
	idB = "server.shop.serviceaccount.identity.linkerd.cluster.local"
	idC = "other.shop.serviceaccount.identity.linkerd.cluster.local"
)

type pki struct {
	anchor *testutil.CA
	issuer *testutil.CA
}

func newPKI(t testing.TB) *pki {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	return &pki{anchor: anchor, issuer: anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})}
}

func (p *pki) identity(t testing.TB, name string) *dataplane.StaticIdentity {
	leaf := p.issuer.Leaf(t, testutil.CertOptions{Name: name})
	id, err := dataplane.NewStaticIdentity(name, leaf.TLS, testutil.Pool(p.anchor))
	require.NoError(t, err)
	return id
}

// echoApp is an application that echoes every byte and counts connections.
type echoApp struct {
	ln       net.Listener
	accepted atomic.Int32
	banner   string
}

func startEcho(t testing.TB, banner string) *echoApp {
	a := &echoApp{ln: testutil.Listen(t), banner: banner}
	go func() {
		for {
			c, err := a.ln.Accept()
			if err != nil {
				return
			}
			a.accepted.Add(1)
			go func() {
				defer c.Close()
				if a.banner != "" {
					io.WriteString(c, a.banner)
				}
				io.Copy(c, c)
			}()
		}
	}()
	return a
}

func (a *echoApp) port() uint16 { return uint16(a.ln.Addr().(*net.TCPAddr).Port) }

type running struct {
	proxy  *dataplane.Proxy
	ls     dataplane.Listeners
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

func testConfig() dataplane.Config {
	cfg := dataplane.DefaultConfig()
	// Generous: a client that has bytes to send sends them at once, but a
	// busy machine may delay it, and a client silent until the timeout is
	// refused. Tests of the timeout itself set a shorter one.
	cfg.DetectTimeout = 5 * time.Second
	cfg.ShutdownGracePeriod = 2 * time.Second
	return cfg
}

func startProxy(t testing.TB, cfg dataplane.Config, id dataplane.Identity, res dataplane.Resolver, pol dataplane.InboundPolicies, ls dataplane.Listeners, opts ...dataplane.Option) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := dataplane.New(ctx, cfg, id, res, pol, opts...)
	require.NoError(t, err)
	if ls.Admin == nil {
		ls.Admin = testutil.Listen(t)
	}
	r := &running{proxy: p, ls: ls, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = p.Run(ctx, ls)
		close(r.done)
	}()
	testutil.Eventually(t, 5*time.Second, func() bool {
		err := p.Ready()
		return err == nil || !strings.Contains(err.Error(), "not running")
	}, "proxy running")
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return r
}

func (r *running) stop(t testing.TB) {
	r.cancel()
	select {
	case <-r.done:
		require.NoError(t, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("proxy did not stop")
	}
}

func (r *running) admin(t testing.TB, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.ls.Admin.Addr().String() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of the series whose line starts with name and
// contains every label (formatted name="value"), or -1.
func (r *running) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	_, body := r.admin(t, "/metrics")
	return sumMetric(body, name, labels...)
}

// sumMetric sums the samples of name in a /metrics body whose lines
// contain every one of labels (each written as `key="value"`); -1 when no
// line matches.
func sumMetric(body, name string, labels ...string) float64 {
	sum, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
			found = true
		}
	}
	if !found {
		return -1
	}
	return sum
}

func allowOnly(ids ...string) *inbound.Server {
	p := &inbound.Authn_PermitMeshTLS_PermitClientIdentities{}
	for _, id := range ids {
		p.Identities = append(p.Identities, &inbound.Identity{Name: id})
	}
	return &inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{}}},
		Authorizations: []*inbound.Authz{{
			Networks: []*inbound.Network{
				{Net: authz.PrefixToProto(netip.MustParsePrefix("0.0.0.0/0"))}, {Net: authz.PrefixToProto(netip.MustParsePrefix("::/0"))},
			},
			Authentication: &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
				Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: p},
			}}},
			Labels: map[string]string{"name": "allow-" + strings.Split(ids[0], ".")[0]},
		}},
	}
}

func defaultServer(t *testing.T, name string) *inbound.Server {
	s, err := dataplane.DefaultInboundServer(name, nil)
	require.NoError(t, err)
	return s
}

// tap is a TCP relay that records every byte going through it.
type tap struct {
	ln  net.Listener
	mu  sync.Mutex
	rec bytes.Buffer
}

func startTap(t testing.TB, to string) *tap {
	tp := &tap{ln: testutil.Listen(t)}
	go func() {
		for {
			c, err := tp.ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.DialTimeout("tcp", to, 2*time.Second)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { io.Copy(tp.writer(s), c); s.(*net.TCPConn).CloseWrite() }()
				io.Copy(tp.writer(c), s)
			}()
		}
	}()
	return tp
}

type recWriter struct {
	tp *tap
	w  io.Writer
}

func (r recWriter) Write(b []byte) (int, error) {
	r.tp.mu.Lock()
	r.tp.rec.Write(b)
	r.tp.mu.Unlock()
	return r.w.Write(b)
}

func (tp *tap) writer(w io.Writer) io.Writer { return recWriter{tp, w} }

func (tp *tap) bytes() []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]byte(nil), tp.rec.Bytes()...)
}

func (tp *tap) port() uint16 { return uint16(tp.ln.Addr().(*net.TCPAddr).Port) }

// opaque makes msg a message detection classifies as opaque at once, as a
// binary protocol's first bytes are (text of token characters only could
// still become an HTTP request line and waits for the detect timeout).
func opaque(msg string) string { return "\x00" + msg }

// echoOnce writes msg on a new connection to addr and reads the echo back.
func echoOnce(t *testing.T, addr, msg string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	n, err := io.ReadFull(c, buf)
	return string(buf[:n]), err
}

// pair is client proxy A (explicit mapping) -> server proxy B -> echo app.
type pair struct {
	pki        *pki
	app        *echoApp
	a, b       *running
	resolver   *dataplane.MemoryResolver
	policies   *dataplane.MemoryPolicies
	tap        *tap
	clientAddr string
	target     string
}

type pairOptions struct {
	serverPolicy *inbound.Server
	endpointID   string // identity discovery announces for B (default idB)
	banner       string
	cfgA, cfgB   func(*dataplane.Config)
	idA          dataplane.Identity
	noTap        bool
	app          *echoApp
}

func startPair(t testing.TB, o pairOptions) *pair {
	t.Helper()
	app := o.app
	if app == nil {
		app = startEcho(t, o.banner)
	}
	pr := &pair{pki: newPKI(t), app: app, resolver: dataplane.NewMemoryResolver(), policies: dataplane.NewMemoryPolicies()}
	if o.serverPolicy == nil {
		o.serverPolicy = allowOnly(idA)
	}
	if o.endpointID == "" {
		o.endpointID = idB
	}
	pr.policies.Set(uint32(pr.app.port()), o.serverPolicy)

	cfgB := testConfig()
	if o.cfgB != nil {
		o.cfgB(&cfgB)
	}
	inB := testutil.Listen(t)
	pr.b = startProxy(t, cfgB, pr.pki.identity(t, idB), nil, pr.policies, dataplane.Listeners{Inbound: inB})
	hop := uint16(inB.Addr().(*net.TCPAddr).Port)
	if !o.noTap {
		pr.tap = startTap(t, inB.Addr().String())
		hop = pr.tap.port()
	}

	pr.target = fmt.Sprintf("server.shop.svc.cluster.local:%d", pr.app.port())
	pr.resolver.Set(pr.target, dataplane.Endpoint{
		Addr:                netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), pr.app.port()),
		Identity:            o.endpointID,
		OpaqueTransportPort: hop,
	})
	cfgA := testConfig()
	if o.cfgA != nil {
		o.cfgA(&cfgA)
	}
	mapped := testutil.Listen(t)
	id := o.idA
	if id == nil {
		id = pr.pki.identity(t, idA)
	}
	pr.a = startProxy(t, cfgA, id, pr.resolver, nil, dataplane.Listeners{
		Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: pr.target}},
	})
	pr.clientAddr = mapped.Addr().String()
	return pr
}
