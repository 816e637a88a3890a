// Package authz decides whether the inbound proxy accepts a connection. It
// reads the proxy API's own policy representation, the
// io.linkerd.proxy.inbound Server message a policy controller streams for
// each port, and applies it to what the proxy knows about the peer at the
// transport level: its address, whether it came over mesh TLS, and the
// identity from its verified certificate.
//
// [Evaluate] is a pure function. It fails closed: a nil Server, an
// authorization without networks, without an authentication or with a kind
// of authentication this version does not know, and an identity list that
// names nothing, all match no one.
package authz

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
)

// Peer is what the inbound proxy knows about a connection's client.
type Peer struct {
	// Addr is the client's address as the socket reports it.
	Addr netip.Addr
	// TLS is true when the proxy terminated mesh TLS for the connection.
	TLS bool
	// Identity is the client's identity from its verified certificate; empty
	// without TLS or when the client sent no certificate.
	Identity string
	// Target is the local address the client connected to, when known. If
	// the Server lists server_ips, the target must be one of them.
	Target netip.Addr
}

// Decision is the result of Evaluate.
type Decision struct {
	Allowed bool
	// Index is the position of the allowing authorization in the Server's
	// list, -1 on deny.
	Index int
	// Name identifies the allowing authorization for metrics and logs.
	Name string
	// Reason explains a denial.
	Reason string
}

// Evaluate applies srv to a connection from peer. The first authorization
// that matches allows it; if none does, it is denied.
func Evaluate(srv *inbound.Server, peer Peer) Decision {
	if srv == nil {
		return Decision{Index: -1, Reason: "no policy for this port"}
	}
	addr := peer.Addr.Unmap()
	if !addr.IsValid() {
		return Decision{Index: -1, Reason: "peer address unknown"}
	}
	if ips := srv.GetServerIps(); len(ips) > 0 && peer.Target.IsValid() {
		found := false
		for _, ip := range ips {
			if a, ok := IPAddr(ip); ok && a == peer.Target.Unmap() {
				found = true
				break
			}
		}
		if !found {
			return Decision{Index: -1, Reason: fmt.Sprintf("target %s is not one of the server's addresses", peer.Target)}
		}
	}
	for i, az := range srv.GetAuthorizations() {
		if matchNetworks(az.GetNetworks(), addr) && matchAuthn(az.GetAuthentication(), peer) {
			return Decision{Allowed: true, Index: i, Name: Name(az, i)}
		}
	}
	who := "unauthenticated client"
	if peer.Identity != "" {
		who = "client " + peer.Identity
	} else if peer.TLS {
		who = "mesh TLS client without identity"
	}
	return Decision{Index: -1, Reason: fmt.Sprintf("no authorization permits %s from %s", who, addr)}
}

// Name returns a label for an authorization: its metadata resource name or
// default name, its "name" label, or its index.
func Name(az *inbound.Authz, index int) string {
	if md := az.GetMetadata(); md != nil {
		if r := md.GetResource(); r != nil && r.GetName() != "" {
			if r.GetKind() != "" {
				return strings.ToLower(r.GetKind()) + ":" + r.GetName()
			}
			return r.GetName()
		}
		if d := md.GetDefault(); d != "" {
			return "default:" + d
		}
	}
	if n := az.GetLabels()["name"]; n != "" {
		return n
	}
	return fmt.Sprintf("authz-%d", index)
}

func matchNetworks(nets []*inbound.Network, addr netip.Addr) bool {
	for _, n := range nets {
		p, ok := IPNetwork(n.GetNet())
		if !ok || !p.Contains(addr) {
			continue
		}
		excluded := false
		for _, ex := range n.GetExcept() {
			// An except entry we cannot read excludes everything: fail closed.
			if e, ok := IPNetwork(ex); !ok || e.Contains(addr) {
				excluded = true
				break
			}
		}
		if !excluded {
			return true
		}
	}
	return false
}

func matchAuthn(a *inbound.Authn, peer Peer) bool {
	switch {
	case a.GetUnauthenticated() != nil:
		return true
	case a.GetMeshTLS() != nil:
		if !peer.TLS {
			return false
		}
		m := a.GetMeshTLS()
		switch {
		case m.GetUnauthenticated() != nil:
			return true
		case m.GetIdentities() != nil:
			return peer.Identity != "" && MatchIdentity(m.GetIdentities(), peer.Identity)
		}
	}
	return false
}

