package cli

import (
	"flag"
	"fmt"

	"github.com/weftmesh/weft/mesh/ports"
)

// registerDefaultOpaquePorts registers --default-opaque-ports, the one
// flag the destination and policy controllers (and the offline policy
// commands) read the default opaque ports from.
func registerDefaultOpaquePorts(fs *flag.FlagSet, dst *string) {
	fs.StringVar(dst, "default-opaque-ports", ports.DefaultOpaque().String(),
		"ports that are opaque unless annotations say otherwise (numbers and ranges); a pod gets those its containers declare, a Service all of them")
}

// parseDefaultOpaquePorts reads the value of --default-opaque-ports.
func parseDefaultOpaquePorts(s string) (ports.Set, error) {
	set, err := ports.Parse(s, nil)
	if err != nil {
		return ports.Set{}, fmt.Errorf("--default-opaque-ports: %w", err)
	}
	return set, nil
}
