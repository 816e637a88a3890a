// Package local connects viz to a local mesh (mesh/local: `weft demo`,
// `weft dev`): its pods as viz targets, read directly on their loopback
// admin addresses, and the policy explanation of a denied pair from the
// mesh's own manifests.
package local

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/apis/vocab"
	meshlocal "github.com/weftmesh/weft/mesh/local"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/viz"
)

// WorkloadKind is the kind viz gives a local mesh's workloads: each is a
// set of replicas, as a Deployment is, so `weft viz stat deploy` works
// the same on a laptop and in a cluster.
const WorkloadKind = "deployment"

// Targets returns the pods of a running local mesh as viz targets.
func Targets(st *meshlocal.State) []viz.Target {
	out := make([]viz.Target, 0, len(st.Plan.Pods))
	for _, p := range st.Plan.Pods {
		out = append(out, viz.Target{
			Namespace: p.Namespace, Pod: p.Name,
			WorkloadKind: WorkloadKind, Workload: p.Workload,
			ServiceAccount: p.ServiceAccount, Identity: p.Identity,
			IP: p.IP, Admin: p.Admin.String(), Tap: p.Tap.String(),
		})
	}
	return out
}

// Source returns a source reading the mesh's proxies on their admin
// addresses (loopback) and tapping them on their tap addresses over mutual
// TLS with the mesh's tapper certificate (State.Tap), each proxy's
// identity verified. The caller closes it to close the tap connections.
func Source(st *meshlocal.State) *viz.TLSTap {
	return tapSource(&viz.Static{List: Targets(st)}, st.Tap)
}

func tapSource(src viz.Source, t *meshlocal.Tap) *viz.TLSTap {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	if t != nil {
		cfg.Certificates = []tls.Certificate{t.Certificate}
		cfg.RootCAs = t.Roots
	}
	return &viz.TLSTap{Source: src, Config: cfg}
}

// Explainer explains denials with the local mesh's policy: the objects
// its mesh file expands to and its policy files, evaluated as the policy
// controller does (mesh/policy).
type Explainer struct {
	manifests []string
	opts      []policy.Option
	mu        sync.Mutex
}

// NewExplainer reads the policy of the running mesh st.
func NewExplainer(st *meshlocal.State) *Explainer {
	paths := append([]string{filepath.Join(st.Dir, "manifests")}, st.Plan.File.PolicyPaths()...)
	return &Explainer{manifests: paths, opts: []policy.Option{
		policy.WithDefaultPolicy(st.Plan.File.DefaultInboundPolicy),
		policy.WithClusterNetworks("127.0.0.0/8"),
	}}
}

// Manifests are the files the explanation reads (for the
// `weft policy explain --manifests` hint).
func (e *Explainer) Manifests() []string { return append([]string(nil), e.manifests...) }

// Explain evaluates the denied connection again with explanation and
// returns it as text. The manifests are read at each call (they are small
// and `weft dev` may have changed its policy files).
func (e *Explainer) Explain(_ context.Context, d viz.DeniedPair) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cfg, err := policy.NewConfig(e.opts...)
	if err != nil {
		return "", err
	}
	ms, err := manifest.LoadPaths(e.manifests...)
	if err != nil {
		return "", fmt.Errorf("viz/local: %w", err)
	}
	objs, err := policy.ObjectsFromManifests(ms)
	if err != nil {
		return "", fmt.Errorf("viz/local: %w", err)
	}
	ix := policy.Build(objs, cfg)
	port, err := strconv.Atoi(d.Port)
	if err != nil || port < 1 || port > 65535 {
		return "", fmt.Errorf("viz/local: denied pair has no valid port (%q)", d.Port)
	}
	req := policy.Request{
		Workload: policy.WorkloadRef{Namespace: d.ToNamespace, Kind: "pod", Name: d.ToPod},
		Port:     intstr.FromInt32(int32(port)),
		Client:   policy.Client{Identity: d.From, Unauthenticated: d.From == ""},
	}
	ex, err := ix.Explain(req)
	if err != nil {
		return "", fmt.Errorf("viz/local: %w", err)
	}
	return ex.String(), nil
}