// MatchIdentity reports whether id is one of the literal identities or ends
// with one of the suffixes. Names compare case-insensitively; a suffix with
// no parts matches every identity; a suffix matches the name itself and
// any name that ends with "." followed by it.
func MatchIdentity(p *inbound.Authn_PermitMeshTLS_PermitClientIdentities, id string) bool {
	id = strings.TrimSuffix(strings.ToLower(id), ".")
	if id == "" {
		return false
	}
	for _, lit := range p.GetIdentities() {
		if strings.TrimSuffix(strings.ToLower(lit.GetName()), ".") == id {
			return true
		}
	}
	for _, sfx := range p.GetSuffixes() {
		parts := sfx.GetParts()
		if len(parts) == 0 {
			return true
		}
		s := strings.ToLower(strings.Join(parts, "."))
		if s == "" {
			continue
		}
		if id == s || strings.HasSuffix(id, "."+s) {
			return true
		}
	}
	return false
}

// IPAddr converts a proxy API address.
func IPAddr(a *pnet.IPAddress) (netip.Addr, bool) {
	switch {
	case a == nil:
		return netip.Addr{}, false
	case a.GetIpv6() != nil:
		v6 := a.GetIpv6()
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i] = byte(v6.GetFirst() >> (56 - 8*i))
			b[8+i] = byte(v6.GetLast() >> (56 - 8*i))
		}
		return netip.AddrFrom16(b).Unmap(), true
	case a.GetIp() != nil:
		v := a.GetIpv4()
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
	}
	return netip.Addr{}, false
}

// IPNetwork converts a proxy API network.
func IPNetwork(n *pnet.IPNetwork) (netip.Prefix, bool) {
	a, ok := IPAddr(n.GetIp())
	if !ok || int(n.GetPrefixLen()) > a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, int(n.GetPrefixLen())).Masked(), true
}

// Address converts an address to the proxy API form.
func Address(a netip.Addr) *pnet.IPAddress {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])}}
	}
	b := a.As16()
	var first, last uint64
	for i := 0; i < 8; i++ {
		first = first<<8 | uint64(b[i])
		last = last<<8 | uint64(b[8+i])
	}
	return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv6{Ipv6: &pnet.IPv6{First: first, Last: last}}}
}

// Network converts a prefix to the proxy API form.
func Network(p netip.Prefix) *inbound.Network {
	return &inbound.Network{Net: &pnet.IPNetwork{Ip: Address(p.Addr()), PrefixLen: uint32(p.Bits())}}
}

// Default inbound policy names, as Linkerd spells them.
const (
	AllUnauthenticated     = "all-unauthenticated"
	AllAuthenticated       = "all-authenticated"
	ClusterUnauthenticated = "cluster-unauthenticated"
	ClusterAuthenticated   = "cluster-authenticated"
	Deny                   = "deny"
	Audit                  = "audit"
)

// DefaultClusterNetworks are the networks "cluster-*" policies allow when
// none are configured (the private ranges Linkerd uses by default).
var DefaultClusterNetworks = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("fd00::/8"),
}

var allNetworks = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// ErrUnknownPolicy is returned by DefaultServer for an unknown name.
var ErrUnknownPolicy = errors.New("authz: unknown default policy")

// DefaultServer builds the Server a default inbound policy stands for, for
// ports the policy controller does not describe. cluster is used by the
// cluster-* policies (nil means DefaultClusterNetworks).
func DefaultServer(policy string, cluster []netip.Prefix) (*inbound.Server, error) {
	if cluster == nil {
		cluster = DefaultClusterNetworks
	}
	nets := func(ps []netip.Prefix) []*inbound.Network {
		out := make([]*inbound.Network, 0, len(ps))
		for _, p := range ps {
			out = append(out, Network(p))
		}
		return out
	}
	unauth := &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}
	anyID := &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
		Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: &inbound.Authn_PermitMeshTLS_PermitClientIdentities{
			Suffixes: []*inbound.IdentitySuffix{{}},
		}},
	}}}
	authz := func(n []netip.Prefix, a *inbound.Authn) []*inbound.Authz {
		return []*inbound.Authz{{Networks: nets(n), Authentication: a, Labels: map[string]string{"name": "default:" + policy}}}
	}
	srv := &inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{}}},
		Labels:   map[string]string{"kind": "default", "name": policy},
	}
	switch policy {
	case AllUnauthenticated, Audit:
		srv.Authorizations = authz(allNetworks, unauth)
	case AllAuthenticated:
		srv.Authorizations = authz(allNetworks, anyID)
	case ClusterUnauthenticated:
		srv.Authorizations = authz(cluster, unauth)
	case ClusterAuthenticated:
		srv.Authorizations = authz(cluster, anyID)
	case Deny:
	default:
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownPolicy, policy, strings.Join(DefaultPolicies(), ", "))
	}
	return srv, nil
}

// DefaultPolicies lists the names DefaultServer accepts.
func DefaultPolicies() []string {
	return []string{AllUnauthenticated, AllAuthenticated, ClusterUnauthenticated, ClusterAuthenticated, Deny, Audit}
}
