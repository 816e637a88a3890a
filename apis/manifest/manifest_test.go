package manifest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/manifest"
	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta1 "github.com/weftmesh/weft/apis/policy/v1beta1"
	policyv1beta2 "github.com/weftmesh/weft/apis/policy/v1beta2"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

// as returns the object at index i as a T, failing the test otherwise.
func as[T any](t *testing.T, objs []manifest.Object, i int) T {
	t.Helper()
	require.Greater(t, len(objs), i, "object %d exists", i)
	v, ok := objs[i].Object.(T)
	require.True(t, ok, "object %d is %T, want %T", i, objs[i].Object, *new(T))
	return v
}

// problems returns every *manifest.Error inside a joined error.
func problems(t *testing.T, err error) []*manifest.Error {
	t.Helper()
	require.Error(t, err)
	var out []*manifest.Error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var me *manifest.Error
		if errors.As(err, &me) {
			out = append(out, me)
		}
	}
	walk(err)
	return out
}

func TestDecodeFileReadsLinkerdPolicyExampleIntoTypedObjects(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/linkerd-policy.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 4)

	ns := as[*corev1.Namespace](t, objs, 0)
	assert.Equal(t, "my-app", ns.Name)
	assert.Equal(t, "enabled", ns.Annotations["linkerd.io/inject"])
	assert.Equal(t, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, objs[0].GroupVersionKind())

	srv := as[*policyv1beta3.Server](t, objs, 1)
	assert.Equal(t, "my-app", srv.Namespace)
	assert.Equal(t, "web-http", srv.Name)
	require.NotNil(t, srv.Spec.PodSelector)
	assert.Equal(t, map[string]string{"app": "web"}, srv.Spec.PodSelector.MatchLabels)
	assert.Equal(t, intstr.FromString("http"), srv.Spec.Port)
	assert.Equal(t, policyv1beta3.ProxyProtocolHTTP1, srv.Spec.ProxyProtocol)
	assert.Equal(t, policyv1beta3.AccessPolicyDeny, srv.Spec.AccessPolicy)
	assert.Nil(t, srv.Spec.ExternalWorkloadSelector)
	assert.Equal(t, "policy.linkerd.io/v1beta3", srv.APIVersion)
	assert.Equal(t, "Server", srv.Kind)

	ap := as[*policyv1alpha1.AuthorizationPolicy](t, objs, 2)
	assert.Equal(t, "web-api-gateway", ap.Name)
	assert.Equal(t, policyv1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"}, ap.Spec.TargetRef)
	require.Len(t, ap.Spec.RequiredAuthenticationRefs, 1)
	ref := ap.Spec.RequiredAuthenticationRefs[0]
	assert.Equal(t, gatewayv1.Kind("ServiceAccount"), ref.Kind)
	assert.Equal(t, gatewayv1.ObjectName("api-gateway"), ref.Name)
	assert.Empty(t, ref.Group)
	assert.Nil(t, ref.Namespace)

	saz := as[*policyv1beta1.ServerAuthorization](t, objs, 3)
	assert.Equal(t, "web-authz-legacy", saz.Name)
	assert.Equal(t, "web-http", saz.Spec.Server.Name)
	assert.Nil(t, saz.Spec.Server.Selector)
	require.NotNil(t, saz.Spec.Client.MeshTLS)
	assert.Equal(t, []policyv1beta1.ServiceAccountRef{{Name: "api-gateway", Namespace: "my-app"}}, saz.Spec.Client.MeshTLS.ServiceAccounts)
	assert.False(t, saz.Spec.Client.Unauthenticated)

	for i, o := range objs {
		assert.Equal(t, "../testdata/linkerd-policy.yaml", o.Source)
		assert.Equal(t, i+1, o.Document)
		assert.Zero(t, o.Item)
	}
	assert.Equal(t, "../testdata/linkerd-policy.yaml document 2: Server my-app/web-http", objs[1].String())
}

func TestDecodeFileRejectsAMisspelledFieldNamingFileDocumentObjectAndField(t *testing.T) {
	objs, err := manifest.DecodeFile("testdata/misspelled-server.yaml")
	assert.Nil(t, objs, "no objects on error")
	require.Error(t, err)
	assert.Equal(t,
		`manifest: testdata/misspelled-server.yaml: document 2 (Server my-app/web-http): unknown field "spec.podSelectr" (line 14)`,
		err.Error())

	var e *manifest.Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, "testdata/misspelled-server.yaml", e.Source)
	assert.Equal(t, 2, e.Document)
	assert.Equal(t, "spec.podSelectr", e.Field)
	assert.Equal(t, 14, e.Line)
	assert.Equal(t, "Server", e.Kind)
	assert.Equal(t, "my-app", e.Namespace)
	assert.Equal(t, "web-http", e.Name)
}

func TestDecodeFileRejectsAnUnknownKind(t *testing.T) {
	objs, err := manifest.DecodeFile("testdata/unknown-kind.yaml")
	assert.Nil(t, objs)
	require.Error(t, err)
	assert.Equal(t,
		`manifest: testdata/unknown-kind.yaml: document 1 (Gateway my-app/ingress): unknown kind "Gateway" for apiVersion "gateway.networking.k8s.io/v1" (line 2)`,
		err.Error())
}

