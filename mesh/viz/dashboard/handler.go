package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

//go:embed static
var static embed.FS

// Handler serves the dashboard (read-only):
//
//	GET /                 the page (static files embedded in the binary)
//	GET /api/frame        the latest frame as JSON
//	GET /api/events       a stream (text/event-stream) of frames and tap events
//	GET /api/explain      ?from=ID&namespace=NS&pod=POD&port=PORT: the policy
//	                      explanation of a denial the latest frame shows
//
// Any other method gets 405. A Host header that is neither an IP literal,
// "localhost" nor an allowed host gets 421. At most WithMaxRequests
// requests and WithMaxStreams streams are served at once; more get 503.
func (d *Dashboard) Handler() http.Handler {
	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /api/frame", d.serveFrame)
	mux.HandleFunc("GET /api/events", d.serveEvents)
	mux.HandleFunc("GET /api/explain", d.serveExplain)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read-only", http.StatusMethodNotAllowed)
			return
		}
		if !d.hostAllowed(r.Host) {
			http.Error(w, "unknown host name: reach the dashboard by its address", http.StatusMisdirectedRequest)
			return
		}
		select {
		case d.reqs <- struct{}{}:
			defer func() { <-d.reqs }()
		default:
			http.Error(w, "too many requests at once", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (d *Dashboard) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if net.ParseIP(host) != nil {
		return true
	}
	return d.cfg.hosts[strings.ToLower(host)]
}

func (d *Dashboard) frame() *Frame {
	if f := d.latest.Load(); f != nil {
		return f
	}
	return &Frame{Nodes: []Node{}, Edges: []Edge{}, Routes: []Route{}, Authz: []Authz{}, Unreachable: []string{}, History: []Point{}, Top: []TopRow{}, Denials: []Denial{}}
}

func (d *Dashboard) serveFrame(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(d.frame())
}

// tapBatch bounds the tap events sent in one message, and tapFlush how
// often they are sent.
const (
	tapBatch = 64
	tapFlush = 250 * time.Millisecond
)

func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	if n := d.streams.Add(1); n > int64(d.cfg.maxStreams) {
		d.streams.Add(-1)
		http.Error(w, "too many live streams", http.StatusServiceUnavailable)
		return
	}
	defer d.streams.Add(-1)
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.streamLife)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	sub, recent := d.hub.subscribe()
	defer d.hub.unsubscribe(sub)

	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !send("frame", d.frame()) || (len(recent) > 0 && !send("tap", recent)) {
		return
	}
	flush := time.NewTicker(tapFlush)
	defer flush.Stop()
	var batch []viz.Event
	for {
		changed := *d.changed.Load()
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if !send("frame", d.frame()) {
				return
			}
		case e := <-sub.ch:
			if len(batch) < tapBatch {
				batch = append(batch, e)
			} else {
				sub.dropped.Add(1)
			}
		case <-flush.C:
			if len(batch) > 0 {
				if !send("tap", batch) {
					return
				}
				batch = batch[:0]
			}
		}
	}
}

// maxQueryValue bounds each query parameter of /api/explain.
const maxQueryValue = 512

func (d *Dashboard) serveExplain(w http.ResponseWriter, r *http.Request) {
	if d.cfg.explainer == nil {
		http.Error(w, "no policy to explain with", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	get := func(k string) string {
		v := q.Get(k)
		if len(v) > maxQueryValue {
			return ""
		}
		return v
	}
	from, ns, pod, port := get("from"), get("namespace"), get("pod"), get("port")
	if from == "(no identity)" {
		from = ""
	}
	// Only denials the dashboard shows are explained: the endpoint is not
	// a general policy oracle.
	var found *Denial
	for _, dn := range d.frame().Denials {
		f := dn.From
		if f == "(no identity)" {
			f = ""
		}
		if f == from && dn.Namespace == ns && dn.Pod == pod && dn.Port == port {
			found = &dn
			break
		}
	}
	if found == nil {
		http.Error(w, "no such denial in the current view", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	text, err := d.cfg.explainer.Explain(ctx, viz.DeniedPair{From: from, ToNamespace: ns, ToPod: pod, Port: port})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	out := struct {
		Explanation string `json:"explanation"`
		Command     string `json:"command"`
		Error       string `json:"error,omitempty"`
	}{Explanation: text, Command: found.Command}
	if err != nil {
		out.Error = err.Error()
	}
	_ = json.NewEncoder(w).Encode(out)
}
