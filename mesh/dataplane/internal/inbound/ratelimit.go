package inbound

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/ratelimit"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"golang.org/x/net/http2/hpack"
)

// Enforcement of a Server's local HTTP rate limit (Linkerd's
// HTTPLocalRateLimitPolicy, authz.Server.RateLimit), as Linkerd's proxy
// does it: after authorization, on every request authorization admitted
// (audit included), the limiter of the port's policy counts the request
// against the total limit, then the override naming the client's verified
// identity or else the client's own per-identity bucket (clients without
// a mesh identity share one). A refused request is answered by the proxy
// and never reaches the application:
//
//	HTTP:  429 Too Many Requests, l5d-proxy-error: total rate limit exceeded: 100rps
//	gRPC:  200, grpc-status 8 (RESOURCE_EXHAUSTED), grpc-message and l5d-proxy-error the same
//
// and counted in Linkerd's inbound_http_local_ratelimit_total with the
// target, the server (srv_*), the policy (ratelimit_group, ratelimit_kind,
// ratelimit_name: the kind as the Inbound API names it,
// "HTTPLocalRateLimitPolicy"), ratelimit_scope ("total", or "identity" for
// per-identity and override limits) and the client's TLS labels. It is
// not an inbound request (request_total), as a denied one is not.
//
// The limiter belongs to the port's policy snapshot. A policy update with
// the same limits (total, identity, overrides) keeps the buckets, so that
// a control plane re-sending the policy, or changing something else in
// it, does not hand every client a fresh burst; other limits start full
// buckets. Linkerd's proxy builds new buckets on every update.
//
// Cost: a port without a rate limit pays one nil check per request; with
// one, the limiter's Allow (no allocation for a client whose bucket
// exists, see internal/ratelimit). The limiter reads the proxy's clock
// (WithClock), which is how tests count requests per window.

// localRateLimitFamily is Linkerd's counter of rate-limited requests.
var localRateLimitFamily = metricstore.NewFamily("inbound_http_local_ratelimit_total",
	"Inbound HTTP requests the server's local rate limit (HTTPLocalRateLimitPolicy) refused.", metricstore.Counter)

// Limit is the rate limit of one port's policy snapshot.
type Limit struct {
	rl *authz.RateLimit   // as the policy gives it (labels)
	l  *ratelimit.Limiter // the buckets, possibly carried over from the previous snapshot

	// refused caches the series refused requests add to.
	refused reqmetrics.Cache[limitKey, *limitSeries]
}

// limitKey identifies the series of a refused request; the server and
// the policy are those of the snapshot holding the cache.
type limitKey struct {
	target netip.AddrPort
	tls    bool
	id     string
	scope  string
}

type limitSeries struct {
	g *metricstore.Group
	s *metricstore.Series
}

// LimitFor returns the rate limit of a new policy snapshot srv (nil when
// it has none), whose buckets read the clock now. prev is the port's
// current snapshot, nil before the first: when its limits are the same,
// its buckets carry over.
func LimitFor(prev *Policy, srv *authz.Server, now func() time.Time) (*Limit, error) {
	rl := srv.RateLimit
	if rl == nil {
		return nil, nil
	}
	if prev != nil && prev.Limit != nil && sameLimits(prev.Limit.rl, rl) {
		return &Limit{rl: rl, l: prev.Limit.l}, nil
	}
	l, err := ratelimit.New(rl, ratelimit.WithClock(now))
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	return &Limit{rl: rl, l: l}, nil
}

// sameLimits reports whether a and b limit the same clients at the same
// rates (their metadata aside).
func sameLimits(a, b *authz.RateLimit) bool {
	return a.Total == b.Total && a.Identity == b.Identity &&
		slices.EqualFunc(a.Overrides, b.Overrides, func(x, y authz.RateLimitOverride) bool {
			return x.RequestsPerSecond == y.RequestsPerSecond && slices.Equal(x.Identities, y.Identities)
		})
}

// rateLimit counts a request that authorization admitted (res) against
// the rate limit of the port's policy st. It returns nil when the request
// may go on; otherwise it has counted the refusal and returns its cause
// (*rateLimitError), which the caller answers (429, or RESOURCE_EXHAUSTED
// for a gRPC call: inboundAnswer, writeRateLimited). Loopback clients skip
// policy, limits included.
func (h *HTTP) rateLimit(st *Policy, info *Conn, res *authz.Result) error {
	if st == nil || st.Limit == nil || res.Reason == authz.ReasonLoopback {
		return nil
	}
	id := ""
	if info.Peer.TLS {
		id = info.Peer.Identity
	}
	d := st.Limit.l.Allow(id)
	if d.Allowed {
		return nil
	}
	scope := d.MetricScope()
	e := st.Limit.series(h, st, info, scope)
	e.g.Touch(time.Now())
	e.s.Inc()
	h.Log.Debug("inbound request rate-limited", "port", info.Port, "scope", d.Scope.String(), "limit", d.RequestsPerSecond, "peer_id", id)
	return &rateLimitError{d.Reason}
}

// series returns the counter of a request refused with scope.
func (lim *Limit) series(h *HTTP, st *Policy, info *Conn, scope string) *limitSeries {
	k := limitKey{target: info.TargetAddr, tls: info.Peer.TLS, id: info.Peer.Identity, scope: scope}
	if e, ok := lim.refused.Load(k); ok && e.g.Alive() {
		return e
	}
	l := metricstore.Target(&metricstore.Labels{}, info.TargetAddr)
	metricstore.Server(l, st.Srv, info.Port)
	// Linkerd's proxy writes the kind as the Inbound API sends it
	// ("HTTPLocalRateLimitPolicy"), not lower-cased as srv_kind is.
	if m := lim.rl.Meta; m.Default != "" {
		l.Add("ratelimit_group", "").Add("ratelimit_kind", "default").Add("ratelimit_name", metricstore.LabelValue(m.Default))
	} else {
		l.Add("ratelimit_group", metricstore.LabelValue(m.Group)).Add("ratelimit_kind", metricstore.LabelValue(m.Kind)).
			Add("ratelimit_name", metricstore.LabelValue(m.Name))
	}
	l.Add("ratelimit_scope", scope)
	metricstore.TLSAccept(l, info.Peer, false)
	g := h.Metrics.Store.Group(l)
	e := &limitSeries{g: g, s: g.Series(localRateLimitFamily, nil)}
	lim.refused.Store(k, e, reqmetrics.MaxCacheEntries)
	return e
}

// writeRateLimited answers a rate-limited request as Linkerd's proxy
// does, with its message (reason) in l5d-proxy-error as it is: for HTTP
// 429 with a short text body, for gRPC a trailers-only response with
// RESOURCE_EXHAUSTED.
func writeRateLimited(w http.ResponseWriter, grpc bool, reason string) {
	h := w.Header()
	clear(h)
	h.Set(httpcore.HeaderProxyError, reason)
	if grpc {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(httpcore.GRPCResourceExhausted))
		h.Set("Grpc-Message", httpcore.GRPCEncode(reason))
		w.WriteHeader(http.StatusOK)
		return
	}
	body := http.StatusText(http.StatusTooManyRequests) + ": " + reason + "\n"
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(body))
}

// rateLimitedFields are writeRateLimited's answer to a gRPC call as
// header fields, for the frame path.
func rateLimitedFields(reason string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: "l5d-proxy-error", Value: reason},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "grpc-status", Value: strconv.Itoa(httpcore.GRPCResourceExhausted)},
		{Name: "grpc-message", Value: httpcore.GRPCEncode(reason)},
	}
}
