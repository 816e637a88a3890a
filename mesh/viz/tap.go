package viz

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// EventKind is the phase of a request a tap event reports.
type EventKind string

// Kinds of tap events, as the proxy API's TapEvent.Http carries them.
const (
	RequestInit  EventKind = "req"
	ResponseInit EventKind = "rsp"
	ResponseEnd  EventKind = "end"
)

// Event is one tap event, decoded from io.linkerd.proxy.tap.TapEvent and
// enriched with what viz knows about the pods at each end.
type Event struct {
	Kind EventKind `json:"kind"`
	// Proxy is the pod whose proxy reported the event; Direction is
	// "inbound" or "outbound" from that proxy's point of view.
	Proxy     string `json:"proxy"`
	Direction string `json:"direction"`
	// Source and Destination are the peers' addresses; SourceMeta and
	// DestinationMeta the labels the proxy and viz know of them (pod,
	// namespace, workload, tls, client_id/server_id).
	Source          netip.AddrPort    `json:"source"`
	Destination     netip.AddrPort    `json:"destination"`
	SourceMeta      map[string]string `json:"sourceMeta,omitempty"`
	DestinationMeta map[string]string `json:"destinationMeta,omitempty"`
	RouteMeta       map[string]string `json:"routeMeta,omitempty"`
	// StreamBase and Stream identify the request within the proxy.
	StreamBase uint32 `json:"streamBase"`
	Stream     uint64 `json:"stream"`
	// Request fields (Kind RequestInit).
	Method    string `json:"method,omitempty"`
	Scheme    string `json:"scheme,omitempty"`
	Authority string `json:"authority,omitempty"`
	Path      string `json:"path,omitempty"`
	// Status is the HTTP status (ResponseInit).
	Status uint32 `json:"status,omitempty"`
	// SinceRequest is the time since the request began (ResponseInit and
	// ResponseEnd); SinceResponse since the response began (ResponseEnd).
	SinceRequest  time.Duration `json:"sinceRequestNs,omitempty"`
	SinceResponse time.Duration `json:"sinceResponseNs,omitempty"`
	// ResponseBytes is the response body size (ResponseEnd).
	ResponseBytes uint64 `json:"responseBytes,omitempty"`
	// GRPCStatus is the grpc-status of the stream's end, ResetCode the
	// HTTP/2 reset error code, when the stream ended that way.
	GRPCStatus *uint32 `json:"grpcStatus,omitempty"`
	ResetCode  *uint32 `json:"resetCode,omitempty"`
	// Headers and Trailers are present only when the tap asked for them.
	Headers  []Header `json:"headers,omitempty"`
	Trailers []Header `json:"trailers,omitempty"`
}

// Header is one header of a tapped request or response.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TLS reports whether the tapped connection was mutual TLS, as the proxy
// labels it ("true" in the tls label of the peer's meta).
func (e Event) TLS() bool {
	return e.SourceMeta["tls"] == "true" || e.DestinationMeta["tls"] == "true"
}

// peerName names a peer for tables: its workload (or pod) when known,
// else its address.
func peerName(meta map[string]string, addr netip.AddrPort) string {
	if _, name := workloadOf(meta, ""); name != "" {
		return name
	}
	if p := meta["pod"]; p != "" {
		return p
	}
	if addr.IsValid() {
		return addr.Addr().String()
	}
	return "-"
}

// Line renders the event as `weft viz tap` prints it: one line starting
// with req, rsp or end, then key=value pairs.
func (e Event) Line() string {
	var b strings.Builder
	dir := "in"
	if e.Direction == "outbound" {
		dir = "out"
	}
	tls := "false"
	if e.TLS() {
		tls = "true"
	}
	fmt.Fprintf(&b, "%s id=%d:%d proxy=%s src=%s dst=%s tls=%s", e.Kind, e.StreamBase, e.Stream, dir, e.Source, e.Destination, tls)
	if id := e.SourceMeta["client_id"]; id != "" {
		fmt.Fprintf(&b, " client_id=%s", id)
	}
	if id := e.DestinationMeta["server_id"]; id != "" {
		fmt.Fprintf(&b, " server_id=%s", id)
	}
	switch e.Kind {
	case RequestInit:
		fmt.Fprintf(&b, " :method=%s :authority=%s :path=%s", e.Method, e.Authority, e.Path)
	case ResponseInit:
		fmt.Fprintf(&b, " :status=%d latency=%dµs", e.Status, e.SinceRequest.Microseconds())
	case ResponseEnd:
		switch {
		case e.GRPCStatus != nil:
			fmt.Fprintf(&b, " grpc-status=%d", *e.GRPCStatus)
		case e.ResetCode != nil:
			fmt.Fprintf(&b, " reset-error=%d", *e.ResetCode)
		}
		fmt.Fprintf(&b, " duration=%dµs response-length=%dB", e.SinceResponse.Microseconds(), e.ResponseBytes)
	}
	return b.String()
}

