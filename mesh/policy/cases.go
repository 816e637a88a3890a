package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// MaxCasesFileBytes bounds a cases file.
const MaxCasesFileBytes = 8 << 20

// Case is one expectation of a cases file (see docs/policy.md):
//
//   - name: web may read items
//     from: {serviceAccount: web, namespace: shop, ip: 10.42.0.7}
//     to: {workload: deployment/api, namespace: shop, port: 8080}
//     request: {method: GET, path: /items, headers: {x-tenant: a}}
//     expect: allow              # or {deny: no-route}, {allow: loopback}, ...
type Case struct {
	// Index is the case's 0-based position in the file.
	Index   int
	Name    string
	Request Request
	Expect  authz.Decision
	// ExpectReason, when set, is the reason class the decision must have
	// too ("no-route" tells a 404 from an "unauthorized" 403).
	ExpectReason string
	// Source is the cases file, for messages.
	Source string
}

// Expected renders the expectation: "deny", or "deny (no-route)".
func (c *Case) Expected() string {
	if c.ExpectReason == "" {
		return c.Expect.String()
	}
	return c.Expect.String() + " (" + c.ExpectReason + ")"
}

// reasonClasses are the reason classes each decision can have, as
// Result.ReasonString names them.
var reasonClasses = map[authz.Decision][]string{
	authz.Allow: {authz.ReasonAuthorized.String(), authz.ReasonLoopback.String(), ReasonUnenforced},
	authz.Deny: {authz.ReasonUnauthorized.String(), authz.ReasonNoRoute.String(), authz.ReasonInvalidPath.String(),
		authz.ReasonAmbiguousRequest.String(), authz.ReasonNoPolicy.String()},
	authz.Audit: {authz.ReasonAudited.String()},
}

// CaseError is an invalid case: its message names the file, the document,
// the case and the field.
type CaseError struct {
	Source string
	Field  string
	Err    error
}

// Error names the file, document and field.
func (e *CaseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("policy: %s: document 1: %v", e.Source, e.Err)
	}
	return fmt.Sprintf("policy: %s: document 1: %s: %v", e.Source, e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *CaseError) Unwrap() error { return e.Err }

// LoadCases reads and validates a cases file.
func LoadCases(path string) ([]Case, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("policy: cases file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("policy: cases file %s is not a regular file", path)
	}
	if st.Size() > MaxCasesFileBytes {
		return nil, fmt.Errorf("policy: cases file %s is larger than %d bytes", path, MaxCasesFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: cases file: %w", err)
	}
	return ParseCases(path, data)
}

type rawObject map[string]json.RawMessage

// strictObject decodes a JSON object and refuses keys not in allowed.
func strictObject(src, field string, raw json.RawMessage, allowed ...string) (rawObject, error) {
	var obj rawObject
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &CaseError{Source: src, Field: field, Err: fmt.Errorf("must be a mapping")}
	}
	var unknown []string
	for k := range obj {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		f := unknown[0]
		if field != "" {
			f = field + "." + f
		}
		return nil, &CaseError{Source: src, Field: f, Err: fmt.Errorf("unknown field (allowed: %s)", strings.Join(allowed, ", "))}
	}
	return obj, nil
}

func str(src, field string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &CaseError{Source: src, Field: field, Err: fmt.Errorf("must be a string")}
	}
	return s, nil
}

// ParseCases reads a cases file's contents; name is used in messages.
func ParseCases(name string, data []byte) ([]Case, error) {
	if len(data) > MaxCasesFileBytes {
		return nil, &CaseError{Source: name, Err: fmt.Errorf("larger than %d bytes", MaxCasesFileBytes)}
	}
	if docs := splitDocuments(data); docs > 1 {
		return nil, &CaseError{Source: name, Err: fmt.Errorf("a cases file holds one document, found %d", docs)}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &CaseError{Source: name, Err: fmt.Errorf("not valid YAML: %v", err)}
	}
	top, err := strictObject(name, "", js, "cases")
	if err != nil {
		return nil, err
	}
	rawCases, ok := top["cases"]
	if !ok {
		return nil, &CaseError{Source: name, Field: "cases", Err: fmt.Errorf("missing")}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(rawCases, &list); err != nil {
		return nil, &CaseError{Source: name, Field: "cases", Err: fmt.Errorf("must be a list")}
	}
	if len(list) == 0 {
		return nil, &CaseError{Source: name, Field: "cases", Err: fmt.Errorf("no cases")}
	}
	out := make([]Case, 0, len(list))
	names := map[string]int{}
	for i, raw := range list {
		c, err := parseCase(name, i, raw)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[c.Name]; dup {
			return nil, &CaseError{Source: name, Field: fmt.Sprintf("cases[%d].name", i), Err: fmt.Errorf("%q is also the name of cases[%d]", c.Name, prev)}
		}
		names[c.Name] = i
		out = append(out, c)
	}
	return out, nil
}

func splitDocuments(data []byte) int {
	n := 0
	for _, doc := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(doc), "\n") {
			l := strings.TrimSpace(line)
			if l != "" && !strings.HasPrefix(l, "#") && l != "..." {
				empty = false
				break
			}
		}
		if !empty {
			n++
		}
	}
	return n
}

