package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// tapFlags are the flags of tap and top: which requests, and for how long.
type tapFlags struct {
	vizFlags
	to, method, authority, path string
	limit                       uint
	duration                    time.Duration
	maxEvents                   int
}

func (f *tapFlags) register(fs *FlagSet, outputs string) {
	f.vizFlags.register(fs, outputs)
	fs.StringVar(&f.to, "to", "", "only requests to this workload or pod")
	fs.StringVar(&f.method, "method", "", "only requests with this HTTP method")
	fs.StringVar(&f.authority, "authority", "", "only requests with this :authority")
	fs.StringVar(&f.path, "path", "", "only requests whose path starts with this")
	fs.UintVar(&f.limit, "max-requests", 0, "ask each proxy to stop reporting after this many requests (0: the proxy's limit)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fs.IntVar(&f.maxEvents, "max-events", 0, "stop after this many events (0: no limit)")
}

func (f *tapFlags) request() viz.TapRequest {
	return viz.TapRequest{Filter: viz.Filter{Method: f.method, Authority: f.authority, PathPrefix: f.path, To: f.to}, Limit: uint32(min(f.limit, 1<<31))}
}

// tapQueue bounds the events waiting to be printed; beyond it events are
// dropped and counted, so a slow terminal never holds the proxies' taps.
const tapQueue = 4096

// openTaps taps the proxies of the pods r selects and merges their events
// into one channel, closed when every tap has ended. The counter reports
// events dropped because the reader was slow.
func openTaps(ctx context.Context, f *tapFlags, r viz.Resource, stdio IO) (<-chan viz.Event, *atomic.Int64, error) {
	src, err := f.source()
	if err != nil {
		return nil, nil, err
	}
	closeWhenDone(ctx, src)
	if rs, ok := src.(viz.ResourceTapSource); ok {
		return openResourceTap(ctx, rs, f, r, stdio)
	}
	ts, ok := src.(viz.TapSource)
	if !ok {
		return nil, nil, errors.New("this source cannot tap the proxies")
	}
	all, err := src.Targets(ctx)
	if err != nil {
		return nil, nil, err
	}
	sel := r.Select(all)
	if len(sel) == 0 {
		return nil, nil, fmt.Errorf("no meshed pods match %s in %s", r, orAll(r.Namespace))
	}
	out := make(chan viz.Event, tapQueue)
	dropped := &atomic.Int64{}
	var wg sync.WaitGroup
	started := 0
	req := f.request()
	for _, t := range sel {
		s, err := ts.Tap(ctx, t, req)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "warning: cannot tap %s: %v\n", t, err)
			continue
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, err := s.Recv()
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(stdio.Stderr, "warning: tap of %s ended: %v\n", t, err)
					}
					return
				}
				if e.Kind == viz.RequestInit && f.to != "" && !req.Filter.Matches(e) {
					continue
				}
				select {
				case out <- e:
				default:
					dropped.Add(1)
				}
			}
		}()
	}
	if started == 0 {
		return nil, nil, errors.New("no proxy could be tapped")
	}
	fmt.Fprintf(stdio.Stderr, "tapping %d proxies of %s (Ctrl-C to stop)...\n", started, r)
	go func() { wg.Wait(); close(out) }()
	return out, dropped, nil
}

// openResourceTap taps r through a cluster's tap API: one stream, which
// the server authorizes for r and fills from every pod of r.
func openResourceTap(ctx context.Context, rs viz.ResourceTapSource, f *tapFlags, r viz.Resource, stdio IO) (<-chan viz.Event, *atomic.Int64, error) {
	warn := func(m string) { fmt.Fprintf(stdio.Stderr, "warning: %s\n", m) }
	s, err := rs.TapResource(ctx, r, f.request(), warn)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan viz.Event, tapQueue)
	dropped := &atomic.Int64{}
	fmt.Fprintf(stdio.Stderr, "tapping %s in %s (Ctrl-C to stop)...\n", r, orAll(r.Namespace))
	go func() {
		defer close(out)
		if c, ok := s.(io.Closer); ok {
			defer c.Close()
		}
		for {
			e, err := s.Recv()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, io.EOF) {
					fmt.Fprintf(stdio.Stderr, "warning: tap of %s ended: %v\n", r, err)
				}
				break
			}
			select {
			case out <- e:
			default:
				dropped.Add(1)
			}
		}
		if d, ok := s.(interface{ Dropped() uint64 }); ok {
			dropped.Add(int64(d.Dropped()))
		}
	}()
	return out, dropped, nil
}

func orAll(ns string) string {
	if ns == "" {
		return "any namespace"
	}
	return "namespace " + ns
}

