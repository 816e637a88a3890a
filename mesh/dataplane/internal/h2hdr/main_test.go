package h2hdr

import (
	"testing"

	"go.uber.org/goleak"
)

// The reader starts no goroutine; the tests' pipes and framers must not
// leave any either.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
