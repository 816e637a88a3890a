package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a goroutine outlives the tests
// (a server or collector the tests started and did not stop).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