func tapResource(cmd string, f *tapFlags, args []string, stdio IO, outputs ...string) (viz.Resource, int, bool) {
	pos := args
	if len(pos) != 1 {
		return viz.Resource{}, vizFail(stdio, cmd, fmt.Errorf("want one resource, such as deploy/web (got %d arguments)", len(pos)), ExitUsage), false
	}
	if err := f.validate(outputs...); err != nil {
		return viz.Resource{}, vizFail(stdio, cmd, err, ExitUsage), false
	}
	if f.prometheus != "" {
		return viz.Resource{}, vizFail(stdio, cmd, errors.New("tap reads the proxies; --prometheus has no live requests"), ExitUsage), false
	}
	if f.duration < 0 || f.maxEvents < 0 {
		return viz.Resource{}, vizFail(stdio, cmd, errors.New("--duration and --max-events must not be negative"), ExitUsage), false
	}
	r, err := viz.ParseResource(pos[0], f.ns())
	if err != nil {
		return viz.Resource{}, vizFail(stdio, cmd, err, ExitUsage), false
	}
	if r.Kind == viz.KindAuthority || r.Kind == viz.KindRoute {
		return viz.Resource{}, vizFail(stdio, cmd, fmt.Errorf("cannot tap a %s; tap a workload or pod and filter with --authority or --path", r.Kind), ExitUsage), false
	}
	return r, 0, true
}

func setupVizTap(fs *FlagSet) Action {
	var f tapFlags
	f.register(fs, "table or json (one JSON object per event)")
	return func(ctx context.Context, args []string, stdio IO) int {
		r, st, ok := tapResource("tap", &f, args, stdio, "table", "json")
		if !ok {
			return st
		}
		if f.duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.duration)
			defer cancel()
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, dropped, err := openTaps(ctx, &f, r, stdio)
		if err != nil {
			return vizFail(stdio, "tap", err, ExitFailure)
		}
		n := 0
		for e := range events {
			if f.output == "json" {
				writeJSONLine(stdio, e)
			} else {
				fmt.Fprintln(stdio.Stdout, e.Line())
			}
			n++
			if f.maxEvents > 0 && n >= f.maxEvents {
				cancel()
				break
			}
		}
		if d := dropped.Load(); d > 0 {
			fmt.Fprintf(stdio.Stderr, "warning: %d events dropped (output too slow)\n", d)
		}
		return ExitOK
	}
}

func setupVizTop(fs *FlagSet) Action {
	var f tapFlags
	f.register(fs, "table, json or yaml")
	return func(ctx context.Context, args []string, stdio IO) int {
		r, st, ok := tapResource("top", &f, args, stdio, "table", "json", "yaml")
		if !ok {
			return st
		}
		if f.duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.duration)
			defer cancel()
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, dropped, err := openTaps(ctx, &f, r, stdio)
		if err != nil {
			return vizFail(stdio, "top", err, ExitFailure)
		}
		top := viz.NewTop()
		tty := f.output == "table" && isTerminal(stdio.Stdout)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		n := 0
	loop:
		for {
			select {
			case e, ok := <-events:
				if !ok {
					break loop
				}
				top.Add(e)
				n++
				if f.maxEvents > 0 && n >= f.maxEvents {
					cancel()
					break loop
				}
			case <-tick.C:
				if tty {
					fmt.Fprint(stdio.Stdout, "\x1b[H\x1b[2J"+renderTop(top.Rows()))
				}
			}
		}
		rows := top.Rows()
		if f.output == "json" || f.output == "yaml" {
			type rowJSON struct {
				Source      string  `json:"source"`
				Destination string  `json:"destination"`
				Method      string  `json:"method"`
				Path        string  `json:"path"`
				Count       int     `json:"count"`
				Successes   int     `json:"successes"`
				SuccessRate float64 `json:"successRate"`
				BestMs      float64 `json:"bestMs"`
				WorstMs     float64 `json:"worstMs"`
				LastMs      float64 `json:"lastMs"`
			}
			out := struct {
				Rows    []rowJSON `json:"rows"`
				Dropped int64     `json:"dropped"`
			}{Rows: []rowJSON{}, Dropped: dropped.Load() + int64(top.Dropped)}
			for _, r := range rows {
				out.Rows = append(out.Rows, rowJSON{r.Source, r.Destination, r.Method, r.Path, r.Count, r.Successes, r.SuccessRate(), msf(r.Best), msf(r.Worst), msf(r.Last)})
			}
			writeViz(stdio.Stdout, f.output, out)
			return ExitOK
		}
		if tty {
			fmt.Fprint(stdio.Stdout, "\x1b[H\x1b[2J")
		}
		fmt.Fprint(stdio.Stdout, renderTop(rows))
		return ExitOK
	}
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func renderTop(rows []viz.TopRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDESTINATION\tMETHOD\tPATH\tCOUNT\tBEST\tWORST\tLAST\tSUCCESS_RATE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.2f%%\n", r.Source, r.Destination, r.Method, r.Path, r.Count,
			msOrDash(msf(r.Best)), msOrDash(msf(r.Worst)), msOrDash(msf(r.Last)), 100*r.SuccessRate())
	}
	tw.Flush()
	return b.String()
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(stdio IO, v any) {
	b, err := jsonMarshal(v)
	if err != nil {
		return
	}
	fmt.Fprintln(stdio.Stdout, string(b))
}
