package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
)

// DiagnosticsCommand is `weft diagnostics`: tools that ask the control
// plane what it tells proxies. Its subcommands are given (by default
// DiagnosticsEndpointsCommand and DiagnosticsPolicyCommand).
func DiagnosticsCommand(subcommands ...Command) Command {
	if len(subcommands) == 0 {
		subcommands = []Command{DiagnosticsEndpointsCommand(), DiagnosticsPolicyCommand()}
	}
	return Command{
		Name:    "diagnostics",
		Summary: "ask the control plane what it tells proxies",
		Sub:     subcommands,
	}
}

// DiagnosticsEndpointsCommand is `weft diagnostics endpoints AUTHORITY
// --destination ADDR`: it resolves AUTHORITY through a Destination
// server, as a proxy would, and prints the endpoint table. With --watch
// it prints the table again after every change until interrupted (or
// until --timeout, when set).
func DiagnosticsEndpointsCommand() Command {
	return Command{
		Name:    "endpoints",
		Summary: "show the endpoints a Destination server gives for an authority",
		Args:    "AUTHORITY --destination HOST:PORT [flags]",
		Long:    diagnosticsEndpointsUsage,
		Setup:   setupDiagnosticsEndpoints,
	}
}

const diagnosticsEndpointsUsage = `AUTHORITY is what a proxy asks for: <svc>.<ns>.svc.<cluster-domain>:<port>,
<pod-ip>:<port> or <cluster-ip>:<port>.

Without --watch the first answer is printed and the command exits: status 0
when the destination exists, 1 when it does not or no answer came within
--timeout, 2 for a malformed authority or bad flags. With --watch the table
is printed again after every change until interrupted, or until --timeout
when it is set.
`

func setupDiagnosticsEndpoints(fs *FlagSet) Action {
	dest := fs.String("destination", "localhost:8086", "HOST:PORT of the Destination server (plaintext gRPC)")
	token := fs.String("context-token", "", `context token to send, such as {"ns":"shop"}`)
	watch := fs.Bool("watch", false, "keep printing the table after every change")
	timeout := fs.Duration("timeout", 0, "give up after this long (default: 10s without --watch, never with it)")
	output := fs.StringP("output", "o", "table", "output format: table, json or yaml (with --watch, one object per change: JSON lines or YAML documents)")
	return func(ctx context.Context, args []string, stdio IO) int {
		positional := args
		if len(positional) != 1 {
			fmt.Fprintln(stdio.Stderr, "weft diagnostics endpoints: want exactly one AUTHORITY (see 'weft diagnostics endpoints --help')")
			return ExitUsage
		}
		authority := positional[0]
		if err := checkOutput(*output, "table", "json", "yaml"); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: %v\n", err)
			return ExitUsage
		}
		show := func(set discovery.EndpointSet, at time.Time) {
			switch *output {
			case "table":
				printEndpoints(stdio.Stdout, authority, set, at)
			case "json":
				_ = json.NewEncoder(stdio.Stdout).Encode(toEndpointsObject(authority, set, at))
			default:
				if *watch {
					fmt.Fprintln(stdio.Stdout, "---")
				}
				_ = writeObject(stdio.Stdout, "yaml", toEndpointsObject(authority, set, at))
			}
		}
		if _, err := discovery.ParseContextToken(*token); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: --context-token: %v\n", err)
			return ExitUsage
		}
		if *timeout < 0 {
			fmt.Fprintln(stdio.Stderr, "weft diagnostics endpoints: --timeout must not be negative")
			return ExitUsage
		}
		if *timeout == 0 && !*watch {
			*timeout = 10 * time.Second
		}
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}

		conn, err := grpc.NewClient(*dest, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: --destination %s: %v\n", *dest, err)
			return ExitUsage
		}
		defer conn.Close()
		c, err := client.New(ctx, conn, client.WithContextToken(*token), client.WithBackoff(100*time.Millisecond, time.Second))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: %v\n", err)
			return ExitUsage
		}
		defer c.Close()
		w, err := c.Watch(ctx, authority)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: %v\n", err)
			return ExitUsage
		}
		defer w.Close()
		if err := w.Wait(ctx); err != nil {
			if status.Code(unwrapStatus(err)) == codes.InvalidArgument {
				fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: %s: %s\n", authority, status.Convert(unwrapStatus(err)).Message())
				return ExitUsage
			}
			fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: no answer from %s: %v\n", *dest, err)
			return ExitFailure
		}
		set, _ := w.Endpoints()
		if !*watch {
			show(set, time.Time{})
			if !set.Exists {
				return ExitFailure
			}
			return ExitOK
		}
		var last discovery.EndpointSet
		printed := false
		for {
			if set, _ := w.Endpoints(); !printed || !set.Equal(last) {
				show(set, time.Now())
				last, printed = set, true
			}
			select {
			case <-ctx.Done():
				return ExitOK
			case <-w.Updated():
				if err := w.Err(); err != nil {
					fmt.Fprintf(stdio.Stderr, "weft diagnostics endpoints: %v\n", err)
				}
			}
		}
	}
}

