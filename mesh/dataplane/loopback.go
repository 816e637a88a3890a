package dataplane

import (
	"net/netip"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// WithLoopbackAllowed lets inbound connections from loopback addresses
// (127.0.0.0/8, ::1) through whatever the policy, as Linkerd's proxy does:
// in a pod, loopback belongs to the pod, so such a client is one of the
// workload's own processes. The decision is made from the socket's peer
// address alone and reported with reason "loopback".
//
// It is off by default because it is only right where loopback belongs to
// the workload alone: weft-proxy turns it on in a pod, while a proxy that
// shares the host's loopback with others (the local mesh, tests, a host
// without network namespaces) must leave it off, or every local process
// would pass.
func WithLoopbackAllowed() Option { return func(o *options) { o.loopback = true } }

// peerConn describes an inbound client for authorization from its socket
// address; TLS and identity are added once the handshake is done.
func (p *Proxy) peerConn(ip netip.Addr) authz.Conn {
	return authz.Conn{IP: ip, Loopback: p.loopback && ip.IsLoopback()}
}
