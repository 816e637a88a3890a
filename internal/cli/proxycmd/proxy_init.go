package proxycmd

import (
	"context"
	"fmt"
	"time"

	"github.com/weftmesh/weft/internal/cli/core"
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
			return setupInit(fs, nil, "/proc")
		},
		Sub: []core.Command{ValidateCommand()},
	}
}

// ValidateCommand is `weft-init validate`: the CNI-mode network validator.
func ValidateCommand() core.Command {
	return core.Command{
		Name:    "validate",
		Summary: "check that the pod's outbound traffic reaches the proxy's port (CNI mode)",
		Long: "Exits non-zero, with the reason, when the pod's outbound traffic does not\n" +
			"reach the proxy's port, so the pod never starts unprotected.",
		Setup: setupValidate,
	}
}

// runInit runs weft-init with runners for iptables and ip6tables (nil: the
// real binaries).
func runInit(ctx context.Context, args []string, stdio core.IO, runners map[string]iptables.Runner) int {
	return runInitAt(ctx, args, stdio, runners, "/proc")
}

// runInitAt is runInit with the /proc directory the close-wait sysctl is
// written under.
func runInitAt(ctx context.Context, args []string, stdio core.IO, runners map[string]iptables.Runner, procRoot string) int {
	c := InitCommand()
	c.Setup = func(fs *core.FlagSet) core.Action { return setupInit(fs, runners, procRoot) }
	return c.Run(ctx, args, stdio)
}

// setupInit declares weft-init's flags; its Action uses runners for
// iptables and ip6tables (nil: the real binaries) and writes the
// close-wait sysctl under procRoot.
func setupInit(fs *core.FlagSet, runners map[string]iptables.Runner, procRoot string) core.Action {
	inPort := fs.Uint("incoming-proxy-port", 4143, "port of the proxy's inbound listener")
	outPort := fs.Uint("outgoing-proxy-port", 4140, "port of the proxy's outbound listener")
	uid := fs.Uint("proxy-uid", 2102, "user ID the proxy runs as; its traffic is never redirected")
	inIgnore := fs.String("inbound-ports-to-ignore", "", "inbound ports (and ranges like 9000-9100) never redirected")
	outIgnore := fs.String("outbound-ports-to-ignore", "", "outbound ports (and ranges) never redirected")
	subnets := fs.String("subnets-to-ignore", "", "source CIDRs (IPv4 and IPv6, comma-separated) whose inbound connections are never redirected")
	closeWait := fs.Duration("close-wait-timeout", 0, "set the pod's nf_conntrack_tcp_timeout_close_wait (whole seconds; needs a privileged container)")
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
		if cfg.SkipSubnets, err = iptables.ParseSubnets(*subnets); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-init: --subnets-to-ignore: %v\n", err)
			return core.ExitUsage
		}
		if *closeWait != 0 && *closeWait < time.Second {
			fmt.Fprintf(stdio.Stderr, "weft-init: --close-wait-timeout %s is under a second\n", *closeWait)
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
			if *ipv6 && len(cfg.SkipSubnets) > 0 {
				v6 := cfg
				v6.IPv6 = true
				s6, _ := iptables.Script(v6)
				fmt.Fprint(stdio.Stdout, "# ip6tables\n"+s6)
			}
			if *closeWait > 0 {
				fmt.Fprintf(stdio.Stdout, "# would write %d to /proc/%s\n", int64(*closeWait/time.Second), iptables.CloseWaitSysctl)
			}
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
				fam := cfg
				fam.IPv6 = bin == "ip6tables"
				err = iptables.Apply(ctx, r, fam)
			}
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-init: %s: %v\n", bin, err)
				return core.ExitFailure
			}
		}
		if *closeWait > 0 && !*cleanup {
			if err := iptables.SetCloseWaitTimeout(procRoot, *closeWait); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-init: %v\n", err)
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

// setupValidate declares the flags of `weft-init validate`, the CNI-mode
// network validator. Its Action
// exits non-zero, with the reason, when the pod's outbound traffic does not
// reach the proxy's port, so the pod never starts unprotected.
func setupValidate(fs *core.FlagSet) core.Action {
	listen := fs.String("listen-addr", "0.0.0.0:4140", "address to listen on: the proxy's outbound port")
	connect := fs.String("connect-addr", "1.1.1.1:20001", "IP:port outside the pod to connect to (nothing needs to listen there)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the check may take")
	return func(ctx context.Context, args []string, stdio core.IO) int {
		if len(args) > 0 {
			fmt.Fprintf(stdio.Stderr, "weft-init validate: unexpected argument %q\n", args[0])
			return core.ExitUsage
		}
		if *timeout <= 0 {
			fmt.Fprintln(stdio.Stderr, "weft-init validate: --timeout must be positive")
			return core.ExitUsage
		}
		vctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err := iptables.Validate(vctx, *listen, *connect); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-init validate: %v\n", err)
			return core.ExitFailure
		}
		fmt.Fprintf(stdio.Stdout, "weft-init validate: outbound traffic to %s reached %s: redirection is in place\n", *connect, *listen)
		return core.ExitOK
	}
}
