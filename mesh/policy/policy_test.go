package policy_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

const nsYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: my-app
  annotations:
    linkerd.io/inject: enabled
%s---
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: my-app
  labels: {app: web}
  annotations: {%s}
spec:
  serviceAccountName: web
  containers:
  - name: web
    image: example/web
    ports:
    - {name: http, containerPort: 8080}
    - {name: admin, containerPort: 9990}
    - {name: db, containerPort: 5432}
    readinessProbe:
      httpGet: {path: /ready, port: http}
`

const serverYAML = `---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: web}}
  port: http
  proxyProtocol: HTTP/1
%s`

const (
	gatewayID = "api-gateway.my-app.serviceaccount.identity.weft.cluster.local"
	reportsID = "reports.my-app.serviceaccount.identity.weft.cluster.local"
)

// build indexes the namespace and web-0 pod plus extra YAML documents.
func build(t *testing.T, nsAnnotations, podAnnotations, extra string, opts ...policy.Option) *policy.Index {
	t.Helper()
	if nsAnnotations != "" {
		nsAnnotations = "    " + nsAnnotations + "\n"
	}
	doc := fmt.Sprintf(nsYAML, nsAnnotations, podAnnotations) + extra
	objs, err := manifest.Decode("test.yaml", []byte(doc))
	require.NoError(t, err)
	o, err := policy.ObjectsFromManifests(objs)
	require.NoError(t, err)
	cfg, err := policy.NewConfig(opts...)
	require.NoError(t, err)
	return policy.Build(o, cfg)
}

// buildWith is build with extra objects added in Go.
func buildWith(t *testing.T, extra string, add func(*policy.Objects)) *policy.Index {
	t.Helper()
	doc := fmt.Sprintf(nsYAML, "", "") + extra
	objs, err := manifest.Decode("test.yaml", []byte(doc))
	require.NoError(t, err)
	o, err := policy.ObjectsFromManifests(objs)
	require.NoError(t, err)
	add(o)
	return policy.Build(o, nil)
}

func TestTheStrictDecoderAlreadyRefusesSomeEmptyLists(t *testing.T) {
	_, err := manifest.Decode("x.yaml", []byte(`apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: empty, namespace: my-app}
spec:
  identities: []
