package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// MaxFileSize bounds a mesh file.
const MaxFileSize = 1 << 20

// Limits of a local mesh.
const (
	MaxReplicas = 16
	MaxPods     = 250
)

// Reserved proxy ports: the workloads' own ports and their outbound
// mappings must not use them.
const (
	InboundPort  = 4143
	AdminPort    = 4191
	OutboundPort = 4140
	// TapPort is each proxy's tap server (Linkerd's 4190; see tap.go).
	TapPort = 4190
)

// File is a compact description of a local mesh: the workloads, the ports
// they serve, whom they call, and who may call them. It expands into the
// Kubernetes objects a cluster would hold (see Plan).
//
//	namespace: shop
//	workloads:
//	- name: web
//	  ports: [{name: http, port: 8080}]
//	  calls: [{service: api, localPort: 9001}]
//	  command: [./web, --listen, "$(WEFT_POD_IP):8080"]
//	- name: api
//	  ports: [{name: http, port: 8081}]
//	policies:
//	- workload: api
//	  port: http
//	  allow: [web]
type File struct {
	// Namespace is the default namespace of workloads and policies
	// ("default" when empty).
	Namespace string `json:"namespace,omitempty"`
	// DefaultInboundPolicy is the policy of ports no Server selects
	// (all-unauthenticated when empty).
	DefaultInboundPolicy string `json:"defaultInboundPolicy,omitempty"`
	// Workloads are the meshed programs.
	Workloads []Workload `json:"workloads"`
	// Policies are compact allow-lists; each becomes a Server, a
	// MeshTLSAuthentication and an AuthorizationPolicy.
	Policies []Policy `json:"policies,omitempty"`
	// PolicyFiles are Linkerd policy manifests (files or directories),
	// relative to the mesh file, used as they are.
	PolicyFiles []string `json:"policyFiles,omitempty"`

	// source names the file in errors; dir resolves PolicyFiles.
	source, dir string
}

// Workload is one program of the mesh, run with one proxy per replica.
type Workload struct {
	Name string `json:"name"`
	// Namespace defaults to the file's.
	Namespace string `json:"namespace,omitempty"`
	// ServiceAccount defaults to the workload's name; it makes the identity.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Replicas defaults to 1.
	Replicas int `json:"replicas,omitempty"`
	// Ports the program listens on (on its pod IP); each is a port of the
	// workload's Service.
	Ports []Port `json:"ports,omitempty"`
	// Calls are the services the program reaches through its proxy.
	Calls []Call `json:"calls,omitempty"`
	// Command runs the program under `weft dev`; "$(VAR)" references are
	// expanded from the pod's variables (Pod.Environ), then from weft
	// dev's own environment.
	Command []string `json:"command,omitempty"`
	// Env adds environment variables to the program.
	Env map[string]string `json:"env,omitempty"`
}

// Port is a port a workload serves.
type Port struct {
	// Name is optional; policies and calls may use it.
	Name string `json:"name,omitempty"`
	Port int    `json:"port"`
	// Opaque skips protocol detection on the port.
	Opaque bool `json:"opaque,omitempty"`
}

// Call is a dependency: the program connects to its pod IP at LocalPort and
// its proxy carries the connection to Service over mutual TLS.
type Call struct {
	// Service is a workload name, or NAMESPACE/NAME for another namespace.
	Service string `json:"service"`
	// Port is the service port (number or name); it may be left out when
	// the service has one port.
	Port intstr.IntOrString `json:"port,omitempty"`
	// LocalPort is where the program connects; it defaults to the service
	// port.
	LocalPort int `json:"localPort,omitempty"`
}

// Policy allows some workloads, and no one else, to reach a port.
type Policy struct {
	// Workload is the protected workload (NAMESPACE/NAME or NAME).
	Workload string `json:"workload"`
	// Port is its port, by number or name.
	Port intstr.IntOrString `json:"port"`
	// Allow lists the client workloads (NAME or NAMESPACE/NAME); their
	// service accounts are authorized over mutual TLS.
	Allow []string `json:"allow"`
}

