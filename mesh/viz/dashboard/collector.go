package dashboard

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// Frame is what the dashboard shows at one moment: the views over the
// last Window, and the history of each workload's and route's golden
// metrics for the charts.
type Frame struct {
	At            time.Time   `json:"at"`
	WindowSeconds float64     `json:"windowSeconds"`
	Nodes         []Node      `json:"nodes"`
	Edges         []Edge      `json:"edges"`
	Routes        []Route     `json:"routes"`
	Authz         []Authz     `json:"authz"`
	Unreachable   []string    `json:"unreachable"`
	History       []Point     `json:"history"`
	Top           []TopRow    `json:"top"`
	Tap           TapStatus   `json:"tap"`
	Explain       bool        `json:"explain"`
	Denials       []Denial    `json:"denials"`
	Stats         StatsCounts `json:"stats"`
}

// Node is a workload in the topology.
type Node struct {
	ID        string   `json:"id"`
	Namespace string   `json:"namespace"`
	Kind      string   `json:"kind"`
	Name      string   `json:"name"`
	Identity  string   `json:"identity"`
	Pods      int      `json:"pods"`
	Meshed    int      `json:"meshed"`
	Golden    Golden   `json:"golden"`
	TCP       float64  `json:"tcpConnections"`
	PodNames  []string `json:"podNames"`
}

// Golden is one group's golden metrics in JSON (null for "no data").
type Golden struct {
	Requests    float64  `json:"requests"`
	RPS         *float64 `json:"rps"`
	SuccessRate *float64 `json:"successRate"`
	P50         *float64 `json:"p50"`
	P95         *float64 `json:"p95"`
	P99         *float64 `json:"p99"`
	MTLSShare   *float64 `json:"mtlsShare"`
}

// Edge is a call between two workloads.
type Edge struct {
	Src      string   `json:"src"`
	Dst      string   `json:"dst"`
	ClientID string   `json:"clientId"`
	ServerID string   `json:"serverId"`
	Secured  bool     `json:"secured"`
	Denied   float64  `json:"denied"`
	DeniedRS *float64 `json:"deniedRps"`
	Golden   Golden   `json:"golden"`
}

// Route is one route a workload serves.
type Route struct {
	Workload  string `json:"workload"`
	Authority string `json:"authority"`
	Route     string `json:"route"`
	Golden    Golden `json:"golden"`
}

// Authz is one authorization row of a workload.
type Authz struct {
	Workload      string  `json:"workload"`
	Server        string  `json:"server"`
	Route         string  `json:"route"`
	Authorization string  `json:"authorization"`
	Port          string  `json:"port"`
	Allowed       float64 `json:"allowed"`
	Denied        float64 `json:"denied"`
}

// Denial is a denied client and pod, with the query that explains it.
type Denial struct {
	Edge      string  `json:"edge"` // SRC->DST node ids
	From      string  `json:"from"`
	Namespace string  `json:"namespace"`
	Pod       string  `json:"pod"`
	Port      string  `json:"port"`
	Count     float64 `json:"count"`
	Command   string  `json:"command"`
}

// Point is one moment of the charts: per node and per route, RPS,
// success rate and latency percentiles.
type Point struct {
	At     time.Time         `json:"at"`
	Series map[string]Golden `json:"series"`
}

// StatsCounts counts the collector's own work.
type StatsCounts struct {
	Rounds      int64 `json:"rounds"`
	TapEvents   int64 `json:"tapEvents"`
	TapDropped  int64 `json:"tapDropped"`
	ScrapeFails int64 `json:"scrapeFailures"`
}

// TapStatus says whether the dashboard taps the proxies.
type TapStatus struct {
	Enabled bool   `json:"enabled"`
	Error   string `json:"error,omitempty"`
	Streams int    `json:"streams"`
}

// TopRow is a hot path from tap.
type TopRow struct {
	Source      string  `json:"source"`
	Destination string  `json:"destination"`
	Method      string  `json:"method"`
	Path        string  `json:"path"`
	Count       int     `json:"count"`
	SuccessRate float64 `json:"successRate"`
	BestMs      float64 `json:"bestMs"`
	WorstMs     float64 `json:"worstMs"`
	LastMs      float64 `json:"lastMs"`
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func golden(g viz.Golden, d time.Duration) Golden {
	return Golden{Requests: g.Requests(), RPS: num(g.RPS(d)), SuccessRate: num(g.SuccessRate()),
		P50: num(g.P(0.5)), P95: num(g.P(0.95)), P99: num(g.P(0.99)), MTLSShare: num(g.MTLSShare())}
}

// nodeID names a node: NAMESPACE/NAME for workloads, with the kind for
// an EgressNetwork (which may share a workload's name).
func nodeID(w viz.Workload) string {
	if w.Kind == viz.KindEgressNetwork {
		return w.Namespace + "/" + viz.KindEgressNetwork + "/" + w.Name
	}
	return w.Namespace + "/" + w.Name
}

// history keeps the rounds of scrapes the frames are computed from.
type history struct {
	mu     sync.Mutex
	rounds []*viz.Round
	points []Point
	max    int
}

func (h *history) add(r *viz.Round) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds = append(h.rounds, r)
	if len(h.rounds) > h.max {
		h.rounds = h.rounds[len(h.rounds)-h.max:]
	}
}