`))
	assert.ErrorContains(t, err, "spec.identities")
}

var web = policy.WorkloadRef{Namespace: "my-app", Kind: "pod", Name: "web-0"}

type client struct {
	id string
	ip string
}

func decide(t *testing.T, ix *policy.Index, port intstr.IntOrString, c client, req *authz.Request) policy.Result {
	t.Helper()
	cl := policy.Client{Unauthenticated: true}
	if c.id != "" {
		cl = policy.Client{Identity: c.id}
	}
	if c.ip != "" {
		cl.IP = netip.MustParseAddr(c.ip)
	}
	res, err := ix.Evaluate(policy.Request{Workload: web, Port: port, Client: cl, HTTP: req})
	require.NoError(t, err)
	return res
}

var http8080 = intstr.FromString("http")

func problemsText(ix *policy.Index) string {
	var b strings.Builder
	for _, p := range ix.Problems() {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestDefaultPoliciesAdmitWhatTheirNamesSay(t *testing.T) {
	type want struct{ meshedIn, meshedOut, plainIn, plainOut authz.Decision }
	A, D, U := authz.Allow, authz.Deny, authz.Audit
	cases := map[string]want{
		"all-unauthenticated":     {A, A, A, A},
		"all-authenticated":       {A, A, D, D},
		"cluster-authenticated":   {A, D, D, D},
		"cluster-unauthenticated": {A, D, A, D},
		"deny":                    {D, D, D, D},
		"audit":                   {U, U, U, U},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			ix := build(t, "", "", "", policy.WithDefaultPolicy(name))
			admin := intstr.FromString("admin")
			assert.Equal(t, w.meshedIn, decide(t, ix, admin, client{id: gatewayID, ip: "10.1.2.3"}, nil).Decision, "meshed, in cluster")
			assert.Equal(t, w.meshedOut, decide(t, ix, admin, client{id: gatewayID, ip: "203.0.113.5"}, nil).Decision, "meshed, outside")
			assert.Equal(t, w.plainIn, decide(t, ix, admin, client{ip: "10.1.2.3"}, nil).Decision, "unmeshed, in cluster")
			assert.Equal(t, w.plainOut, decide(t, ix, admin, client{ip: "203.0.113.5"}, nil).Decision, "unmeshed, outside")
		})
	}
}

func TestPodAnnotationOverridesNamespaceOverridesCluster(t *testing.T) {
	admin := intstr.FromString("admin")
	ix := build(t, "config.linkerd.io/default-inbound-policy: deny", "", "")
	assert.Equal(t, authz.Deny, decide(t, ix, admin, client{id: gatewayID}, nil).Decision)
	ix = build(t, "config.linkerd.io/default-inbound-policy: deny", "config.linkerd.io/default-inbound-policy: all-authenticated", "")
	assert.Equal(t, authz.Allow, decide(t, ix, admin, client{id: gatewayID}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, admin, client{}, nil).Decision)
	e, err := ix.Explain(policy.Request{Workload: web, Port: admin, Client: policy.Client{Unauthenticated: true}})
	require.NoError(t, err)
	assert.Contains(t, e.String(), "the default policy all-authenticated applies (from the annotation on pod web-0)")

	ix = build(t, "config.linkerd.io/default-inbound-policy: wide-open", "", "")
	assert.Contains(t, problemsText(ix), `unknown default policy "wide-open"`)
	assert.Equal(t, authz.Allow, decide(t, ix, admin, client{}, nil).Decision, "an invalid annotation falls back to the cluster default")
}

func TestAServerWithoutAuthorizationsDeniesUnlessItsAccessPolicySaysOtherwise(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: deny\n"))
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{id: gatewayID}, nil).Decision)
	ix = build(t, "", "", fmt.Sprintf(serverYAML, ""))
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{id: gatewayID}, nil).Decision, "accessPolicy defaults to deny")
	ix = build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: all-authenticated\n"))
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{id: gatewayID}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{}, nil).Decision)
	ix = build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: audit\n"))
	res := decide(t, ix, http8080, client{}, nil)
	assert.Equal(t, authz.Audit, res.Decision)
	assert.Equal(t, authz.ReasonAudited, res.Reason)
}

func TestKubeletProbesAreAuthorizedOnlyOnServersWithoutRoutes(t *testing.T) {
	ready := &authz.Request{Method: "GET", Path: "/ready"}
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: deny\n"))
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{ip: "10.0.0.9"}, ready).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{ip: "10.0.0.9"}, &authz.Request{Method: "POST", Path: "/ready"}).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{ip: "10.0.0.9"}, &authz.Request{Method: "GET", Path: "/readyz"}).Decision)

	narrow := build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: deny\n"), policy.WithProbeNetworks("192.168.1.0/24"))
	assert.Equal(t, authz.Deny, decide(t, narrow, http8080, client{ip: "10.0.0.9"}, ready).Decision)
	assert.Equal(t, authz.Allow, decide(t, narrow, http8080, client{ip: "192.168.1.7"}, ready).Decision)

	routed := build(t, "", "", fmt.Sprintf(serverYAML, "  accessPolicy: deny\n")+`---
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: api, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]
`)
	assert.Equal(t, authz.Deny, decide(t, routed, http8080, client{ip: "10.0.0.9"}, ready).Decision, "with HTTPRoutes, probes need an explicit authorization")
}

func TestTargetRefsToMissingObjectsWarnAndGrantNothing(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: to-nowhere, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-https}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: missing-authn, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{group: policy.linkerd.io, kind: MeshTLSAuthentication, name: gone}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: missing-route, namespace: my-app}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: gone}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
---
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: legacy, namespace: my-app}
spec:
  server: {name: web-grpc}
  client: {unauthenticated: true}
`)
	text := problemsText(ix)
	assert.Contains(t, text, "warning: test.yaml document 4: AuthorizationPolicy my-app/to-nowhere: spec.targetRef: Server my-app/web-https not found")
	assert.Contains(t, text, "AuthorizationPolicy my-app/missing-authn: spec.requiredAuthenticationRefs[0]: MeshTLSAuthentication my-app/gone not found")
	assert.Contains(t, text, "AuthorizationPolicy my-app/missing-route: spec.targetRef: HTTPRoute my-app/gone")
	assert.Contains(t, text, "ServerAuthorization my-app/legacy: spec.server.name: Server my-app/web-grpc not found")
	assert.Empty(t, ix.Errors())
	for _, c := range []client{{id: gatewayID}, {}, {id: reportsID}} {
		assert.Equal(t, authz.Deny, decide(t, ix, http8080, c, nil).Decision, "%+v", c)
	}
}