// Load reads and checks a mesh file.
func Load(path string) (*File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("local: %s: %d bytes, more than the %d allowed", path, fi.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	f.dir = filepath.Dir(abs)
	return f, nil
}

// Parse decodes a mesh file strictly (an unknown field is an error) and
// checks it. name is used in error messages; PolicyFiles are relative to
// the working directory (Load makes them relative to the file).
func Parse(name string, data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("local: %s: %d bytes, more than the %d allowed", name, len(data), MaxFileSize)
	}
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("local: %s: %w", name, err)
	}
	f.source = name
	if err := f.check(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Source is the name the file was loaded from.
func (f *File) Source() string { return f.source }

func (f *File) errf(field, format string, args ...any) error {
	src := f.source
	if src == "" {
		src = "mesh file"
	}
	return fmt.Errorf("local: %s: %s: %s", src, field, fmt.Sprintf(format, args...))
}

// check fills defaults and validates every field, reporting all problems.
func (f *File) check() error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	if f.Namespace == "" {
		f.Namespace = "default"
	}
	if msgs := validation.IsDNS1123Label(f.Namespace); len(msgs) > 0 {
		add(f.errf("namespace", "%q: %s", f.Namespace, strings.Join(msgs, "; ")))
	}
	switch f.DefaultInboundPolicy {
	case "":
		f.DefaultInboundPolicy = "all-unauthenticated"
	case "all-unauthenticated", "all-authenticated", "cluster-unauthenticated", "cluster-authenticated", "deny", "audit":
	default:
		add(f.errf("defaultInboundPolicy", "%q: want all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny or audit", f.DefaultInboundPolicy))
	}
	if len(f.Workloads) == 0 {
		add(f.errf("workloads", "at least one workload is needed"))
	}
	seen := map[string]int{}
	pods := 0
	for i := range f.Workloads {
		w := &f.Workloads[i]
		field := fmt.Sprintf("workloads[%d]", i)
		if msgs := validation.IsDNS1123Label(w.Name); len(msgs) > 0 {
			add(f.errf(field+".name", "%q: %s", w.Name, strings.Join(msgs, "; ")))
		}
		if w.Namespace == "" {
			w.Namespace = f.Namespace
		} else if msgs := validation.IsDNS1123Label(w.Namespace); len(msgs) > 0 {
			add(f.errf(field+".namespace", "%q: %s", w.Namespace, strings.Join(msgs, "; ")))
		}
		if w.ServiceAccount == "" {
			w.ServiceAccount = w.Name
		} else if msgs := validation.IsDNS1123Subdomain(w.ServiceAccount); len(msgs) > 0 {
			add(f.errf(field+".serviceAccount", "%q: %s", w.ServiceAccount, strings.Join(msgs, "; ")))
		}
		key := w.Namespace + "/" + w.Name
		if j, dup := seen[key]; dup {
			add(f.errf(field+".name", "%q in namespace %q is already workloads[%d]", w.Name, w.Namespace, j))
		}
		seen[key] = i
		if w.Replicas == 0 {
			w.Replicas = 1
		}
		if w.Replicas < 1 || w.Replicas > MaxReplicas {
			add(f.errf(field+".replicas", "%d is not between 1 and %d", w.Replicas, MaxReplicas))
		}
		pods += max(w.Replicas, 0)
		ports := map[int]bool{}
		names := map[string]bool{}
		for j, p := range w.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", field, j)
			if p.Port < 1 || p.Port > 65535 {
				add(f.errf(pf+".port", "%d is not between 1 and 65535", p.Port))
			} else if reserved(p.Port) {
				add(f.errf(pf+".port", "%d is reserved for the proxy (4140, 4143, 4190, 4191)", p.Port))
			} else if ports[p.Port] {
				add(f.errf(pf+".port", "%d is listed twice", p.Port))
			}
			ports[p.Port] = true
			if p.Name != "" {
				if msgs := validation.IsValidPortName(p.Name); len(msgs) > 0 {
					add(f.errf(pf+".name", "%q: %s", p.Name, strings.Join(msgs, "; ")))
				} else if names[p.Name] {
					add(f.errf(pf+".name", "%q is listed twice", p.Name))
				}
				names[p.Name] = true
			}
		}
		if len(w.Command) > 0 && w.Command[0] == "" {
			add(f.errf(field+".command", "the program name is empty"))
		}
		for k := range w.Env {
			if msgs := validation.IsEnvVarName(k); len(msgs) > 0 || strings.HasPrefix(k, "WEFT_") {
				add(f.errf(field+".env", "%q: not a valid variable name, or one starting with WEFT_ (those are set by the mesh)", k))
			}
		}
	}
	if pods > MaxPods {
		add(f.errf("workloads", "%d pods in all, more than the %d a local mesh holds", pods, MaxPods))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// References need every workload checked first.
	for i := range f.Workloads {
		w := &f.Workloads[i]
		used := map[int]string{}
		for _, p := range w.Ports {
			used[p.Port] = "the workload's own port"
		}
		for j := range w.Calls {
			c := &w.Calls[j]
			cf := fmt.Sprintf("workloads[%d].calls[%d]", i, j)
			target, ok := f.lookup(c.Service, w.Namespace)
			if !ok {
				add(f.errf(cf+".service", "%q names no workload", c.Service))
				continue
			}
			p, err := target.port(c.Port)
			if err != nil {
				add(f.errf(cf+".port", "%v", err))
				continue
			}
			c.Port = intstr.FromInt32(int32(p.Port))
			if c.LocalPort == 0 {
				c.LocalPort = p.Port
			}
			switch {
			case c.LocalPort < 1 || c.LocalPort > 65535:
				add(f.errf(cf+".localPort", "%d is not between 1 and 65535", c.LocalPort))
			case reserved(c.LocalPort):
				add(f.errf(cf+".localPort", "%d is reserved for the proxy (4140, 4143, 4190, 4191)", c.LocalPort))
			case used[c.LocalPort] != "":
				add(f.errf(cf+".localPort", "%d is already %s; set localPort to a free port", c.LocalPort, used[c.LocalPort]))
			}
			used[c.LocalPort] = fmt.Sprintf("the local port of calls[%d]", j)
		}
	}
	for i := range f.Policies {
		p := &f.Policies[i]
		pf := fmt.Sprintf("policies[%d]", i)
		target, ok := f.lookup(p.Workload, f.Namespace)
		if !ok {
			add(f.errf(pf+".workload", "%q names no workload", p.Workload))
			continue
		}
		p.Workload = target.Namespace + "/" + target.Name
		if _, err := target.port(p.Port); err != nil || p.Port == (intstr.IntOrString{}) {
			if err == nil {
				err = errors.New("a port is required")
			}
			add(f.errf(pf+".port", "%v", err))
		}
		if len(p.Allow) == 0 {
			add(f.errf(pf+".allow", "empty: list the workloads allowed in (an empty list would deny everyone; write a Server in policyFiles for that)"))
		}
		for j, a := range p.Allow {
			c, ok := f.lookup(a, target.Namespace)
			if !ok {
				add(f.errf(fmt.Sprintf("%s.allow[%d]", pf, j), "%q names no workload", a))
				continue
			}
			p.Allow[j] = c.Namespace + "/" + c.Name
		}
	}
	for i, pf := range f.PolicyFiles {
		if pf == "" {
			add(f.errf(fmt.Sprintf("policyFiles[%d]", i), "empty path"))
		}
	}
	return errors.Join(errs...)
}

