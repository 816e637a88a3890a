package webhook_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

func newValidator(t *testing.T) (string, *http.Client) {
	t.Helper()
	v, err := webhook.NewValidator()
	require.NoError(t, err)
	return serveTLS(t, v)
}

// objectReview wraps a YAML object in an AdmissionReview as the API server
// would send it.
func objectReview(t *testing.T, op admissionv1.Operation, doc string) []byte {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	var meta struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &meta))
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	require.NoError(t, err)
	return review(t, &admissionv1.AdmissionRequest{
		UID:       "v-1",
		Kind:      metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: meta.Kind},
		Namespace: meta.Metadata.Namespace,
		Name:      meta.Metadata.Name,
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
	})
}

func TestValidatorAcceptsLinkerdExamples(t *testing.T) {
	url, client := newValidator(t)
	objs, err := manifest.LoadPaths(filepath.Join("testdata", "valid.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	docs := strings.Split(readFile(t, "valid.yaml"), "\n---\n")
	require.Len(t, docs, len(objs))
	for i, doc := range docs {
		status, body := post(t, client, url, objectReview(t, admissionv1.Create, doc))
		require.Equal(t, http.StatusOK, status)
		resp := decodeResponse(t, body)
		assert.True(t, resp.Allowed, "document %d: %+v", i+1, resp.Result)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// decodeTyped decodes a YAML object into its Go type without the CRD
// schema checks of apis/manifest, so Validate's own checks can be seen.
func decodeTyped(t *testing.T, doc string) runtime.Object {
	t.Helper()
	var tm metav1.TypeMeta
	require.NoError(t, yaml.Unmarshal([]byte(doc), &tm))
	obj, err := manifest.Scheme().New(tm.GroupVersionKind())
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), obj))
	return obj
}

func TestValidateListsEveryInvalidField(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"service profile", `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes:
  - name: ""
    condition: {pathRegex: "/api/(", method: "GET /"}
  - name: no-condition
  - name: empty-condition
    condition: {}
    responseClasses:
    - condition: {status: {min: 599, max: 500}}
    timeout: soon
  retryBudget: {retryRatio: -1, minRetriesPerSecond: 1, ttl: "10x"}
  dstOverrides:
  - {authority: "web:99999", weight: 1}
  opaquePorts: ["9000-8000"]
`, []string{
			"spec.routes[0].name", "spec.routes[0].condition.pathRegex", "spec.routes[0].condition.method",
			"spec.routes[1].condition: Required", "spec.routes[2].condition: Required",
			"spec.routes[2].responseClasses[0].condition.status", "min is greater than max",
			"spec.routes[2].timeout", "spec.retryBudget.retryRatio", "spec.retryBudget.ttl",
			"spec.dstOverrides[0].authority", "spec.opaquePorts[0]",
		}},
		{"server", `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  externalWorkloadSelector: {matchLabels: {app: vm}}
  port: 0
  proxyProtocol: HTTP/3
  accessPolicy: allow-all
`, []string{"spec.externalWorkloadSelector", "spec.port", "spec.proxyProtocol", "spec.accessPolicy"}},
		{"server without selector", `apiVersion: policy.linkerd.io/v1beta2
kind: Server
metadata: {name: web, namespace: shop}
spec:
  port: not_a-valid-name
`, []string{"spec.podSelector: Required", "spec.port"}},
		{"server authorization", `apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: a, namespace: shop}
spec:
  server: {}
  client:
    unauthenticated: true
    meshTLS:
      unauthenticatedTLS: true
      identities: ["web.*.serviceaccount"]
    networks:
    - cidr: 10.0.0.0/8
      except: [192.168.0.0/16]
`, []string{"spec.server: Required", "spec.client.unauthenticated", "spec.client.meshTLS.unauthenticatedTLS",
			"spec.client.meshTLS.identities[0]", "spec.client.networks[0].except[0]"}},
		{"authorization policy", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {group: apps, kind: Deployment, name: web}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: a}
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: b}
  - {kind: ServiceAccount, name: c}
  - {group: example.com, kind: Token, name: d}
