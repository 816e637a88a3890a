package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// collectRules lists every CEL rule of a schema, by the path it sits at.
func collectRules(path string, s *apiextensionsv1.JSONSchemaProps, out map[string][]string) {
	if s == nil {
		return
	}
	for _, r := range s.XValidations {
		out[path] = append(out[path], r.Rule)
	}
	for k, p := range s.Properties {
		collectRules(joinPath(path, k), &p, out)
	}
	if s.Items != nil {
		collectRules(path+"[]", s.Items.Schema, out)
	}
	if s.AdditionalProperties != nil {
		collectRules(path+"{}", s.AdditionalProperties.Schema, out)
	}
}

func TestDecoderEvaluatesEveryCELRuleOurOwnMarkersGenerate(t *testing.T) {
	schemas, err := embeddedSchemas()
	require.NoError(t, err)
	known := 0
	for gvk, s := range schemas {
		rules := map[string][]string{}
		collectRules("", s, rules)
		for path, rs := range rules {
			for _, r := range rs {
				if _, ok := evalRule(r, map[string]any{}); ok {
					known++
					continue
				}
				// Only the Gateway API types reused by HTTPRoute bring
				// rules of other shapes, below its rules and parentRefs.
				assert.Equal(t, "HTTPRoute", gvk.Kind, "%s %s: unevaluated rule %q", gvk, path, r)
			}
		}
	}
	// Server v1beta2 and v1beta3, ServerAuthorization, MeshTLSAuthentication,
	// and three filter rules each for rule and backend filters.
	assert.Equal(t, 2+1+1+6, known)
}

func TestEvalRuleReadsTheGeneratedShapes(t *testing.T) {
	one := "(has(self.podSelector)?1:0)+(has(self.externalWorkloadSelector)?1:0) == 1"
	for _, tc := range []struct {
		obj  map[string]any
		want bool
	}{
		{map[string]any{"podSelector": map[string]any{}}, true},
		{map[string]any{"externalWorkloadSelector": map[string]any{}}, true},
		{map[string]any{}, false},
		{map[string]any{"podSelector": nil, "externalWorkloadSelector": nil}, false},
	} {
		ok, known := evalRule(one, tc.obj)
		assert.True(t, known)
		assert.Equal(t, tc.want, ok, "%v", tc.obj)
	}

	iff := "has(self.requestRedirect) == (self.type == 'RequestRedirect')"
	ok, known := evalRule(iff, map[string]any{"type": "RequestRedirect", "requestRedirect": map[string]any{}})
	assert.True(t, known)
	assert.True(t, ok)
	ok, _ = evalRule(iff, map[string]any{"type": "RequestRedirect"})
	assert.False(t, ok)
	ok, _ = evalRule(iff, map[string]any{"type": "RequestHeaderModifier", "requestRedirect": map[string]any{}})
	assert.False(t, ok)
	ok, _ = evalRule(iff, map[string]any{"type": "RequestHeaderModifier"})
	assert.True(t, ok)

	_, known = evalRule("self.size() <= 1", map[string]any{})
	assert.False(t, known)
}