// FromDir finds a running local mesh from its directory (the one
// `weft demo` and `weft dev` print): the pods in DIR/manifests, with their
// addresses, service accounts and proxies' admin addresses, as the mesh's
// control plane reads them. It is how `weft viz --local DIR` reaches a
// mesh that another process runs.
func FromDir(dir string) ([]viz.Target, error) {
	ms, err := manifest.LoadPaths(filepath.Join(dir, "manifests"))
	if err != nil {
		return nil, fmt.Errorf("viz/local: %s is not a running local mesh: %w", dir, err)
	}
	var out []viz.Target
	for _, m := range ms {
		pod, ok := m.Object.(*corev1.Pod)
		if !ok || pod.Labels[vocab.LabelControlPlaneNamespace] == "" {
			continue
		}
		t := viz.Target{
			Namespace: pod.Namespace, Pod: pod.Name,
			WorkloadKind: WorkloadKind, Workload: pod.Labels[meshlocal.LabelApp],
			ServiceAccount: pod.Spec.ServiceAccountName,
		}
		if id, err := meshlocal.Domain.Name(pod.Namespace, pod.Spec.ServiceAccountName); err == nil {
			t.Identity = id.String()
		}
		if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			t.IP = ip
		}
		for _, c := range pod.Spec.Containers {
			for _, e := range c.Env {
				switch e.Name {
				case vocab.EnvAdminAddr:
					t.Admin = e.Value
				case vocab.EnvTapAddr:
					t.Tap = e.Value
				}
			}
		}
		if t.Admin == "" || !t.IP.IsLoopback() {
			return nil, fmt.Errorf("viz/local: pod %s/%s in %s has no loopback admin address", pod.Namespace, pod.Name, dir)
		}
		if t.Tap != "" && !loopback(t.Tap) {
			return nil, fmt.Errorf("viz/local: pod %s/%s in %s has a tap address off loopback (%q)", pod.Namespace, pod.Name, dir, t.Tap)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("viz/local: no meshed pods in %s", dir)
	}
	return out, nil
}

// NewDirExplainer explains denials with the policy of the local mesh
// in dir (its expanded manifests; the mesh file's own policy files are
// not known from the directory, so pass them in extra).
func NewDirExplainer(dir, defaultPolicy string, extra ...string) *Explainer {
	if defaultPolicy == "" {
		defaultPolicy = "all-unauthenticated"
	}
	return &Explainer{manifests: append([]string{filepath.Join(dir, "manifests")}, extra...), opts: []policy.Option{
		policy.WithDefaultPolicy(defaultPolicy),
		policy.WithClusterNetworks("127.0.0.0/8"),
	}}
}

// loopback reports whether addr is a loopback IP:port.
func loopback(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().IsLoopback()
}

// DirSource is the source of the local mesh in dir, whose pods are ts
// (from FromDir): their admin addresses for metrics, and their tap
// addresses over mutual TLS with the tapper credentials the mesh wrote in
// dir (meshlocal.LoadTap). When those cannot be read it still reads
// metrics, and each tap fails naming why. Close closes its tap
// connections.
func DirSource(dir string, ts []viz.Target) interface {
	viz.TapSource
	io.Closer
} {
	t, err := meshlocal.LoadTap(dir)
	if err != nil {
		return noTap{Static: &viz.Static{List: ts}, err: err}
	}
	return tapSource(&viz.Static{List: ts}, t)
}

// noTap reads metrics and refuses to tap, saying why.
type noTap struct {
	*viz.Static
	err error
}

func (n noTap) Tap(context.Context, viz.Target, viz.TapRequest) (viz.EventStream, error) {
	return nil, fmt.Errorf("viz/local: cannot tap: %w", n.err)
}

func (noTap) Close() error { return nil }
