package policytest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/policytest"
)

var seed = []string{"../../../examples/policy-ci/manifests/base", "../../../examples/policy-ci/manifests/authorizationpolicy"}

func TestAssertionsPassOnTheSeedExample(t *testing.T) {
	ix := policytest.Load(t, seed)
	web := policytest.To("my-app", "deployment/web", "http")
	policytest.AssertAllowed(t, ix, web.From(policytest.ServiceAccount("my-app", "api-gateway")).GET("/items"))
	policytest.AssertAllowed(t, ix, web.From(policytest.Identity("api-gateway.my-app.serviceaccount.identity.weft.cluster.local")))
	policytest.AssertDenied(t, ix, web.From(policytest.ServiceAccount("my-app", "reports")).POST("/items", "content-type", "application/json"))
	policytest.AssertDenied(t, ix, web.From(policytest.At(policytest.Unauthenticated(), "10.42.0.9")))
	policytest.AssertDenied(t, ix, web.From(policytest.TLSWithoutIdentity()))
	policytest.AssertAllowed(t, ix, web.From(policytest.At(policytest.Unauthenticated(), "127.0.0.1")), "loopback is the workload itself")
	policytest.AssertNoWarnings(t, ix)
}

func TestAssertAuditedPassesOnlyWhenAnAuditPolicyAloneLetsTheRequestThrough(t *testing.T) {
	ix := policytest.Load(t, seed, policy.WithDefaultPolicy("audit"))
	admin := policytest.To("my-app", "deployment/web", "admin")
	policytest.AssertAudited(t, ix, admin.From(policytest.Unauthenticated()).GET("/metrics"))

	rec := &recorder{TB: t}
	web := policytest.To("my-app", "deployment/web", "http")
	assert.False(t, policytest.AssertAudited(rec, ix, web.From(policytest.ServiceAccount("my-app", "api-gateway")).GET("/items")),
		"an authorized request is allowed, not audited")
	assert.Contains(t, strings.Join(rec.msgs, "\n"), "expected audit, got allow")
}

func TestRunCasesRunsEachCaseAsASubtest(t *testing.T) {
	ix := policytest.Load(t, seed)
	policytest.RunCases(t, ix, "../../../examples/policy-ci/cases.yaml")
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msgs   []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func TestAFailedAssertionPrintsTheExplanation(t *testing.T) {
	ix := policytest.Load(t, seed)
	rec := &recorder{TB: t}
	ok := policytest.AssertAllowed(rec, ix, policytest.To("my-app", "deployment/web", "8080").
		From(policytest.ServiceAccount("my-app", "reports")).GET("/items"), "reports needs %s", "items")
	assert.False(t, ok)
	assert.True(t, rec.failed)
	out := strings.Join(rec.msgs, "\n")
	for _, want := range []string{
		"expected allow, got deny for GET /items from serviceaccount my-app/reports to deployment/web in my-app port 8080",
		"Server my-app/web-http",
		"AuthorizationPolicy my-app/web-api-gateway (via ServiceAccount my-app/api-gateway) does not apply",
		"reports needs items",
	} {
		assert.Contains(t, out, want)
	}

	rec = &recorder{TB: t}
	assert.False(t, policytest.AssertDenied(rec, ix, policytest.To("my-app", "deployment/nope", "80").From(policytest.Unauthenticated())))
	assert.Contains(t, strings.Join(rec.msgs, "\n"), "cannot evaluate")

	rec = &recorder{TB: t}
	assert.False(t, policytest.AssertDenied(rec, ix, policytest.To("my-app", "service/web", "80").From(policytest.Unauthenticated())))
	assert.Contains(t, strings.Join(rec.msgs, "\n"), "invalid target")
}