func parseCase(src string, i int, raw json.RawMessage) (Case, error) {
	f := fmt.Sprintf("cases[%d]", i)
	obj, err := strictObject(src, f, raw, "name", "from", "to", "request", "expect")
	if err != nil {
		return Case{}, err
	}
	c := Case{Index: i, Source: src}
	for _, k := range []string{"name", "from", "to", "expect"} {
		if _, ok := obj[k]; !ok {
			return Case{}, &CaseError{Source: src, Field: f + "." + k, Err: fmt.Errorf("missing")}
		}
	}
	if c.Name, err = str(src, f+".name", obj["name"]); err != nil {
		return Case{}, err
	}
	if strings.TrimSpace(c.Name) == "" {
		return Case{}, &CaseError{Source: src, Field: f + ".name", Err: fmt.Errorf("empty")}
	}
	f = fmt.Sprintf("cases[%d] (%s)", i, c.Name)

	// from
	from, err := strictObject(src, f+".from", obj["from"], "serviceAccount", "namespace", "identity", "unauthenticated", "tls", "ip")
	if err != nil {
		return Case{}, err
	}
	var cl Client
	for k, v := range from {
		switch k {
		case "serviceAccount":
			cl.ServiceAccount, err = str(src, f+".from.serviceAccount", v)
		case "namespace":
			cl.Namespace, err = str(src, f+".from.namespace", v)
		case "identity":
			cl.Identity, err = str(src, f+".from.identity", v)
		case "unauthenticated":
			if e := json.Unmarshal(v, &cl.Unauthenticated); e != nil {
				err = &CaseError{Source: src, Field: f + ".from.unauthenticated", Err: fmt.Errorf("must be true or false")}
			}
		case "tls":
			if e := json.Unmarshal(v, &cl.TLS); e != nil {
				err = &CaseError{Source: src, Field: f + ".from.tls", Err: fmt.Errorf("must be true or false")}
			}
		case "ip":
			var s string
			if s, err = str(src, f+".from.ip", v); err == nil {
				a, perr := netip.ParseAddr(s)
				if perr != nil || a.Zone() != "" {
					err = &CaseError{Source: src, Field: f + ".from.ip", Err: fmt.Errorf("%q is not an IP address", s)}
				}
				cl.IP = a.Unmap()
			}
		}
		if err != nil {
			return Case{}, err
		}
	}
	if err := cl.Validate(); err != nil {
		return Case{}, &CaseError{Source: src, Field: f + ".from", Err: fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "policy: "))}
	}
	c.Request.Client = cl

	// to
	to, err := strictObject(src, f+".to", obj["to"], "workload", "namespace", "port")
	if err != nil {
		return Case{}, err
	}
	for _, k := range []string{"workload", "port"} {
		if _, ok := to[k]; !ok {
			return Case{}, &CaseError{Source: src, Field: f + ".to." + k, Err: fmt.Errorf("missing")}
		}
	}
	wl, err := str(src, f+".to.workload", to["workload"])
	if err != nil {
		return Case{}, err
	}
	ns := ""
	if v, ok := to["namespace"]; ok {
		if ns, err = str(src, f+".to.namespace", v); err != nil {
			return Case{}, err
		}
	}
	ref, err := ParseKindName(wl, ns)
	if err != nil {
		return Case{}, &CaseError{Source: src, Field: f + ".to.workload", Err: fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "policy: "))}
	}
	c.Request.Workload = ref
	port, err := parsePortValue(to["port"])
	if err != nil {
		return Case{}, &CaseError{Source: src, Field: f + ".to.port", Err: err}
	}
	c.Request.Port = port

	// request
	if raw, ok := obj["request"]; ok && string(raw) != "null" {
		rq, err := strictObject(src, f+".request", raw, "method", "path", "host", "headers")
		if err != nil {
			return Case{}, err
		}
		hr := &authz.Request{Method: "GET", Path: "/", Header: http.Header{}}
		if v, ok := rq["method"]; ok {
			if hr.Method, err = str(src, f+".request.method", v); err != nil {
				return Case{}, err
			}
			if !validMethod(hr.Method) {
				return Case{}, &CaseError{Source: src, Field: f + ".request.method", Err: fmt.Errorf("%q is not an HTTP method", hr.Method)}
			}
		}
		if v, ok := rq["path"]; ok {
			if hr.Path, err = str(src, f+".request.path", v); err != nil {
				return Case{}, err
			}
			if hr.Path == "" {
				return Case{}, &CaseError{Source: src, Field: f + ".request.path", Err: fmt.Errorf("empty")}
			}
		}
		if v, ok := rq["host"]; ok {
			if hr.Host, err = str(src, f+".request.host", v); err != nil {
				return Case{}, err
			}
		}
		if v, ok := rq["headers"]; ok {
			var hs map[string]json.RawMessage
			if err := json.Unmarshal(v, &hs); err != nil {
				return Case{}, &CaseError{Source: src, Field: f + ".request.headers", Err: fmt.Errorf("must be a mapping of names to a value or a list of values")}
			}
			for name, hv := range hs {
				hf := f + ".request.headers." + name
				if !validHeaderName(name) {
					return Case{}, &CaseError{Source: src, Field: hf, Err: fmt.Errorf("%q is not a valid header name", name)}
				}
				var one string
				var many []string
				switch {
				case json.Unmarshal(hv, &one) == nil:
					many = []string{one}
				case json.Unmarshal(hv, &many) == nil:
				default:
					return Case{}, &CaseError{Source: src, Field: hf, Err: fmt.Errorf("must be a string or a list of strings")}
				}
				for _, val := range many {
					if strings.ContainsAny(val, "\r\n\x00") {
						return Case{}, &CaseError{Source: src, Field: hf, Err: fmt.Errorf("value holds CR, LF or NUL")}
					}
					hr.Header.Add(name, val)
				}
			}
		}
		c.Request.HTTP = hr
	}

	// expect: a decision, or a mapping of one decision to a reason class.
	if err := parseExpect(src, f+".expect", obj["expect"], &c); err != nil {
		return Case{}, err
	}
	return c, nil
}

