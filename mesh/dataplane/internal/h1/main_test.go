package h1_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every connection, body writer and wait a test starts ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