// windowBefore returns the latest round and the newest round at least d
// older than it (or the oldest kept).
func (h *history) windowBefore(d time.Duration) (prev, cur *viz.Round) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rounds) == 0 {
		return nil, nil
	}
	cur = h.rounds[len(h.rounds)-1]
	for i := len(h.rounds) - 2; i >= 0; i-- {
		prev = h.rounds[i]
		if cur.At.Sub(prev.At) >= d {
			break
		}
	}
	return prev, cur
}

func (h *history) addPoint(p Point, maxPoints int) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.points = append(h.points, p)
	if len(h.points) > maxPoints {
		h.points = h.points[len(h.points)-maxPoints:]
	}
	return append([]Point(nil), h.points...)
}

// buildFrame computes the views of window w.
func buildFrame(w viz.Window, at time.Time, explainHint func(viz.DeniedPair) string) Frame {
	f := Frame{At: at, WindowSeconds: w.Duration.Seconds(), Nodes: []Node{}, Edges: []Edge{}, Routes: []Route{}, Authz: []Authz{}, Unreachable: []string{}, Denials: []Denial{}}
	var targets []viz.Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
		if ts.Err != nil {
			f.Unreachable = append(f.Unreachable, ts.Target.Key()+": "+ts.Err.Error())
		}
	}
	ids := map[string]string{}
	pods := map[string][]string{}
	for _, t := range targets {
		id := t.Namespace + "/" + t.Workload
		if t.Workload == "" {
			id = t.Namespace + "/" + t.Pod
		}
		ids[id] = t.Identity
		pods[id] = append(pods[id], t.Pod)
	}
	for _, row := range viz.Stat(w, viz.Resource{Kind: viz.KindWorkload}) {
		id := row.Namespace + "/" + row.Name
		f.Nodes = append(f.Nodes, Node{ID: id, Namespace: row.Namespace, Kind: row.WorkloadKind, Name: row.Name, Identity: ids[id],
			Pods: row.Pods, Meshed: row.Meshed, Golden: golden(row.Golden, w.Duration), TCP: row.TCPConnections, PodNames: pods[id]})
	}
	known := map[string]bool{}
	for _, n := range f.Nodes {
		known[n.ID] = true
	}
	for _, e := range viz.Edges(w) {
		src, dst := nodeID(e.Src), nodeID(e.Dst)
		for _, x := range []viz.Workload{e.Src, e.Dst} {
			if id := nodeID(x); !known[id] {
				known[id] = true
				f.Nodes = append(f.Nodes, Node{ID: id, Namespace: x.Namespace, Kind: x.Kind, Name: x.Name})
			}
		}
		var deniedRate *float64
		if w.Duration > 0 {
			deniedRate = num(e.Denied / w.Duration.Seconds())
		}
		f.Edges = append(f.Edges, Edge{Src: src, Dst: dst, ClientID: e.ClientID, ServerID: e.ServerID, Secured: e.Secured(),
			Denied: e.Denied, DeniedRS: deniedRate, Golden: golden(e.Golden(), w.Duration)})
	}
	for _, n := range f.Nodes {
		if n.Pods == 0 {
			continue
		}
		r := viz.Resource{Kind: viz.KindWorkload, Namespace: n.Namespace, Name: n.Name}
		for _, rt := range viz.Routes(w, r, nil) {
			f.Routes = append(f.Routes, Route{Workload: n.ID, Authority: rt.Authority, Route: rt.Route, Golden: golden(rt.Golden, w.Duration)})
		}
		for _, a := range viz.Authz(w, r) {
			f.Authz = append(f.Authz, Authz{Workload: n.ID, Server: a.Server, Route: a.Route, Authorization: a.Authorization, Port: a.Port, Allowed: a.Allowed, Denied: a.Denied})
			for _, d := range a.Denials {
				from := "(no identity)"
				src := ""
				if d.From != "" {
					from = d.From
					src = nodeID(d.FromWorkload)
				}
				f.Denials = append(f.Denials, Denial{Edge: src + "->" + n.ID, From: from, Namespace: d.ToNamespace, Pod: d.ToPod, Port: d.Port, Count: d.Count, Command: explainHint(d)})
			}
		}
	}
	return f
}

// point extracts the chart values of a frame.
func point(f Frame) Point {
	p := Point{At: f.At, Series: map[string]Golden{}}
	for _, n := range f.Nodes {
		if n.Pods > 0 {
			p.Series["node:"+n.ID] = n.Golden
		}
	}
	for _, r := range f.Routes {
		p.Series["route:"+r.Workload+"|"+r.Route] = r.Golden
	}
	return p
}

// scrapeLoop scrapes src every interval until ctx ends, calling each with
// the new round.
func scrapeLoop(ctx context.Context, src viz.Source, interval time.Duration, log *slog.Logger, each func(*viz.Round)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r, err := viz.ScrapeAll(ctx, src, nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("dashboard: listing the proxies failed", "error", err)
		} else {
			each(r)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