// endpointsObject is `weft diagnostics endpoints -o json|yaml`.
type endpointsObject struct {
	Authority string           `json:"authority"`
	At        *time.Time       `json:"at,omitempty"`
	Exists    bool             `json:"exists"`
	Endpoints []endpointObject `json:"endpoints"`
}

type endpointObject struct {
	Addr                string            `json:"addr"`
	Weight              uint32            `json:"weight"`
	Identity            string            `json:"identity,omitempty"`
	Hint                string            `json:"hint"`
	OpaqueTransportPort uint32            `json:"opaqueTransportPort,omitempty"`
	Zone                string            `json:"zone,omitempty"`
	AuthorityOverride   string            `json:"authorityOverride,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
}

func toEndpointsObject(authority string, set discovery.EndpointSet, at time.Time) endpointsObject {
	o := endpointsObject{Authority: authority, Exists: set.Exists, Endpoints: []endpointObject{}}
	if !at.IsZero() {
		at = at.UTC()
		o.At = &at
	}
	for _, e := range set.Endpoints {
		o.Endpoints = append(o.Endpoints, endpointObject{Addr: e.Addr.String(), Weight: e.Weight, Identity: e.Identity, Hint: fmt.Sprint(e.Hint),
			OpaqueTransportPort: e.OpaqueTransportPort, Zone: e.Zone, AuthorityOverride: e.AuthorityOverride, Labels: e.MetricLabels})
	}
	return o
}

func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

// printEndpoints writes the endpoint table; a zero at omits the header's
// time.
func printEndpoints(out io.Writer, authority string, set discovery.EndpointSet, at time.Time) {
	header := "# " + authority
	if !at.IsZero() {
		header += " at " + at.Format(time.RFC3339)
	}
	switch {
	case !set.Exists:
		fmt.Fprintf(out, "%s: does not exist (no such service, or an IP that is neither a cluster IP nor a pod)\n", header)
		return
	case len(set.Endpoints) == 0:
		fmt.Fprintf(out, "%s: exists, no endpoints\n", header)
		return
	}
	fmt.Fprintf(out, "%s: %d endpoint(s)\n", header, len(set.Endpoints))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tWEIGHT\tIDENTITY\tHINT\tOPAQUE-TRANSPORT\tZONE\tPOD\tOWNER")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, e := range set.Endpoints {
		transport := "-"
		if e.OpaqueTransportPort != 0 {
			transport = fmt.Sprint(e.OpaqueTransportPort)
		}
		owner := "-"
		for _, k := range []string{"deployment", "statefulset", "daemonset", "replicaset", "job", "cronjob", "replicationcontroller"} {
			if v := e.MetricLabels[k]; v != "" {
				owner = k + "/" + v
				break
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Addr, e.Weight, dash(e.Identity), e.Hint, transport,
			dash(e.Zone), dash(e.MetricLabels["pod"]), owner)
	}
	_ = tw.Flush()
}
