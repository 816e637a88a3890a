package vocab

import "net/netip"

// DefaultClusterNetworks returns the networks a mesh treats as its
// cluster's when none are configured: Linkerd's default clusterNetworks,
// the private ranges a cluster's pods usually live in. The cluster-*
// default inbound policies trust clients from these networks, and so do
// ServerAuthorizations that list none. It is the one source of this
// default: the policy controller (policy.NewConfig), the proxy
// (dataplane's Config and default policies) and the injector (the
// clusterNetworks value, written to WEFT_PROXY_CLUSTER_NETWORKS) all
// start from it. Each call returns a new slice, so a caller may change
// its copy.
func DefaultClusterNetworks() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("fd00::/8"),
	}
}