func parseExpect(src, field string, raw json.RawMessage, c *Case) error {
	var exp string
	if json.Unmarshal(raw, &exp) != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
			return &CaseError{Source: src, Field: field, Err: fmt.Errorf("must be allow, deny or audit, or a mapping of one of them to a reason ({deny: no-route})")}
		}
		for k, v := range m {
			exp = k
			r, err := str(src, field+"."+k, v)
			if err != nil {
				return err
			}
			c.ExpectReason = r
		}
	}
	d, err := authz.ParseDecision(exp)
	if err != nil {
		return &CaseError{Source: src, Field: field, Err: fmt.Errorf("%q: want allow, deny or audit", exp)}
	}
	c.Expect = d
	if c.ExpectReason != "" && !slices.Contains(reasonClasses[d], c.ExpectReason) {
		return &CaseError{Source: src, Field: field + "." + exp, Err: fmt.Errorf("%q is not a reason for %s (want one of %s)", c.ExpectReason, exp, strings.Join(reasonClasses[d], ", "))}
	}
	return nil
}

func parsePortValue(raw json.RawMessage) (intstr.IntOrString, error) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return intstr.IntOrString{}, fmt.Errorf("must be a number or a port name")
	}
	switch t := v.(type) {
	case json.Number:
		n = t
		i, err := strconv.Atoi(n.String())
		if err != nil || i < 1 || i > 65535 {
			return intstr.IntOrString{}, fmt.Errorf("%s is not a port number (1-65535)", n)
		}
		return intstr.FromInt32(int32(i)), nil
	case string:
		if i, err := strconv.Atoi(t); err == nil {
			if i < 1 || i > 65535 {
				return intstr.IntOrString{}, fmt.Errorf("%d is not a port number (1-65535)", i)
			}
			return intstr.FromInt32(int32(i)), nil
		}
		if t == "" || len(t) > 15 {
			return intstr.IntOrString{}, fmt.Errorf("%q is not a port name", t)
		}
		return intstr.FromString(t), nil
	}
	return intstr.IntOrString{}, fmt.Errorf("must be a number or a port name")
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !isTokenChar(m[i]) {
			return false
		}
	}
	return true
}

func validHeaderName(n string) bool { return validMethod(n) }

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Case Case
	Got  authz.Decision
	// GotReason is the decision's reason class (Result.ReasonString).
	GotReason   string
	Pass        bool
	Explanation Explanation
}

// Outcome renders what happened: "deny (unauthorized)".
func (r *CaseResult) Outcome() string { return r.Got.String() + " (" + r.GotReason + ")" }

// RunCases evaluates every case against the index. A case naming a
// workload or port that is not in the objects is an input error
// (*CaseError); no results are returned then.
func RunCases(ix *Index, cases []Case) ([]CaseResult, error) {
	out := make([]CaseResult, 0, len(cases))
	for _, c := range cases {
		f := fmt.Sprintf("cases[%d] (%s)", c.Index, c.Name)
		if _, ok := ix.workloads[c.Request.Workload]; !ok {
			return nil, &CaseError{Source: c.Source, Field: f + ".to.workload",
				Err: fmt.Errorf("%s/%s is not among the manifests in namespace %s", c.Request.Workload.Kind, c.Request.Workload.Name, c.Request.Workload.Namespace)}
		}
		e, err := ix.Explain(c.Request)
		if err != nil {
			return nil, &CaseError{Source: c.Source, Field: f + ".to.port", Err: fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "policy: "))}
		}
		reason := e.ReasonString()
		pass := e.Decision == c.Expect && (c.ExpectReason == "" || c.ExpectReason == reason)
		out = append(out, CaseResult{Case: c, Got: e.Decision, GotReason: reason, Pass: pass, Explanation: e})
	}
	return out, nil
}
