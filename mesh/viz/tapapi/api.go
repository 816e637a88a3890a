package tapapi

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weftmesh/weft/mesh/viz"
)

// The API's coordinates, as the APIService and RBAC rules name them.
const (
	Group   = "tap.weftmesh.io"
	Version = "v1alpha1"
	// Verb is the verb a user needs on RESOURCE/tap (Linkerd's tap API
	// asks for the same).
	Verb = "watch"
	// Subresource is the subresource a user needs the Verb on.
	Subresource = "tap"
	// APIServiceName is the name of the APIService object.
	APIServiceName = Version + "." + Group
)

// prefix is the path of the API's group and version.
const prefix = "/apis/" + Group + "/" + Version

// Resources are the resource types a tap may name, with the viz kind
// each selects.
var Resources = map[string]viz.Resource{
	"pods":         {Kind: viz.KindPod},
	"deployments":  {Kind: viz.KindWorkload, WorkloadKind: "deployment"},
	"statefulsets": {Kind: viz.KindWorkload, WorkloadKind: "statefulset"},
	"daemonsets":   {Kind: viz.KindWorkload, WorkloadKind: "daemonset"},
	"jobs":         {Kind: viz.KindWorkload, WorkloadKind: "k8s_job"},
}

// Target is what one tap request names: the RBAC resource it is checked
// against and the pods it selects.
type Target struct {
	// Namespace is the namespace; Resource the plural resource type
	// ("namespaces" for the whole namespace); Name the object (empty for
	// every object of the type; the namespace itself for "namespaces").
	Namespace, Resource, Name string
}

// Select is the viz resource the target selects.
func (t Target) Select() viz.Resource {
	if t.Resource == "namespaces" {
		return viz.Resource{Kind: viz.KindNamespace, Namespace: t.Namespace}
	}
	r := Resources[t.Resource]
	r.Namespace, r.Name = t.Namespace, t.Name
	return r
}

func (t Target) String() string {
	switch {
	case t.Resource == "namespaces":
		return "namespace " + t.Namespace
	case t.Name == "":
		return t.Resource + " in namespace " + t.Namespace
	}
	return t.Resource + "/" + t.Name + " in namespace " + t.Namespace
}

// TargetOf turns a viz resource into the API's target. A tap names one
// namespace; a workload of any kind cannot be named.
func TargetOf(r viz.Resource) (Target, error) {
	if r.Namespace == "" {
		return Target{}, errors.New("tapapi: a tap names one namespace")
	}
	if r.Kind == viz.KindNamespace {
		return Target{Namespace: r.Namespace, Resource: "namespaces", Name: r.Namespace}, nil
	}
	for res, v := range Resources {
		if v.Kind == r.Kind && v.WorkloadKind == r.WorkloadKind {
			return Target{Namespace: r.Namespace, Resource: res, Name: r.Name}, nil
		}
	}
	return Target{}, fmt.Errorf("tapapi: cannot tap %s (tap a namespace, pods, deployments, statefulsets, daemonsets or jobs)", r)
}

// Path is the URL path of a tap of t.
func (t Target) Path() string {
	switch {
	case t.Resource == "namespaces":
		return prefix + "/watch/namespaces/" + t.Namespace + "/tap"
	case t.Name == "":
		return prefix + "/watch/namespaces/" + t.Namespace + "/" + t.Resource + "/tap"
	}
	return prefix + "/watch/namespaces/" + t.Namespace + "/" + t.Resource + "/" + t.Name + "/tap"
}

