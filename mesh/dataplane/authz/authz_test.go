package authz_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/mesh/dataplane/authz"
)

const (
	web = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	api = "api.shop.serviceaccount.identity.linkerd.cluster.local"
)

func nets(ps ...string) []*inbound.Network {
	var out []*inbound.Network
	for _, p := range ps {
		out = append(out, authz.Network(netip.MustParsePrefix(p)))
	}
	return out
}

func unauthenticated() *inbound.Authn {
	return &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}
}

func meshTLSAny() *inbound.Authn {
	return &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
		Clients: &inbound.Authn_PermitMeshTLS_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}},
	}}}
}

func identities(ids []string, suffixes ...[]string) *inbound.Authn {
	p := &inbound.Authn_PermitMeshTLS_PermitClientIdentities{}
	for _, id := range ids {
		p.Identities = append(p.Identities, &inbound.Identity{Name: id})
	}
	for _, s := range suffixes {
		p.Suffixes = append(p.Suffixes, &inbound.IdentitySuffix{Parts: s})
	}
	return &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
		Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: p},
	}}}
}

func peer(addr string, id string) authz.Peer {
	return authz.Peer{Addr: netip.MustParseAddr(addr), TLS: id != "", Identity: id}
}

func TestEvaluateAppliesNetworksAndAuthentications(t *testing.T) {
	onlyWeb := &inbound.Server{Authorizations: []*inbound.Authz{{
		Networks: nets("0.0.0.0/0", "::/0"), Authentication: identities([]string{web}),
	}}}
	cases := []struct {
		name  string
		srv   *inbound.Server
		peer  authz.Peer
		allow bool
	}{
		{"no policy denies", nil, peer("10.0.0.1", web), false},
		{"no authorizations denies", &inbound.Server{}, peer("10.0.0.1", web), false},
		{"listed identity allowed", onlyWeb, peer("10.0.0.1", web), true},
		{"listed identity in other case allowed", onlyWeb, peer("10.0.0.1", "WEB.shop.serviceaccount.identity.linkerd.cluster.local"), true},
		{"other identity denied", onlyWeb, peer("10.0.0.1", api), false},
		{"plaintext denied by identity rule", onlyWeb, peer("10.0.0.1", ""), false},
		{"tls without identity denied by identity rule", onlyWeb, authz.Peer{Addr: netip.MustParseAddr("10.0.0.1"), TLS: true}, false},
		{"identity claimed without tls is not trusted", onlyWeb, authz.Peer{Addr: netip.MustParseAddr("10.0.0.1"), Identity: web}, false},
		{"unauthenticated allows plaintext", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: unauthenticated()}}}, peer("192.0.2.1", ""), true},
		{"mesh tls any allows tls without identity", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: meshTLSAny()}}}, authz.Peer{Addr: netip.MustParseAddr("10.1.1.1"), TLS: true}, true},
		{"mesh tls any refuses plaintext", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: meshTLSAny()}}}, peer("10.1.1.1", ""), false},
		{"network outside denied", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("10.0.0.0/8"), Authentication: unauthenticated()}}}, peer("192.168.1.1", ""), false},
		{"mapped v4 peer matches v4 network", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("10.0.0.0/8"), Authentication: unauthenticated()}}}, peer("::ffff:10.0.0.1", ""), true},
		{"v6 network", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("fd00::/8"), Authentication: unauthenticated()}}}, peer("fd00::1", ""), true},
		{"authorization without networks is ignored", &inbound.Server{Authorizations: []*inbound.Authz{{Authentication: unauthenticated()}}}, peer("10.0.0.1", ""), false},
		{"authorization without authentication is ignored", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0")}}}, peer("10.0.0.1", web), false},
		{"empty mesh tls block is ignored", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{}}}}}}, peer("10.0.0.1", web), false},
		{"empty identity list matches nobody", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: identities(nil)}}}, peer("10.0.0.1", web), false},
		{"empty suffix matches every identity", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{})}}}, peer("10.0.0.1", api), true},
		{"suffix matches names under it", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{"shop", "serviceaccount", "identity", "linkerd", "cluster", "local"})}}}, peer("10.0.0.1", web), true},
		{"suffix does not match a longer label", &inbound.Server{Authorizations: []*inbound.Authz{{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{"hop", "serviceaccount", "identity", "linkerd", "cluster", "local"})}}}, peer("10.0.0.1", web), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := authz.Evaluate(c.srv, c.peer)
			assert.Equal(t, c.allow, d.Allowed, d.Reason)
			if !c.allow {
				assert.Equal(t, -1, d.Index)
				assert.NotEmpty(t, d.Reason)
			}
		})
	}
}

