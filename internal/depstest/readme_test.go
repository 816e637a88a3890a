package depstest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/depstest"
)

// TestREADMENamesEveryImportablePackageUnderMesh keeps the README's
// package table in step with mesh/: a package added without a row (or a
// row left behind by a move) fails here.
func TestREADMENamesEveryImportablePackageUnderMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the module's import graph with go list")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	g, err := depstest.Load("../..", module, "./mesh/...")
	require.NoError(t, err)
	listed := 0
	for _, p := range g.Local {
		rel := strings.TrimPrefix(p, module+"/")
		if !strings.HasPrefix(rel, "mesh/") || strings.Contains(rel+"/", "/internal/") {
			continue
		}
		listed++
		assert.Contains(t, string(readme), "`"+rel+"`", "README.md's package table has no row naming %s", rel)
	}
	require.Greater(t, listed, 10, "go list found the mesh packages")
}
