package watch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests
// (a watch that did not end with its destination or the cache).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
