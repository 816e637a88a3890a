package depstest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataplaneFiles is every source file (tests aside) that may live in the
// mesh/dataplane package itself, by why it is there (issue 28 item 1).
// The package is to hold only the public API and the seams; the proxy's
// concerns are packages of their own under mesh/dataplane/internal
// (l4, meshstate, httpcore, inbound, outbound, metricstore, reqmetrics,
// relay, tap, ...). New code goes into one of those; a file that moved
// out leaves this list.
var dataplaneFiles = map[string]string{
	// The public API and the seams: Config, New, Run (which drives
	// internal/l4's paths over internal/meshstate's state), the
	// listeners, the options, the sources (discovery, policies,
	// profiles) and their values, the TLS helpers, the admin and tap
	// servers Run serves, and the default policies.
	"doc.go":          "api",
	"config.go":       "api",
	"config_extra.go": "api",
	"proxy.go":        "api",
	"listeners.go":    "api",
	"sources.go":      "api",
	"tls.go":          "api",
	"admin.go":        "api",
	"options.go":      "api",
	"policy.go":       "api",
	"own.go":          "api",
}

// TestTheDataplanePackageHoldsOnlyTheFilesItsRuleLists keeps the list
// above exact: a file it does not name fails (put the code in a package
// of its own), and so does a name with no file (it moved: drop it).
func TestTheDataplanePackageHoldsOnlyTheFilesItsRuleLists(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "..", "mesh", "dataplane"))
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		found = append(found, name)
		_, ok := dataplaneFiles[name]
		assert.True(t, ok, "mesh/dataplane/%s is not in the package's file rule (internal/depstest/dataplane_files_test.go): the package holds the public API and the seams; put new code in a package of its own under mesh/dataplane/internal", name)
	}
	require.NotEmpty(t, found, "read mesh/dataplane")
	for name := range dataplaneFiles {
		_, err := os.Stat(filepath.Join("..", "..", "mesh", "dataplane", name))
		assert.NoError(t, err, "the file rule names mesh/dataplane/%s, which is gone: drop it from the list", name)
	}
}