func TestEmptyMatchListsNeverAllowEveryone(t *testing.T) {
	ix := buildWith(t, fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: nobody-required, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: []
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: via-empty, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{group: policy.linkerd.io, kind: MeshTLSAuthentication, name: empty}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: no-nets, namespace: my-app}
spec:
  networks: []
---
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: no-clients, namespace: my-app}
spec:
  server: {name: web-http}
  client:
    meshTLS: {}
`, func(o *policy.Objects) {
		// The strict decoder already refuses these two; objects from a
		// cluster reach the index without that check.
		require.NoError(t, o.Add(&v1alpha1.MeshTLSAuthentication{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "my-app"}}, policy.Location{}))
		require.NoError(t, o.Add(&v1beta1.ServerAuthorization{ObjectMeta: metav1.ObjectMeta{Name: "no-server", Namespace: "my-app"},
			Spec: v1beta1.ServerAuthorizationSpec{Client: v1beta1.Client{Unauthenticated: true}}}, policy.Location{}))
	})
	text := problemsText(ix)
	for _, want := range []string{
		"error: test.yaml document 4: AuthorizationPolicy my-app/nobody-required: spec.requiredAuthenticationRefs: at least one authentication reference is required",
		"MeshTLSAuthentication my-app/empty: spec: no identities configured",
		"AuthorizationPolicy my-app/via-empty: spec.requiredAuthenticationRefs[0]: MeshTLSAuthentication my-app/empty is invalid",
		"NetworkAuthentication my-app/no-nets: spec.networks: no networks",
		"ServerAuthorization my-app/no-clients: spec.client.meshTLS: authorizes no clients",
		"ServerAuthorization my-app/no-server: spec.server: names no server",
	} {
		assert.Contains(t, text, want)
	}
	for _, c := range []client{{id: gatewayID}, {}, {ip: "203.0.113.1"}} {
		assert.Equal(t, authz.Deny, decide(t, ix, http8080, c, nil).Decision, "%+v", c)
	}
}

func TestMalformedCIDRsAreErrorsNamingTheField(t *testing.T) {
	for _, c := range []struct{ cidr, except, want string }{
		{"10.0.0.0/33", "", "10.0.0.0/33"},
		{"10.0.0/8", "", "10.0.0/8"},
		{"banana", "", "banana"},
		{"fe80::/10%eth0", "", "zones"},
		{"10.0.0.0/8", "192.168.0.0/16", "not inside"},
		{"10.0.0.0/16", "10.0.0.0/8", "not inside"},
		{"10.0.0.0/8", "10.0.0.0/8", "removes all"},
	} {
		except := ""
		if c.except != "" {
			except = fmt.Sprintf("\n    except: [%q]", c.except)
		}
		ix := build(t, "", "", fmt.Sprintf(`---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: nets, namespace: my-app}
spec:
  networks:
  - cidr: %q%s
`, c.cidr, except))
		errs := ix.Errors()
		if assert.Len(t, errs, 1, c.cidr) {
			assert.Equal(t, "spec.networks[0]", errs[0].Field)
			assert.Contains(t, errs[0].Message, c.want)
			assert.Equal(t, "test.yaml document 3", errs[0].Location.String())
		}
	}
	ix := build(t, "", "", `---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: nets, namespace: my-app}
spec:
  networks: [{cidr: 10.1.2.3/8}]
`)
	assert.Empty(t, ix.Errors(), "Linkerd accepts host bits")
	assert.Contains(t, problemsText(ix), "has host bits set; it means 10.0.0.0/8")
}

func TestInvalidIdentityWildcardsAreErrors(t *testing.T) {
	for _, id := range []string{"web*", "*web.my-app", "a.*.b", "**", "*.", "web..my-app", "*.*.my-app"} {
		ix := build(t, "", "", fmt.Sprintf(`---
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: my-app}
spec:
  identities: [%q]
