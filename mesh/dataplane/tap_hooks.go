package dataplane

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http2"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// The data path's calls into tap. Each is made only when p.tap.on(), so a
// proxy without open taps pays one atomic load per request; with taps open
// and none taking the request, building and matching the view allocates
// nothing (BenchmarkTapDataPath shows it).

// tapOutbound offers an outbound request to the open taps. ep is the
// endpoint it is sent to (zero when the proxy answers it itself).
func (p *Proxy) tapOutbound(r *http.Request, info *connInfo, route string, ep Endpoint) *tapRequest {
	v := tapView{
		direction: ptap.TapEvent_OUTBOUND, src: info.remote, dst: ep.Addr, r: r,
		scheme: "http", method: r.Method, authority: r.Host, path: escapedPath(r), route: route, ep: ep,
	}
	return p.tap.start(&v)
}

// tapInbound offers an inbound request to the open taps, described with
// the policy that decided on it.
func (p *Proxy) tapInbound(r *http.Request, info *connInfo, st *portState, res *authz.Result) *tapRequest {
	v := tapView{
		direction: ptap.TapEvent_INBOUND, src: info.remote, dst: info.targetAddr, r: r,
		scheme: "http", method: r.Method, authority: r.Host, path: escapedPath(r), route: routeLabel(res),
		info: info, st: st, res: res,
	}
	return p.tap.start(&v)
}

// routeLabel names the policy route that matched, "" without one.
func routeLabel(res *authz.Result) string {
	m, ok := res.Route()
	if !ok {
		return ""
	}
	if m.Default != "" {
		return m.Default
	}
	return m.Name
}

// meta renders the source and destination labels of an admitted request;
// the source's go in buf (two at most), the destination's in dstBuf
// (reused from the request's last use).
//
// Outbound, the source is the local application over loopback and the
// destination is described by its discovery labels and identity. Inbound,
// the source is the client (its verified identity, or why there is none)
// and the destination is the local application, described by the policy
// that decided.
func (v *tapView) meta(buf, dstBuf []tapLabel) (src, dst []tapLabel) {
	if v.direction == ptap.TapEvent_OUTBOUND {
		ep := &v.ep
		dst = slices.Grow(dstBuf, len(ep.MetricLabels)+2)
		for k, val := range ep.MetricLabels {
			if k == "tls" || (k == "server_id" && ep.Identity != "") {
				continue // replaced below
			}
			dst = append(dst, tapLabel{k, val})
		}
		if ep.Identity != "" {
			dst = append(dst, tapLabel{"tls", "true"}, tapLabel{"server_id", ep.Identity})
		} else {
			dst = append(dst, tapLabel{"tls", metricstore.NoTLSNotProvidedDst})
		}
		return append(buf, tapLabel{"tls", metricstore.NoTLSLoopback}), dst
	}
	if v.info.peer.TLS {
		src = append(buf, tapLabel{"tls", "true"}, tapLabel{"client_id", v.info.peer.Identity})
	} else {
		src = append(buf, tapLabel{"tls", metricstore.NoTLSFromRemote})
	}
	l := &metricstore.Labels{}
	for _, g := range v.policyMetas() {
		if g.ok {
			metricstore.Meta(l, g.prefix, g.meta)
		}
	}
	dst = slices.Grow(dstBuf, len(l.Names)+1)
	for i, n := range l.Names {
		dst = append(dst, tapLabel{n, l.Values[i]})
	}
	return src, append(dst, tapLabel{"tls", metricstore.NoTLSLoopback})
}

// tapPolicyMeta is one policy object an inbound request's labels name.
type tapPolicyMeta struct {
	prefix string
	meta   authz.Meta
	ok     bool
}

// policyMetas are the server, the route (when one matched) and the
// authorization (when one allowed) of an inbound request.
func (v *tapView) policyMetas() [3]tapPolicyMeta {
	var srv *authz.Server
	if v.st != nil {
		srv = v.st.srv
	}
	out := [3]tapPolicyMeta{{prefix: "srv", meta: srvMeta(srv), ok: true}, {prefix: "route"}, {prefix: "authz"}}
	out[1].meta, out[1].ok = v.res.Route()
	if v.res.Authorization != nil {
		out[2].meta, out[2].ok = v.res.Authorization.Meta, true
	}
	return out
}

// dstLabelIs reports whether the request's destination has label k with
// value want, as meta would render it, without rendering (allocating)
// anything.
func (v *tapView) dstLabelIs(k, want string) bool {
	if v.direction == ptap.TapEvent_OUTBOUND {
		ep := &v.ep
		switch {
		case k == "tls" && ep.Identity != "":
			return want == "true"
		case k == "tls":
			return want == metricstore.NoTLSNotProvidedDst
		case k == "server_id" && ep.Identity != "":
			return want == ep.Identity
		}
		val, ok := ep.MetricLabels[k]
		return ok && val == want
	}
	if k == "tls" {
		return want == metricstore.NoTLSLoopback
	}
	prefix, field, ok := strings.Cut(k, "_")
	if !ok {
		return false
	}
	for _, g := range v.policyMetas() {
		if g.ok && g.prefix == prefix {
			return metaLabelIs(g.meta, field, want)
		}
	}
	return false
}

// metaLabelIs reports whether metaLabels renders field (group, kind or
// name) of m as want.
func metaLabelIs(m authz.Meta, field, want string) bool {
	if m.Default != "" {
		switch field {
		case "group":
			return want == ""
		case "kind":
			return want == "default"
		case "name":
			return want == metricstore.LabelValue(m.Default)
		}
		return false
	}
	switch field {
	case "group":
		return want == metricstore.LabelValue(m.Group)
	case "kind":
		return lowerIs(m.Kind, want)
	case "name":
		return want == metricstore.LabelValue(m.Name)
	}
	return false
}

// lowerIs reports whether metricstore.LabelValue(strings.ToLower(s)) == want, without
// allocating for an ASCII s.
func lowerIs(s, want string) bool {
	if len(s) > metricstore.MaxLabelValue {
		return want == metricstore.LabelValue(strings.ToLower(s))
	}
	if len(s) != len(want) {
		// ToLower keeps an ASCII string's length; a non-ASCII one takes
		// the slow path.
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return want == metricstore.LabelValue(strings.ToLower(s))
			}
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return want == metricstore.LabelValue(strings.ToLower(s))
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

func srvMeta(s *authz.Server) authz.Meta {
	if s == nil {
		return authz.Meta{}
	}
	return s.Meta
}

// tapGRPCStatus parses a grpc-status value for a tap event: -1 when absent
// or not a number.
func tapGRPCStatus(v string) int64 {
	if v == "" {
		return -1
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return -1
	}
	return int64(n)
}

// tapResetCode is the HTTP/2 error code of a stream reset that ended a
// response body, -1 when the error is not one.
func tapResetCode(err error) int64 {
	var se http2.StreamError
	if errors.As(err, &se) {
		return int64(se.Code)
	}
	switch {
	case errors.Is(err, errClientGone):
		return int64(http2.ErrCodeCancel)
	case errors.Is(err, errUpstreamBody):
		return int64(http2.ErrCodeInternal)
	}
	return -1
}
