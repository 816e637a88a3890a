package dataplane

import (
	"errors"
	"net/http"
	"strconv"

	"golang.org/x/net/http2"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// The data path's calls into tap. Each is made only when p.tap.on(), so a
// proxy without open taps pays one atomic load per request; with taps open
// and none taking the request, building the view allocates nothing.

// tapOutbound offers an outbound request to the open taps. ep is the
// endpoint it is sent to (zero when the proxy answers it itself), taken
// by value so that callers copy it to the heap only when a tap is open.
func (p *Proxy) tapOutbound(r *http.Request, info *connInfo, route string, ep Endpoint) *tapRequest {
	v := tapView{
		direction: ptap.TapEvent_OUTBOUND, src: info.remote, dst: ep.Addr, r: r,
		scheme: "http", method: r.Method, authority: r.Host, path: escapedPath(r), route: route,
		ep: &ep, meta: outboundMeta,
	}
	return p.tap.start(&v)
}

// outboundMeta: the source is the local application over loopback; the
// destination is described by its discovery labels and identity.
func outboundMeta(v *tapView) (map[string]string, map[string]string) {
	ep := v.ep
	m := make(map[string]string, len(ep.MetricLabels)+2)
	for k, val := range ep.MetricLabels {
		m[k] = val
	}
	if ep.Identity != "" {
		m["tls"], m["server_id"] = "true", ep.Identity
	} else {
		m["tls"] = noTLSNotProvidedDst
	}
	return map[string]string{"tls": noTLSLoopback}, m
}

// tapInbound offers an inbound request to the open taps, described with
// the policy that decided on it.
func (p *Proxy) tapInbound(r *http.Request, info *connInfo, st *portState, res *authz.Result) *tapRequest {
	v := tapView{
		direction: ptap.TapEvent_INBOUND, src: info.remote, dst: info.targetAddr, r: r,
		scheme: "http", method: r.Method, authority: r.Host, path: escapedPath(r), route: routeLabel(res),
		info: info, st: st, res: res, meta: inboundMeta,
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

// inboundMeta: the source is the client (its verified identity, or why
// there is none); the destination is the local application, described by
// the policy that decided.
func inboundMeta(v *tapView) (map[string]string, map[string]string) {
	src := map[string]string{"tls": noTLSFromRemote}
	if v.info.peer.TLS {
		src = map[string]string{"tls": "true", "client_id": v.info.peer.Identity}
	}
	l := &labels{}
	var srv *authz.Server
	if v.st != nil {
		srv = v.st.srv
	}
	metaLabels(l, "srv", srvMeta(srv))
	if m, ok := v.res.Route(); ok {
		metaLabels(l, "route", m)
	}
	if v.res.Authorization != nil {
		metaLabels(l, "authz", v.res.Authorization.Meta)
	}
	dst := make(map[string]string, len(l.names)+1)
	for i, n := range l.names {
		dst[n] = l.values[i]
	}
	dst["tls"] = noTLSLoopback
	return src, dst
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
