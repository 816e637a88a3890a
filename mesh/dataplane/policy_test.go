package dataplane_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// These cases pin down what the inbound policies the proxy receives mean
// under the shared evaluator (mesh/policy/authz), which the proxy uses for
// every connection and request. A policy FromProto refuses is never
// applied: the proxy keeps the last good one or, before any, denies.

const (
	web = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	api = "api.shop.serviceaccount.identity.linkerd.cluster.local"
)

func nets(ps ...string) []*inbound.Network {
	var out []*inbound.Network
	for _, p := range ps {
		out = append(out, &inbound.Network{Net: authz.PrefixToProto(netip.MustParsePrefix(p))})
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

func detectServer(azs ...*inbound.Authz) *inbound.Server {
	for i, az := range azs {
		if az.Labels == nil && az.Metadata == nil {
			az.Labels = map[string]string{"name": fmt.Sprintf("az-%d", i)}
		}
	}
	return &inbound.Server{
		Protocol:       &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{}}},
		Authorizations: azs,
	}
}

func conn(addr, id string) authz.Conn {
	return authz.Conn{IP: netip.MustParseAddr(addr), TLS: id != "", Identity: id}
}

// decide evaluates a connection the way the proxy does: a refused policy
// denies.
func decide(srv *inbound.Server, c authz.Conn) (authz.Decision, error) {
	s, err := authz.FromProto(srv)
	if err != nil {
		return authz.Deny, err
	}
	return authz.Evaluate(s, c, nil).Decision, nil
}

func TestInboundPoliciesMeanTheSameUnderTheSharedEvaluator(t *testing.T) {
	onlyWeb := func() *inbound.Server {
		return detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0", "::/0"), Authentication: identities([]string{web})})
	}
	cases := []struct {
		name    string
		srv     *inbound.Server
		conn    authz.Conn
		allow   bool
		refused bool
	}{
		{"no policy is refused", nil, conn("10.0.0.1", web), false, true},
		{"no authorizations denies", detectServer(), conn("10.0.0.1", web), false, false},
		{"listed identity allowed", onlyWeb(), conn("10.0.0.1", web), true, false},
		{"other identity denied", onlyWeb(), conn("10.0.0.1", api), false, false},
		{"plaintext denied by identity rule", onlyWeb(), conn("10.0.0.1", ""), false, false},
		{"tls without identity denied by identity rule", onlyWeb(), authz.Conn{IP: netip.MustParseAddr("10.0.0.1"), TLS: true}, false, false},
		{"identity claimed without tls is not trusted", onlyWeb(), authz.Conn{IP: netip.MustParseAddr("10.0.0.1"), Identity: web}, false, false},
		{"unauthenticated allows plaintext", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: unauthenticated()}), conn("192.0.2.1", ""), true, false},
		{"mesh tls any allows tls without identity", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: meshTLSAny()}), authz.Conn{IP: netip.MustParseAddr("10.1.1.1"), TLS: true}, true, false},
		{"mesh tls any refuses plaintext", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: meshTLSAny()}), conn("10.1.1.1", ""), false, false},
		{"network outside denied", detectServer(&inbound.Authz{Networks: nets("10.0.0.0/8"), Authentication: unauthenticated()}), conn("192.168.1.1", ""), false, false},
		{"mapped v4 peer matches v4 network", detectServer(&inbound.Authz{Networks: nets("10.0.0.0/8"), Authentication: unauthenticated()}), conn("::ffff:10.0.0.1", ""), true, false},
		{"v6 network", detectServer(&inbound.Authz{Networks: nets("fd00::/8"), Authentication: unauthenticated()}), conn("fd00::1", ""), true, false},
		{"authorization without networks is refused", detectServer(&inbound.Authz{Authentication: unauthenticated()}), conn("10.0.0.1", ""), false, true},
		{"authorization without authentication is refused", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0")}), conn("10.0.0.1", web), false, true},
		{"empty mesh tls block is refused", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{}}}}), conn("10.0.0.1", web), false, true},
		{"empty identity list is refused", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities(nil)}), conn("10.0.0.1", web), false, true},
		{"empty suffix matches every identity", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{})}), conn("10.0.0.1", api), true, false},
		{"suffix matches names under it", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{"shop", "serviceaccount", "identity", "linkerd", "cluster", "local"})}), conn("10.0.0.1", web), true, false},
		{"suffix does not match a longer label", detectServer(&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities(nil, []string{"hop", "serviceaccount", "identity", "linkerd", "cluster", "local"})}), conn("10.0.0.1", web), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := decide(c.srv, c.conn)
			if c.refused {
				assert.Error(t, err, "the evaluator refuses the policy")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.allow, d == authz.Allow)
		})
	}
}

