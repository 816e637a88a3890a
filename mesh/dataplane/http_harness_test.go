package dataplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// seen is what the HTTP application recorded about one request.
type seen struct {
	Method     string
	RequestURI string
	Proto      string
	Host       string
	Header     http.Header
	Body       string
}

// httpApp is an application speaking HTTP/1.1 and h2c on one port:
//
//	/echo           answers with the request body
//	/status/NNN     answers NNN
//	/headers        answers the request header as JSON
//	/sleep?d=DUR    waits DUR (or until the client goes away), then 200
//	/stream?n=N     writes N lines, flushing each
//	/trailers       answers with a trailer X-Checksum
//	/big?n=BYTES    answers BYTES bytes
//	anything else   200 "ok"
type httpApp struct {
	srv      *http.Server
	ln       net.Listener
	requests atomic.Int32
	accepted atomic.Int32 // connections accepted
	open     atomic.Int32 // connections open now
	mu       sync.Mutex
	log      []seen
	handler  http.HandlerFunc // overrides the routes above when set
}

// startHTTPApp starts the application; each of configure may change its
// server (an idle timeout, say) before it serves.
func startHTTPApp(t testing.TB, configure ...func(*http.Server)) *httpApp {
	a := &httpApp{ln: testutil.Listen(t)}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), Protocols: &protos, ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				a.accepted.Add(1)
				a.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				a.open.Add(-1)
			}
		}}
	for _, c := range configure {
		c(a.srv)
	}
	go a.srv.Serve(a.ln)
	t.Cleanup(func() { a.srv.Close() })
	return a
}

func (a *httpApp) port() uint16 { return uint16(a.ln.Addr().(*net.TCPAddr).Port) }

func (a *httpApp) last() seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.log) == 0 {
		return seen{}
	}
	return a.log[len(a.log)-1]
}

func (a *httpApp) serve(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	var body []byte
	if r.URL.Path != "/echo" && r.URL.Path != "/stream-echo" {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	}
	a.mu.Lock()
	a.log = append(a.log, seen{Method: r.Method, RequestURI: r.RequestURI, Proto: r.Proto, Host: r.Host, Header: r.Header.Clone(), Body: string(body)})
	a.mu.Unlock()
	if a.handler != nil {
		a.handler(w, r)
		return
	}
	switch {
	case r.URL.Path == "/echo":
		w.Header().Set("Content-Type", "application/octet-stream")
		io.Copy(w, r.Body)
	case strings.HasPrefix(r.URL.Path, "/status/"):
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d\n", code)
	case r.URL.Path == "/headers":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r.Header)
	case r.URL.Path == "/sleep":
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "slept\n")
	case r.URL.Path == "/stream":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	case r.URL.Path == "/trailers":
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "abc123")
	case r.URL.Path == "/big":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		chunk := strings.Repeat("x", 32<<10)
		for n > 0 {
			k := min(n, len(chunk))
			io.WriteString(w, chunk[:k])
			n -= k
		}
	default:
		io.WriteString(w, "ok\n")
	}
}

// httpPair is client proxy A (mapped listener) -> mesh TLS -> server proxy
// B -> httpApp.
type httpPair struct {
	pki        *pki
	app        *httpApp
	a, b       *running
	resolver   *dataplane.MemoryResolver
	policies   *dataplane.MemoryPolicies
	outbound   *dataplane.MemoryOutboundPolicies
	profiles   *dataplane.MemoryProfiles
	clientAddr string
	target     string
	inB        *countingListener
	tapA, tapB net.Listener // set when the proxy's config names tappers
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

type httpPairOptions struct {
	serverPolicy *inbound.Server
	cfgA, cfgB   func(*dataplane.Config)
	app          *httpApp
	unmeshed     bool // discovery announces the app directly, without identity
	optsA, optsB []dataplane.Option
}

func startHTTPPair(t testing.TB, o httpPairOptions) *httpPair {
	t.Helper()
	app := o.app
	if app == nil {
		app = startHTTPApp(t)
	}
	hp := &httpPair{
		pki: newPKI(t), app: app, resolver: dataplane.NewMemoryResolver(), policies: dataplane.NewMemoryPolicies(),
		outbound: dataplane.NewMemoryOutboundPolicies(), profiles: dataplane.NewMemoryProfiles(),
	}
	if o.serverPolicy == nil {
		o.serverPolicy = allowOnly(idA)
	}
	hp.policies.Set(uint32(app.port()), o.serverPolicy)
	cfgB := testConfig()
	if o.cfgB != nil {
		o.cfgB(&cfgB)
	}
	hp.inB = &countingListener{Listener: testutil.Listen(t)}
	lsB := dataplane.Listeners{Inbound: hp.inB}
	if len(cfgB.TapIdentities) > 0 {
		lsB.Tap = testutil.Listen(t)
		hp.tapB = lsB.Tap
	}
	hp.b = startProxy(t, cfgB, hp.pki.identity(t, idB), nil, hp.policies, lsB, o.optsB...)
	hop := uint16(hp.inB.Addr().(*net.TCPAddr).Port)

	hp.target = fmt.Sprintf("web.shop.svc.cluster.local:%d", app.port())
	ep := dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), Identity: idB, OpaqueTransportPort: hop}
	if o.unmeshed {
		ep = dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port())}
	}
	hp.resolver.Set(hp.target, ep)
	cfgA := testConfig()
	if o.cfgA != nil {
		o.cfgA(&cfgA)
	}
	mapped := testutil.Listen(t)
	lsA := dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: hp.target}}}
	if len(cfgA.TapIdentities) > 0 {
		lsA.Tap = testutil.Listen(t)
		hp.tapA = lsA.Tap
	}
	hp.a = startProxy(t, cfgA, hp.pki.identity(t, idA), hp.resolver, nil, lsA,
		append([]dataplane.Option{dataplane.WithOutboundPolicies(hp.outbound), dataplane.WithProfiles(hp.profiles)}, o.optsA...)...)
	hp.clientAddr = mapped.Addr().String()
	return hp
}

// url returns the URL of path through the client proxy.
func (hp *httpPair) url(path string) string { return "http://" + hp.clientAddr + path }

// h1Client speaks HTTP/1.1 (keep-alive) to the proxy.
func h1Client() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// h2cClient speaks HTTP/2 with prior knowledge to the proxy.
func h2cClient() *http.Client {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DisableCompression: true}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t testing.TB, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// allowAll is a detect server admitting everyone.
func allowAll(t testing.TB) *inbound.Server {
	s, err := dataplane.DefaultInboundServer(dataplane.AllUnauthenticated, nil)
	require.NoError(t, err)
	return s
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func netipAddrPort(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

// establishedTo counts this machine's TCP sockets connected to addr (an
// IPv4 address) that are still established, from /proc/net/tcp. A socket
// whose peer closed leaves that state (CLOSE_WAIT) when its kernel has
// taken the FIN: a test that makes a server close a kept-alive connection
// waits for that before it sends the next request, since the server's
// own "closed" (a metric, a callback) comes before the FIN is delivered,
// and on a busy machine well before.
func establishedTo(t testing.TB, addr net.Addr) int {
	t.Helper()
	ta, ok := addr.(*net.TCPAddr)
	require.True(t, ok, "a TCP address")
	ip := ta.IP.To4()
	require.NotNil(t, ip, "an IPv4 address")
	// The kernel prints the address's bytes as a little-endian word.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	raw, err := os.ReadFile("/proc/net/tcp")
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && f[3] == "01" {
			n++
		}
	}
	return n
}
