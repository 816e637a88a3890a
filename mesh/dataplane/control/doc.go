// Package control connects the proxy (mesh/dataplane) to the control plane.
// It adapts the control-plane clients to the seams the proxy consumes, so
// that neither side knows about the other:
//
//	dataplane.Identity         <- Identity, over the identity client (mesh/identity/client)
//	dataplane.Resolver         <- Resolver, over the discovery client (mesh/discovery/client)
//	dataplane.Profiles         <- Profiles, over the same discovery client's WatchProfile
//	dataplane.InboundPolicies  <- Policies, a client of io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort
//	dataplane.OutboundPolicies <- OutboundPolicies, a client of io.linkerd.proxy.outbound.OutboundPolicies/Watch
//
// Most programs call Connect, which takes the control-plane addresses, trust
// anchors and the workload's identity from a Config (FromEnv and LoadEnv read
// it from the WEFT_PROXY_*_ADDR, _TRUST_ANCHORS, _IDENTITY_*, _NAMESPACE,
// _POD, _SERVICE_ACCOUNT and _DESTINATION_CONTEXT variables; Settings lists
// them), dials the three services and returns all the sources together. The
// proxy's own settings are a separate dataplane.Config:
//
//	cfg, _ := dataplane.LoadEnv()
//	cc, _ := control.LoadEnv()
//	src, err := control.Connect(ctx, cc)
//	if err != nil { ... }
//	defer src.Close()
//	p, _ := dataplane.New(ctx, cfg, src.Identity, src.Resolver, src.Policies,
//		dataplane.WithOutboundPolicies(src.OutboundPolicies), dataplane.WithProfiles(src.Profiles))
//
// Connect dials in plaintext: in a cluster the control-plane pods' own
// proxies terminate mutual TLS, and on one machine (weft demo, weft dev)
// everything is on loopback. Pass WithDialOptions to add transport
// credentials.
//
// # Translation
//
// The Resolver turns each discovery endpoint into a dataplane.Endpoint:
// address, TLS identity, protocol hint (h2, opaque or none), opaque
// transport port and weight. A destination that discovery says does not
// exist is an error wrapping dataplane.ErrNotFound on the first answer;
// when it disappears later the watcher gets an empty set (no endpoints).
// In explicit mode, where no iptables rule sends a peer's connection to
// its proxy, WithMeshedInboundPort makes every meshed endpoint (one with
// an identity) reachable through its proxy's inbound port: the proxy dials
// that port and the transport header carries the application port, as
// docs/dataplane.md describes.
//
// The Policies client sends the workload as Linkerd's proxies do
// ({"ns":"shop","pod":"web-1"}). NotFound on the first answer is
// dataplane.ErrNotFound (the proxy then applies its default policy); once a
// port has a policy, a broken stream keeps the channel open and the last
// policy in force while it reconnects with jittered backoff.
//
// OutboundPolicies works the same way for a target: an IP:port is sent as
// an address, anything else as an authority; NotFound (an unknown Service)
// is dataplane.ErrNotFound, and a broken stream keeps the last policy while
// it reconnects. Profiles reports ErrNotFound for a name discovery refuses
// (outside the cluster domain) and for the default profile of a name with
// no Service or endpoint behind it; otherwise it streams the profile as a
// DestinationProfile, re-encoded from the discovery client's model (route
// names survive as the "route" metrics label; other labels do not).
//
// The Identity holds the workload's certificate through the identity
// client, which renews it at 70% of its lifetime and keeps the current one
// while the identity service is away.
package control
