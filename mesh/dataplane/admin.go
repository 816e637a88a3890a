package dataplane

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves the admin endpoints:
//
//	/live      200 while the process runs
//	/ready     200 with a certificate and every declared port's first
//	           policy, 503 with the reason otherwise (and at once on drain)
//	/metrics   Prometheus text
//	/shutdown  POST from a loopback client starts the drain; 404 unless
//	           WEFT_PROXY_ADMIN_SHUTDOWN is on
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
		if !fromLoopback(r) {
			http.Error(w, "shutdown is only accepted from loopback", http.StatusForbidden)
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
