package webhook_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/inject/webhook"
	"github.com/weftmesh/weft/mesh/policy"
)

// ruleCases is the one table of verdicts for resources that reach Weft.
// Each case names the fields an object is refused for (none: accepted). The
// same table drives the admission webhook (Validate) and the controllers
// that read the object from a cluster or a file: the policy index (Build
// ignores the object, with an error on each field) and the destination
// index (ResolveProfile refuses the profile, naming each field). A case
// that the two sides judge differently fails here.
var ruleCases = []struct {
	name   string
	doc    string
	fields []string
}{
	{"a network whose address has host bits set means its network", `apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: nets, namespace: shop}
spec:
  networks: [{cidr: 10.0.0.1/8}]
`, nil},
	{"an exception outside its network", `apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: nets, namespace: shop}
spec:
  networks:
  - cidr: 10.0.0.0/16
    except: [10.0.0.0/8]
`, []string{"spec.networks[0]"}},
	{"a server with an impossible port, protocol and access policy", `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  port: 0
  proxyProtocol: HTTP/3
  accessPolicy: allow-all
`, []string{"spec.accessPolicy", "spec.port", "spec.proxyProtocol"}},
	{"a v1beta1 server", `apiVersion: policy.linkerd.io/v1beta1
kind: Server
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  port: http
  proxyProtocol: gRPC
`, nil},
	{"a server without a pod selector", `apiVersion: policy.linkerd.io/v1beta2
kind: Server
metadata: {name: web, namespace: shop}
spec:
  port: 8080
`, []string{"spec.podSelector"}},
	{"a server authorization both unauthenticated and meshTLS", `apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: a, namespace: shop}
spec:
  server: {name: web}
  client:
    unauthenticated: true
    meshTLS: {serviceAccounts: [{name: web}]}
`, []string{"spec.client.unauthenticated"}},
	{"unauthenticated TLS beside identities", `apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: a, namespace: shop}
spec:
  server: {selector: {matchLabels: {app: web}}}
  client:
    meshTLS: {unauthenticatedTLS: true, identities: ["web.shop.serviceaccount.identity.weft.cluster.local"]}
`, []string{"spec.client.meshTLS.unauthenticatedTLS"}},
	{"a server authorization naming no server, with a bad exception", `apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: a, namespace: shop}
spec:
  server: {}
  client:
    meshTLS: {identities: ["*"]}
    networks: [{cidr: 10.0.0.0/8, except: [192.168.0.0/16]}]
`, []string{"spec.client.networks[0]", "spec.server"}},
	{"an authorization policy on a Deployment", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {group: apps, kind: Deployment, name: web}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: c}]
`, []string{"spec.targetRef"}},
	{"an authorization policy requiring two MeshTLSAuthentications", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: a}
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: b}
`, []string{"spec.requiredAuthenticationRefs[1]"}},
	{"an authorization policy requiring nothing", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web}
  requiredAuthenticationRefs: []
`, []string{"spec.requiredAuthenticationRefs"}},
	{"an authorization policy on another namespace applies to nothing but is valid", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {kind: Namespace, name: billing}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: web}]
`, nil},
	{"a mesh TLS authentication with a wildcard inside and a Pod reference", `apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: m, namespace: shop}
spec:
  identities: ["*.shop.serviceaccount.identity.weft.cluster.local", "a.*.b"]
  identityRefs: [{kind: Pod, name: x}]
`, []string{"spec.identities[1]", "spec.identityRefs[0].kind"}},
	{"an HTTPRoute path without a leading slash", `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: api}}]
`, []string{"spec.rules[0].matches[0].path.value"}},
	{"a Gateway HTTPRoute with a regular expression that does not compile", `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]
  rules:
  - matches: [{headers: [{type: RegularExpression, name: x-user, value: "(("}]}]
`, []string{"spec.rules[0].matches[0].headers[0].value"}},
	{"a GRPCRoute matching methods by regular expression", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]
  rules:
  - matches: [{method: {type: RegularExpression, service: "shop\\..*"}}]
`, []string{"spec.rules[0].matches[0].method.type"}},
	{"a valid HTTPLocalRateLimitPolicy", `apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: rl, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web}
  total: {requestsPerSecond: 1000}
  identity: {requestsPerSecond: 100}
  overrides:
  - requestsPerSecond: 200
    clientRefs: [{kind: ServiceAccount, name: sa-1, namespace: linkerd}]
`, nil},
	{"an HTTPLocalRateLimitPolicy wrong in every way Linkerd's webhook refuses", `apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: rl, namespace: shop}
spec:
  targetRef: {group: apps, kind: Deployment, name: web}
  total: {requestsPerSecond: 1000}
  identity: {requestsPerSecond: 2000}
  overrides:
  - requestsPerSecond: 2000
    clientRefs: [{kind: ServiceAccount, name: sa-1}]
  - requestsPerSecond: 0
    clientRefs: [{group: apps, kind: Deployment, name: web}]