`, id))
		errs := ix.Errors()
		if assert.Len(t, errs, 1, id) {
			assert.Equal(t, "spec.identities[0]", errs[0].Field, id)
		}
	}
}

func TestMeshTLSAuthenticationAndNetworkAuthenticationMustBothMatch(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: my-app-clients, namespace: my-app}
spec:
  identityRefs:
  - {kind: Namespace, name: my-app}
  - {kind: ServiceAccount, name: x, namespace: other}
---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: my-app}
spec:
  networks:
  - cidr: 10.0.0.0/8
    except: [10.99.0.0/16]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: both, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: my-app-clients}
  - {group: policy.linkerd.io, kind: NetworkAuthentication, name: office}
`)
	require.Empty(t, ix.Errors(), problemsText(ix))
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{id: reportsID, ip: "10.1.1.1"}, nil).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{id: "x.other.serviceaccount.identity.weft.cluster.local", ip: "10.1.1.1"}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{id: reportsID, ip: "10.99.1.1"}, nil).Decision, "excepted network")
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{id: reportsID, ip: "192.168.1.1"}, nil).Decision, "outside the network")
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{id: "x.third.serviceaccount.identity.weft.cluster.local", ip: "10.1.1.1"}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{ip: "10.1.1.1"}, nil).Decision)
}

func TestServerAuthorizationWithoutNetworksAdmitsOnlyClusterNetworks(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: anyone, namespace: my-app}
spec:
  server:
    selector: {matchLabels: {}}
  client: {unauthenticated: true}
`, policy.WithClusterNetworks("10.0.0.0/8"))
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{ip: "10.3.3.3"}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, client{ip: "172.16.0.1"}, nil).Decision)
}

func TestNamespaceTargetedPolicyAppliesToEveryServerInTheNamespace(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-admin, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: web}}
  port: admin
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ns-wide, namespace: my-app}
spec:
  targetRef: {kind: Namespace, name: my-app}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
`)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{id: gatewayID}, nil).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, intstr.FromString("admin"), client{id: gatewayID}, nil).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, intstr.FromString("admin"), client{id: reportsID}, nil).Decision)
}

const routesYAML = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: admin, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
  - matches:
    - path: {type: Exact, value: /admin}
    - path: {type: PathPrefix, value: /admin/}
      headers:
      - {name: X-Role, value: admin}
      - {name: x-role, value: root}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: public, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: admin-gateway, namespace: my-app}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: admin}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: public-anyone, namespace: my-app}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: public}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: NetworkAuthentication, name: everywhere}
---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: everywhere, namespace: my-app}
spec:
  networks: [{cidr: 0.0.0.0/0}, {cidr: "::/0"}]
