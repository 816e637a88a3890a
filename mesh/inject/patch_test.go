package inject_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/inject"
)

func TestPatchApplyFollowsRFC6902(t *testing.T) {
	doc := []byte(`{"a":{"b~c":1,"d/e":[1,2,3]},"n":1.50}`)
	out, err := inject.Patch{
		{Op: "add", Path: "/a/d~1e/1", Value: 9},
		{Op: "add", Path: "/a/d~1e/-", Value: 4},
		{Op: "remove", Path: "/a/d~1e/0"},
		{Op: "replace", Path: "/a/b~0c", Value: "x"},
		{Op: "test", Path: "/n", Value: 1.50},
		{Op: "add", Path: "/z", Value: map[string]int{"k": 1}},
	}.Apply(doc)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":{"b~c":"x","d/e":[9,2,3,4]},"n":1.50,"z":{"k":1}}`, string(out))
}

func TestPatchApplyRejectsBadOperationsWithoutTouchingTheDocument(t *testing.T) {
	doc := []byte(`{"a":[1]}`)
	for _, tc := range []struct {
		name string
		op   inject.Operation
		want string
	}{
		{"missing parent", inject.Operation{Op: "add", Path: "/x/y", Value: 1}, `member "x" does not exist`},
		{"index past the end", inject.Operation{Op: "add", Path: "/a/5", Value: 1}, "out of range"},
		{"leading zero index", inject.Operation{Op: "add", Path: "/a/01", Value: 1}, "bad array index"},
		{"replace missing", inject.Operation{Op: "replace", Path: "/b", Value: 1}, "does not exist"},
		{"remove with -", inject.Operation{Op: "remove", Path: "/a/-"}, "only valid for add"},
		{"bad escape", inject.Operation{Op: "add", Path: "/a~2", Value: 1}, "bad ~ escape"},
		{"relative pointer", inject.Operation{Op: "add", Path: "a", Value: 1}, "does not start with /"},
		{"failed test", inject.Operation{Op: "test", Path: "/a/0", Value: 2}, "test failed"},
		{"unknown op", inject.Operation{Op: "move", Path: "/a"}, "unsupported operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := string(doc)
			_, err := inject.Patch{tc.op}.Apply(doc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, before, string(doc))
		})
	}
	_, err := inject.Patch{}.Apply([]byte(`{"a":1} trailing`))
	require.Error(t, err)
}

func TestPatchWithPrefixTargetsAPodTemplate(t *testing.T) {
	p := inject.Patch{{Op: "add", Path: "/metadata/labels", Value: map[string]string{"a": "b"}}}.WithPrefix("/spec/template")
	out, err := p.Apply([]byte(`{"spec":{"template":{"metadata":{}}}}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"spec":{"template":{"metadata":{"labels":{"a":"b"}}}}}`, string(out))
}