// ParsePath reads a tap request's URL path. ok is false when the path is
// not a tap at all; err says what is wrong with one that is.
func ParsePath(p string) (t Target, ok bool, err error) {
	rest, found := strings.CutPrefix(p, prefix+"/watch/namespaces/")
	if !found {
		return Target{}, false, nil
	}
	rest, found = strings.CutSuffix(rest, "/tap")
	if !found {
		return Target{}, false, nil
	}
	parts := strings.Split(rest, "/")
	for _, s := range parts {
		if err := checkName(s); err != nil {
			return Target{}, true, fmt.Errorf("tapapi: path %q: %w", p, err)
		}
	}
	switch len(parts) {
	case 1:
		t = Target{Namespace: parts[0], Resource: "namespaces", Name: parts[0]}
	case 2:
		t = Target{Namespace: parts[0], Resource: parts[1]}
	case 3:
		t = Target{Namespace: parts[0], Resource: parts[1], Name: parts[2]}
	default:
		return Target{}, true, fmt.Errorf("tapapi: path %q: want .../namespaces/NS[/RESOURCE[/NAME]]/tap", p)
	}
	if _, known := Resources[t.Resource]; len(parts) > 1 && !known {
		return Target{}, true, fmt.Errorf("tapapi: path %q: cannot tap %q (want pods, deployments, statefulsets, daemonsets or jobs)", p, t.Resource)
	}
	return t, true, nil
}

// checkName accepts what Kubernetes accepts as a namespace or object name
// (a DNS subdomain: lower-case letters, digits, '-' and '.', at most 253).
func checkName(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("name %q: want 1 to 253 characters", s)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("name %q is not a name", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("name %q: want lower-case letters, digits, '-' and '.'", s)
		}
	}
	return nil
}

// Request is the body of a tap request: which requests to report and how
// many.
type Request struct {
	// Method, Authority (exact) and PathPrefix select requests, as the
	// proxy matches them; To keeps only requests to a workload or pod.
	Method     string `json:"method,omitempty"`
	Authority  string `json:"authority,omitempty"`
	PathPrefix string `json:"pathPrefix,omitempty"`
	To         string `json:"to,omitempty"`
	// Limit asks each proxy to stop after this many requests (0: the
	// proxy's own bound).
	Limit uint32 `json:"limit,omitempty"`
	// Headers asks for request and response headers.
	Headers bool `json:"headers,omitempty"`
	// MaxEvents ends the tap after this many events (0: the server's
	// bound, MaxEvents, only).
	MaxEvents uint64 `json:"maxEvents,omitempty"`
}

// MaxRequestBytes bounds a request's body.
const MaxRequestBytes = 16 << 10

// maxField bounds one string of a Request.
const maxField = 2048

// Validate refuses a request the server will not run, naming the field.
func (r Request) Validate() error {
	for _, f := range []struct{ name, v string }{{"method", r.Method}, {"authority", r.Authority}, {"pathPrefix", r.PathPrefix}, {"to", r.To}} {
		if len(f.v) > maxField {
			return fmt.Errorf("tapapi: %s: %d bytes, at most %d", f.name, len(f.v), maxField)
		}
		if !utf8.ValidString(f.v) || strings.ContainsFunc(f.v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return fmt.Errorf("tapapi: %s: invalid UTF-8 or control characters", f.name)
		}
	}
	if strings.ContainsAny(r.Method, " \t/:") {
		return fmt.Errorf("tapapi: method %q is not an HTTP method", r.Method)
	}
	return nil
}

// TapRequest is what the server asks each proxy for.
func (r Request) TapRequest() viz.TapRequest {
	return viz.TapRequest{Filter: viz.Filter{Method: r.Method, Authority: r.Authority, PathPrefix: r.PathPrefix, To: r.To}, Limit: r.Limit, Headers: r.Headers}
}

// RequestOf is the body for a viz tap request.
func RequestOf(req viz.TapRequest) Request {
	return Request{Method: req.Filter.Method, Authority: req.Filter.Authority, PathPrefix: req.Filter.PathPrefix, To: req.Filter.To, Limit: req.Limit, Headers: req.Headers}
}

// Message is one line of a tap's answer: exactly one field is set.
type Message struct {
	// Event is a tap event, enriched by the server with what it knows
	// of the peers.
	Event *viz.Event `json:"event,omitempty"`
	// Dropped counts events the server dropped since its last Dropped
	// message, because the reader was slower than the proxies or the tap
	// went over its events per second.
	Dropped uint64 `json:"dropped,omitempty"`
	// Warning reports a pod that could not be tapped, or whose tap ended.
	Warning string `json:"warning,omitempty"`
}

// MaxMessageBytes bounds one line of the answer (an event with its
// headers).
const MaxMessageBytes = 1 << 20
