package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/policy"
)

func loadIndex(t testing.TB, opts []policy.Option, paths ...string) *policy.Index {
	t.Helper()
	objs, err := manifest.LoadPaths(paths...)
	require.NoError(t, err)
	o, err := policy.ObjectsFromManifests(objs)
	require.NoError(t, err)
	cfg, err := policy.NewConfig(opts...)
	require.NoError(t, err)
	return policy.Build(o, cfg)
}

func TestSeedExamplesAllowOnlyTheAPIGateway(t *testing.T) {
	for _, alt := range []string{"authorizationpolicy", "serverauthorization"} {
		t.Run(alt, func(t *testing.T) {
			ix := loadIndex(t, nil, "testdata/seed/common", "testdata/seed/"+alt)
			assert.Empty(t, ix.Errors())
			for _, p := range ix.Problems() {
				t.Log(p)
			}
			cases, err := policy.LoadCases("testdata/seed/cases.yaml")
			require.NoError(t, err)
			results, err := policy.RunCases(ix, cases)
			require.NoError(t, err)
			for _, r := range results {
				assert.True(t, r.Pass, "%s: expected %s, got %s\n%s", r.Case.Name, r.Case.Expect, r.Got, r.Explanation)
			}
		})
	}
}

// The cases where Weft once disagreed with Linkerd's own policy tests
// (issue 18), as a user would write them for `weft policy test`.
func TestLinkerdParityCasesPass(t *testing.T) {
	ix := loadIndex(t, nil, "../../examples/policy-ci/linkerd-parity/manifests")
	assert.Empty(t, ix.Errors())
	cases, err := policy.LoadCases("../../examples/policy-ci/linkerd-parity/cases.yaml")
	require.NoError(t, err)
	results, err := policy.RunCases(ix, cases)
	require.NoError(t, err)
	require.NotEmpty(t, results)
	for _, r := range results {
		assert.True(t, r.Pass, "%s: expected %s, got %s\n%s", r.Case.Name, r.Case.Expected(), r.Outcome(), r.Explanation)
	}
}