func TestEvaluateHonoursExceptRanges(t *testing.T) {
	n := nets("10.0.0.0/8")
	srv := &inbound.Server{Authorizations: []*inbound.Authz{{Networks: n, Authentication: unauthenticated()}}}
	n[0].Except = append(n[0].Except, authz.Network(netip.MustParsePrefix("10.1.0.0/16")).GetNet())
	assert.True(t, authz.Evaluate(srv, peer("10.2.0.1", "")).Allowed)
	assert.False(t, authz.Evaluate(srv, peer("10.1.2.3", "")).Allowed)
}

func TestEvaluatePicksTheFirstMatchingAuthorizationAndNamesIt(t *testing.T) {
	srv := &inbound.Server{Authorizations: []*inbound.Authz{
		{Networks: nets("0.0.0.0/0"), Authentication: identities([]string{api})},
		{Networks: nets("0.0.0.0/0"), Authentication: identities([]string{web}), Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "AuthorizationPolicy", Name: "web-in"}}}},
	}}
	d := authz.Evaluate(srv, peer("10.0.0.1", web))
	require.True(t, d.Allowed)
	assert.Equal(t, 1, d.Index)
	assert.Equal(t, "authorizationpolicy:web-in", d.Name)
}

func TestEvaluateChecksServerIPsWhenTheTargetIsKnown(t *testing.T) {
	srv, err := authz.DefaultServer(authz.AllUnauthenticated, nil)
	require.NoError(t, err)
	srv.ServerIps = append(srv.ServerIps, authz.Address(netip.MustParseAddr("10.0.0.5")))
	p := peer("10.0.0.1", "")
	p.Target = netip.MustParseAddr("10.0.0.5")
	assert.True(t, authz.Evaluate(srv, p).Allowed)
	p.Target = netip.MustParseAddr("10.0.0.6")
	assert.False(t, authz.Evaluate(srv, p).Allowed)
}

func TestDefaultServersMeanWhatTheirNamesSay(t *testing.T) {
	cluster := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		policy string
		peer   authz.Peer
		allow  bool
	}{
		{authz.AllUnauthenticated, peer("203.0.113.9", ""), true},
		{authz.Audit, peer("203.0.113.9", ""), true},
		{authz.AllAuthenticated, peer("203.0.113.9", ""), false},
		{authz.AllAuthenticated, peer("203.0.113.9", web), true},
		{authz.ClusterUnauthenticated, peer("10.3.3.3", ""), true},
		{authz.ClusterUnauthenticated, peer("203.0.113.9", ""), false},
		{authz.ClusterAuthenticated, peer("10.3.3.3", ""), false},
		{authz.ClusterAuthenticated, peer("10.3.3.3", web), true},
		{authz.Deny, peer("10.3.3.3", web), false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %v", c.policy, c.peer), func(t *testing.T) {
			srv, err := authz.DefaultServer(c.policy, cluster)
			require.NoError(t, err)
			assert.Equal(t, c.allow, authz.Evaluate(srv, c.peer).Allowed)
		})
	}
	_, err := authz.DefaultServer("allow-everything", nil)
	assert.ErrorIs(t, err, authz.ErrUnknownPolicy)
	assert.ErrorContains(t, err, "allow-everything")
}

func TestAddressConversionRoundTrips(t *testing.T) {
	for _, s := range []string{"0.0.0.0", "10.1.2.3", "255.255.255.255", "::", "fd00::1", "2001:db8::ff:1"} {
		a := netip.MustParseAddr(s)
		got, ok := authz.IPAddr(authz.Address(a))
		require.True(t, ok)
		assert.Equal(t, a, got)
	}
	_, ok := authz.IPAddr(nil)
	assert.False(t, ok)
}

func ExampleEvaluate() {
	srv, _ := authz.DefaultServer(authz.AllAuthenticated, nil)
	d := authz.Evaluate(srv, authz.Peer{Addr: netip.MustParseAddr("10.0.0.7"), TLS: true, Identity: web})
	fmt.Println(d.Allowed, d.Name)
	d = authz.Evaluate(srv, authz.Peer{Addr: netip.MustParseAddr("10.0.0.7")})
	fmt.Println(d.Allowed, d.Reason)
	// Output:
	// true default:all-authenticated
	// false no authorization permits unauthenticated client from 10.0.0.7
}
