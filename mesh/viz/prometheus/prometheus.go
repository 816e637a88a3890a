// Package prometheus reads viz windows from a Prometheus server instead of
// the proxies: `weft viz --prometheus URL`. It asks PromQL over the same
// metric names the proxies export (Linkerd's), so every view of package
// viz works unchanged, and history is whatever the server keeps.
//
// A window of d is the increase() of each counter over [d] and the last
// value of each gauge; a window "since start" (d == 0) is each counter's
// current value. Series must carry the labels Linkerd's scrape
// configuration adds (namespace, pod, and the workload kind such as
// deployment); the pods the series name become the window's targets.
//
// What it trusts: the server's answers are input; a body is cut at
// MaxResponseBytes and MaxSeries series, and a non-numeric sample value is
// an error naming the query.
package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// Limits on what one query may return.
const (
	MaxResponseBytes = 64 << 20
	MaxSeries        = 200000
)

// Client queries one Prometheus server's HTTP API.
type Client struct {
	base *url.URL
	http *http.Client
}

// New returns a client of the server at rawURL (http or https, such as
// http://prometheus.linkerd-viz:9090). hc nil means http.DefaultClient.
func New(rawURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus: %q is not an http(s) URL", rawURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, http: hc}, nil
}

// counters are the counter families the views read; gauges the gauges.
var (
	counters = []string{
		viz.MetricResponses, viz.MetricLatency + "_bucket",
		viz.MetricRouteResp, viz.MetricRouteLatency + "_bucket",
		viz.MetricTCPOpenTotal,
		viz.MetricHTTPAllow, viz.MetricHTTPDeny, viz.MetricTCPAllow, viz.MetricTCPDeny,
		viz.MetricTCPRouteOpen, viz.MetricTCPRouteClose, viz.MetricTLSRouteOpen, viz.MetricTLSRouteClose,
	}
	gauges = []string{viz.MetricTCPOpen}
)

// Window returns the window of d ending now (d == 0: counts since each
// proxy started).
func (c *Client) Window(ctx context.Context, d time.Duration) (viz.Window, error) {
	if d != 0 && d < time.Second {
		return viz.Window{}, fmt.Errorf("prometheus: window %s is under a second", d)
	}
	now := time.Now()
	w := viz.Window{Duration: d, End: now}
	r := strconv.FormatInt(int64(d/time.Second), 10) + "s"
	for _, name := range counters {
		q := name
		if d > 0 {
			q = "increase(" + name + "[" + r + "])"
		}
		ss, err := c.Query(ctx, q, now)
		if err != nil {
			return viz.Window{}, err
		}
		for i := range ss {
			ss[i].Name = name
		}
		w.Series = append(w.Series, ss...)
	}
	for _, name := range gauges {
		ss, err := c.Query(ctx, name, now)
		if err != nil {
			return viz.Window{}, err
		}
		for i := range ss {
			ss[i].Name = name
		}
		w.Series = append(w.Series, ss...)
	}
	w.Targets = targets(w.Series)
	return w, nil
}

// targets are the pods the series name; identities are learnt from the
// server identities their callers verified.
func targets(ss []viz.Series) []viz.TargetStatus {
	byKey := map[string]*viz.Target{}
	for _, s := range ss {
		ns, pod := s.Labels["namespace"], s.Labels["pod"]
		if ns == "" || pod == "" {
			continue
		}
		t := byKey[ns+"/"+pod]
		if t == nil {
			t = &viz.Target{Namespace: ns, Pod: pod}
			for _, k := range viz.WorkloadKinds {
				if v := s.Labels[k]; v != "" {
					t.WorkloadKind, t.Workload = k, v
					break
				}
			}
			byKey[ns+"/"+pod] = t
		}
	}
	for _, s := range ss {
		if s.Labels["tls"] != "true" || s.Labels["server_id"] == "" {
			continue
		}
		if t := byKey[s.Labels["dst_namespace"]+"/"+s.Labels["dst_pod"]]; t != nil {
			t.Identity = s.Labels["server_id"]
			t.ServiceAccount = s.Labels["dst_serviceaccount"]
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]viz.TargetStatus, 0, len(keys))
	for _, k := range keys {
		out = append(out, viz.TargetStatus{Target: *byKey[k]})
	}
	return out
}

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// Query runs an instant PromQL query at t and returns its vector.
func (c *Client) Query(ctx context.Context, q string, t time.Time) ([]viz.Series, error) {
	u := c.base.JoinPath("api", "v1", "query")
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("prometheus: %s: %w", q, err)
	}
	if len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("prometheus: %s: answer larger than %d bytes", q, MaxResponseBytes)
	}
	var ar apiResponse
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("prometheus: %s: %s answered %s, not the query API's JSON", q, c.base.Redacted(), resp.Status)
	}
	if ar.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s: %s", q, ar.ErrorType, ar.Error)
	}
	if ar.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus: %s: result type %q, want vector", q, ar.Data.ResultType)
	}
	if len(ar.Data.Result) > MaxSeries {
		return nil, fmt.Errorf("prometheus: %s: more than %d series", q, MaxSeries)
	}
	out := make([]viz.Series, 0, len(ar.Data.Result))
	for _, r := range ar.Data.Result {
		s, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("prometheus: %s: a sample value is not a string", q)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus: %s: sample value %q: %w", q, s, err)
		}
		l := r.Metric
		delete(l, "__name__")
		out = append(out, viz.Series{Labels: l, Value: v})
	}
	return out, nil
}