`, []string{"spec.identity.requestsPerSecond", "spec.overrides[0].requestsPerSecond", "spec.overrides[1].clientRefs[0]",
		"spec.overrides[1].requestsPerSecond", "spec.targetRef"}},
	{"an HTTPLocalRateLimitPolicy with limits outside the proxy API's range", `apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: rl, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web}
  total: {requestsPerSecond: -1}
  identity: {requestsPerSecond: 4294967296}
`, []string{"spec.identity.requestsPerSecond", "spec.total.requestsPerSecond"}},
	{"a valid EgressNetwork", `apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: partner, namespace: shop}
spec:
  trafficPolicy: Deny
  networks: [{cidr: 10.1.0.0/24}, {cidr: 10.1.1.0/24, except: [10.1.1.0/28]}]
`, nil},
	{"an EgressNetwork without networks stands for every address outside the cluster", `apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: all, namespace: linkerd-egress}
spec: {trafficPolicy: Allow}
`, nil},
	{"an EgressNetwork with an empty networks list", `apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: none, namespace: shop}
spec: {trafficPolicy: Allow, networks: []}
`, []string{"spec.networks"}},
	{"an EgressNetwork wrong in every field", `apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: bad, namespace: shop}
spec:
  trafficPolicy: allow
  networks: [{cidr: 10.1.0.0/33}, {cidr: 10.1.1.0/24, except: [10.1.1.0/24]}]
`, []string{"spec.networks[0]", "spec.networks[1]", "spec.trafficPolicy"}},
	{"a v1alpha2 TLSRoute on an EgressNetwork port", `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: all, port: 443}]
  hostnames: [api.example.com, "*.example.org"]
  rules: [{backendRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: all}]}]
`, nil},
	{"a TLSRoute on an EgressNetwork without a port, with two rules and a bad hostname", `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: all}]
  hostnames: ["api.*.example.com"]
  rules: [{backendRefs: [{name: a, port: 443}]}, {backendRefs: [{name: b, port: 443}]}]
`, []string{"spec.hostnames[0]", "spec.parentRefs[0].port", "spec.rules"}},
	{"a v1 TCPRoute on a Service", `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: db, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, name: db, port: 5432}]
  rules: [{backendRefs: [{name: db-blue, port: 5432, weight: 90}, {name: db-green, port: 5432, weight: 10}]}]
`, nil},
	{"a v1alpha2 TCPRoute without a rule", `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, name: db, port: 5432}]
`, []string{"spec.rules"}},
	{"a valid ServiceProfile", `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes:
  - name: books
    condition: {method: GET, pathRegex: "/books/[^/]*"}
    timeout: 300ms
  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}
`, nil},
	{"a ServiceProfile wrong in many places", `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes:
  - name: ""
    condition: {pathRegex: "/api/("}
  - name: no-condition
  - name: empty-condition
    condition: {}
    responseClasses:
    - condition: {status: {min: 599, max: 500}}
    timeout: soon
  - name: method
    condition: {method: "GET /"}
  retryBudget: {retryRatio: -1, minRetriesPerSecond: 1, ttl: "10x"}
  dstOverrides:
  - {authority: "web:99999", weight: 1}
  opaquePorts: ["9000-8000"]
`, []string{
		"spec.dstOverrides[0].authority", "spec.opaquePorts[0]", "spec.retryBudget.retryRatio", "spec.retryBudget.ttl",
		"spec.routes[0].condition.pathRegex", "spec.routes[0].name", "spec.routes[1].condition",
		"spec.routes[2].condition", "spec.routes[2].responseClasses[0].condition.status", "spec.routes[2].timeout",
		"spec.routes[3].condition.method",
	}},
}

func TestTheWebhookAndTheControllersJudgeEveryResourceAlike(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decodeTyped(t, tc.doc)
			want := append([]string(nil), tc.fields...)
			sort.Strings(want)

			var admission []string
			for _, e := range webhook.Validate(obj) {
				admission = append(admission, e.Field)
			}
			sort.Strings(admission)
			assert.Equal(t, want, admission, "the admission webhook")

			assert.Equal(t, want, controllerVerdict(t, obj), "the controller reading the object")
		})
	}
}

// controllerVerdict returns the fields the controller that consumes obj
// refuses it for, sorted.
func controllerVerdict(t *testing.T, obj runtime.Object) []string {
	t.Helper()
	var out []string
	if sp, ok := obj.(*spv1alpha2.ServiceProfile); ok {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
		_, err := discovery.ResolveProfile([]runtime.Object{svc, sp}, "web.shop.svc.cluster.local:80", discovery.ContextToken{})
		for _, e := range leaves(err) {
			var pe *discovery.ProfileError
			require.ErrorAs(t, e, &pe)
			out = append(out, pe.Field)
		}
		sort.Strings(out)
		return out
	}
	objs := &policy.Objects{}
	require.NoError(t, objs.Add(obj, policy.Location{}))
	ix := policy.Build(objs, nil)
	for _, p := range ix.Errors() {
		out = append(out, p.Field)
	}
	sort.Strings(out)
	return out
}

func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}
