package core

import (
	"fmt"
	"strings"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/ports"
)

// RegisterDefaultOpaquePorts registers --default-opaque-ports, the one
// flag the destination and policy controllers (and the offline policy
// commands) read the default opaque ports from.
func RegisterDefaultOpaquePorts(fs *FlagSet, dst *string) {
	fs.StringVar(dst, "default-opaque-ports", ports.DefaultOpaque().String(),
		"ports that are opaque unless annotations say otherwise (numbers and ranges); a pod gets those its containers declare, a Service all of them")
}

// ParseDefaultOpaquePorts reads the value of --default-opaque-ports.
func ParseDefaultOpaquePorts(s string) (ports.Set, error) {
	set, err := ports.Parse(s, nil)
	if err != nil {
		return ports.Set{}, fmt.Errorf("--default-opaque-ports: %w", err)
	}
	return set, nil
}

// RegisterProbeNetworks registers --probe-networks, the same flag for
// weft-controller policy and the offline policy commands; set records
// that the flag was given (an empty value turns the probe authorization
// off).
func RegisterProbeNetworks(fs *FlagSet, dst *StringList, set *bool) {
	fs.Func("probe-networks", "comma-separated networks kubelet probes come from (default 0.0.0.0/0,::/0; an empty value turns the probe authorization off)", func(v string) error {
		*set = true
		return dst.Set(v)
	})
}

// RegisterClusterNetworks registers --cluster-networks, the same flag for
// weft-controller policy and the offline policy commands. Its default,
// shown in the help, is vocab.DefaultClusterNetworks, which policy.NewConfig
// applies when the flag is not given.
func RegisterClusterNetworks(fs *FlagSet, dst *StringList) {
	nets := vocab.DefaultClusterNetworks()
	shown := make([]string, len(nets))
	for i, n := range nets {
		shown[i] = n.String()
	}
	fs.Var(dst, "cluster-networks", "comma-separated cluster networks (default "+strings.Join(shown, ",")+")")
}
