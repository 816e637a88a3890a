package dataplane_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when any goroutine outlives the tests:
// every proxy, listener, pool and tap a test starts must be stopped by it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