func reserved(p int) bool {
	return p == InboundPort || p == AdminPort || p == OutboundPort || p == TapPort
}

// lookup finds a workload by NAME (in namespace ns) or NAMESPACE/NAME.
func (f *File) lookup(ref, ns string) (*Workload, bool) {
	name := ref
	if a, b, ok := strings.Cut(ref, "/"); ok {
		ns, name = a, b
	}
	for i := range f.Workloads {
		if w := &f.Workloads[i]; w.Name == name && w.Namespace == ns {
			return w, true
		}
	}
	return nil, false
}

// port finds a port by number or name; an empty reference is the only port.
func (w *Workload) port(ref intstr.IntOrString) (Port, error) {
	switch {
	case ref.Type == intstr.String && ref.StrVal != "":
		for _, p := range w.Ports {
			if p.Name == ref.StrVal {
				return p, nil
			}
		}
		return Port{}, fmt.Errorf("workload %s has no port named %q", w.Name, ref.StrVal)
	case ref.Type == intstr.Int && ref.IntVal != 0:
		for _, p := range w.Ports {
			if p.Port == int(ref.IntVal) {
				return p, nil
			}
		}
		return Port{}, fmt.Errorf("workload %s does not serve port %d", w.Name, ref.IntVal)
	}
	if len(w.Ports) != 1 {
		return Port{}, fmt.Errorf("workload %s serves %d ports: name one", w.Name, len(w.Ports))
	}
	return w.Ports[0], nil
}

// PolicyPaths returns PolicyFiles resolved against the mesh file's
// directory.
func (f *File) PolicyPaths() []string {
	out := make([]string, 0, len(f.PolicyFiles))
	for _, p := range f.PolicyFiles {
		if !filepath.IsAbs(p) && f.dir != "" {
			p = filepath.Join(f.dir, p)
		}
		out = append(out, p)
	}
	return out
}
