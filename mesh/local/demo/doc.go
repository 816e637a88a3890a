// Package demo is `weft demo`: the embedded demo mesh, its programs and its
// live view.
//
// The mesh (demo.yaml, MeshFile) has four workloads in namespace demo:
// frontend (HTTP on 8080; each request calls backend through its proxy),
// backend (HTTP on 8081), traffic (a client calling frontend at Config.Rate
// requests per second) and intruder (calling backend twice a second). The
// policy lets only frontend's service account reach backend's http port, so
// every intruder request is denied by backend's proxy: its connection is
// closed, or it gets a 403 once the proxy authorizes HTTP requests; both
// count as denied.
//
// Run starts the mesh with mesh/local, then draws a view every
// Config.Interval: per workload the request rate, success rate and p50/p99
// latency over the last few seconds as the programs saw them (Stats), and
// from each proxy's metrics registry (what its /metrics serves) the inbound
// authorization decisions and the mutual-TLS identities it verified
// (ReadProxy). On a terminal the table is redrawn in place; otherwise plain
// lines are printed (RenderLines). When ctx ends or Config.Duration passes it
// stops everything and prints the summary (RenderSummary).
//
// Stats, ReadProxy and the Render functions are pure and tested on their
// own; Run is tested end to end.
package demo