func TestDecodeFileReturnsNoObjectsWhenOneDocumentOfManyIsBad(t *testing.T) {
	objs, err := manifest.DecodeFile("testdata/one-bad-document.yaml")
	assert.Nil(t, objs)
	ps := problems(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, 2, ps[0].Document)
	assert.Equal(t, "spec.proxyProtocl", ps[0].Field)
	assert.Equal(t, 16, ps[0].Line)
	assert.Contains(t, err.Error(), `document 2 (Server my-app/web-http): unknown field "spec.proxyProtocl"`)
}

func TestDecodeReportsEveryBadDocumentNotJustTheFirst(t *testing.T) {
	in := `
apiVersion: v1
kind: Namespace
metadata: {name: a, labelz: {}}
---
apiVersion: v1
kind: Namespace
metadata: {name: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: c, annotationz: {}}
`
	objs, err := manifest.Decode("ns.yaml", []byte(in))
	assert.Nil(t, objs)
	ps := problems(t, err)
	require.Len(t, ps, 2)
	assert.Equal(t, 1, ps[0].Document)
	assert.Equal(t, "metadata.labelz", ps[0].Field)
	assert.Equal(t, 4, ps[0].Line)
	assert.Equal(t, 3, ps[1].Document)
	assert.Equal(t, "metadata.annotationz", ps[1].Field)
	assert.Equal(t, 12, ps[1].Line)
}

func TestDecodeRejectsBadDocumentsWithAClearMessage(t *testing.T) {
	const server = "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: web-http\n  namespace: my-app\n"
	for _, tc := range []struct {
		name string
		in   string
		want string // the whole message after "manifest: web.yaml: "
	}{
		{
			name: "duplicate field in YAML",
			in:   server + "spec:\n  port: 80\n  podSelector: {}\n  port: 81\n",
			want: `document 1 (Server my-app/web-http): duplicate field "spec.port" (line 9)`,
		},
		{
			name: "duplicate field in JSON",
			in:   `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","name":"b"}}`,
			want: `document 1 (Namespace b): duplicate field "metadata.name" (line 1)`,
		},
		{
			name: "list where a port is expected",
			in:   server + "spec:\n  podSelector: {}\n  port: [80]\n",
			want: `document 1 (Server my-app/web-http): wrong type for field "spec.port": got list, want integer or string (line 8)`,
		},
		{
			name: "number where a protocol is expected",
			in:   server + "spec:\n  podSelector: {}\n  port: 80\n  proxyProtocol: 1\n",
			want: `document 1 (Server my-app/web-http): wrong type for field "spec.proxyProtocol": got number, want string (line 9)`,
		},
		{
			name: "YAML 1.1 boolean where a label value is expected",
			in:   server + "spec:\n  podSelector:\n    matchLabels:\n      meshed: yes\n  port: 80\n",
			want: `document 1 (Server my-app/web-http): wrong type for field "spec.podSelector.matchLabels": got boolean, want string (line 8)`,
		},
		{
			name: "YAML 1.1 boolean where a namespace is expected",
			in:   "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: n}\n",
			want: `document 1 (ServiceAccount a): wrong type for field "metadata.namespace": got boolean, want string (line 3)`,
		},
		{
			name: "string where a list of containers is expected",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: web\n",
			want: `document 1 (Pod p): wrong type for field "spec.containers": got string, want list (line 5)`,
		},
		{
			name: "wrong type deep inside a list",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: web\n    ports:\n    - containerPort: http\n",
			want: `document 1 (Pod p): wrong type for field "spec.containers.ports.containerPort": got string, want integer (line 8)`,
		},
		{
			name: "unknown field deep inside a list",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns1}\nspec:\n  rules:\n  - matches:\n    - path: {value: /a}\n    - path: {valu: /b}\n",
			want: `document 1 (HTTPRoute ns1/r): unknown field "spec.rules[0].matches[1].path.valu" (line 8)`,
		},
		{
			name: "missing apiVersion",
			in:   "kind: Namespace\nmetadata: {name: a}\n",
			want: `document 1 (Namespace a): missing field "apiVersion"`,
		},
		{
			name: "missing kind",
			in:   "apiVersion: v1\nmetadata: {name: a}\n",
			want: `document 1 (a): missing field "kind"`,
		},
		{
			name: "missing name",
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n",
			want: `document 1 (Namespace): missing field "metadata.name"`,
		},
		{
			name: "kind not served at that version",
			in:   "apiVersion: policy.linkerd.io/v1alpha1\nkind: Server\nmetadata: {name: s}\nspec: {port: 80}\n",
			want: `document 1 (Server s): kind "Server" is not served at apiVersion "policy.linkerd.io/v1alpha1"; use policy.linkerd.io/v1beta1 or policy.linkerd.io/v1beta2 or policy.linkerd.io/v1beta3 (line 2)`,
		},
		{
			name: "kind in the wrong case",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: server\nmetadata: {name: s}\n",
			want: `document 1 (server s): unknown kind "server" for apiVersion "policy.linkerd.io/v1beta3"; kinds are case-sensitive: did you mean "Server"? (line 2)`,
		},
		{
			name: "core kind a mesh does not read",
			in:   "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
			want: `document 1 (Node n1): unknown kind "Node" for apiVersion "v1" (line 2)`,
		},
		{
			name: "meta kind that is not a resource",
			in:   "apiVersion: v1\nkind: Status\nmetadata: {}\n",
			want: `document 1 (Status): unknown kind "Status" for apiVersion "v1" (line 2)`,
		},
		{
			name: "malformed apiVersion",
			in:   "apiVersion: a/b/c\nkind: Namespace\nmetadata: {name: a}\n",
			want: `document 1 (Namespace a): invalid apiVersion "a/b/c" (line 1)`,
		},
		{
			name: "apiVersion that is not a string",
			in:   "apiVersion: 1\nkind: Namespace\nmetadata: {name: a}\n",
			want: `document 1 (Namespace a): wrong type for field "apiVersion": got number, want string (line 1)`,
		},
		{
			name: "metadata that is not an object",
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: a\n",
			want: `document 1 (Namespace): wrong type for field "metadata": got string, want object (line 3)`,
		},
		{
			name: "a document that is a list",
			in:   "- apiVersion: v1\n  kind: Namespace\n",
			want: `document 1: document is a list, not an object (line 1)`,
		},
		{
			name: "a document that is a string",
			in:   "# a comment\n---\njust text\n",
			want: `document 1: document is a string, not an object (line 2)`,
		},
		{
			name: "YAML syntax error reported at its line in the file",
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: [b\n",
			want: `document 2: invalid YAML: did not find expected ',' or ']' (line 7)`,
		},
		{
			name: "content after a document end marker",
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n...\nkind: Pod\n",
			want: `document 1: content after the "..." document end marker; start a new document with "---" (line 5)`,
		},
		{
			name: "invalid base64 in a Secret",
			in:   "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  k: '!!!'\n",
			want: `document 1 (Secret s): invalid value: illegal base64 data at input byte 0`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("web.yaml", []byte(tc.in))
			assert.Nil(t, objs)
			require.Error(t, err)
			assert.Equal(t, "manifest: web.yaml: "+tc.want, err.Error())
		})
	}
}