`

func TestPathTricksCannotReachARestrictedRoute(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+routesYAML)
	require.Empty(t, ix.Errors(), problemsText(ix))
	anon := client{ip: "10.1.1.1"}
	for _, p := range []string{"/admin", "/public/../admin", "//admin", "/%2e%2e/admin", "/./admin", "/%61dmin", "/public/%2E%2E/admin"} {
		res := decide(t, ix, http8080, anon, &authz.Request{Method: "GET", Path: p})
		assert.Equal(t, authz.Deny, res.Decision, p)
		if m, ok := res.Route(); assert.True(t, ok, p) {
			assert.Equal(t, "admin", m.Name, p)
		}
	}
	for _, p := range []string{"/admin%2F", "/admin%2f", "/..;/admin", "/admin#f", "/admin%00", "/a\\admin", "/%2e%2e%2fadmin"} {
		res := decide(t, ix, http8080, client{id: gatewayID}, &authz.Request{Method: "GET", Path: p})
		assert.Equal(t, authz.Deny, res.Decision, p)
		assert.Equal(t, authz.ReasonInvalidPath, res.Reason, p)
	}
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, anon, &authz.Request{Method: "GET", Path: "/public/x"}).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{id: gatewayID}, &authz.Request{Method: "GET", Path: "/public/../admin"}).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, anon, &authz.Request{Method: "GET", Path: "/%252e%252e/admin"}).Decision,
		"a double-encoded dot is a literal segment, matched as such")
}

func TestHeaderRulesWithRepeatedValues(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+routesYAML)
	assert.Contains(t, problemsText(ix), "HTTPRoute.gateway.networking.k8s.io my-app/admin: spec.rules[0].matches[1].headers[1].name: header X-Role is matched twice; only the first match counts")
	anon := client{ip: "10.1.1.1"}
	gw := client{id: gatewayID}
	hdr := func(vals ...string) *authz.Request {
		h := http.Header{}
		for _, v := range vals {
			h.Add("X-Role", v)
		}
		return &authz.Request{Method: "GET", Path: "/admin/users", Header: h}
	}
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, gw, hdr("admin")).Decision)
	assert.Equal(t, authz.Deny, decide(t, ix, http8080, anon, hdr("admin")).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, anon, hdr("user")).Decision, "not the admin route")
	for _, vals := range [][]string{{"user", "admin"}, {"user,admin"}, {"admin", "user"}} {
		res := decide(t, ix, http8080, anon, hdr(vals...))
		assert.Equal(t, authz.Deny, res.Decision, vals)
		assert.Equal(t, authz.ReasonAmbiguousRequest, res.Reason, vals)
	}
}

func TestNotMeshedWorkloadsAreUnenforced(t *testing.T) {
	ix := build(t, "", "linkerd.io/inject: disabled", fmt.Sprintf(serverYAML, ""))
	res := decide(t, ix, http8080, client{}, nil)
	assert.Equal(t, authz.Allow, res.Decision)
	assert.Equal(t, policy.MeshedNo, res.Meshed)
	assert.Equal(t, policy.ReasonUnenforced, res.ReasonString())
}

func TestOpaqueAndRequireIdentityPortAnnotations(t *testing.T) {
	ix := build(t, "", "config.linkerd.io/opaque-ports: \"5432,7000-7002\", config.linkerd.io/proxy-require-identity-inbound-ports: \"9990\"", "")
	srv, ok := ix.Lookup(web, 5432)
	require.True(t, ok)
	assert.Equal(t, authz.ProtocolOpaque, srv.Protocol)
	srv, _ = ix.Lookup(web, 7001)
	assert.Equal(t, authz.ProtocolOpaque, srv.Protocol)
	srv, _ = ix.Lookup(web, 8080)
	assert.Equal(t, authz.ProtocolDetect, srv.Protocol)
	admin := intstr.FromString("admin")
	assert.Equal(t, authz.Deny, decide(t, ix, admin, client{}, nil).Decision, "9990 requires identity")
	assert.Equal(t, authz.Allow, decide(t, ix, admin, client{id: gatewayID}, nil).Decision)
	assert.Equal(t, authz.Allow, decide(t, ix, http8080, client{}, nil).Decision)
}

func TestLintsAreWarnings(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+`---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-undeclared, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: web}}
  port: 7777
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-named, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: web}}
  port: grpc
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: nobody, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: ghost}}
  port: 80
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http-two, namespace: my-app}
spec:
  podSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
  port: 8080
