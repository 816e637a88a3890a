package policycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// PolicyCommand is `weft policy`: `test` checks expectations about
// authorization against manifests, offline (for CI); `explain` prints the
// decision for one client and target with its reasons.
func PolicyCommand() Command {
	return Command{
		Name:    "policy",
		Summary: "test and explain authorization policy offline (policy test, policy explain)",
		Sub: []Command{
			{Name: "test", Args: "--manifests PATH --cases FILE [flags]", Summary: "check expected authorization decisions against manifests (for CI)", Setup: setupPolicyTest},
			{Name: "explain", Args: "--manifests PATH --to-workload KIND/NAME --to-port PORT [flags]", Summary: "print the decision for one client and target, with its reasons", Setup: setupPolicyExplain},
		},
	}
}

// Commands lists weft-policy's commands: test, explain, authz and version.
func Commands() []Command {
	return []Command{TestCommand(), ExplainCommand(), AuthzCommand(), core.VersionCommand()}
}

// TestCommand is `policy test` on its own, the main command of
// cmd/weft-policy: `weft-policy test` is `weft policy test`.
func TestCommand() Command { return PolicyCommand().Sub[0] }

// ExplainCommand is `policy explain` on its own (`weft-policy explain`).
func ExplainCommand() Command { return PolicyCommand().Sub[1] }

// caseJSON is one case in `-o json` output.
type caseJSON struct {
	Name           string         `json:"name"`
	Expected       string         `json:"expected"`
	ExpectedReason string         `json:"expectedReason,omitempty"`
	Got            string         `json:"got"`
	Pass           bool           `json:"pass"`
	Reason         string         `json:"reason"`
	Workload       string         `json:"workload"`
	Namespace      string         `json:"namespace"`
	Port           uint16         `json:"port"`
	Server         string         `json:"server,omitempty"`
	Route          string         `json:"route,omitempty"`
	Authorization  string         `json:"authorization,omitempty"`
	RateLimit      *rateLimitJSON `json:"rateLimit,omitempty"`
	Explanation    []string       `json:"explanation"`
}

// rateLimitJSON is the HTTPLocalRateLimitPolicy that counts an admitted
// request: the total limit and the client's own (scope override,
// identity or none), in requests per second, 0 for none.
type rateLimitJSON struct {
	Policy      string `json:"policy"`
	Total       uint32 `json:"total"`
	ClientScope string `json:"clientScope"`
	Client      uint32 `json:"client"`
}

type testJSON struct {
	Cases    []caseJSON `json:"cases"`
	Warnings []string   `json:"warnings"`
	Passed   int        `json:"passed"`
	Failed   int        `json:"failed"`
}

func setupPolicyTest(fs *FlagSet) Action {
	var f policyFlags
	f.register(fs)
	cases := fs.String("cases", "", "YAML file of cases (see docs/policy.md)")
	return func(_ context.Context, args []string, stdio IO) int {
		fail := func(err error) int {
			fmt.Fprintf(stdio.Stderr, "weft policy test: %v\n", err)
			return ExitUsage
		}
		if len(args) != 0 {
			return fail(fmt.Errorf("unexpected arguments %q", args))
		}
		if err := f.validate(); err != nil {
			return fail(err)
		}
		if *cases == "" {
			return fail(errors.New("--cases FILE is required"))
		}
		ix, err := loadPolicyIndex(&f)
		if err != nil {
			return fail(err)
		}
		cs, err := policy.LoadCases(*cases)
		if err != nil {
			return fail(err)
		}
		results, err := policy.RunCases(ix, cs)
		if err != nil {
			return fail(err)
		}
		warns := warnings(ix)
		passed, failed := 0, 0
		for _, r := range results {
			if r.Pass {
				passed++
			} else {
				failed++
			}
		}
		if f.output == "json" || f.output == "yaml" {
			out := testJSON{Warnings: warns, Passed: passed, Failed: failed, Cases: []caseJSON{}}
			if out.Warnings == nil {
				out.Warnings = []string{}
			}
			for _, r := range results {
				out.Cases = append(out.Cases, toCaseJSON(r))
			}
			if err := writeObject(stdio.Stdout, f.output, out); err != nil {
				return fail(err)
			}
		} else {
			for _, w := range warns {
				fmt.Fprintln(stdio.Stderr, w)
			}
			for _, r := range results {
				if r.Pass {
					fmt.Fprintf(stdio.Stdout, "PASS %s\n", r.Case.Name)
					// An admitted request past a rate limit gets 429
					// instead: say which limits count it.
					if rl := r.Explanation.RateLimit; rl != nil {
						writeIndented(stdio.Stdout, rl.String(r.Explanation.Conn.Identity), "  ")
					}
					continue
				}
				fmt.Fprintf(stdio.Stdout, "FAIL %s: expected %s, got %s\n", r.Case.Name, r.Case.Expected(), r.Outcome())
				writeIndented(stdio.Stdout, r.Explanation.String(), "  ")
			}
			fmt.Fprintf(stdio.Stdout, "%d passed, %d failed\n", passed, failed)
		}
		if failed > 0 {
			return ExitFailure
		}
		return ExitOK
	}
}

func toCaseJSON(r policy.CaseResult) caseJSON {
	e := r.Explanation
	c := caseJSON{
		Name: r.Case.Name, Expected: r.Case.Expect.String(), ExpectedReason: r.Case.ExpectReason, Got: r.Got.String(), Pass: r.Pass,
		Reason: e.ReasonString(), Workload: r.Case.Request.Workload.Kind + "/" + r.Case.Request.Workload.Name,
		Namespace: r.Case.Request.Workload.Namespace, Port: e.Port, Explanation: e.Steps,
	}
	if e.Server != nil {
		c.Server = e.Server.Meta.String()
	}
	if m, ok := e.Result.Route(); ok {
		c.Route = m.String()
	}
	if e.Authorization != nil {
		c.Authorization = e.Authorization.Meta.String()
	}
	if rl := e.RateLimit; rl != nil {
		c.RateLimit = &rateLimitJSON{Policy: rl.Policy.Meta.String(), Total: rl.Total, ClientScope: rl.Scope.String(), Client: rl.RequestsPerSecond}
	}
	if c.Explanation == nil {
		c.Explanation = []string{}
	}
	return c
}