func TestDecodeFillsInLinkerdCRDDefaultsAsTheAPIServerWould(t *testing.T) {
	in := `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: ns1}
spec:
  podSelector: {}
  port: 8080
---
apiVersion: policy.linkerd.io/v1beta1
kind: Server
metadata: {name: old, namespace: ns1}
spec:
  podSelector: {}
  port: 8080
---
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: ns1}
spec:
  parentRefs:
  - name: s
  rules:
  - filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ns1}
spec:
  ports:
  - port: 80
`
	objs, err := manifest.Decode("defaults.yaml", []byte(in))
	require.NoError(t, err)
	require.Len(t, objs, 4)

	srv := as[*policyv1beta3.Server](t, objs, 0)
	assert.Equal(t, policyv1beta3.AccessPolicyDeny, srv.Spec.AccessPolicy)
	assert.Equal(t, policyv1beta3.ProxyProtocolUnknown, srv.Spec.ProxyProtocol)
	assert.Equal(t, policyv1beta1.ProxyProtocolUnknown, as[*policyv1beta1.Server](t, objs, 1).Spec.ProxyProtocol)

	route := as[*policyv1beta3.HTTPRoute](t, objs, 2)
	pr := route.Spec.ParentRefs[0]
	require.NotNil(t, pr.Group)
	assert.Equal(t, gatewayv1.Group("policy.linkerd.io"), *pr.Group)
	require.NotNil(t, pr.Kind)
	assert.Equal(t, gatewayv1.Kind("Gateway"), *pr.Kind)
	rule := route.Spec.Rules[0]
	require.Len(t, rule.Matches, 1, "a rule without matches matches every path")
	assert.Equal(t, gatewayv1.PathMatchPathPrefix, *rule.Matches[0].Path.Type)
	assert.Equal(t, "/", *rule.Matches[0].Path.Value)
	require.NotNil(t, rule.Filters[0].RequestRedirect.StatusCode)
	assert.Equal(t, 302, *rule.Filters[0].RequestRedirect.StatusCode)

	svc := as[*corev1.Service](t, objs, 3)
	assert.Empty(t, svc.Spec.Ports[0].Protocol, "core kinds are returned as written")
}

