package h2client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its connections and servers: no goroutine of the
// client, the test servers or the dialled sockets outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
