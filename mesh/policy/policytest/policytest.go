// Package policytest checks authorization policy in ordinary `go test`
// runs: load the same manifests you deploy, then assert who may reach
// what. A failed assertion prints the decision's full explanation (which
// Server, route and authorization decided, or why none applied), so the
// test output says why, not only that.
//
//	func TestOnlyTheGatewayReachesWeb(t *testing.T) {
//		ix := policytest.Load(t, []string{"../deploy"})
//		web := policytest.To("my-app", "deployment/web", "http")
//		policytest.AssertAllowed(t, ix, web.From(policytest.ServiceAccount("my-app", "api-gateway")).GET("/items"))
//		policytest.AssertDenied(t, ix, web.From(policytest.ServiceAccount("my-app", "reports")))
//	}
//
// It uses the evaluator the proxies run (mesh/policy and its authz
// package), reads manifests with the strict decoder (apis/manifest), and
// works with testify: every Assert function takes optional msgAndArgs and
// returns whether it passed.
package policytest

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Load decodes the manifests under paths (files or directories) and
// indexes them. Invalid manifests or policy objects fail the test at once.
func Load(t testing.TB, paths []string, opts ...policy.Option) *policy.Index {
	t.Helper()
	ms, err := manifest.LoadPaths(paths...)
	if err != nil {
		t.Fatalf("policytest: %v", err)
	}
	objs, err := policy.ObjectsFromManifests(ms)
	if err != nil {
		t.Fatalf("policytest: %v", err)
	}
	cfg, err := policy.NewConfig(opts...)
	if err != nil {
		t.Fatalf("policytest: %v", err)
	}
	ix := policy.Build(objs, cfg)
	if errs := ix.Errors(); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, p := range errs {
			lines[i] = p.String()
		}
		t.Fatalf("policytest: invalid policy objects:\n%s", strings.Join(lines, "\n"))
	}
	return ix
}

// ServiceAccount is a meshed client running as a service account.
func ServiceAccount(namespace, name string) policy.Client {
	return policy.Client{ServiceAccount: name, Namespace: namespace}
}

// Identity is a meshed client with an identity written out.
func Identity(id string) policy.Client { return policy.Client{Identity: id} }

// Unauthenticated is a client without mesh identity.
func Unauthenticated() policy.Client { return policy.Client{Unauthenticated: true} }

// TLSWithoutIdentity is a client that speaks mesh TLS but presents no
// identity (what ServerAuthorization's unauthenticatedTLS admits).
func TLSWithoutIdentity() policy.Client { return policy.Client{TLS: true} }

// At sets the client's address.
func At(c policy.Client, ip string) policy.Client {
	c.IP = netip.MustParseAddr(ip).Unmap()
	return c
}

// Target is a workload port that requests are built against.
type Target struct {
	req policy.Request
	err error
}

// To names a workload ("deployment/web", "pod/web-0") in a namespace and
// a port (number or container port name, as a string).
func To(namespace, workload, port string) Target {
	ref, err := policy.ParseKindName(workload, namespace)
	t := Target{req: policy.Request{Workload: ref}, err: err}
	if n, err := strconv.Atoi(port); err == nil {
		t.req.Port = intstr.FromInt32(int32(n))
	} else {
		t.req.Port = intstr.FromString(port)
	}
	return t
}

// Req is a request under construction; it is a policy.Request.
type Req struct {
	policy.Request
	err error
}

// From returns a connection from the client to the target.
func (t Target) From(c policy.Client) Req {
	r := t.req
	r.Client = c
	return Req{Request: r, err: t.err}
}

// HTTP makes the request an HTTP request; headers are name, value pairs.
func (r Req) HTTP(method, path string, headers ...string) Req {
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Add(headers[i], headers[i+1])
	}
	r.Request.HTTP = &authz.Request{Method: method, Path: path, Header: h}
	return r
}

// GET is HTTP("GET", path, headers...).
func (r Req) GET(path string, headers ...string) Req { return r.HTTP("GET", path, headers...) }

// POST is HTTP("POST", path, headers...).
func (r Req) POST(path string, headers ...string) Req { return r.HTTP("POST", path, headers...) }

func describe(r policy.Request) string {
	var who string
	switch c := r.Client; {
	case c.ServiceAccount != "":
		who = "serviceaccount " + c.Namespace + "/" + c.ServiceAccount
	case c.Identity != "":
		who = "identity " + c.Identity
	case c.TLS:
		who = "a mesh TLS client without identity"
	default:
		who = "an unauthenticated client"
	}
	if r.Client.IP.IsValid() {
		who += " at " + r.Client.IP.String()
	}
	what := "a connection"
	if r.HTTP != nil {
		what = r.HTTP.Method + " " + r.HTTP.Path
	}
	return fmt.Sprintf("%s from %s to %s port %s", what, who, r.Workload, r.Port.String())
}

// AssertDecision asserts that the request gets the decision, printing the
// explanation when it does not.
func AssertDecision(t testing.TB, ix *policy.Index, want authz.Decision, r Req, msgAndArgs ...any) bool {
	t.Helper()
	if r.err != nil {
		return assert.Fail(t, fmt.Sprintf("invalid target: %v", r.err), msgAndArgs...)
	}
	e, err := ix.Explain(r.Request)
	if err != nil {
		return assert.Fail(t, fmt.Sprintf("cannot evaluate %s: %v", describe(r.Request), err), msgAndArgs...)
	}
	if e.Decision != want {
		return assert.Fail(t, fmt.Sprintf("expected %s, got %s for %s\n%s", want, e.Decision, describe(r.Request), e), msgAndArgs...)
	}
	return true
}

// AssertAllowed asserts that the request is allowed.
func AssertAllowed(t testing.TB, ix *policy.Index, r Req, msgAndArgs ...any) bool {
	t.Helper()
	return AssertDecision(t, ix, authz.Allow, r, msgAndArgs...)
}

// AssertDenied asserts that the request is denied.
func AssertDenied(t testing.TB, ix *policy.Index, r Req, msgAndArgs ...any) bool {
	t.Helper()
	return AssertDecision(t, ix, authz.Deny, r, msgAndArgs...)
}

// AssertAudited asserts that the request is let through by an audit
// policy only.
func AssertAudited(t testing.TB, ix *policy.Index, r Req, msgAndArgs ...any) bool {
	t.Helper()
	return AssertDecision(t, ix, authz.Audit, r, msgAndArgs...)
}

// AssertNoWarnings asserts that indexing found no warnings (lints such as
// a Server selecting no pod or a reference to a missing object).
func AssertNoWarnings(t testing.TB, ix *policy.Index, msgAndArgs ...any) bool {
	t.Helper()
	var ws []string
	for _, p := range ix.Problems() {
		ws = append(ws, p.String())
	}
	if len(ws) > 0 {
		return assert.Fail(t, "policy warnings:\n"+strings.Join(ws, "\n"), msgAndArgs...)
	}
	return true
}

// RunCases runs every case of a cases file (the `weft policy test`
// format) as a subtest named after the case.
func RunCases(t *testing.T, ix *policy.Index, path string) {
	t.Helper()
	cases, err := policy.LoadCases(path)
	if err != nil {
		t.Fatalf("policytest: %v", err)
	}
	results, err := policy.RunCases(ix, cases)
	if err != nil {
		t.Fatalf("policytest: %v", err)
	}
	for _, r := range results {
		t.Run(r.Case.Name, func(t *testing.T) {
			if !r.Pass {
				t.Errorf("expected %s, got %s\n%s", r.Case.Expect, r.Got, r.Explanation)
			}
		})
	}
}
