package proxycmd

import (
	"context"
	"log/slog"
	"net"
	"strconv"

	"github.com/weftmesh/weft/mesh/dataplane/control"
)

// ControlPlaneSources is the ProxySources of the weft-proxy binary: it
// dials the identity, destination and policy services named by
// WEFT_PROXY_IDENTITY_ADDR, WEFT_PROXY_DESTINATION_ADDR and
// WEFT_PROXY_POLICY_ADDR in plaintext gRPC (in a cluster the control
// plane's own proxies carry mutual TLS; on one machine it is loopback),
// and returns once the workload holds its first certificate.
//
// In explicit mode (WEFT_PROXY_OUTBOUND_ADDR off), no iptables rule sends
// a peer's connection to its proxy, so meshed endpoints are dialled at the
// port of this proxy's own WEFT_PROXY_INBOUND_ADDR (every proxy of a local
// mesh listens on the same inbound port, 4143 by default).
func ControlPlaneSources(ctx context.Context, env ProxyEnv, log *slog.Logger) (ProxyInputs, error) {
	cfg := env.Proxy
	opts := []control.Option{control.WithLogger(log)}
	if cfg.OutboundAddr == "" {
		if _, p, err := net.SplitHostPort(cfg.InboundAddr); err == nil {
			if port, err := strconv.ParseUint(p, 10, 16); err == nil && port != 0 {
				opts = append(opts, control.WithExplicitMode(uint16(port)))
			}
		}
	}
	src, err := control.Connect(ctx, env.Control, opts...)
	if err != nil {
		return ProxyInputs{}, err
	}
	return ProxyInputs{
		Identity: src.Identity,
		Resolver: src.Resolver,
		Policies: src.Policies,
		// Profiles come from the destination service, outbound policies
		// from the policy service, over the same connections.
		OutboundPolicies: src.OutboundPolicies,
		Profiles:         src.Profiles,
		Cleanup:          func() { _ = src.Close() },
	}, nil
}
