package proxycmd

import (
	"github.com/weftmesh/weft/internal/cli/core"

	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

// InitCommand is weft-init: it installs (or with --cleanup removes) the nat
// rules that send the pod's TCP traffic through its proxy. --dry-run prints
// the rules as iptables-restore input instead.
func InitCommand() core.Command {
	return core.Command{
		Name:    "weft-init",
		Summary: "install the iptables rules that redirect a pod's traffic to its proxy",
		Setup: func(fs *core.FlagSet) core.Action {
			return setupInit(fs, nil)
		},
	}
}

// runInit runs weft-init with args, and runners for iptables and ip6tables
// (nil: the real binaries).
func runInit(ctx context.Context, args []string, stdio core.IO, runners map[string]iptables.Runner) int {
	c := InitCommand()
	c.Setup = func(fs *core.FlagSet) core.Action { return setupInit(fs, runners) }
	return c.Run(ctx, args, stdio)
}

// setupInit declares weft-init's flags; its Action uses runners for
// iptables and ip6tables (nil: the real binaries).
func setupInit(fs *core.FlagSet, runners map[string]iptables.Runner) core.Action {
	inPort := fs.Uint("incoming-proxy-port", 4143, "port of the proxy's inbound listener")
	outPort := fs.Uint("outgoing-proxy-port", 4140, "port of the proxy's outbound listener")
	uid := fs.Uint("proxy-uid", 2102, "user ID the proxy runs as; its traffic is never redirected")
	inIgnore := fs.String("inbound-ports-to-ignore", "", "inbound ports (and ranges like 9000-9100) never redirected")
	outIgnore := fs.String("outbound-ports-to-ignore", "", "outbound ports (and ranges) never redirected")
	ipv6 := fs.Bool("ipv6", true, "also install the rules with ip6tables")
	dryRun := fs.Bool("dry-run", false, "print the rules instead of installing them")
	cleanup := fs.Bool("cleanup", false, "remove weft-init's chains and jumps")
	return func(ctx context.Context, args []string, stdio core.IO) int {
		if len(args) > 0 {
			fmt.Fprintf(stdio.Stderr, "weft-init: unexpected argument %q\n", args[0])
			return core.ExitUsage
		}
		cfg := iptables.Config{ProxyUID: uint32(*uid)}
		for name, v := range map[string]uint{"--incoming-proxy-port": *inPort, "--outgoing-proxy-port": *outPort} {
			if v == 0 || v > 65535 {
				fmt.Fprintf(stdio.Stderr, "weft-init: %s %d is not a port\n", name, v)
				return core.ExitUsage
			}
		}
		cfg.InboundPort, cfg.OutboundPort = uint16(*inPort), uint16(*outPort)
		var err error
		if cfg.InboundPortsToIgnore, err = iptables.ParsePorts(*inIgnore); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-init: --inbound-ports-to-ignore: %v\n", err)
			return core.ExitUsage
		}
		if cfg.OutboundPortsToIgnore, err = iptables.ParsePorts(*outIgnore); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-init: --outbound-ports-to-ignore: %v\n", err)
			return core.ExitUsage
		}
		script, err := iptables.Script(cfg)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-init: %v\n", err)
			return core.ExitUsage
		}
		if *dryRun {
			if *cleanup {
				fmt.Fprintf(stdio.Stdout, "# would remove chains %v and their jumps from PREROUTING and OUTPUT\n", iptables.Chains())
				return core.ExitOK
			}
			fmt.Fprint(stdio.Stdout, script)
			return core.ExitOK
		}
		bins := []string{"iptables"}
		if *ipv6 {
			bins = append(bins, "ip6tables")
		}
		for _, bin := range bins {
			r := runners[bin]
			if r == nil {
				// As a non-root user (the injector's default), weft-init holds
				// CAP_NET_ADMIN and CAP_NET_RAW through its binary's file
				// capabilities and hands them to iptables as ambient ones.
				caps, err := iptables.NetCapabilities()
				if err != nil {
					fmt.Fprintf(stdio.Stderr, "weft-init: %v\n", err)
					return core.ExitFailure
				}
				r = iptables.Exec{Binary: bin, AmbientCaps: caps}
			}
			if *cleanup {
				err = iptables.Cleanup(ctx, r)
			} else {
				err = iptables.Apply(ctx, r, cfg)
			}
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-init: %s: %v\n", bin, err)
				return core.ExitFailure
			}
		}
		if *cleanup {
			fmt.Fprintln(stdio.Stdout, "weft-init: rules removed")
		} else {
			fmt.Fprintf(stdio.Stdout, "weft-init: rules installed (inbound -> %d, outbound -> %d, proxy uid %d)\n", cfg.InboundPort, cfg.OutboundPort, cfg.ProxyUID)
		}
		return core.ExitOK
	}
}
