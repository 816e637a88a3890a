package otlpexport_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests:
// every tracer's batch processor and exporter connection must be shut
// down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
