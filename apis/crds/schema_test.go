package crds_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/weftmesh/weft/apis/crds"
)

// apiServer applies to a custom resource what kube-apiserver applies on
// create, using the apiserver's own code: pruning of unknown fields,
// defaulting, OpenAPI validation and CEL validation rules.
type apiServer struct {
	t       *testing.T
	schemas map[schema.GroupVersionKind]*apiextensions.JSONSchemaProps
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	all, err := crds.All()
	require.NoError(t, err)
	s := &apiServer{t: t, schemas: map[schema.GroupVersionKind]*apiextensions.JSONSchemaProps{}}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			internal := &apiextensions.JSONSchemaProps{}
			require.NoError(t, apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil))
			s.schemas[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = internal
		}
	}
	return s
}

// admit runs obj through the apiserver's checks, changing it in place
// (defaults), and returns what the apiserver would complain about.
func (s *apiServer) admit(obj map[string]any) []string {
	t := s.t
	t.Helper()
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	require.NoError(t, err)
	props, ok := s.schemas[gv.WithKind(kind)]
	require.True(t, ok, "a CRD serves %s %s", apiVersion, kind)

	structural, err := structuralschema.NewStructural(props)
	require.NoError(t, err)
	var problems []string
	for _, p := range pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		problems = append(problems, "unknown field "+p)
	}
	defaulting.Default(obj, structural)
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	require.NoError(t, err)
	for _, e := range apiservervalidation.ValidateCustomResource(nil, obj, validator) {
		problems = append(problems, e.Error())
	}
	errs, _ := cel.NewValidator(structural, true, celconfig.PerCallLimit).
		Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
	for _, e := range errs {
		problems = append(problems, e.Error())
	}
	return problems
}

// readObjects reads every document of a YAML or JSON file as a map,
// expanding v1 Lists.
func readObjects(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, path)
		if obj == nil {
			continue
		}
		if obj["kind"] == "List" {
			for _, item := range obj["items"].([]any) {
				out = append(out, item.(map[string]any))
			}
			continue
		}
		out = append(out, obj)
	}
}

func ours(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	return strings.HasPrefix(apiVersion, "policy.linkerd.io/") || strings.HasPrefix(apiVersion, "linkerd.io/")
}

func TestLinkerdExamplesPassTheCRDSchemasAsTheAPIServerChecksThem(t *testing.T) {
	api := newAPIServer(t)
	files, err := filepath.Glob("../testdata/*")
	require.NoError(t, err)
	checked := map[string]bool{}
	for _, f := range files {
		for _, obj := range readObjects(t, f) {
			if !ours(obj) {
				continue
			}
			md, _ := obj["metadata"].(map[string]any)
			name := f + " " + obj["kind"].(string) + " " + md["name"].(string)
			assert.Empty(t, api.admit(obj), name)
			checked[obj["apiVersion"].(string)+" "+obj["kind"].(string)] = true
		}
	}
	// Every served version of every kind was exercised by an example.
	for gvk := range api.schemas {
		assert.True(t, checked[gvk.GroupVersion().String()+" "+gvk.Kind], "an example of %s", gvk)
	}
}

func TestCRDDefaultsMatchLinkerds(t *testing.T) {
	api := newAPIServer(t)

	server := map[string]any{
		"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
		"metadata": map[string]any{"name": "s", "namespace": "n"},
		"spec":     map[string]any{"podSelector": map[string]any{}, "port": int64(80)},
	}
	require.Empty(t, api.admit(server))
	spec := server["spec"].(map[string]any)
	assert.Equal(t, "deny", spec["accessPolicy"])
	assert.Equal(t, "unknown", spec["proxyProtocol"])

	route := map[string]any{
		"apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "r", "namespace": "n"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "s"}},
			"rules":      []any{map[string]any{}},
		},
	}
	require.Empty(t, api.admit(route))
	parent := route["spec"].(map[string]any)["parentRefs"].([]any)[0].(map[string]any)
	assert.Equal(t, "policy.linkerd.io", parent["group"])
	assert.Equal(t, "Gateway", parent["kind"])
	match := route["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)["matches"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"type": "PathPrefix", "value": "/"}, match["path"])
}

