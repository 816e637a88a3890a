package inbound

import (
	"net/netip"
	"strings"

	pbinbound "github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Conn is what the inbound proxy knows of the connection a request came
// on. The connection paths (internal/l4) fill it when they accept the
// connection; the
// peer's identity is the one mesh TLS verified, and FromProxy says the
// peer is a proxy (mesh TLS and the transport header).
type Conn struct {
	httpcore.Conn

	Port      uint16
	Peer      authz.Conn
	Target    netip.Addr // the address the client connected to, when known
	FromProxy bool       // mesh TLS with the transport header: a peer proxy
	DstName   string     // the authority the peer proxy resolved (transport header), checked with discovery before any use
}

// Policy is a port's current policy: as received, as the shared
// evaluator reads it, and what the requests under it share (their
// series, its rate limit). The policy cache of internal/meshstate makes
// one per update; the L4 inbound path reads it too.
type Policy struct {
	Proto *pbinbound.Server
	Srv   *authz.Server

	// Limit is the port's HTTP rate limit (LimitFor); nil for none.
	Limit *Limit

	// series caches the request series resolved under this policy.
	series reqmetrics.Cache[seriesKey, *seriesEntry]
}

// ServerIPsAllow applies a Server's server_ips list, which the shared
// evaluator does not read: when the list is set and the address the client
// connected to is known, it must be one of them.
func ServerIPsAllow(ps *pbinbound.Server, target netip.Addr) bool {
	ips := ps.GetServerIps()
	if len(ips) == 0 || !target.IsValid() {
		return true
	}
	for _, ip := range ips {
		if a, err := authz.AddrFromProto(ip); err == nil && a.Unmap() == target.Unmap() {
			return true
		}
	}
	return false
}

// metaLabel renders policy metadata as a log value: "default:NAME" for a
// built-in policy, "kind:NAME" for a resource.
func metaLabel(m authz.Meta) string {
	if m.Default != "" {
		return "default:" + m.Default
	}
	return strings.ToLower(m.Kind) + ":" + m.Name
}

// routeName names the route a request matched, for the log.
func routeName(res *authz.Result) string {
	m, ok := res.Route()
	if !ok {
		return ""
	}
	return metaLabel(m)
}
