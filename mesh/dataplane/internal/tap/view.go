package tap

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// How a request is described to the taps: its endpoint metadata as Linkerd's
// proxy reports it, rendered only for a request a tap took, and matched
// label by label without rendering for one it may not take.

// meta renders the source and destination labels of an admitted request;
// the source's go in buf (two at most), the destination's in dstBuf
// (reused from the request's last use).
//
// Outbound, the source is the local application over loopback and the
// destination is described by its discovery labels and identity. Inbound,
// the source is the client (its verified identity, or why there is none)
// and the destination is the local application, described by the policy
// that decided.
func (v *View) meta(buf, dstBuf []label) (src, dst []label) {
	if v.Direction == ptap.TapEvent_OUTBOUND {
		dst = slices.Grow(dstBuf, len(v.DstLabels)+2)
		for k, val := range v.DstLabels {
			if k == "tls" || (k == "server_id" && v.DstIdentity != "") {
				continue // replaced below
			}
			dst = append(dst, label{k, val})
		}
		if v.DstIdentity != "" {
			dst = append(dst, label{"tls", "true"}, label{"server_id", v.DstIdentity})
		} else {
			dst = append(dst, label{"tls", metricstore.NoTLSNotProvidedDst})
		}
		return append(buf, label{"tls", metricstore.NoTLSLoopback}), dst
	}
	if v.Peer.TLS {
		src = append(buf, label{"tls", "true"}, label{"client_id", v.Peer.Identity})
	} else {
		src = append(buf, label{"tls", metricstore.NoTLSFromRemote})
	}
	l := &metricstore.Labels{}
	for _, g := range v.policyMetas() {
		if g.ok {
			metricstore.Meta(l, g.prefix, g.meta)
		}
	}
	dst = slices.Grow(dstBuf, len(l.Names)+1)
	for i, n := range l.Names {
		dst = append(dst, label{n, l.Values[i]})
	}
	return src, append(dst, label{"tls", metricstore.NoTLSLoopback})
}

// policyMeta is one policy object an inbound request's labels name.
type policyMeta struct {
	prefix string
	meta   authz.Meta
	ok     bool
}

// policyMetas are the server, the route (when one matched) and the
// authorization (when one allowed) of an inbound request.
func (v *View) policyMetas() [3]policyMeta {
	out := [3]policyMeta{{prefix: "srv", meta: srvMeta(v.Server), ok: true}, {prefix: "route"}, {prefix: "authz"}}
	out[1].meta, out[1].ok = v.Result.Route()
	if v.Result.Authorization != nil {
		out[2].meta, out[2].ok = v.Result.Authorization.Meta, true
	}
	return out
}

// dstLabelIs reports whether the request's destination has label k with
// value want, as meta would render it, without rendering (allocating)
// anything.
func (v *View) dstLabelIs(k, want string) bool {
	if v.Direction == ptap.TapEvent_OUTBOUND {
		switch {
		case k == "tls" && v.DstIdentity != "":
			return want == "true"
		case k == "tls":
			return want == metricstore.NoTLSNotProvidedDst
		case k == "server_id" && v.DstIdentity != "":
			return want == v.DstIdentity
		}
		val, ok := v.DstLabels[k]
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

// GRPCStatus parses a grpc-status value for a tap event: -1 when absent
// or not a number.
func GRPCStatus(v string) int64 {
	if v == "" {
		return -1
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return -1
	}
	return int64(n)
}
