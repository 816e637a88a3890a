// Command quickstart embeds a whole Weft mesh in one Go program: the
// control plane (identity, destination, policy) and one proxy per
// workload, all in-process on loopback, through package mesh/local.
//
// Two programs of its own run in the mesh: a greeter HTTP server and a
// client that calls it through its proxy. A third workload, a stranger,
// tries the same call and is refused by the policy. The program prints what
// happened and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/local"
)

// The mesh, in the compact mesh-file format (docs/local-mesh.md). It
// expands into the Namespace, ServiceAccounts, Pods, Services,
// EndpointSlices and Linkerd policy objects the control plane reads.
const meshFile = `
namespace: quickstart
workloads:
- name: greeter
  ports: [{name: http, port: 8080}]
- name: client
  calls: [{service: greeter, localPort: 9000}]
- name: stranger
  calls: [{service: greeter, localPort: 9000}]
policies:
- workload: greeter
  port: http
  allow: [client]
`

func main() {
	requests := flag.Int("requests", 3, "how many requests the client sends")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *requests); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, requests int) error {
	f, err := local.Parse("quickstart", []byte(meshFile))
	if err != nil {
		return err
	}

	// The programs: plain Go functions that the runner starts once every
	// proxy is ready. Each gets its pod: its loopback address and the local
	// addresses where its proxy carries its calls.
	finished := make(chan error, 2)
	greeter := func(ctx context.Context, pod local.Pod) error {
		l, err := net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(pod.Ports[0].Port)).String())
		if err != nil {
			return err
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s", pod.Name)
		})}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	caller := func(ctx context.Context, pod local.Pod) error {
		url := "http://" + pod.Mappings[0].Listen.String() + "/"
		client := &http.Client{Timeout: 3 * time.Second}
		var lines []string
		for i := 0; i < requests; i++ {
			resp, err := get(ctx, client, url)
			lines = append(lines, fmt.Sprintf("%s -> greeter: %s", pod.Workload, resp))
			if err != nil {
				lines[len(lines)-1] = fmt.Sprintf("%s -> greeter: refused (%v)", pod.Workload, err)
			}
		}
		finished <- printLines(out, lines)
		<-ctx.Done()
		return nil
	}

	r, err := local.New(ctx, f,
		local.WithApp("greeter", greeter),
		local.WithApp("client", caller),
		local.WithApp("stranger", caller))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	select {
	case <-r.Ready():
	case err := <-done:
		return err
	}
	st := r.State()
	fmt.Fprintf(out, "control plane: identity %s, destination %s, policy %s\n",
		st.ControlPlane.Identity, st.ControlPlane.Destination, st.ControlPlane.Policy)
	for _, p := range st.Plan.Pods {
		fmt.Fprintf(out, "pod %s at %s, identity %s\n", p.Name, p.IP, p.Identity)
	}

	// Wait for both callers, then show what the greeter's proxy verified.
	for range 2 {
		select {
		case err := <-finished:
			if err != nil {
				return err
			}
		case err := <-done:
			return fmt.Errorf("the mesh stopped early: %v", err)
		}
	}
	for _, p := range st.Proxies {
		if p.Pod.Workload != "greeter" {
			continue
		}
		mfs, err := p.Registry().Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "inbound_") || !strings.Contains(mf.GetName(), "_authz_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				var peer, tls string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "client_id":
						peer = l.GetValue()
					case "tls":
						tls = l.GetValue()
					}
				}
				fmt.Fprintf(out, "greeter's proxy: %s peer=%s mtls=%s count=%.0f\n", mf.GetName(), peer, tls, m.GetCounter().GetValue())
			}
		}
	}
	cancel()
	return <-done
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", resp.Status)
	}
	return string(body), nil
}

// printLines writes a caller's lines in one go so the two callers do not
// interleave.
func printLines(w io.Writer, lines []string) error {
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}