func writeIndented(w io.Writer, text, indent string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
}

func setupPolicyExplain(fs *FlagSet) Action {
	var f policyFlags
	f.register(fs)
	var (
		fromSA, fromNS, fromID, fromIP string
		unauth, fromTLS                bool
		toWorkload, toNS, toPort       string
		method, path, host             string
		headers                        StringList
	)
	fs.StringVar(&fromSA, "from-service-account", "", "client: service account of a meshed workload (with --from-namespace)")
	fs.StringVar(&fromNS, "from-namespace", "", "client: namespace of --from-service-account")
	fs.StringVar(&fromID, "from-identity", "", "client: mesh identity, written out")
	fs.BoolVar(&unauth, "from-unauthenticated", false, "client: without mesh identity (not meshed)")
	fs.BoolVar(&fromTLS, "from-tls", false, "client: speaks mesh TLS without an identity (what unauthenticatedTLS admits)")
	fs.StringVar(&fromIP, "from-ip", "", "client address (default: inside the first cluster network)")
	fs.StringVar(&toWorkload, "to-workload", "", "target workload: KIND/NAME (deployment/api, pod/api-0)")
	fs.StringVar(&toNS, "to-namespace", "default", "target namespace")
	fs.StringVar(&toPort, "to-port", "", "target port: number or container port name")
	fs.StringVar(&method, "method", "", "HTTP method; with --path, evaluates a request instead of a connection")
	fs.StringVar(&path, "path", "", "HTTP request path (and query), as sent")
	fs.StringVar(&host, "host", "", "HTTP Host / :authority")
	fs.Var(&headers, "header", "HTTP header 'name: value' (repeatable)")
	return func(_ context.Context, args []string, stdio IO) int {
		fail := func(err error) int {
			fmt.Fprintf(stdio.Stderr, "weft policy explain: %v\n", err)
			return ExitUsage
		}
		if len(args) != 0 {
			return fail(fmt.Errorf("unexpected arguments %q", args))
		}
		if err := f.validate(); err != nil {
			return fail(err)
		}
		if toWorkload == "" || toPort == "" {
			return fail(errors.New("--to-workload and --to-port are required"))
		}
		req := policy.Request{Client: policy.Client{ServiceAccount: fromSA, Namespace: fromNS, Identity: fromID, Unauthenticated: unauth, TLS: fromTLS}}
		if err := req.Client.Validate(); err != nil {
			return fail(fmt.Errorf("client: %s", strings.TrimPrefix(err.Error(), "policy: ")))
		}
		if fromIP != "" {
			a, err := netip.ParseAddr(fromIP)
			if err != nil {
				return fail(fmt.Errorf("--from-ip %q is not an IP address", fromIP))
			}
			req.Client.IP = a.Unmap()
		}
		ref, err := policy.ParseKindName(toWorkload, toNS)
		if err != nil {
			return fail(err)
		}
		req.Workload = ref
		if n, err := strconv.Atoi(toPort); err == nil {
			if n < 1 || n > 65535 {
				return fail(fmt.Errorf("--to-port %d is out of range 1-65535", n))
			}
			req.Port = intstr.FromInt32(int32(n))
		} else {
			req.Port = intstr.FromString(toPort)
		}
		if method != "" || path != "" || host != "" || len(headers) > 0 {
			hr := &authz.Request{Method: method, Path: path, Host: host, Header: http.Header{}}
			if hr.Method == "" {
				hr.Method = "GET"
			}
			if hr.Path == "" {
				hr.Path = "/"
			}
			for _, h := range headers {
				name, value, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(name) == "" {
					return fail(fmt.Errorf("--header %q: want 'name: value'", h))
				}
				hr.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
			req.HTTP = hr
		}
		ix, err := loadPolicyIndex(&f)
		if err != nil {
			return fail(err)
		}
		e, err := ix.Explain(req)
		if err != nil {
			return fail(err)
		}
		if f.output == "json" || f.output == "yaml" {
			c := toCaseJSON(policy.CaseResult{Case: policy.Case{Name: "explain", Request: req, Expect: e.Decision}, Got: e.Decision, Pass: true, Explanation: e})
			out := struct {
				Decision      string         `json:"decision"`
				Reason        string         `json:"reason"`
				Workload      string         `json:"workload"`
				Namespace     string         `json:"namespace"`
				Port          uint16         `json:"port"`
				Server        string         `json:"server,omitempty"`
				Route         string         `json:"route,omitempty"`
				Authorization string         `json:"authorization,omitempty"`
				RateLimit     *rateLimitJSON `json:"rateLimit,omitempty"`
				Explanation   []string       `json:"explanation"`
				Warnings      []string       `json:"warnings"`
			}{e.Decision.String(), c.Reason, c.Workload, c.Namespace, c.Port, c.Server, c.Route, c.Authorization, c.RateLimit, c.Explanation, warnings(ix)}
			if out.Warnings == nil {
				out.Warnings = []string{}
			}
			_ = writeObject(stdio.Stdout, f.output, out)
			return ExitOK
		}
		for _, w := range warnings(ix) {
			fmt.Fprintln(stdio.Stderr, w)
		}
		fmt.Fprint(stdio.Stdout, e.String())
		return ExitOK
	}
}
