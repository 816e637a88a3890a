package httpcore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests
// (the tunnel's copies among them).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
