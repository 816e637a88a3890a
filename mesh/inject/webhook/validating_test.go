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
`, []string{"spec.routes[0].condition.pathRegex", "spec.routes[0].responseClasses[0].condition.status", "want 100 <= min <= max <= 599"}},
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
