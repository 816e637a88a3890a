package l4

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests
// (a relay direction or an idle poller that did not end).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
