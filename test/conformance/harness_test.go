package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

const (
	clientID = "client.shop.serviceaccount.identity.linkerd.cluster.local"
	serverID = "server.shop.serviceaccount.identity.linkerd.cluster.local"
)

// need finds a tool: the env variable, then PATH, then the given paths.
// Missing, it skips the test, or fails it under CI=true.
func need(t *testing.T, env, name string, more ...string) string {
	t.Helper()
	candidates := []string{}
	if v := os.Getenv(env); v != "" {
		candidates = append(candidates, v)
	}
	if p, err := exec.LookPath(name); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, more...)
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	msg := fmt.Sprintf("%s not found (set %s or install it; see package doc)", name, env)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func gopathBin() string {
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin")
}

type proxy struct {
	p      *dataplane.Proxy
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, cfg dataplane.Config, id dataplane.Identity, res dataplane.Resolver, pol dataplane.InboundPolicies, ls dataplane.Listeners, opts ...dataplane.Option) *proxy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := dataplane.New(ctx, cfg, id, res, pol, opts...)
	require.NoError(t, err)
	pr := &proxy{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { pr.done <- p.Run(ctx, ls) }()
	testutil.Eventually(t, 5*time.Second, func() bool {
		err := p.Ready()
		return err == nil || !strings.Contains(err.Error(), "not running")
	}, "proxy running")
	t.Cleanup(func() {
		cancel()
		select {
		case <-pr.done:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return pr
}

// mesh is the set of listeners the conformance tools are pointed at, in
// front of an application on appPort.
type mesh struct {
	// outbound is the client proxy's listener for the application's
	// destination: traffic crosses both proxies over mutual TLS.
	outbound string
	// inbound is an inbound listener reached in cleartext, as an unmeshed
	// client reaches a meshed pod.
	inbound string
	// client and server are the proxies on either side of the mesh hop.
	client, server *dataplane.Proxy
}

// requests sums request_total of a proxy for one direction, counting only
// series with mesh TLS when tls is set.
func requests(t *testing.T, p *dataplane.Proxy, direction string, tls bool) float64 {
	mfs, err := p.Registry().Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "request_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["direction"] == direction && (!tls || labels["tls"] == "true") {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func startMesh(t *testing.T, appPort uint16) *mesh {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	identity := func(name string) dataplane.Identity {
		leaf := issuer.Leaf(t, testutil.CertOptions{Name: name})
		id, err := dataplane.NewStaticIdentity(name, leaf.TLS, testutil.Pool(anchor))
		require.NoError(t, err)
		return id
	}
	cfg := dataplane.DefaultConfig()
	cfg.ShutdownGracePeriod = time.Second
	allow, err := dataplane.DefaultInboundServer(dataplane.AllUnauthenticated, nil)
	require.NoError(t, err)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(appPort), allow)

	inB := testutil.Listen(t)
	server := run(t, cfg, identity(serverID), nil, pols, dataplane.Listeners{Inbound: inB, Admin: testutil.Listen(t)})

	plain := testutil.Listen(t)
	app := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), appPort)
	run(t, cfg, identity(serverID), nil, pols, dataplane.Listeners{Inbound: plain, Admin: testutil.Listen(t)},
		dataplane.WithOriginalDestination(func(net.Conn) (netip.AddrPort, error) { return app, nil }))

	res := dataplane.NewMemoryResolver()
	target := fmt.Sprintf("app.shop.svc.cluster.local:%d", appPort)
	res.Set(target, dataplane.Endpoint{Addr: app, Identity: serverID, OpaqueTransportPort: uint16(inB.Addr().(*net.TCPAddr).Port)})
	mapped := testutil.Listen(t)
	client := run(t, cfg, identity(clientID), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: target}}, Admin: testutil.Listen(t)})
	return &mesh{outbound: mapped.Addr().String(), inbound: plain.Addr().String(), client: client.p, server: server.p}
}

// startH2App serves HTTP/1.1 and h2c with a small fixed answer, after
// reading the request body and a short think time, as an application
// does. (An application that answers before reading the body, or at once,
// races h2spec's follow-up frames on the same stream: the stream is
// already closed when they arrive.)
func startH2App(t *testing.T) uint16 {
	// Large enough for h2spec's flow-control cases, which need a response
	// bigger than the window they set.
	body := []byte(strings.Repeat("weft conformance\n", 4096))
	ln := testutil.Listen(t)
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write(body)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Log(err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