func TestExceptRangesCarveHolesInNetworks(t *testing.T) {
	n := nets("10.0.0.0/8")
	n[0].Except = append(n[0].Except, authz.PrefixToProto(netip.MustParsePrefix("10.1.0.0/16")))
	srv := detectServer(&inbound.Authz{Networks: n, Authentication: unauthenticated()})
	d, err := decide(srv, conn("10.2.0.1", ""))
	require.NoError(t, err)
	assert.Equal(t, authz.Allow, d)
	d, _ = decide(srv, conn("10.1.2.3", ""))
	assert.Equal(t, authz.Deny, d)
}

func TestTheFirstAdmittingAuthorizationIsNamed(t *testing.T) {
	srv := detectServer(
		&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities([]string{api})},
		&inbound.Authz{Networks: nets("0.0.0.0/0"), Authentication: identities([]string{web}),
			Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "AuthorizationPolicy", Name: "web-in"}}}},
	)
	s, err := authz.FromProto(srv)
	require.NoError(t, err)
	res := authz.Evaluate(s, conn("10.0.0.1", web), nil)
	require.Equal(t, authz.Allow, res.Decision)
	assert.Equal(t, "web-in", res.Authorization.Meta.Name)
}

func TestDefaultInboundPoliciesMeanWhatTheirNamesSay(t *testing.T) {
	cluster := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		policy string
		conn   authz.Conn
		want   authz.Decision
	}{
		{dataplane.AllUnauthenticated, conn("203.0.113.9", ""), authz.Allow},
		{dataplane.AuditAll, conn("203.0.113.9", ""), authz.Audit},
		{dataplane.AllAuthenticated, conn("203.0.113.9", ""), authz.Deny},
		{dataplane.AllAuthenticated, conn("203.0.113.9", web), authz.Allow},
		{dataplane.ClusterUnauthenticated, conn("10.3.3.3", ""), authz.Allow},
		{dataplane.ClusterUnauthenticated, conn("203.0.113.9", ""), authz.Deny},
		{dataplane.ClusterAuthenticated, conn("10.3.3.3", ""), authz.Deny},
		{dataplane.ClusterAuthenticated, conn("10.3.3.3", web), authz.Allow},
		{dataplane.DenyAll, conn("10.3.3.3", web), authz.Deny},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %v", c.policy, c.conn), func(t *testing.T) {
			srv, err := dataplane.DefaultInboundServer(c.policy, cluster)
			require.NoError(t, err)
			s, err := authz.FromProto(srv)
			require.NoError(t, err, "the proxy's own defaults pass the strict conversion")
			assert.Equal(t, c.want, authz.Evaluate(s, c.conn, nil).Decision)
			req := authz.Evaluate(s, c.conn, &authz.Request{Method: "GET", Path: "/anything", Host: "web"})
			assert.Equal(t, c.want, req.Decision, "requests take the default route and the same authorizations")
		})
	}
	_, err := dataplane.DefaultInboundServer("allow-everything", nil)
	assert.ErrorIs(t, err, dataplane.ErrUnknownPolicy)
	assert.ErrorContains(t, err, "allow-everything")
}