// Filter selects tap events. Zero fields match everything.
type Filter struct {
	// Method, Authority (exact) and PathPrefix select requests.
	Method     string
	Authority  string
	PathPrefix string
	// To selects requests to a workload or pod name (destination meta).
	To string
}

// Matches reports whether a request's first event passes the filter.
func (f Filter) Matches(e Event) bool {
	if f.Method != "" && !strings.EqualFold(e.Method, f.Method) {
		return false
	}
	if f.Authority != "" && e.Authority != f.Authority {
		return false
	}
	if f.PathPrefix != "" && !strings.HasPrefix(e.Path, f.PathPrefix) {
		return false
	}
	if f.To != "" {
		_, wl := workloadOf(e.DestinationMeta, "")
		if wl != f.To && e.DestinationMeta["pod"] != f.To {
			return false
		}
	}
	return true
}

// Success classifies a finished request as Linkerd does: a 5xx status, a
// stream reset, or a gRPC status of Unknown, DeadlineExceeded, Internal,
// Unavailable or DataLoss is a failure.
func Success(status uint32, end Event) bool {
	if status >= 500 || end.ResetCode != nil {
		return false
	}
	if g := end.GRPCStatus; g != nil {
		switch *g {
		case 2, 4, 13, 14, 15:
			return false
		}
	}
	return true
}

// TopRow is one line of `weft viz top`: requests sharing a source,
// destination, method and path.
type TopRow struct {
	Source, Destination string
	Method, Path        string
	Count               int
	Successes           int
	Best, Worst, Last   time.Duration
}

// SuccessRate is Successes/Count.
func (r TopRow) SuccessRate() float64 {
	if r.Count == 0 {
		return 0
	}
	return float64(r.Successes) / float64(r.Count)
}

// Top aggregates finished requests from tap events into the hottest paths.
// It pairs each request's events by proxy and stream, is bounded (at most
// MaxPending requests in flight; older ones are dropped and counted) and
// is not safe for concurrent use.
type Top struct {
	pending map[topID]*topReq
	order   []topID
	rows    map[topRowKey]*TopRow
	// Dropped counts requests forgotten before they finished.
	Dropped int
}

// MaxPending bounds the requests Top tracks before their end.
const MaxPending = 10000

// MaxTopRows bounds the rows of Top; requests past it are counted in one
// row with path OtherPath (paths come from clients, who could otherwise
// grow the table without limit).
const MaxTopRows = 1000

// OtherPath is the path of the row that collects paths past MaxTopRows.
const OtherPath = "(other paths)"

type topID struct {
	proxy  string
	base   uint32
	stream uint64
}

type topReq struct {
	init   Event
	status uint32
}

type topRowKey struct{ src, dst, method, path string }

// NewTop returns an empty Top.
func NewTop() *Top {
	return &Top{pending: map[topID]*topReq{}, rows: map[topRowKey]*TopRow{}}
}

// Add feeds one event.
func (t *Top) Add(e Event) {
	id := topID{e.Proxy, e.StreamBase, e.Stream}
	switch e.Kind {
	case RequestInit:
		if _, ok := t.pending[id]; !ok {
			for len(t.pending) >= MaxPending && len(t.order) > 0 {
				oldest := t.order[0]
				t.order = t.order[1:]
				if _, ok := t.pending[oldest]; ok {
					delete(t.pending, oldest)
					t.Dropped++
				}
			}
			if len(t.order) > 2*MaxPending {
				t.order = slices.DeleteFunc(t.order, func(o topID) bool { _, ok := t.pending[o]; return !ok })
			}
			t.order = append(t.order, id)
		}
		t.pending[id] = &topReq{init: e}
	case ResponseInit:
		if r := t.pending[id]; r != nil {
			r.status = e.Status
		}
	case ResponseEnd:
		r := t.pending[id]
		if r == nil {
			return
		}
		delete(t.pending, id)
		k := topRowKey{peerName(r.init.SourceMeta, r.init.Source), peerName(r.init.DestinationMeta, r.init.Destination), r.init.Method, r.init.Path}
		row := t.rows[k]
		if row == nil && len(t.rows) >= MaxTopRows {
			k = topRowKey{src: "-", dst: "-", path: OtherPath}
			row = t.rows[k]
		}
		lat := e.SinceRequest
		if row == nil {
			row = &TopRow{Source: k.src, Destination: k.dst, Method: k.method, Path: k.path, Best: lat, Worst: lat}
			t.rows[k] = row
		}
		row.Count++
		if Success(r.status, e) {
			row.Successes++
		}
		row.Best = min(row.Best, lat)
		row.Worst = max(row.Worst, lat)
		row.Last = lat
	}
}

// Rows returns the rows, most requests first.
func (t *Top) Rows() []TopRow {
	out := make([]TopRow, 0, len(t.rows))
	for _, r := range t.rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		if out[i].Destination != out[j].Destination {
			return out[i].Destination < out[j].Destination
		}
		return out[i].Path < out[j].Path
	})
	return out
}
