package outbound

import (
	"context"
	"net"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// outboundUpgrade forwards a protocol upgrade (WebSocket): the request
// goes, in one attempt, to an endpoint picked as for any request, on a
// connection of its own (mesh TLS with the transport header announcing
// HTTP/1 for a meshed endpoint), and the connection becomes a tunnel only
// if the upstream answers 101 Switching Protocols for the protocol asked
// for. Any other answer is relayed as a normal response. Taps are not
// offered upgrades.
func (h *HTTP) outboundUpgrade(c *outboundCall, up string) {
	c.tapped = true
	var a outboundAttempt
	if err := a.pick(c, nil); err != nil {
		c.fail(err)
		return
	}
	ep := a.h.Value()
	hdr := outboundHeader(c.r, c.rt.RequestHeaders, a.backend.RequestHeaders)
	target := c.svc.Names().Target
	httpcore.ForwardUpgrade(c.ctx, c.w, c.r, &httpcore.Upgrade{
		Proto: up, Header: hdr,
		Dial: func(ctx context.Context) (net.Conn, error) {
			if ep.Identity != "" {
				return h.DialEndpoint(ctx, ep, target, transport.HTTP1, nil)
			}
			dctx, cancel := context.WithTimeout(ctx, h.ConnectTimeout)
			defer cancel()
			return h.Dial(dctx, ep.Addr.String())
		},
		Fail:          c.fail,
		Head:          func(status int) { c.stats.Head(status) },
		Done:          func(status int, failure bool) { c.stats.Done(status, "", failure, "") },
		Endpoint:      a.h.Done,
		FromPeerProxy: ep.Identity != "",
	})
}