`)
	assert.Empty(t, ix.Errors())
	text := problemsText(ix)
	for _, want := range []string{
		"Server my-app/web-undeclared: spec.port: port 7777 is not declared by any container of Pod web-0",
		`Server my-app/web-named: spec.port: no container of Pod web-0 declares a port named "grpc"`,
		"Server my-app/nobody: spec.podSelector: selects no workload",
		"Server my-app/web-http-two: spec.podSelector: overlaps Server web-http on port 8080 of Pod web-0; web-http is used",
	} {
		assert.Contains(t, text, want)
	}
}

func TestExplanationNamesEveryStep(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+routesYAML)
	e, err := ix.Explain(policy.Request{Workload: web, Port: http8080, Client: policy.Client{ServiceAccount: "reports", Namespace: "my-app"},
		HTTP: &authz.Request{Method: "GET", Path: "/public/../admin"}})
	require.NoError(t, err)
	s := e.String()
	for _, want := range []string{
		"decision: deny (unauthorized)",
		"port 8080 (http) is selected by Server my-app/web-http",
		"client address not given: assuming 10.0.0.1",
		`request: GET /admin (normalized from "/public/../admin")`,
		"route: HTTPRoute my-app/admin",
		"AuthorizationPolicy my-app/admin-gateway (via ServiceAccount my-app/api-gateway) does not apply",
	} {
		assert.Contains(t, s, want)
	}
}

func TestEvaluateErrorsOnUnknownWorkloadsAndPorts(t *testing.T) {
	ix := build(t, "", "", "")
	_, err := ix.Evaluate(policy.Request{Workload: policy.WorkloadRef{Namespace: "my-app", Kind: "pod", Name: "nope"}, Port: http8080, Client: policy.Client{Unauthenticated: true}})
	assert.ErrorContains(t, err, "not found")
	_, err = ix.Evaluate(policy.Request{Workload: web, Port: intstr.FromString("grpc"), Client: policy.Client{Unauthenticated: true}})
	assert.ErrorContains(t, err, `declares a port named "grpc"`)
	_, err = ix.Evaluate(policy.Request{Workload: web, Port: intstr.FromInt32(70000), Client: policy.Client{Unauthenticated: true}})
	assert.ErrorContains(t, err, "out of range")
}

func TestParseKindNameAcceptsKubectlKinds(t *testing.T) {
	for in, kind := range map[string]string{"deployment/api": "deployment", "deploy/api": "deployment", "pod/api-0": "pod", "sts/db": "statefulset", "DaemonSet/x": "daemonset"} {
		r, err := policy.ParseKindName(in, "")
		require.NoError(t, err, in)
		assert.Equal(t, kind, r.Kind)
		assert.Equal(t, "default", r.Namespace)
	}
	for _, bad := range []string{"api", "service/api", "deployment/", "/api", "a/b/c"} {
		_, err := policy.ParseKindName(bad, "x")
		assert.Error(t, err, bad)
	}
}

func TestDuplicateObjectsAreAnErrorNamingBothPlaces(t *testing.T) {
	a, err := manifest.Decode("a.yaml", []byte(fmt.Sprintf(serverYAML, "")))
	require.NoError(t, err)
	b, err := manifest.Decode("b.yaml", []byte(fmt.Sprintf(serverYAML, "")))
	require.NoError(t, err)
	_, err = policy.ObjectsFromManifests(append(a, b...))
	assert.ErrorContains(t, err, "b.yaml document 1: Server my-app/web-http is defined twice (also in a.yaml document 1)")
}

func TestAnHTTPRouteIsNotAttachedToAServerThatAGRPCRouteNames(t *testing.T) {
	// Linkerd's status controller marks such an HTTPRoute conflicted and
	// its index attaches only accepted routes: the Server keeps its default
	// route, so the route's own authorization grants nothing.
	doc := `apiVersion: v1
kind: Namespace
metadata: {name: shop, annotations: {linkerd.io/inject: enabled}}
---
apiVersion: v1
kind: Pod
metadata: {name: api-0, namespace: shop, labels: {app: api}}
spec:
  serviceAccountName: api
  containers: [{name: api, image: x, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: api-http, namespace: shop}
spec: {podSelector: {matchLabels: {app: api}}, port: http, proxyProtocol: HTTP/1}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: items, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: api-http}]
  rules: [{matches: [{path: {type: PathPrefix, value: /items}}]}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: items-web, namespace: shop}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: items}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: web}]
`
	grpcRoute := `---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: api-http}]
`
	req := policy.Request{Workload: policy.WorkloadRef{Namespace: "shop", Kind: "pod", Name: "api-0"}, Port: intstr.FromString("http"),
		Client: policy.Client{ServiceAccount: "web", Namespace: "shop"}, HTTP: &authz.Request{Method: "GET", Path: "/items"}}

	ix := policy.Build(objectsFrom(t, doc), nil)
	res, err := ix.Evaluate(req)
	require.NoError(t, err)
	assert.Equal(t, authz.Allow, res.Decision, "alone, the HTTPRoute attaches")

	ix = policy.Build(objectsFrom(t, doc+grpcRoute), nil)
	res, err = ix.Evaluate(req)
	require.NoError(t, err)
	assert.Equal(t, authz.Deny, res.Decision)
	assert.Equal(t, authz.ReasonUnauthorized, res.Reason, "the default route matches; nothing authorizes web on the Server")
	e, err := ix.Explain(req)
	require.NoError(t, err)
	assert.Contains(t, e.String(), "GRPCRoute rpc names it too (conflicted)")
}
