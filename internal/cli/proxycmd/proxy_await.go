package proxycmd

import (
	"github.com/weftmesh/weft/internal/cli/core"

	"context"
	"fmt"
	"net/http"
	"time"
)

// ProxyAwaitCommand is `weft-proxy await`: it waits until the proxy's admin
// server answers /ready with 200. The injector runs it as the proxy
// container's postStart hook in classic (non-native) sidecar mode, so that
// application containers start only once the proxy can carry their traffic.
func ProxyAwaitCommand() core.Command {
	return core.Command{Name: "await", Summary: "wait until the proxy is ready (postStart hook)", Setup: setupProxyAwait}
}

func setupProxyAwait(fs *core.FlagSet) core.Action {
	admin := fs.String("admin-addr", "127.0.0.1:4191", "HOST:PORT of the proxy's admin server")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait before failing")
	interval := fs.Duration("interval", 200*time.Millisecond, "time between probes")
	return func(ctx context.Context, args []string, stdio core.IO) int {
		if *timeout <= 0 || *interval <= 0 {
			fmt.Fprintln(stdio.Stderr, "weft-proxy await: --timeout and --interval must be positive")
			return core.ExitUsage
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		url := "http://" + *admin + "/ready"
		client := &http.Client{Timeout: time.Second}
		last := "no answer yet"
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-proxy await: --admin-addr %q: %v\n", *admin, err)
				return core.ExitUsage
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return core.ExitOK
				}
				last = resp.Status
			} else if ctx.Err() == nil {
				// A probe cut short by the deadline says nothing new; keep the
				// last real answer for the message.
				last = err.Error()
			}
			select {
			case <-ctx.Done():
				fmt.Fprintf(stdio.Stderr, "weft-proxy await: proxy at %s not ready after %s (last: %s)\n", *admin, *timeout, last)
				return core.ExitFailure
			case <-time.After(*interval):
			}
		}
	}
}
