package model_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/discovery/model"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseContextTokenReadsJSONAndTheLegacyForm(t *testing.T) {
	tok, err := model.ParseContextToken(`{"ns":"shop","nodeName":"node-1","pod":"web-1"}`)
	require.NoError(t, err)
	assert.Equal(t, model.ContextToken{Namespace: "shop", NodeName: "node-1", Pod: "web-1"}, tok)
	tok, err = model.ParseContextToken("ns:shop")
	require.NoError(t, err)
	assert.Equal(t, "shop", tok.Namespace)
	tok, err = model.ParseContextToken("")
	require.NoError(t, err)
	assert.Zero(t, tok)
}

func TestParseContextTokenRefusesBadTokens(t *testing.T) {
	for _, tc := range []struct{ tok, why string }{
		{"{", "unexpected end"},
		{`{"ns": 7}`, "cannot unmarshal"},
		{`{"ns": "Not_Valid"}`, "namespace"},
		{"ns:", ""},
		{"pod:web", "neither JSON"},
		{strings.Repeat("x", 5000), "over the limit"},
	} {
		_, err := model.ParseContextToken(tc.tok)
		if tc.tok == "ns:" {
			assert.NoError(t, err, "an empty legacy namespace is no namespace")
			continue
		}
		require.Error(t, err, "%.30q", tc.tok)
		assert.Contains(t, err.Error(), tc.why)
	}
}

func FuzzParseContextToken(f *testing.F) {
	for _, s := range []string{`{"ns":"a"}`, "ns:a", "", "{", `{"ns":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := model.ParseContextToken(s)
		if err == nil && len(tok.Namespace) > 63 {
			t.Fatalf("accepted namespace %q", tok.Namespace)
		}
	})
}

// The namespace check is written here so the proxy links nothing of
// Kubernetes; it must accept exactly what Kubernetes accepts.
func FuzzContextTokenNamespaceAgreesWithKubernetes(f *testing.F) {
	for _, s := range []string{"shop", "a", "a-b", "-a", "a-", "A", "a_b", "1abc", strings.Repeat("a", 63), strings.Repeat("a", 64), "a.b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ns string) {
		if ns == "" {
			return
		}
		_, err := model.ParseContextToken("ns:" + ns)
		k8sOK := len(validation.IsDNS1123Label(ns)) == 0
		assert.Equal(t, k8sOK, err == nil, "namespace %q: Kubernetes accepts it: %v, error: %v", ns, k8sOK, err)
	})
}