func TestCRDSchemasRejectWhatLinkerdRejects(t *testing.T) {
	api := newAPIServer(t)
	meta := map[string]any{"name": "x", "namespace": "n"}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want string
	}{
		{
			name: "Server selecting both pods and external workloads",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"podSelector": map[string]any{}, "externalWorkloadSelector": map[string]any{}, "port": int64(80)}},
			want: "exactly one of the fields in [podSelector externalWorkloadSelector] must be set",
		},
		{
			name: "Server selecting nothing",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta2", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"port": "http"}},
			want: "exactly one of the fields in [podSelector externalWorkloadSelector] must be set",
		},
		{
			name: "Server without a port",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta1", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"podSelector": map[string]any{}}},
			want: "spec.port: Required value",
		},
		{
			name: "Server with an access policy Linkerd does not know",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"podSelector": map[string]any{}, "port": int64(80), "accessPolicy": "allow"}},
			want: `spec.accessPolicy: Unsupported value: "allow"`,
		},
		{
			name: "Server with a protocol Linkerd does not know",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"podSelector": map[string]any{}, "port": int64(80), "proxyProtocol": "HTTP/3"}},
			want: `spec.proxyProtocol: Unsupported value: "HTTP/3"`,
		},
		{
			name: "misspelled field",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server", "metadata": meta,
				"spec": map[string]any{"podSelectr": map[string]any{}, "podSelector": map[string]any{}, "port": int64(80)}},
			want: "unknown field spec.podSelectr",
		},
		{
			name: "MeshTLSAuthentication with both identities and references",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "MeshTLSAuthentication", "metadata": meta,
				"spec": map[string]any{"identities": []any{"*"}, "identityRefs": []any{map[string]any{"kind": "ServiceAccount"}}}},
			want: "exactly one of the fields in [identities identityRefs] must be set",
		},
		{
			name: "ServerAuthorization naming a server two ways",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta1", "kind": "ServerAuthorization", "metadata": meta,
				"spec": map[string]any{"server": map[string]any{"name": "a", "selector": map[string]any{}}, "client": map[string]any{"unauthenticated": true}}},
			want: "exactly one of the fields in [name selector] must be set",
		},
		{
			name: "AuthorizationPolicy without authentications",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "AuthorizationPolicy", "metadata": meta,
				"spec": map[string]any{"targetRef": map[string]any{"kind": "Server", "name": "s"}}},
			want: "spec.requiredAuthenticationRefs: Required value",
		},
		{
			name: "HTTPRoute filter whose type and body disagree",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute", "metadata": meta,
				"spec": map[string]any{"rules": []any{map[string]any{"filters": []any{map[string]any{
					"type": "RequestRedirect", "requestHeaderModifier": map[string]any{"remove": []any{"x"}}}}}}}},
			want: "filter.requestHeaderModifier must be set if and only if filter.type is RequestHeaderModifier",
		},
		{
			name: "HTTPRoute filter Linkerd does not support",
			obj: map[string]any{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute", "metadata": meta,
				"spec": map[string]any{"rules": []any{map[string]any{"filters": []any{map[string]any{"type": "URLRewrite"}}}}}},
			want: `Unsupported value: "URLRewrite"`,
		},
		{
			name: "ServiceProfile route without a condition",
			obj: map[string]any{"apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile", "metadata": meta,
				"spec": map[string]any{"routes": []any{map[string]any{"name": "r"}}}},
			want: "spec.routes[0].condition: Required value",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := api.admit(tc.obj)
			require.NotEmpty(t, problems, "the API server refuses it")
			assert.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}
}

// rawDocuments reads a file's documents as unstructured objects, exactly
// as written, indexed by document and then by List item (a document that
// is not a List has one entry).
func rawDocuments(path string) ([][]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out [][]*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if obj == nil {
			continue
		}
		if obj["kind"] == "List" {
			var items []*unstructured.Unstructured
			for _, item := range obj["items"].([]any) {
				items = append(items, &unstructured.Unstructured{Object: item.(map[string]any)})
			}
			out = append(out, items)
			continue
		}
		out = append(out, []*unstructured.Unstructured{{Object: obj}})
	}
}