func TestDecodeEnforcesLinkerdCRDSchemas(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			name: "access policy Linkerd does not know",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: ns1}\nspec:\n  podSelector: {}\n  port: 80\n  accessPolicy: allow\n",
			want: `document 1 (Server ns1/s): invalid value for field "spec.accessPolicy": "allow" is not one of "all-unauthenticated", "all-authenticated", "cluster-authenticated", "cluster-unauthenticated", "deny", "audit" (line 7)`,
		},
		{
			name: "proxy protocol Linkerd does not know",
			in:   "apiVersion: policy.linkerd.io/v1beta2\nkind: Server\nmetadata: {name: s, namespace: ns1}\nspec:\n  podSelector: {}\n  port: 80\n  proxyProtocol: HTTP/3\n",
			want: `document 1 (Server ns1/s): invalid value for field "spec.proxyProtocol": "HTTP/3" is not one of "unknown", "HTTP/1", "HTTP/2", "gRPC", "opaque", "TLS" (line 7)`,
		},
		{
			name: "Server without a port",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: ns1}\nspec:\n  podSelector: {}\n",
			want: `document 1 (Server ns1/s): missing field "spec.port" (line 4)`,
		},
		{
			name: "AuthorizationPolicy without required authentications",
			in:   "apiVersion: policy.linkerd.io/v1alpha1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: ns1}\nspec:\n  targetRef: {kind: Server, name: s}\n",
			want: `document 1 (AuthorizationPolicy ns1/p): missing field "spec.requiredAuthenticationRefs" (line 4)`,
		},
		{
			name: "MeshTLSAuthentication with an empty identity list",
			in:   "apiVersion: policy.linkerd.io/v1alpha1\nkind: MeshTLSAuthentication\nmetadata: {name: m, namespace: ns1}\nspec:\n  identities: []\n",
			want: `document 1 (MeshTLSAuthentication ns1/m): invalid value for field "spec.identities": has 0 items, want at least 1 (line 5)`,
		},
		{
			name: "ServerAuthorization identity that is not a name",
			in:   "apiVersion: policy.linkerd.io/v1beta1\nkind: ServerAuthorization\nmetadata: {name: a, namespace: ns1}\nspec:\n  server: {name: s}\n  client:\n    meshTLS:\n      identities: [\"Web.NS\"]\n",
			want: `document 1 (ServerAuthorization ns1/a): invalid value for field "spec.client.meshTLS.identities[0]": "Web.NS" does not match ^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ (line 8)`,
		},
		{
			name: "target kind that is not a kind name",
			in:   "apiVersion: policy.linkerd.io/v1alpha1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: ns1}\nspec:\n  targetRef: {kind: 'Server!', name: s}\n  requiredAuthenticationRefs: []\n",
			want: `document 1 (AuthorizationPolicy ns1/p): invalid value for field "spec.targetRef.kind": "Server!" does not match ^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$ (line 5)`,
		},
		{
			name: "HTTPRoute filter Linkerd does not support",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns1}\nspec:\n  rules:\n  - filters:\n    - type: URLRewrite\n",
			want: `document 1 (HTTPRoute ns1/r): invalid value for field "spec.rules[0].filters[0].type": "URLRewrite" is not one of "RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect" (line 7)`,
		},
		{
			name: "HTTPRoute parent port out of range",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns1}\nspec:\n  parentRefs:\n  - {name: s, port: 70000}\n",
			want: `document 1 (HTTPRoute ns1/r): invalid value for field "spec.parentRefs[0].port": 70000 is above the maximum 65535 (line 6)`,
		},
		{
			name: "Server selecting both pods and external workloads",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: ns1}\nspec:\n  podSelector: {}\n  externalWorkloadSelector: {}\n  port: 80\n",
			want: `document 1 (Server ns1/s): invalid value for field "spec": exactly one of the fields in [podSelector externalWorkloadSelector] must be set (line 4)`,
		},
		{
			name: "MeshTLSAuthentication with neither identities nor references",
			in:   "apiVersion: policy.linkerd.io/v1alpha1\nkind: MeshTLSAuthentication\nmetadata: {name: m, namespace: ns1}\nspec: {}\n",
			want: `document 1 (MeshTLSAuthentication ns1/m): invalid value for field "spec": exactly one of the fields in [identities identityRefs] must be set (line 4)`,
		},
		{
			name: "HTTPRoute filter whose body does not match its type",
			in:   "apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns1}\nspec:\n  rules:\n  - backendRefs:\n    - name: web\n      port: 80\n      filters:\n      - type: RequestRedirect\n",
			want: `document 1 (HTTPRoute ns1/r): invalid value for field "spec.rules[0].backendRefs[0].filters[0]": filter.requestRedirect must be set if and only if filter.type is RequestRedirect (line 10)`,
		},
		{
			name: "ServiceProfile route without a condition",
			in:   "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: a.b.svc.cluster.local, namespace: b}\nspec:\n  routes:\n  - name: r\n",
			want: `document 1 (ServiceProfile b/a.b.svc.cluster.local): missing field "spec.routes[0].condition" (line 6)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("web.yaml", []byte(tc.in))
			assert.Nil(t, objs)
			require.Error(t, err)
			assert.Equal(t, "manifest: web.yaml: "+tc.want, err.Error())
		})
	}
}

func TestDecodeRefusesADocumentOverTheSizeLimit(t *testing.T) {
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  k: " + strings.Repeat("x", manifest.MaxDocumentBytes) + "\n"
	in := "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n" + big
	objs, err := manifest.Decode("big.yaml", []byte(in))
	assert.Nil(t, objs)
	ps := problems(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, 2, ps[0].Document)
	assert.Equal(t, 4, ps[0].Line)
	assert.Contains(t, err.Error(), fmt.Sprintf("manifest: big.yaml: document 2: document is %d bytes, over the limit of %d bytes", len(big)+1, manifest.MaxDocumentBytes))
}

func TestDecodeSkipsEmptyAndCommentOnlyDocumentsButCountsThem(t *testing.T) {
	in := "# preamble comment\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---   # marker with a comment\n\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n...\n# trailing comment is fine\n"
	objs, err := manifest.Decode("ns.yaml", []byte(in))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, 3, objs[0].Document)
	assert.Equal(t, 5, objs[1].Document)
	assert.Equal(t, "a", as[*corev1.Namespace](t, objs, 0).Name)
	assert.Equal(t, "b", as[*corev1.Namespace](t, objs, 1).Name)

	objs, err = manifest.Decode("empty.yaml", []byte("# nothing here\n\n"))
	require.NoError(t, err)
	assert.Empty(t, objs)
	objs, err = manifest.Decode("empty.yaml", nil)
	require.NoError(t, err)
	assert.Empty(t, objs)
}

func TestDecodeCountsLinesAndDocumentsTheSameWithWindowsLineEndings(t *testing.T) {
	in := "apiVersion: v1\r\nkind: Namespace\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: Namespace\r\nmetadata:\r\n  name: b\r\n  nmae: c\r\n"
	_, err := manifest.Decode("crlf.yaml", []byte(in))
	ps := problems(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, 2, ps[0].Document)
	assert.Equal(t, "metadata.nmae", ps[0].Field)
	assert.Equal(t, 9, ps[0].Line)
}

func TestDecodeKeepsContentThatFollowsADocumentMarkerOnItsLine(t *testing.T) {
	in := "--- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n--- # a comment\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"
	objs, err := manifest.Decode("markers.yaml", []byte(in))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "a", as[*corev1.Namespace](t, objs, 0).Name)
	assert.Equal(t, "b", as[*corev1.Namespace](t, objs, 1).Name)
	assert.Equal(t, []int{1, 2}, []int{objs[0].Document, objs[1].Document})
}

func TestDecodeReadsAStreamOfJSONObjectsAndFlowStyleYAML(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}
{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b","labelz":{}}}`
	_, err := manifest.Decode("ns.json", []byte(in))
	ps := problems(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, 2, ps[0].Document)
	assert.Equal(t, 2, ps[0].Line)
	assert.Equal(t, "metadata.labelz", ps[0].Field)

	objs, err := manifest.Decode("flow.yaml", []byte("{apiVersion: v1, kind: Namespace, metadata: {name: a}}\n"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, "a", as[*corev1.Namespace](t, objs, 0).Name)
}

func TestDecodeFileExpandsListsIntoTheirItems(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/list.json")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	svc := as[*corev1.Service](t, objs, 0)
	assert.Equal(t, "api", svc.Name)
	assert.Equal(t, intstr.FromInt32(8080), svc.Spec.Ports[0].TargetPort)
	srv := as[*policyv1beta3.Server](t, objs, 1)
	assert.Equal(t, intstr.FromInt32(8080), srv.Spec.Port)
	for i, o := range objs {
		assert.Equal(t, 1, o.Document)
		assert.Equal(t, i+1, o.Item)
	}
	assert.Equal(t, "../testdata/list.json document 1 item 2: Server my-app/api-http", objs[1].String())
}

func TestDecodeChecksEachListItemAndTypedListsDefaultTheirItemsKind(t *testing.T) {
	typed := `
apiVersion: policy.linkerd.io/v1beta3
kind: ServerList
items:
- metadata: {name: a, namespace: ns1}
  spec: {podSelector: {}, port: 80}
- apiVersion: policy.linkerd.io/v1beta3
  kind: Server
  metadata: {name: b, namespace: ns1}
  spec: {podSelector: {}, port: 81}
`
	objs, err := manifest.Decode("servers.yaml", []byte(typed))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	a := as[*policyv1beta3.Server](t, objs, 0)
	assert.Equal(t, "Server", a.Kind, "the item gets the list's element kind")
	assert.Equal(t, "policy.linkerd.io/v1beta3", a.APIVersion)
	assert.Equal(t, schema.GroupVersionKind{Group: "policy.linkerd.io", Version: "v1beta3", Kind: "Server"}, objs[0].GroupVersionKind())

	for _, tc := range []struct{ name, in, want string }{
		{
			name: "unknown field in an item",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: b}\n  spek: {}\n",
			want: `manifest: l.yaml: document 1 item 2 (Namespace b): unknown field "spek" (line 10)`,
		},
		{
			name: "item of another kind in a typed list",
			in:   "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n",
			want: `manifest: l.yaml: document 1 item 1 (Namespace a): Namespace (v1) item in a PodList (line 5)`,
		},
		{
			name: "item without a kind in a v1 List",
			in:   "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: a}\n",
			want: `manifest: l.yaml: document 1 item 1 (a): missing field "apiVersion"` + "\n" + `manifest: l.yaml: document 1 item 1 (a): missing field "kind"`,
		},
		{
			name: "list inside a list",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n",
			want: `manifest: l.yaml: document 1 item 1 (List): a list may not hold another list (line 5)`,
		},
		{
			name: "unknown field in the list itself",
			in:   "apiVersion: v1\nkind: List\nitemz: []\n",
			want: `manifest: l.yaml: document 1 (List): unknown field "itemz" (line 3)`,
		},
		{
			name: "item that is not an object",
			in:   "apiVersion: v1\nkind: List\nitems:\n- 42\n",
			want: `manifest: l.yaml: document 1 item 1: item is a number, not an object (line 4)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("l.yaml", []byte(tc.in))
			assert.Nil(t, objs)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

func TestDecodeFileReadsAServiceProfileWithNestedConditions(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/serviceprofile.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	sp := as[*spv1alpha2.ServiceProfile](t, objs, 0)
	assert.Equal(t, "authors.booksapp.svc.cluster.local", sp.Name)
	require.Len(t, sp.Spec.Routes, 3)

	r0 := sp.Spec.Routes[0]
	assert.Equal(t, "GET /authors.json", r0.Name)
	assert.Equal(t, &spv1alpha2.RequestMatch{Method: "GET", PathRegex: `/authors\.json`}, r0.Condition)
	assert.True(t, r0.IsRetryable)
	assert.Equal(t, "25ms", r0.Timeout)

	r1 := sp.Spec.Routes[1]
	assert.Equal(t, []spv1alpha2.RequestMatch{{PathRegex: `/authors/\d+`}, {Method: "POST"}}, r1.Condition.All)
	require.Len(t, r1.ResponseClasses, 1)
	assert.True(t, r1.ResponseClasses[0].IsFailure)
	assert.Equal(t, &spv1alpha2.Range{Min: 500, Max: 599}, r1.ResponseClasses[0].Condition.Status)

	r2 := sp.Spec.Routes[2]
	require.Len(t, r2.Condition.Any, 2)
	require.Len(t, r2.Condition.Any[1].All, 2)
	assert.Equal(t, &spv1alpha2.RequestMatch{Method: "DELETE"}, r2.Condition.Any[1].All[0].Not)
	rc := r2.ResponseClasses[0].Condition
	require.Len(t, rc.Any, 2)
	assert.Equal(t, &spv1alpha2.Range{Min: 500}, rc.Any[0].Status)
	assert.Equal(t, &spv1alpha2.Range{Max: 399}, rc.Any[1].Not.Status)

	require.NotNil(t, sp.Spec.RetryBudget)
	assert.InDelta(t, 0.2, sp.Spec.RetryBudget.RetryRatio, 1e-6)
	assert.Equal(t, uint32(10), sp.Spec.RetryBudget.MinRetriesPerSecond)
	assert.Equal(t, "10s", sp.Spec.RetryBudget.TTL)
	require.Len(t, sp.Spec.DstOverrides, 2)
	assert.Equal(t, "authors-v2.booksapp.svc.cluster.local:7001", sp.Spec.DstOverrides[1].Authority)
	assert.Equal(t, 0, sp.Spec.DstOverrides[0].Weight.Cmp(resource.MustParse("900m")))
}

func TestDecodeRejectsAMisspelledFieldInsideANestedServiceProfileCondition(t *testing.T) {
	in := "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: a.b.svc.cluster.local, namespace: b}\nspec:\n  routes:\n  - name: r\n    condition:\n      any:\n      - not:\n          pathRegx: /x\n"
	_, err := manifest.Decode("sp.yaml", []byte(in))
	require.Error(t, err)
	assert.Equal(t, `manifest: sp.yaml: document 1 (ServiceProfile b/a.b.svc.cluster.local): unknown field "spec.routes[0].condition.any[0].not.pathRegx" (line 10)`, err.Error())
}

func TestDecodeFileReadsGatewayAPIRoutes(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/gateway-routes.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 2)

	hr := as[*gatewayv1.HTTPRoute](t, objs, 0)
	assert.Equal(t, "backend-router", hr.Name)
	require.Len(t, hr.Spec.ParentRefs, 1)
	pr := hr.Spec.ParentRefs[0]
	assert.Equal(t, gatewayv1.ObjectName("backend-a-podinfo"), pr.Name)
	require.NotNil(t, pr.Kind)
	assert.Equal(t, gatewayv1.Kind("Service"), *pr.Kind)
	require.NotNil(t, pr.Port)
	assert.Equal(t, gatewayv1.PortNumber(9898), *pr.Port)
	require.Len(t, hr.Spec.Rules, 2)
	assert.Equal(t, "alternative", hr.Spec.Rules[0].Matches[0].Headers[0].Value)
	assert.Equal(t, gatewayv1.ObjectName("backend-b-podinfo"), hr.Spec.Rules[0].BackendRefs[0].Name)
	require.NotNil(t, hr.Spec.Rules[1].Timeouts)
	assert.Equal(t, gatewayv1.Duration("10s"), *hr.Spec.Rules[1].Timeouts.Request)

	gr := as[*gatewayv1.GRPCRoute](t, objs, 1)
	require.Len(t, gr.Spec.Rules, 1)
	require.NotNil(t, gr.Spec.Rules[0].Matches[0].Method)
	assert.Equal(t, "FindByShortcode", *gr.Spec.Rules[0].Matches[0].Method.Method)
}

func TestDecodeFileReadsLinkerdRoutesAuthenticationsAndOlderServerVersions(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/linkerd-authn.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 8)

	route := as[*policyv1beta3.HTTPRoute](t, objs, 1)
	require.Len(t, route.Spec.ParentRefs, 1)
	pr := route.Spec.ParentRefs[0]
	assert.Equal(t, gatewayv1.ObjectName("authors-server"), pr.Name)
	require.NotNil(t, pr.Kind)
	assert.Equal(t, gatewayv1.Kind("Server"), *pr.Kind)
	require.Len(t, route.Spec.Rules, 1)
	m := route.Spec.Rules[0].Matches
	require.Len(t, m, 2)
	assert.Equal(t, "/authors.json", *m[0].Path.Value)
	assert.Equal(t, gatewayv1.PathMatchPathPrefix, *m[0].Path.Type, "the CRD default is filled in")
	assert.Equal(t, gatewayv1.PathMatchPathPrefix, *m[1].Path.Type)
	assert.Equal(t, gatewayv1.HTTPMethodGet, *m[1].Method)

	ap := as[*policyv1alpha1.AuthorizationPolicy](t, objs, 2)
	assert.Equal(t, gatewayv1.Kind("HTTPRoute"), ap.Spec.TargetRef.Kind)
	require.Len(t, ap.Spec.RequiredAuthenticationRefs, 2)
	require.NotNil(t, ap.Spec.RequiredAuthenticationRefs[1].Namespace)
	assert.Equal(t, "linkerd", *ap.Spec.RequiredAuthenticationRefs[1].Namespace)

	ids := as[*policyv1alpha1.MeshTLSAuthentication](t, objs, 3)
	assert.Equal(t, []string{
		"books.booksapp.serviceaccount.identity.linkerd.cluster.local",
		"webapp.booksapp.serviceaccount.identity.linkerd.cluster.local",
	}, ids.Spec.Identities)
	refs := as[*policyv1alpha1.MeshTLSAuthentication](t, objs, 4)
	require.Len(t, refs.Spec.IdentityRefs, 2)
	assert.Equal(t, gatewayv1.Kind("Namespace"), refs.Spec.IdentityRefs[1].Kind)

	netauthn := as[*policyv1alpha1.NetworkAuthentication](t, objs, 5)
	require.Len(t, netauthn.Spec.Networks, 4)
	assert.Equal(t, policyv1alpha1.Network{Cidr: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}, netauthn.Spec.Networks[3])

	old := as[*policyv1beta1.Server](t, objs, 6)
	assert.Equal(t, intstr.FromInt32(9990), old.Spec.Port)
	assert.Equal(t, policyv1beta1.ProxyProtocolOpaque, old.Spec.ProxyProtocol)
	assert.Equal(t, []string{"authors", "books"}, old.Spec.PodSelector.MatchExpressions[0].Values)

	vm := as[*policyv1beta2.Server](t, objs, 7)
	require.NotNil(t, vm.Spec.ExternalWorkloadSelector)
	assert.Nil(t, vm.Spec.PodSelector)
	assert.Equal(t, policyv1beta2.ProxyProtocolGRPC, vm.Spec.ProxyProtocol)
}

func TestDecodeFileReadsEveryCoreKindTheMeshUses(t *testing.T) {
	objs, err := manifest.DecodeFile("../testdata/workloads.yaml")
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GroupVersionKind().Kind)
	}
	assert.Equal(t, []string{"ServiceAccount", "ConfigMap", "Secret", "Deployment", "Service", "EndpointSlice", "Pod", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob"}, kinds)

	sec := as[*corev1.Secret](t, objs, 2)
	assert.Equal(t, []byte("secret"), sec.Data["token"], "data is base64-decoded")
	assert.Equal(t, "not-encoded", sec.StringData["plain"])

	dep := as[*appsv1.Deployment](t, objs, 3)
	assert.Equal(t, int32(2), *dep.Spec.Replicas)
	assert.Equal(t, "5432", dep.Spec.Template.Annotations["config.linkerd.io/opaque-ports"])
	assert.Equal(t, int32(8080), dep.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)

	svc := as[*corev1.Service](t, objs, 4)
	assert.Equal(t, intstr.FromString("http"), svc.Spec.Ports[0].TargetPort)

	es := as[*discoveryv1.EndpointSlice](t, objs, 5)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, es.AddressType)
	assert.Equal(t, []string{"10.1.0.7"}, es.Endpoints[0].Addresses)
	assert.True(t, *es.Endpoints[0].Conditions.Ready)

	pod := as[*corev1.Pod](t, objs, 6)
	assert.Equal(t, "10.1.0.7", pod.Status.PodIP)
	cj := as[*batchv1.CronJob](t, objs, 11)
	assert.Equal(t, "0 3 * * *", cj.Spec.Schedule)
}

func TestSchemeRecognizesEveryDocumentedKindAndIsFreshEachCall(t *testing.T) {
	s := manifest.Scheme()
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "policy.linkerd.io", Version: "v1beta1", Kind: "Server"},
		{Group: "policy.linkerd.io", Version: "v1beta2", Kind: "Server"},
		{Group: "policy.linkerd.io", Version: "v1beta3", Kind: "Server"},
		{Group: "policy.linkerd.io", Version: "v1beta1", Kind: "ServerAuthorization"},
		{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "AuthorizationPolicy"},
		{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "MeshTLSAuthentication"},
		{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "NetworkAuthentication"},
		{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "HTTPLocalRateLimitPolicy"},
		{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "EgressNetwork"},
		{Group: "policy.linkerd.io", Version: "v1beta3", Kind: "HTTPRoute"},
		{Group: "linkerd.io", Version: "v1alpha2", Kind: "ServiceProfile"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GRPCRoute"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "TCPRoute"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "TLSRoute"},
		{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "TCPRoute"},
		{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "TLSRoute"},
		{Version: "v1", Kind: "Namespace"},
		{Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "Service"},
		{Version: "v1", Kind: "ServiceAccount"},
		{Version: "v1", Kind: "ConfigMap"},
		{Version: "v1", Kind: "Secret"},
		{Version: "v1", Kind: "List"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		{Group: "batch", Version: "v1", Kind: "Job"},
		{Group: "batch", Version: "v1", Kind: "CronJob"},
		{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
	} {
		assert.True(t, s.Recognizes(gvk), "%s", gvk)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Endpoints"},
		{Version: "v1", Kind: "Node"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"},
		{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "UDPRoute"},
	} {
		assert.False(t, s.Recognizes(gvk), "%s is left out on purpose", gvk)
	}

	other := manifest.Scheme()
	assert.NotSame(t, s, other)
	s.AddKnownTypes(schema.GroupVersion{Version: "v1"}, &corev1.Node{})
	assert.False(t, other.Recognizes(schema.GroupVersionKind{Version: "v1", Kind: "Node"}), "schemes share nothing")
}

func TestDecodeStopsListingProblemsAfterAHundred(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: n%d, bogus: 1}\n---\n", i)
	}
	objs, err := manifest.Decode("many.yaml", []byte(b.String()))
	assert.Nil(t, objs)
	assert.Len(t, problems(t, err), 100)
	assert.True(t, strings.HasSuffix(err.Error(), "manifest: 50 more problems not shown"), err.Error())
}

// writeFiles creates files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func ns(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n"
}

func names(t *testing.T, objs []manifest.Object) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		out = append(out, filepath.Base(o.Source)+":"+o.GroupVersionKind().Kind)
	}
	return out
}

func TestLoadPathsWalksDirectoriesInLexicalOrderAndSkipsHiddenAndOtherFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b/z.yaml":          ns("bz"),
		"b/a.yml":           ns("ba"),
		"a.json":            `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`,
		"c/d/e.YAML":        ns("cde"),
		".git/config.yaml":  "not: a manifest",
		".hidden.yaml":      "not: a manifest",
		"README.md":         "# not a manifest",
		"c/notes.txt":       "not: a manifest",
		"outside/link.yaml": ns("linked"),
	})
	require.NoError(t, os.Symlink(filepath.Join(dir, "outside/link.yaml"), filepath.Join(dir, "b/linked.yaml")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "c"), filepath.Join(dir, "b/dirlink")))

	objs, err := manifest.LoadPaths(filepath.Join(dir, "b"), filepath.Join(dir, "a.json"), filepath.Join(dir, "c"), filepath.Join(dir, "b/z.yaml"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yml:Namespace", "linked.yaml:Namespace", "z.yaml:Namespace", "a.json:Namespace", "e.YAML:Namespace"}, names(t, objs))
	assert.Equal(t, filepath.Join(dir, "b/a.yml"), objs[0].Source)
}

func TestLoadPathsReturnsNoObjectsWhenAnyFileIsBadAndNamesThatFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"1-good.yaml": ns("good"),
		"2-bad.yaml":  ns("fine") + "---\n" + "apiVersion: v1\nkind: Namespace\nmetadata: {name: bad}\nspek: {}\n",
		"3-good.yaml": ns("also-good"),
	})
	objs, err := manifest.LoadPaths(dir)
	assert.Nil(t, objs)
	require.Error(t, err)
	assert.Equal(t, `manifest: `+filepath.Join(dir, "2-bad.yaml")+`: document 2 (Namespace bad): unknown field "spek" (line 8)`, err.Error())
}

func TestLoadPathsReadsTheSharedTestdataDirectory(t *testing.T) {
	objs, err := manifest.LoadPaths("../testdata")
	require.NoError(t, err)
	// gateway-routes 2, linkerd-authn 8, linkerd-egress 2, linkerd-policy 4, linkerd-ratelimit 1, list 2, serviceprofile 1, workloads 12.
	assert.Len(t, objs, 32)
}

func TestLoadPathsAndDecodeFileRejectMissingEmptyOversizedAndSpecialPaths(t *testing.T) {
	_, err := manifest.LoadPaths()
	assert.EqualError(t, err, "manifest: no paths given")

	dir := t.TempDir()
	_, err = manifest.LoadPaths(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml")
	assert.ErrorIs(t, err, os.ErrNotExist)

	_, err = manifest.DecodeFile(dir)
	require.Error(t, err)
	assert.Equal(t, "manifest: "+dir+": not a regular file", err.Error())

	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(manifest.MaxFileBytes+1)) // sparse: nothing is written
	require.NoError(t, f.Close())
	_, err = manifest.DecodeFile(big)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("manifest: %s: file is %d bytes, over the limit of %d bytes", big, manifest.MaxFileBytes+1, manifest.MaxFileBytes), err.Error())

	objs, err := manifest.LoadPaths(t.TempDir())
	require.NoError(t, err, "an empty directory holds no objects")
	assert.Empty(t, objs)
}

func BenchmarkDecodeWorkloads(b *testing.B) {
	data, err := os.ReadFile("../testdata/workloads.yaml")
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := manifest.Decode("workloads.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeThousandServers(b *testing.B) {
	var buf strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&buf, "---\napiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: s%d\n  namespace: ns\nspec:\n  podSelector:\n    matchLabels: {app: web}\n  port: http\n  proxyProtocol: HTTP/1\n  accessPolicy: deny\n", i)
	}
	data := []byte(buf.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		objs, err := manifest.Decode("servers.yaml", data)
		if err != nil || len(objs) != 1000 {
			b.Fatal(err, len(objs))
		}
	}
}

func BenchmarkDecodeOneServer(b *testing.B) {
	data := []byte("apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: ns}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  port: http\n")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := manifest.Decode("server.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
