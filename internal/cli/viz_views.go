package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

type goldenJSON struct {
	Requests    float64  `json:"requests"`
	Successes   float64  `json:"successes"`
	Failures    float64  `json:"failures"`
	SuccessRate *float64 `json:"successRate"`
	RPS         *float64 `json:"rps"`
	LatencyP50  *float64 `json:"latencyMsP50"`
	LatencyP95  *float64 `json:"latencyMsP95"`
	LatencyP99  *float64 `json:"latencyMsP99"`
	MTLSShare   *float64 `json:"mtlsShare"`
}

func toGoldenJSON(g viz.Golden, d time.Duration) goldenJSON {
	return goldenJSON{
		Requests: g.Requests(), Successes: g.Successes, Failures: g.Failures,
		SuccessRate: num(g.SuccessRate()), RPS: num(g.RPS(d)),
		LatencyP50: num(g.P(0.5)), LatencyP95: num(g.P(0.95)), LatencyP99: num(g.P(0.99)),
		MTLSShare: num(g.MTLSShare()),
	}
}

func windowNote(w viz.Window) string {
	if w.Duration == 0 {
		return "since the proxies started"
	}
	return "over " + w.Duration.Round(100*time.Millisecond).String()
}

func setupVizStat(fs *FlagSet) Action {
	var f vizFlags
	var wf windowFlags
	f.register(fs, "table, wide, json or yaml")
	wf.register(fs)
	return func(ctx context.Context, args []string, stdio IO) int {
		pos := args
		if len(pos) != 1 {
			return vizFail(stdio, "stat", fmt.Errorf("want one resource, such as deploy or deploy/web (got %d arguments)", len(pos)), ExitUsage)
		}
		if err := f.validate("table", "wide", "json", "yaml"); err != nil {
			return vizFail(stdio, "stat", err, ExitUsage)
		}
		if err := wf.validate(); err != nil {
			return vizFail(stdio, "stat", err, ExitUsage)
		}
		r, err := viz.ParseResource(pos[0], f.ns())
		if err != nil {
			return vizFail(stdio, "stat", err, ExitUsage)
		}
		if r.Kind != viz.KindNamespace && f.all {
			r.Namespace = ""
		}
		w, err := collect(ctx, &f, &wf, stdio)
		if err != nil {
			return vizFail(stdio, "stat", err, ExitFailure)
		}
		reportUnreachable(w, stdio)
		rows := viz.Stat(w, r)
		if f.output == "json" || f.output == "yaml" {
			type rowJSON struct {
				Kind           string  `json:"kind"`
				Namespace      string  `json:"namespace"`
				Name           string  `json:"name"`
				Authority      string  `json:"authority,omitempty"`
				Meshed         int     `json:"meshedPods"`
				Pods           int     `json:"pods"`
				TCPConnections float64 `json:"tcpConnections"`
				Denied         float64 `json:"denied"`
				goldenJSON
			}
			out := struct {
				WindowSeconds float64   `json:"windowSeconds"`
				Rows          []rowJSON `json:"rows"`
			}{WindowSeconds: w.Duration.Seconds(), Rows: []rowJSON{}}
			for _, row := range rows {
				kind := string(row.Kind)
				if row.WorkloadKind != "" {
					kind = row.WorkloadKind
				}
				out.Rows = append(out.Rows, rowJSON{kind, row.Namespace, row.Name, row.Authority, row.Meshed, row.Pods, row.TCPConnections, row.Denied, toGoldenJSON(row.Golden, w.Duration)})
			}
			writeViz(stdio.Stdout, f.output, out)
			return ExitOK
		}
		if len(rows) == 0 {
			fmt.Fprintf(stdio.Stderr, "No traffic found for %s %s.\n", r, windowNote(w))
			return ExitOK
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 2, 4, 3, ' ', 0)
		head := "NAME\tMESHED\tSUCCESS\tRPS\tLATENCY_P50\tLATENCY_P95\tLATENCY_P99\tTCP_CONN\tMTLS"
		if f.all || r.Kind == viz.KindNamespace {
			head = "NAMESPACE\t" + head
		}
		if r.Kind == viz.KindRoute {
			head += "\tAUTHORITY"
		}
		if f.output == "wide" {
			head += "\tREQUESTS\tFAILURES\tDENIED"
		}
		fmt.Fprintln(tw, head)
		for _, row := range rows {
			line := ""
			if f.all || r.Kind == viz.KindNamespace {
				line = row.Namespace + "\t"
			}
			meshed := "-"
			if row.Pods > 0 {
				meshed = fmt.Sprintf("%d/%d", row.Meshed, row.Pods)
			}
			line += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s", row.Name, meshed, pctOrDash(row.SuccessRate()), rpsOrDash(row.RPS(w.Duration)),
				msOrDash(row.P(0.5)), msOrDash(row.P(0.95)), msOrDash(row.P(0.99)), row.TCPConnections, pctOrDash(row.MTLSShare()))
			if r.Kind == viz.KindRoute {
				line += "\t" + row.Authority
			}
			if f.output == "wide" {
				line += fmt.Sprintf("\t%.0f\t%.0f\t%.0f", row.Requests(), row.Failures, row.Denied)
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
		return ExitOK
	}
}

func setupVizEdges(fs *FlagSet) Action {
	var f vizFlags
	var wf windowFlags
	f.register(fs, "table, wide, json or yaml")
	wf.register(fs)
	return func(ctx context.Context, args []string, stdio IO) int {
		pos := args
		if len(pos) > 1 {
			return vizFail(stdio, "edges", fmt.Errorf("want at most one resource type, got %d arguments", len(pos)), ExitUsage)
		}
		if err := f.validate("table", "wide", "json", "yaml"); err != nil {
			return vizFail(stdio, "edges", err, ExitUsage)
		}
		if err := wf.validate(); err != nil {
			return vizFail(stdio, "edges", err, ExitUsage)
		}
		w, err := collect(ctx, &f, &wf, stdio)
		if err != nil {
			return vizFail(stdio, "edges", err, ExitFailure)
		}
		reportUnreachable(w, stdio)
		ns := f.ns()
		var edges []viz.Edge
		for _, e := range viz.Edges(w) {
			if ns == "" || e.Src.Namespace == ns || e.Dst.Namespace == ns {
				edges = append(edges, e)
			}
		}
		if f.output == "json" || f.output == "yaml" {
			type edgeJSON struct {
				Src         viz.Workload `json:"src"`
				Dst         viz.Workload `json:"dst"`
				ClientID    string       `json:"clientId"`
				ServerID    string       `json:"serverId"`
				Secured     bool         `json:"secured"`
				Denied      float64      `json:"denied"`
				Connections float64      `json:"connections"`
				goldenJSON
			}
			out := struct {
				WindowSeconds float64    `json:"windowSeconds"`
				Edges         []edgeJSON `json:"edges"`
			}{WindowSeconds: w.Duration.Seconds(), Edges: []edgeJSON{}}
			for _, e := range edges {
				out.Edges = append(out.Edges, edgeJSON{e.Src, e.Dst, e.ClientID, e.ServerID, e.Secured(), e.Denied, e.Connections, toGoldenJSON(e.Golden(), w.Duration)})
			}
			writeViz(stdio.Stdout, f.output, out)
			return ExitOK
		}
		if len(edges) == 0 {
			fmt.Fprintf(stdio.Stderr, "No edges found %s.\n", windowNote(w))
			return ExitOK
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 2, 4, 3, ' ', 0)
		head := "SRC\tDST\tSRC_NS\tDST_NS\tCLIENT_ID\tSERVER_ID\tSECURED\tRPS\tSUCCESS\tDENIED"
		fmt.Fprintln(tw, head)
		for _, e := range edges {
			sec := "-"
			if e.Secured() {
				sec = "√"
			}
			cid, sid := viz.ShortIdentity(e.ClientID), viz.ShortIdentity(e.ServerID)
			if f.output == "wide" {
				cid, sid = e.ClientID, e.ServerID
			}
			g := e.Golden()
			dst := e.Dst.Name
			if e.Dst.Kind == viz.KindEgressNetwork {
				dst = "egressnetwork/" + dst
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\n", e.Src.Name, dst, e.Src.Namespace, e.Dst.Namespace,
				orDash(cid), orDash(sid), sec, rpsOrDash(g.RPS(w.Duration)), pctOrDash(g.SuccessRate()), e.Denied)
		}
		tw.Flush()
		return ExitOK
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func setupVizRoutes(fs *FlagSet) Action {
	var f vizFlags
	var wf windowFlags
	f.register(fs, "table, json or yaml")
	wf.register(fs)
	to := fs.String("to", "", "show the routes the resource calls on this Service (NAME, svc/NAME, NAME.NAMESPACE.svc.cluster.local, optionally :PORT), EgressNetwork (egressnetwork/NAME, optionally :PORT) or IP:PORT, instead of those it serves")
	toNS := fs.String("to-namespace", "", "namespace of the --to Service or EgressNetwork (default: the resource's, -n)")
	return func(ctx context.Context, args []string, stdio IO) int {
		pos := args
		if len(pos) != 1 {
			return vizFail(stdio, "routes", fmt.Errorf("want one resource, such as deploy/web (got %d arguments)", len(pos)), ExitUsage)
		}
		if err := f.validate("table", "json", "yaml"); err != nil {
			return vizFail(stdio, "routes", err, ExitUsage)
		}
		if err := wf.validate(); err != nil {
			return vizFail(stdio, "routes", err, ExitUsage)
		}
		r, err := viz.ParseResource(pos[0], f.ns())
		if err != nil {
			return vizFail(stdio, "routes", err, ExitUsage)
		}
		var target *viz.RouteTarget
		if *to != "" {
			ns := *toNS
			if ns == "" {
				ns = f.ns()
			}
			t, err := viz.ParseRouteTarget(*to, ns)
			if err != nil {
				return vizFail(stdio, "routes", fmt.Errorf("--to: %w", err), ExitUsage)
			}
			target = &t
		} else if *toNS != "" {
			return vizFail(stdio, "routes", fmt.Errorf("--to-namespace needs --to"), ExitUsage)
		}
		w, err := collect(ctx, &f, &wf, stdio)
		if err != nil {
			return vizFail(stdio, "routes", err, ExitFailure)
		}
		reportUnreachable(w, stdio)
		rows := viz.Routes(w, r, target)
		if f.output == "json" || f.output == "yaml" {
			type rowJSON struct {
				Direction     string `json:"direction"`
				Authority     string `json:"authority"`
				Route         string `json:"route"`
				EgressNetwork string `json:"egressNetwork,omitempty"`
				goldenJSON
			}
			out := struct {
				WindowSeconds float64   `json:"windowSeconds"`
				Routes        []rowJSON `json:"routes"`
			}{WindowSeconds: w.Duration.Seconds(), Routes: []rowJSON{}}
			for _, row := range rows {
				out.Routes = append(out.Routes, rowJSON{row.Direction, row.Authority, row.Route, row.EgressNetwork, toGoldenJSON(row.Golden, w.Duration)})
			}
			writeViz(stdio.Stdout, f.output, out)
			return ExitOK
		}
		if len(rows) == 0 {
			if target != nil {
				fmt.Fprintf(stdio.Stderr, "No route traffic found from %s to %s %s.\n", r, target, windowNote(w))
				if target.Addr.IsValid() {
					fmt.Fprintln(stdio.Stderr, "The proxies name a Service's traffic by the Service (its ClusterIP too): try --to svc/NAME.")
				}
				if target.EgressNetwork != "" {
					fmt.Fprintln(stdio.Stderr, "Only HTTP and gRPC traffic under an EgressNetwork has route metrics; opaque connections it refused count in tcp_refused_total.")
				}
				return ExitOK
			}
			fmt.Fprintf(stdio.Stderr, "No route traffic found for %s %s.\n", r, windowNote(w))
			return ExitOK
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 2, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "ROUTE\tAUTHORITY\tSUCCESS\tRPS\tLATENCY_P50\tLATENCY_P95\tLATENCY_P99")
		egress := map[string]bool{}
		for _, row := range rows {
			if row.EgressNetwork != "" {
				egress[row.EgressNetwork] = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Route, row.Authority, pctOrDash(row.SuccessRate()), rpsOrDash(row.RPS(w.Duration)),
				msOrDash(row.P(0.5)), msOrDash(row.P(0.95)), msOrDash(row.P(0.99)))
		}
		tw.Flush()
		if target != nil && target.EgressNetwork == "" {
			// An address target whose traffic left the mesh: say under
			// which EgressNetwork's routes.
			for _, name := range slices.Sorted(maps.Keys(egress)) {
				fmt.Fprintf(stdio.Stdout, "(routes of EgressNetwork %s)\n", name)
			}
		}
		return ExitOK
	}
}

func setupVizAuthz(fs *FlagSet) Action {
	var f vizFlags
	var wf windowFlags
	f.register(fs, "table, json or yaml")
	wf.register(fs)
	manifests := fs.String("manifests", "", "manifests to name in the 'weft policy explain' hint of a denied pair (default: the local mesh's, or PATH)")
	return func(ctx context.Context, args []string, stdio IO) int {
		pos := args
		if len(pos) != 1 {
			return vizFail(stdio, "authz", fmt.Errorf("want one resource, such as deploy/web (got %d arguments)", len(pos)), ExitUsage)
		}
		if err := f.validate("table", "json", "yaml"); err != nil {
			return vizFail(stdio, "authz", err, ExitUsage)
		}
		if err := wf.validate(); err != nil {
			return vizFail(stdio, "authz", err, ExitUsage)
		}
		r, err := viz.ParseResource(pos[0], f.ns())
		if err != nil {
			return vizFail(stdio, "authz", err, ExitUsage)
		}
		w, err := collect(ctx, &f, &wf, stdio)
		if err != nil {
			return vizFail(stdio, "authz", err, ExitFailure)
		}
		reportUnreachable(w, stdio)
		rows := viz.Authz(w, r)
		hintPath := *manifests
		if hintPath == "" && f.local != "" {
			hintPath = localManifests(f.local)
		}
		if f.output == "json" || f.output == "yaml" {
			type denialJSON struct {
				From         string       `json:"from"`
				FromWorkload viz.Workload `json:"fromWorkload"`
				Namespace    string       `json:"namespace"`
				Pod          string       `json:"pod"`
				Port         string       `json:"port"`
				Count        float64      `json:"count"`
				Explain      string       `json:"explain"`
				// Diagnostics asks the cluster's policy controller (for
				// a cluster source, where no manifests are at hand).
				Diagnostics string `json:"diagnostics,omitempty"`
			}
			type rowJSON struct {
				Namespace     string            `json:"namespace"`
				Server        string            `json:"server"`
				Route         string            `json:"route"`
				Authorization string            `json:"authorization"`
				Port          string            `json:"port"`
				Allowed       float64           `json:"allowed"`
				Denied        float64           `json:"denied"`
				AllowedRPS    *float64          `json:"allowedRps"`
				DeniedRPS     *float64          `json:"deniedRps"`
				Clients       []viz.ClientCount `json:"clients"`
				Denials       []denialJSON      `json:"denials"`
			}
			out := struct {
				WindowSeconds float64   `json:"windowSeconds"`
				Rows          []rowJSON `json:"rows"`
			}{WindowSeconds: w.Duration.Seconds(), Rows: []rowJSON{}}
			for _, row := range rows {
				rj := rowJSON{row.Namespace, row.Server, row.Route, row.Authorization, row.Port, row.Allowed, row.Denied,
					num(rate(row.Allowed, w.Duration)), num(rate(row.Denied, w.Duration)), row.Clients, []denialJSON{}}
				for _, d := range row.Denials {
					dj := denialJSON{d.From, d.FromWorkload, d.ToNamespace, d.ToPod, d.Port, d.Count, d.ExplainCommand(hintPath), ""}
					if hintPath == "" {
						dj.Diagnostics = d.DiagnosticsCommand()
					}
					rj.Denials = append(rj.Denials, dj)
				}
				out.Rows = append(out.Rows, rj)
			}
			writeViz(stdio.Stdout, f.output, out)
			return ExitOK
		}
		if len(rows) == 0 {
			fmt.Fprintf(stdio.Stderr, "No authorization decisions found for %s %s.\n", r, windowNote(w))
			return ExitOK
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 2, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tROUTE\tAUTHORIZATION\tPORT\tALLOWED\tDENIED\tALLOWED_RPS\tDENIED_RPS\tCLIENTS")
		var denials []viz.DeniedPair
		for _, row := range rows {
			var ids []string
			for _, c := range row.Clients {
				ids = append(ids, orDash(viz.ShortIdentity(c.Identity)))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\n", orDash(row.Server), orDash(row.Route), orUnauthorized(row.Authorization), row.Port,
				row.Allowed, row.Denied, rpsOrDash(rate(row.Allowed, w.Duration)), rpsOrDash(rate(row.Denied, w.Duration)), strings.Join(ids, ","))
			denials = append(denials, row.Denials...)
		}
		tw.Flush()
		if len(denials) > 0 {
			fmt.Fprintln(stdio.Stdout, "\nDenied; to see why:")
			for _, d := range denials {
				if hintPath == "" {
					// A cluster: what the policy controller serves that
					// port, then the offline explanation over the manifests.
					fmt.Fprintf(stdio.Stdout, "  %s\n", d.DiagnosticsCommand())
				}
				fmt.Fprintf(stdio.Stdout, "  %s\n", d.ExplainCommand(hintPath))
			}
		}
		return ExitOK
	}
}

func orUnauthorized(s string) string {
	if s == "" {
		return "[UNAUTHORIZED]"
	}
	return s
}

func rate(n float64, d time.Duration) float64 {
	if d <= 0 {
		return nan()
	}
	return n / d.Seconds()
}