`, []string{"spec.targetRef.kind", "spec.requiredAuthenticationRefs[1]", "spec.requiredAuthenticationRefs[3].kind",
			"cannot be referenced together"}},
		{"authorization policy on another namespace", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRef: {kind: Namespace, name: billing}
  requiredAuthenticationRefs: []
`, []string{"spec.targetRef.name", "own namespace"}},
		{"mesh TLS authentication", `apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: m, namespace: shop}
spec:
  identities: ["*.shop.serviceaccount.identity.weft.cluster.local", "a.*.b"]
  identityRefs: [{kind: Pod, name: x}]
`, []string{"spec.identityRefs: Forbidden", "spec.identities[1]", "spec.identityRefs[0].kind"}},
		{"network authentication", `apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: nets, namespace: shop}
spec:
  networks:
  - cidr: 10.0.0.1/8
  - cidr: 10.0.0.0/16
    except: [10.0.0.0/8, "fd00::/8", "10.0.1.0/24"]
`, []string{"spec.networks[0].cidr", "host bits", "spec.networks[1].except[0]", "negates all", "spec.networks[1].except[1]"}},
		{"policy HTTPRoute", `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]
  rules:
  - matches:
    - path: {type: PathPrefix, value: api}
      headers: [{name: "bad header", value: x}]
      method: "GE T"
    filters:
    - type: RequestRedirect
    timeouts: {request: 1s, backendRequest: 5s}
`, []string{"spec.rules[0].matches[0].path.value", "spec.rules[0].matches[0].headers[0].name",
			"spec.rules[0].matches[0].method", "spec.rules[0].filters[0]", "spec.rules[0].timeouts.backendRequest"}},
		{"gateway GRPCRoute", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: shop}
spec:
  parentRefs: [{kind: Service, group: core, name: web, port: 8080}]
  rules:
  - matches:
    - method: {service: ""}
    backendRefs: [{name: web}]
`, []string{"spec.rules[0].matches[0].method", "spec.rules[0].backendRefs[0].port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := webhook.Validate(decodeTyped(t, tc.doc))
			require.NotEmpty(t, errs)
			msg := errs.ToAggregate().Error()
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

func TestValidatorRejectionsListTheInvalidFields(t *testing.T) {
	url, client := newValidator(t)
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"semantic checks", `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes:
  - name: r
    condition: {pathRegex: "/api/("}
    responseClasses:
    - condition: {status: {min: 599, max: 500}}
`, []string{"spec.routes[0].condition.pathRegex", "spec.routes[0].responseClasses[0].condition.status", "min is greater than max"}},
		{"misspelled field", `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes:
  - name: r
    conditon: {method: GET}
`, []string{"spec.routes[0].conditon"}},
		{"schema checks", `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  externalWorkloadSelector: {matchLabels: {app: vm}}
  port: 8080
  proxyProtocol: HTTP/3
`, []string{"spec", "spec.proxyProtocol"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, client, url, objectReview(t, admissionv1.Create, tc.doc))
			require.Equal(t, http.StatusOK, status)
			resp := decodeResponse(t, body)
			assert.Equal(t, "v-1", string(resp.UID))
			require.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
			for _, w := range tc.want {
				assert.Contains(t, resp.Result.Message, w)
			}
			require.NotNil(t, resp.Result.Details)
			assert.NotEmpty(t, resp.Result.Details.Causes)
		})
	}
}

func TestValidatorAllowsDeletionsAndKindsItDoesNotValidate(t *testing.T) {
	url, client := newValidator(t)
	bad := `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  routes: [{name: r}]
`
	status, body := post(t, client, url, objectReview(t, admissionv1.Delete, bad))
	require.Equal(t, http.StatusOK, status)
	assert.True(t, decodeResponse(t, body).Allowed)

	status, body = post(t, client, url, objectReview(t, admissionv1.Create, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {a: b}\n"))
	require.Equal(t, http.StatusOK, status)
	assert.True(t, decodeResponse(t, body).Allowed)

	status, body = post(t, client, url, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}`))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(body), "request.uid is empty")
}

// The Linkerd documentation examples kept with the API types must all pass.
func TestValidateAcceptsTheAPIExamples(t *testing.T) {
	objs, err := manifest.LoadPaths(filepath.Join("..", "..", "..", "apis", "testdata"))
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	for _, o := range objs {
		assert.Empty(t, webhook.Validate(o.Object), o.String())
	}
}

func TestValidatorNamesAFieldOfTheWrongType(t *testing.T) {
	url, client := newValidator(t)
	status, body := post(t, client, url, objectReview(t, admissionv1.Create, `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: web.shop.svc.cluster.local, namespace: shop}
spec:
  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10}
`))
	require.Equal(t, http.StatusOK, status)
	resp := decodeResponse(t, body)
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "spec.retryBudget.ttl")
	require.NotNil(t, resp.Result.Details)
	require.Len(t, resp.Result.Details.Causes, 1)
	assert.Equal(t, "spec.retryBudget.ttl", resp.Result.Details.Causes[0].Field)
}
