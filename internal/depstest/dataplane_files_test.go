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
// (httpcore, inbound, outbound, metricstore, reqmetrics, relay, tap,
// ...). New code goes into one of those; a file that moved out leaves
// this list.
//
// The groups after the first are what has not moved yet, and why.
var dataplaneFiles = map[string]string{
	// The public API and the seams: Config, New, Run, the listeners, the
	// options, the sources (discovery, policies, profiles) and their
	// values, the TLS helpers, the admin handler, the tracer and the
	// default policies.
	"doc.go":          "api",
	"config.go":       "api",
	"config_extra.go": "api",
	"proxy.go":        "api",
	"listeners.go":    "api",
	"sources.go":      "api",
	"tls.go":          "api",
	"admin.go":        "api",
	"trace_hook.go":   "api",
	"loopback.go":     "api",
	"policy.go":       "api",
	"own.go":          "api",

	// The L4 paths and what both directions share: accepting, detecting,
	// peer identity, the original destination, the relay's wiring, the
	// connection tracking, the HTTP servers and the dispatch by
	// direction. They read the Proxy's listeners, TLS and connection
	// tracking. The connection metrics are internal/connmetrics', the
	// access log internal/accesslog's, the original destination
	// internal/origdst's and the discovery and policy caches
	// internal/watch's: these files choose the labels and wrap the
	// requests. The pools to upstreams are internal/upstream's: http.go
	// gives them the Proxy's mesh TLS dial, plain dial and transport
	// metrics as their Dialer, and holds toEndpoint, the HTTP.RoundTrip
	// internal/outbound sends on: it maps an endpoint to a pool and its
	// key, and the HTTP/1.1 pool's wait deadline to the outbound side's
	// pool-timeout error, which the pools do not link.
	"inbound.go": "l4",
	// The outbound frame path's wiring: its StreamHandler, and the round
	// trip of its calls over internal/upstream's HTTP/2 pool (toEndpoint's
	// field version, beside it in the dataplane package for the same
	// reason).
	"grpc_out.go":        "l4",
	"outbound_stream.go": "l4",
	"outbound.go":        "l4",
	"relay.go":           "l4",
	"direction.go":       "l4",
	"http.go":            "l4",
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
