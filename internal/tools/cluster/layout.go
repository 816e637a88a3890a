// Package cluster runs a single-node Kubernetes cluster on this machine
// from real components (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy, CoreDNS, containerd, runc and the
// CNI bridge plugin), for Weft's end-to-end suite and for people trying
// Weft (`make cluster-up`, docs/cluster.md).
//
// The node lives in a network namespace and a private mount namespace of
// its own, held by one process that does nothing else (the holder); every
// component is started inside them with nsenter. Inside, the node has its
// own /var/lib, /var/log and /run (bind mounts of directories under the
// cluster's state directory, and a tmpfs), files bound over the few global
// sysctls the kubelet insists on setting, and its IP address on a veth
// pair whose both ends stay inside. The host keeps its interfaces, routes,
// iptables rules and mounts; what the cluster leaves on it is files under
// the state directory, cgroups under /<cgroup root>, the processes and one
// loopback listener that forwards to the API server. [Down] removes all
// of them.
//
// The state directory records what [Up] made (state.json); [Load] reads it
// back for tests, which reach pods through [State.DialInNode] and run
// programs in the node with [State.NodeCommand].
//
// This is tooling, never linked by the mesh libraries.
package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Addresses of the node, the same in every cluster: each cluster has a
// network namespace of its own, so they never collide.
const (
	NodeIP         = "10.250.0.2"
	nodePeerIP     = "10.250.0.1"
	nodeNet        = "/24"
	PodCIDR        = "10.244.0.0/24"
	ClusterCIDR    = "10.244.0.0/16"
	ServiceCIDR    = "10.96.0.0/16"
	APIServiceIP   = "10.96.0.1"
	DNSServiceIP   = "10.96.0.10"
	ClusterDomain  = "cluster.local"
	NodeName       = "weft-node"
	apiServerPort  = 6443
	bridgeName     = "cni0"
	nodeIface      = "weft-node"
	nodePeerIface  = "weft-peer"
	serviceAccount = "https://kubernetes.default.svc.cluster.local"
)

// Images the cluster itself needs (built by Up from this tree and the
// cached CoreDNS binary).
const (
	PauseImage   = "weft.local/pause:1"
	CoreDNSImage = "weft.local/coredns:1"
)

// Layout names every file of one cluster.
type Layout struct {
	Name string
	Dir  string
}

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$`)

// NewLayout returns the layout of the cluster called name under dir
// (default: $HOME/.cache/weft/cluster/<name>).
func NewLayout(name, dir string) (Layout, error) {
	if !validName.MatchString(name) {
		return Layout{}, fmt.Errorf("cluster: name %q: want 1-16 lower-case letters, digits and dashes", name)
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Layout{}, fmt.Errorf("cluster: state directory: %w", err)
		}
		dir = filepath.Join(home, ".cache", "weft", "cluster", name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Layout{}, fmt.Errorf("cluster: state directory: %w", err)
	}
	// containerd's socket path must fit a sockaddr_un (108 bytes).
	if len(abs) > 70 {
		return Layout{}, fmt.Errorf("cluster: state directory %s is longer than 70 bytes (unix socket paths inside it would not fit)", abs)
	}
	return Layout{Name: name, Dir: abs}, nil
}

func (l Layout) path(p ...string) string { return filepath.Join(append([]string{l.Dir}, p...)...) }

// StateFile is state.json.
func (l Layout) StateFile() string { return l.path("state.json") }

// Kubeconfig is the admin kubeconfig for the host (through the forwarder).
func (l Layout) Kubeconfig() string { return l.path("kubeconfig") }

// LogDir holds one log file per component.
func (l Layout) LogDir() string { return l.path("logs") }

// PIDDir holds one pid file per process Up started.
func (l Layout) PIDDir() string { return l.path("run") }

// ContainerdSocket is containerd's gRPC socket (reachable from the host).
func (l Layout) ContainerdSocket() string { return l.path("containerd", "containerd.sock") }

// CgroupRoot is the kubelet's cgroup root: every pod's cgroup is below it,
// in each hierarchy.
func (l Layout) CgroupRoot() string { return "/weft-cluster-" + l.Name }

func (l Layout) pki(f string) string { return l.path("pki", f) }
