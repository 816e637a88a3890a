package proxytrace_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests:
// the proxy and its exporter must both be stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
