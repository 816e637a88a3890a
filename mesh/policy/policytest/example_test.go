package policytest_test

import (
	"testing"

	"github.com/weftmesh/weft/mesh/policy/policytest"
)

// In a _test.go file of your own:
func Example() {
	var t *testing.T // the *testing.T of your test function
	_ = func() {
		ix := policytest.Load(t, []string{"deploy/"})
		web := policytest.To("my-app", "deployment/web", "http")
		policytest.AssertAllowed(t, ix, web.From(policytest.ServiceAccount("my-app", "api-gateway")).GET("/items"))
		policytest.AssertDenied(t, ix, web.From(policytest.ServiceAccount("my-app", "reports")))
	}
}
