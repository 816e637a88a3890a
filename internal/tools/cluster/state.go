package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// State is what Up records in state.json.
type State struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Holder keeps the node's namespaces; NetNS and MntNS are their inodes.
	Holder Proc   `json:"holder"`
	NetNS  uint64 `json:"netns"`
	MntNS  uint64 `json:"mntns"`
	// ForwardAddr is the host loopback address that forwards to the API
	// server (the kubeconfig's server).
	ForwardAddr string `json:"forwardAddr"`
	Kubeconfig  string `json:"kubeconfig"`
	// BinDir holds kubectl and the Kubernetes binaries.
	BinDir string `json:"binDir"`
	Procs  []Proc `json:"procs"`
}

// ErrNoCluster is returned by Load when no cluster of that name is up.
var ErrNoCluster = errors.New("cluster: no cluster is up")

// Load reads the state of the cluster of layout l and checks that its
// processes still run.
func Load(l Layout) (*State, error) {
	b, err := os.ReadFile(l.StateFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s; run make cluster-up)", ErrNoCluster, l.StateFile())
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", l.StateFile(), err)
	}
	if err := s.check(); err != nil {
		return &s, err
	}
	return &s, nil
}

// LoadFromEnv loads the cluster named by $WEFT_CLUSTER_NAME (default
// "weft") in $WEFT_CLUSTER_DIR (default under $HOME/.cache/weft/cluster).
func LoadFromEnv() (*State, error) {
	l, err := LayoutFromEnv()
	if err != nil {
		return nil, err
	}
	return Load(l)
}

// LayoutFromEnv is the layout named by $WEFT_CLUSTER_NAME and
// $WEFT_CLUSTER_DIR.
func LayoutFromEnv() (Layout, error) {
	name := os.Getenv("WEFT_CLUSTER_NAME")
	if name == "" {
		name = "weft"
	}
	return NewLayout(name, os.Getenv("WEFT_CLUSTER_DIR"))
}

// check returns an error naming every recorded process that is gone.
func (s *State) check() error {
	var dead []string
	for _, p := range append([]Proc{s.Holder}, s.Procs...) {
		if !p.Alive() {
			dead = append(dead, p.Name)
		}
	}
	if len(dead) > 0 {
		return fmt.Errorf("cluster %s is broken: %v no longer running (logs in %s/logs; make cluster-down removes it)", s.Name, dead, s.Dir)
	}
	return nil
}

// RESTConfig is the admin client configuration.
func (s *State) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
}

// NetNSPath is the node's network namespace file.
func (s *State) NetNSPath() string { return fmt.Sprintf("/proc/%d/ns/net", s.Holder.PID) }

// DialInNode opens a TCP connection from inside the node's network
// namespace, where pod and Service addresses are reachable. addr must be
// an IP address and port. It needs root.
func (s *State) DialInNode(ctx context.Context, addr string) (net.Conn, error) {
	return dialIn(ctx, s.NetNSPath(), "tcp", addr)
}

// InNodeNetwork runs fn on a thread inside the node's network namespace;
// sockets it creates stay in that namespace.
func (s *State) InNodeNetwork(fn func() error) error { return inNetns(s.NetNSPath(), fn) }

// NodeCommand returns a command that runs argv inside the node's network
// and mount namespaces.
func (s *State) NodeCommand(ctx context.Context, argv ...string) *exec.Cmd {
	a := inNode(s.Holder.PID, argv...)
	return exec.CommandContext(ctx, a[0], a[1:]...)
}

// Env returns the lines `hack/cluster.sh env` prints.
func (s *State) Env() string {
	return "export KUBECONFIG=" + shellQuote(s.Kubeconfig) + "\nexport PATH=" + shellQuote(s.BinDir) + ":\"$PATH\"\n"
}

func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
