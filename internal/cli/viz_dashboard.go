package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"

	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/dashboard"
	vizlocal "github.com/weftmesh/weft/mesh/viz/local"
)

// dashboardMaxConns bounds the connections the dashboard's listener
// accepts at once.
const dashboardMaxConns = 128

// listenDashboard opens the dashboard's listener (before anything else
// starts, so that a bad address fails at once).
func listenDashboard(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, errors.New("the dashboard address is empty")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return l, nil
}

// serveDashboard serves d on l until ctx ends and returns the URL and a
// channel that reports the server's end. The dashboard's Run shares ctx.
func serveDashboard(ctx context.Context, l net.Listener, d *dashboard.Dashboard) (string, <-chan error) {
	srv := &http.Server{
		Handler:           d.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	done := make(chan error, 1)
	go func() {
		runDone := make(chan struct{})
		go func() { _ = d.Run(ctx); close(runDone) }()
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			srv.Close()
		}()
		err := srv.Serve(netutil.LimitListener(l, dashboardMaxConns))
		<-runDone
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	host := l.Addr().String()
	if h, p, err := net.SplitHostPort(host); err == nil && (h == "::" || h == "0.0.0.0") {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	return "http://" + host + "/", done
}

// closeWhenDone closes src's connections (a TLSTap's tap connections)
// once ctx ends.
func closeWhenDone(ctx context.Context, src viz.Source) {
	if c, ok := src.(io.Closer); ok {
		context.AfterFunc(ctx, func() { _ = c.Close() })
	}
}

// localDashboard builds the dashboard of a running local mesh; its tap
// connections close when ctx ends.
func localDashboard(ctx context.Context, src viz.Source, ex *vizlocal.Explainer) (*dashboard.Dashboard, error) {
	closeWhenDone(ctx, src)
	manifests := strings.Join(ex.Manifests(), " --manifests ")
	return dashboard.New(src,
		dashboard.WithExplainer(ex),
		dashboard.WithExplainHint(func(d viz.DeniedPair) string { return d.ExplainCommand(manifests) }))
}

func setupVizDashboard(fs *FlagSet) Action {
	var f vizFlags
	f.register(fs, "table")
	// The dashboard reads the proxies only: --prometheus is not offered,
	// and refused with a clear message when given anyway.
	_ = fs.MarkHidden("prometheus")
	addr := fs.String("addr", "127.0.0.1:50750", "address to serve the dashboard on (loopback by default: it has no authentication)")
	interval := fs.Duration("interval", 2*time.Second, "how often the proxies are read")
	window := fs.Duration("window", 10*time.Second, "span the figures cover")
	hosts := fs.String("allowed-hosts", "", "comma-separated host names the page may be reached by, besides IP addresses and localhost")
	return func(ctx context.Context, args []string, stdio IO) int {
		if len(args) != 0 {
			return vizFail(stdio, "dashboard", fmt.Errorf("unexpected argument %q", args[0]), ExitUsage)
		}
		if f.prometheus != "" {
			return vizFail(stdio, "dashboard", errors.New("the dashboard reads the proxies directly; --prometheus is not supported"), ExitUsage)
		}
		// A cluster's dashboard shows every namespace unless -n names
		// one: "default" rarely holds a meshed workload.
		if f.local == "" && !fs.Changed("namespace") {
			f.all = true
		}
		src, err := f.source()
		if err != nil {
			return vizFail(stdio, "dashboard", err, ExitFailure)
		}
		closeWhenDone(ctx, src)
		opts := []dashboard.Option{dashboard.WithInterval(*interval), dashboard.WithWindow(*window)}
		if *hosts != "" {
			opts = append(opts, dashboard.WithAllowedHosts(strings.Split(*hosts, ",")...))
		}
		if f.local != "" {
			ex := vizlocal.NewDirExplainer(f.local, "")
			manifests := localManifests(f.local)
			opts = append(opts, dashboard.WithExplainer(ex),
				dashboard.WithExplainHint(func(d viz.DeniedPair) string { return d.ExplainCommand(manifests) }))
		}
		d, err := dashboard.New(src, opts...)
		if err != nil {
			return vizFail(stdio, "dashboard", err, ExitUsage)
		}
		l, err := listenDashboard(*addr)
		if err != nil {
			return vizFail(stdio, "dashboard", err, ExitFailure)
		}
		url, done := serveDashboard(ctx, l, d)
		fmt.Fprintf(stdio.Stdout, "weft viz dashboard: serving %s (Ctrl-C to stop)\n", url)
		if err := <-done; err != nil {
			return vizFail(stdio, "dashboard", err, ExitFailure)
		}
		return ExitOK
	}
}
