package upstream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every connection, request and wait a test starts ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
