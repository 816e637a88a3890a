package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
)

// Reasons the admin server refuses a connection (the reason label of
// tcp_refused_total, direction "admin").
const (
	refuseTooMany           = "too-many-connections" // the connection cap
	refuseTooManyFromClient = "too-many-from-client" // the cap per client address
)

// Fixed limits of the admin server (the timeouts and the connection cap
// are settings).
const (
	// adminWriteTimeout bounds writing one admin response (a /metrics
	// scrape included).
	adminWriteTimeout = 30 * time.Second
	// adminMaxHeaderBytes bounds an admin request head.
	adminMaxHeaderBytes = 16 << 10
	// adminMaxPerClient bounds the admin connections one client address
	// holds at once (a probe or a scrape needs one or two).
	adminMaxPerClient = 16
)

// adminServer is the HTTP server of the admin listener: every request
// must arrive whole within the header timeout (admin requests have no
// body), a response is written within adminWriteTimeout, and an idle
// keep-alive connection is closed after the idle timeout.
func (p *Proxy) adminServer() *http.Server {
	return &http.Server{
		Handler:           p.AdminHandler(),
		ReadHeaderTimeout: p.cfg.AdminHeaderTimeout,
		ReadTimeout:       p.cfg.AdminHeaderTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       p.cfg.AdminIdleTimeout,
		MaxHeaderBytes:    adminMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
}

// capAdmin caps the admin connections open at once, in all and per
// client address: one past a cap is closed as soon as it is accepted (and
// counted), never queued. A client holding many connections thus costs a
// bounded amount, and one address cannot take the slots the kubelet's
// probes and Prometheus need.
func (p *Proxy) capAdmin(l net.Listener) net.Listener {
	return &capListener{Listener: l, max: p.cfg.AdminMaxConnections, perClient: adminMaxPerClient,
		byClient: map[netip.Addr]int{}, refused: func(reason string) { p.m.Refuse("admin", reason) }}
}

type capListener struct {
	net.Listener
	max, perClient int
	refused        func(reason string)

	mu       sync.Mutex
	open     int
	byClient map[netip.Addr]int
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var client netip.Addr
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			client = ta.AddrPort().Addr().Unmap()
		}
		l.mu.Lock()
		reason := ""
		switch {
		case l.open >= l.max:
			reason = refuseTooMany
		case l.byClient[client] >= l.perClient:
			reason = refuseTooManyFromClient
		default:
			l.open++
			l.byClient[client]++
		}
		l.mu.Unlock()
		if reason != "" {
			l.refused(reason)
			c.Close()
			continue
		}
		return &capConn{Conn: c, release: sync.OnceFunc(func() {
			l.mu.Lock()
			l.open--
			if l.byClient[client]--; l.byClient[client] <= 0 {
				delete(l.byClient, client)
			}
			l.mu.Unlock()
		})}, nil
	}
}

type capConn struct {
	net.Conn
	release func()
}

func (c *capConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// AdminHandler serves the admin endpoints:
//
//	/live      200 while the process runs
//	/ready     200 with a certificate and every declared port's first
//	           policy, 503 with the reason otherwise (and at once on drain)
//	/metrics   Prometheus text
//	/shutdown  POST from a loopback client that reached the admin server
//	           directly (not through a connection the proxy dialled)
//	           starts the drain; 404 unless WEFT_PROXY_ADMIN_SHUTDOWN is on
func (p *Proxy) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "live")
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := p.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/shutdown", func(w http.ResponseWriter, r *http.Request) {
		if !p.cfg.AdminShutdown {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		if !fromLoopback(r) || p.paths.Dialled(r.RemoteAddr) {
			// A connection the proxy dialled itself carries a request it
			// forwarded for a client elsewhere, whatever its address.
			http.Error(w, "shutdown is only accepted from loopback clients that reach the admin server directly", http.StatusForbidden)
			return
		}
		p.log.Info("shutdown requested through the admin server")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "shutting down")
		p.Shutdown()
	})
	return mux
}

// fromLoopback checks the socket peer (never a header).
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// serveTap serves the tap API on l until ctx ends (internal/tap). The
// data path calls tap only when p.tap.On(), so a proxy without open taps
// pays one atomic load per request; with taps open and none taking the
// request, building and matching the view allocates nothing
// (BenchmarkTapDataPath shows it).
func (p *Proxy) serveTap(ctx context.Context, l net.Listener) {
	p.tap.Serve(ctx, l, tap.ServerConfig{
		TLS:              tapServerTLS(p.id, p.now),
		Identities:       p.cfg.TapIdentities,
		Identity:         PeerIdentity,
		HandshakeTimeout: p.cfg.TapHandshakeTimeout,
		Refused:          func(reason string) { p.m.Refuse("tap", reason) },
		Log:              p.log,
	})
}
