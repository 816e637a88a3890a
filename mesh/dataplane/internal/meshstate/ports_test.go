package meshstate

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// opaqueServer is an inbound policy the evaluator reads: an opaque port
// named name.
func opaqueServer(name string) *inbound.Server {
	return &inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}},
		Labels:   map[string]string{"group": "policy.linkerd.io", "kind": "server", "name": name},
	}
}

// unreadableServer is an inbound policy the evaluator refuses (it has no
// protocol).
func unreadableServer() *inbound.Server {
	return &inbound.Server{Labels: map[string]string{"group": "policy.linkerd.io", "kind": "server", "name": "broken"}}
}

// An inbound policy the evaluator refuses is counted and not applied: a
// port with no good policy yet gets DenyAll's state, a port with one
// keeps it; a later good policy replaces the deny-all state.
func TestPortsCountARefusedInboundPolicyAndDenyUntilAGoodOne(t *testing.T) {
	const port = 8080
	pols := newSource[uint32, *inbound.Server](t)
	denied := make(chan *authz.Server, 4)
	h := newHarness(t, Settings{
		Policies:      pols,
		DefaultPolicy: &Policy{Srv: &authz.Server{Meta: authz.DefaultMeta("all-unauthenticated"), Protocol: authz.ProtocolDetect}},
		DefaultName:   "all-unauthenticated",
		Compile:       authz.FromProto,
		DenyAll: func(reason string) *authz.Server {
			s := &authz.Server{Meta: authz.DefaultMeta(reason), Protocol: authz.ProtocolDetect, HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()}}
			denied <- s
			return s
		},
	})
	type got struct {
		p   *Policy
		err error
	}
	first := make(chan got, 1)
	go func() {
		p, err := h.st.Ports().Get(h.ctx, port)
		first <- got{p, err}
	}()

	c := pols.next(t)
	require.Equal(t, uint32(port), c.key)
	st := c.open()
	bad := unreadableServer()
	st.send(t, bad)
	g := <-first // Get returns with the port's first state
	require.NoError(t, g.err)
	deny := <-denied
	assert.Same(t, deny, g.p.Srv, "a port whose first policy is refused gets DenyAll's state")
	assert.Same(t, bad, g.p.Proto)
	assert.Equal(t, authz.DefaultMeta("invalid-policy"), deny.Meta)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.m.PolicyRefused), "the refusal is counted")
	assert.Equal(t, 1.0, h.counter(t, "inbound_policy_refused_total", map[string]string{}))

	good := opaqueServer("web")
	st.send(t, good)
	st.close()
	c = pols.next(t)
	p, err := h.st.Ports().Get(h.ctx, port)
	require.NoError(t, err)
	assert.Same(t, good, p.Proto, "a good policy replaces the deny-all state")
	assert.NotSame(t, deny, p.Srv)
	assert.Equal(t, authz.ProtocolOpaque, p.Srv.Protocol)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.m.PolicyRefused), "a good policy is not counted")

	c.settle(t, unreadableServer())
	again, err := h.st.Ports().Get(h.ctx, port)
	require.NoError(t, err)
	assert.Same(t, p, again, "a refused policy keeps the last good state")
	assert.Equal(t, 2.0, testutil.ToFloat64(h.m.PolicyRefused), "each refusal is counted")
	require.Len(t, denied, 1)
	assert.NotSame(t, <-denied, again.Srv, "the deny-all state of a later refusal is not applied")
}
