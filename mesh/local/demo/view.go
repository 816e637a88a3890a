package demo

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one workload in the live view.
type Row struct {
	Figures
	Proxy ProxyFigures
	// Calls are the services the workload calls (NAME).
	Calls []string
}

// Frame is the whole view at one moment.
type Frame struct {
	Elapsed time.Duration
	Rows    []Row
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func pct(f float64, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func peers(pf ProxyFigures) string {
	var parts []string
	for _, id := range pf.To {
		parts = append(parts, "->"+ShortIdentity(id))
	}
	for _, id := range pf.From {
		parts = append(parts, "<-"+ShortIdentity(id))
	}
	for _, id := range pf.DeniedFrom {
		parts = append(parts, "x-"+ShortIdentity(id))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// RenderTable renders the frame as the terminal view's table.
func RenderTable(f Frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "weft demo  %s  (Ctrl-C to stop)\n", f.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "rates and latencies over the last %s; peers: ->server <-client x-denied client (mTLS identities)\n\n", Window)
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tRPS\tSUCCESS\tP50\tP99\tREQUESTS\tDENIED\tAUTHZ ALLOW/DENY\tMTLS PEERS")
	for _, r := range f.Rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%s\t%d\t%d\t%.0f/%.0f\t%s\n",
			r.Workload, r.RPS, pct(r.SuccessRate, r.Requests), ms(r.P50), ms(r.P99),
			r.Requests, r.Figures.Denied, r.Proxy.Allowed, r.Proxy.Denied, peers(r.Proxy))
	}
	tw.Flush()
	return b.String()
}

// RenderLines renders the frame as plain lines, one per workload, for
// output that is not a terminal.
func RenderLines(f Frame) string {
	var b strings.Builder
	t := fmt.Sprintf("%.1fs", f.Elapsed.Seconds())
	for _, r := range f.Rows {
		fmt.Fprintf(&b, "t=%s workload=%s rps=%.1f success=%s p50=%s p99=%s requests=%d denied=%d authz_allow=%.0f authz_deny=%.0f peers=%q\n",
			t, r.Workload, r.RPS, pct(r.SuccessRate, r.Requests), ms(r.P50), ms(r.P99),
			r.Requests, r.Figures.Denied, r.Proxy.Allowed, r.Proxy.Denied, peers(r.Proxy))
	}
	return b.String()
}

// Summary is the outcome of a demo run.
type Summary struct {
	Elapsed time.Duration
	// Succeeded counts requests that succeeded end to end, as their
	// callers saw them; Denied those refused by policy.
	Succeeded, Denied int64
	// Identities are the mutual-TLS identities the proxies verified.
	Identities []string
	Frame      Frame
}

// OK reports whether the run showed what the demo is for: traffic flowing
// over mutual TLS and a request denied by policy.
func (s Summary) OK() bool { return s.Succeeded > 0 && s.Denied > 0 && len(s.Identities) > 0 }

// NewSummary derives the summary of a final frame.
func NewSummary(f Frame) Summary {
	s := Summary{Elapsed: f.Elapsed, Frame: f}
	ids := map[string]bool{}
	for _, r := range f.Rows {
		s.Succeeded += r.Succeeded
		s.Denied += r.Figures.Denied
		for _, id := range append(append([]string{}, r.Proxy.From...), r.Proxy.To...) {
			ids[id] = true
		}
	}
	s.Identities = keys(ids)
	return s
}

// RenderSummary renders the closing summary.
func RenderSummary(s Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nSummary after %s\n", s.Elapsed.Truncate(100*time.Millisecond))
	for _, r := range s.Frame.Rows {
		what := "served"
		if len(r.Calls) > 0 {
			what = "called " + strings.Join(r.Calls, ", ") + ":"
		}
		fmt.Fprintf(&b, "  %-9s %s %d requests, %d succeeded (%s), %d denied, %d failed; p50 %s, p99 %s\n",
			r.Workload, what, r.Requests, r.Succeeded, pct(ratio(r.Succeeded, r.Requests), r.Requests), r.Figures.Denied, r.Failed, ms(r.TotalP50), ms(r.TotalP99))
	}
	fmt.Fprintf(&b, "\nMutual TLS: the proxies verified these workload identities\n")
	for _, r := range s.Frame.Rows {
		if len(r.Proxy.From) > 0 {
			fmt.Fprintf(&b, "  %s's proxy accepted %s\n", r.Workload, strings.Join(r.Proxy.From, ", "))
		}
	}
	fmt.Fprintf(&b, "\nPolicy\n")
	for _, r := range s.Frame.Rows {
		if r.Proxy.Denied > 0 || r.Proxy.Allowed > 0 {
			fmt.Fprintf(&b, "  %s's proxy: %.0f allowed, %.0f denied", r.Workload, r.Proxy.Allowed, r.Proxy.Denied)
			if len(r.Proxy.DeniedFrom) > 0 {
				fmt.Fprintf(&b, " (denied %s)", strings.Join(r.Proxy.DeniedFrom, ", "))
			}
			b.WriteString("\n")
		}
	}
	if s.OK() {
		fmt.Fprintf(&b, "\nresult: %d requests succeeded over mutual TLS; %d denied by policy\n", s.Succeeded, s.Denied)
	} else {
		fmt.Fprintf(&b, "\nresult: incomplete: %d requests succeeded, %d denied, %d identities seen\n", s.Succeeded, s.Denied, len(s.Identities))
	}
	return b.String()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
