package policycmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/policy"
)

// policyFlags are the flags shared by `weft policy test`, `weft policy
// explain` and `weft authz`.
type policyFlags struct {
	manifests       core.StringList
	defaultPolicy   string
	clusterNetworks core.StringList
	trustDomain     string
	cpNamespace     string
	output          string
	opaquePorts     string
	probeNetworks   core.StringList
	probeSet        bool
}

func (f *policyFlags) register(fs *FlagSet) {
	fs.Var(&f.manifests, "manifests", "file or directory of Kubernetes manifests (repeatable; directories are read recursively for .yaml/.yml)")
	fs.StringVar(&f.defaultPolicy, "default-policy", "all-unauthenticated", "cluster default inbound policy: all-unauthenticated, all-authenticated, cluster-authenticated, cluster-unauthenticated, deny or audit")
	core.RegisterClusterNetworks(fs, &f.clusterNetworks)
	fs.StringVar(&f.trustDomain, "trust-domain", "cluster.local", "trust domain of identity names")
	fs.StringVar(&f.cpNamespace, "control-plane-namespace", "weft", "control-plane namespace in identity names")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text, json or yaml")
	core.RegisterDefaultOpaquePorts(fs, &f.opaquePorts)
	core.RegisterProbeNetworks(fs, &f.probeNetworks, &f.probeSet)
}

func (f *policyFlags) options() []policy.Option {
	opaque, err := core.ParseDefaultOpaquePorts(f.opaquePorts)
	opts := []policy.Option{
		func(*policy.Config) error { return err },
		policy.WithDefaultOpaquePorts(opaque),
		policy.WithDefaultPolicy(f.defaultPolicy),
		policy.WithTrustDomain(f.trustDomain),
		policy.WithControlPlaneNamespace(f.cpNamespace),
	}
	if len(f.clusterNetworks) > 0 {
		opts = append(opts, policy.WithClusterNetworks(f.clusterNetworks...))
	}
	if f.probeSet {
		opts = append(opts, policy.WithProbeNetworks(f.probeNetworks...))
	}
	return opts
}

func (f *policyFlags) validate() error {
	if len(f.manifests) == 0 {
		return errors.New("--manifests PATH is required")
	}
	if err := checkOutput(f.output, "text", "json", "yaml"); err != nil {
		return err
	}
	return nil
}

// loadPolicyIndex decodes the manifests strictly and indexes them. Invalid
// manifests or objects are an error (the input is invalid); warnings come
// back with the index.
func loadPolicyIndex(f *policyFlags) (*policy.Index, error) {
	cfg, err := policy.NewConfig(f.options()...)
	if err != nil {
		return nil, err
	}
	ms, err := manifest.LoadPaths(f.manifests...)
	if err != nil {
		return nil, err
	}
	objs, err := policy.ObjectsFromManifests(ms)
	if err != nil {
		return nil, err
	}
	ix := policy.Build(objs, cfg)
	if errs := ix.Errors(); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, p := range errs {
			lines[i] = p.String()
		}
		return nil, fmt.Errorf("invalid policy objects:\n%s", strings.Join(lines, "\n"))
	}
	return ix, nil
}

func warnings(ix *policy.Index) []string {
	var out []string
	for _, p := range ix.Problems() {
		if p.Severity == policy.SeverityWarning {
			out = append(out, p.String())
		}
	}
	return out
}

// Names of core this package uses unqualified.
type (
	// FlagSet is what a command declares its flags on.
	FlagSet = core.FlagSet
	// Action is a command's body.
	Action = core.Action
	// IO is what a command reads and writes.
	IO = core.IO
	// Command is one node of a command tree.
	Command = core.Command
	// StringList is a repeatable, comma-splitting flag.
	StringList = core.StringList
)

// Exit statuses, as core's.
const (
	ExitOK      = core.ExitOK
	ExitFailure = core.ExitFailure
	ExitUsage   = core.ExitUsage
)

func checkOutput(output string, allowed ...string) error { return core.CheckOutput(output, allowed...) }

func writeObject(w io.Writer, format string, v any) error { return core.WriteObject(w, format, v) }
