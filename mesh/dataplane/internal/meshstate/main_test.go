package meshstate

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests
// (a policy or profile watch that did not end with its context).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
