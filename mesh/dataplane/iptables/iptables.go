// Package iptables computes and installs the nat rules that send a pod's TCP
// traffic through its Weft proxy (what the weft-init container does).
//
// Rules are computed by [Rules], a pure function of a [Config]. [Apply] and
// [Cleanup] carry them out through a [Runner], the small seam over the
// iptables and ip6tables commands; [Exec] runs the real commands (optionally
// prefixed, for example by "ip netns exec NAME") and [Memory] is an
// in-memory nat table for tests.
//
// The rules live in Weft's own chains so that they can be found and removed:
//
//	PREROUTING -> WEFT_INIT_PREROUTING: ignored inbound ports RETURN,
//	              connections from skipped subnets RETURN, then
//	              WEFT_INIT_REDIRECT (REDIRECT to the inbound port, 4143)
//	OUTPUT     -> WEFT_INIT_OUTPUT: the proxy's UID RETURN, loopback RETURN,
//	              ignored outbound ports RETURN, then REDIRECT to the
//	              outbound port (4140)
//
// Apply is idempotent: it creates the chains if they are missing, replaces
// their content, and adds each jump from the built-in chains only once.
//
// Beside the rules, weft-init sets the conntrack close-wait timeout
// ([SetCloseWaitTimeout]) and, as `weft-init validate` in CNI mode, checks
// that outbound traffic really reaches the proxy's port ([Validate]).
package iptables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Chain names owned by weft-init.
const (
	ChainPrerouting = "WEFT_INIT_PREROUTING"
	ChainRedirect   = "WEFT_INIT_REDIRECT"
	ChainOutput     = "WEFT_INIT_OUTPUT"
)

// Table is the table every rule lives in.
const Table = "nat"

// PortRange is an inclusive range of TCP ports; a single port has First == Last.
type PortRange struct{ First, Last uint16 }

// String renders the range the way iptables' multiport match takes it.
func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d:%d", r.First, r.Last)
}

// ParsePorts parses a comma-separated list of ports and ranges ("25,587,
// 9000-9100"). Empty items are ignored.
func ParsePorts(s string) ([]PortRange, error) {
	var out []PortRange
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := parsePort(lo)
		if err != nil {
			return nil, fmt.Errorf("iptables: port %q: %w", item, err)
		}
		last := first
		if isRange {
			if last, err = parsePort(hi); err != nil {
				return nil, fmt.Errorf("iptables: port range %q: %w", item, err)
			}
			if last < first {
				return nil, fmt.Errorf("iptables: port range %q ends before it starts", item)
			}
		}
		out = append(out, PortRange{First: first, Last: last})
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("not a port number in 1..65535")
	}
	return uint16(n), nil
}

// Config describes the capture to install.
type Config struct {
	// InboundPort receives redirected inbound connections (default 4143).
	InboundPort uint16
	// OutboundPort receives redirected outbound connections (default 4140).
	OutboundPort uint16
	// ProxyUID is the user the proxy runs as; its own connections are never
	// redirected (default 2102).
	ProxyUID uint32
	// InboundPortsToIgnore and OutboundPortsToIgnore are never redirected.
	InboundPortsToIgnore  []PortRange
	OutboundPortsToIgnore []PortRange
	// SkipSubnets are source networks whose inbound connections are never
	// redirected (config.linkerd.io/skip-subnets, as Linkerd applies it:
	// for example a Docker bridge inside the pod). Each family's rules take
	// the subnets of that family.
	SkipSubnets []netip.Prefix
	// IPv6 says the rules are for ip6tables; it selects the SkipSubnets
	// that apply.
	IPv6 bool
}

// ParseSubnets parses a comma-separated list of CIDRs ("10.0.0.0/8,
// fd00::/8"). Empty items are ignored; host bits must be zero.
func ParseSubnets(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("iptables: subnet %q is not a CIDR", item)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("iptables: subnet %q has host bits set (did you mean %s?)", item, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// subnets returns the skipped subnets of the rules' family.
func (c Config) subnets() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.SkipSubnets {
		if p.Addr().Is4() != c.IPv6 {
			out = append(out, p)
		}
	}
	return out
}

// DefaultConfig returns the standard ports and proxy UID.
func DefaultConfig() Config {
	return Config{InboundPort: 4143, OutboundPort: 4140, ProxyUID: 2102}
}

// Rule is one rule appended to a chain of the nat table.
type Rule struct {
	Chain string
	Spec  []string
}

// String renders the rule as iptables-save does ("-A CHAIN spec...").
func (r Rule) String() string { return "-A " + r.Chain + " " + strings.Join(r.Spec, " ") }

// Jump is a rule in a built-in chain that enters one of ours.
type Jump struct {
	From, To string
}

// Spec is the rule specification of the jump.
func (j Jump) Spec() []string { return []string{"-j", j.To} }

// Jumps lists the jumps from the built-in chains, in the order Apply adds them.
func Jumps() []Jump {
	return []Jump{{From: "PREROUTING", To: ChainPrerouting}, {From: "OUTPUT", To: ChainOutput}}
}

// Chains lists Weft's chains.
func Chains() []string { return []string{ChainRedirect, ChainPrerouting, ChainOutput} }

// maxMultiport is how many ports one multiport match takes (a range counts twice).
const maxMultiport = 15

// Rules returns the content of Weft's chains for cfg, in order.
func Rules(cfg Config) ([]Rule, error) {
	if cfg.InboundPort == 0 || cfg.OutboundPort == 0 {
		return nil, errors.New("iptables: inbound and outbound proxy ports must be set")
	}
	if cfg.InboundPort == cfg.OutboundPort {
		return nil, fmt.Errorf("iptables: inbound and outbound proxy ports are both %d", cfg.InboundPort)
	}
	var rules []Rule
	add := func(chain string, spec ...string) { rules = append(rules, Rule{Chain: chain, Spec: spec}) }

	add(ChainRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", strconv.Itoa(int(cfg.InboundPort)))
	for _, group := range multiport(cfg.InboundPortsToIgnore) {
		add(ChainPrerouting, "-p", "tcp", "-m", "multiport", "--dports", group, "-j", "RETURN")
	}
	for _, p := range cfg.subnets() {
		add(ChainPrerouting, "-s", p.String(), "-j", "RETURN")
	}
	add(ChainPrerouting, "-j", ChainRedirect)

	add(ChainOutput, "-m", "owner", "--uid-owner", strconv.FormatUint(uint64(cfg.ProxyUID), 10), "-j", "RETURN")
	add(ChainOutput, "-o", "lo", "-j", "RETURN")
	for _, group := range multiport(cfg.OutboundPortsToIgnore) {
		add(ChainOutput, "-p", "tcp", "-m", "multiport", "--dports", group, "-j", "RETURN")
	}
	add(ChainOutput, "-p", "tcp", "-j", "REDIRECT", "--to-ports", strconv.Itoa(int(cfg.OutboundPort)))
	return rules, nil
}

// multiport splits ranges into groups that fit one multiport match.
func multiport(ranges []PortRange) []string {
	var groups []string
	var cur []string
	used := 0
	for _, r := range ranges {
		cost := 1
		if r.First != r.Last {
			cost = 2
		}
		if used+cost > maxMultiport {
			groups = append(groups, strings.Join(cur, ","))
			cur, used = nil, 0
		}
		cur = append(cur, r.String())
		used += cost
	}
	if len(cur) > 0 {
		groups = append(groups, strings.Join(cur, ","))
	}
	return groups
}

// Script renders the rules as iptables-save input for the nat table, which
// is what --dry-run prints.
func Script(cfg Config) (string, error) {
	rules, err := Rules(cfg)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range Chains() {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, j := range Jumps() {
		fmt.Fprintf(&b, "-A %s %s\n", j.From, strings.Join(j.Spec(), " "))
	}
	for _, r := range rules {
		b.WriteString(r.String() + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String(), nil
}

// Runner runs one iptables (or ip6tables) command. An error means the
// command failed; for check commands (-C) that is how a missing rule shows.
type Runner interface {
	Run(ctx context.Context, args ...string) error
}

// Apply installs cfg's rules through r, idempotently.
func Apply(ctx context.Context, r Runner, cfg Config) error {
	rules, err := Rules(cfg)
	if err != nil {
		return err
	}
	for _, c := range Chains() {
		if r.Run(ctx, "-t", Table, "-S", c) != nil {
			if err := r.Run(ctx, "-t", Table, "-N", c); err != nil {
				return fmt.Errorf("iptables: creating chain %s: %w", c, err)
			}
		} else if err := r.Run(ctx, "-t", Table, "-F", c); err != nil {
			return fmt.Errorf("iptables: flushing chain %s: %w", c, err)
		}
	}
	for _, rule := range rules {
		args := append([]string{"-t", Table, "-A", rule.Chain}, rule.Spec...)
		if err := r.Run(ctx, args...); err != nil {
			return fmt.Errorf("iptables: adding %q: %w", rule.String(), err)
		}
	}
	for _, j := range Jumps() {
		check := append([]string{"-t", Table, "-C", j.From}, j.Spec()...)
		if r.Run(ctx, check...) == nil {
			continue
		}
		add := append([]string{"-t", Table, "-A", j.From}, j.Spec()...)
		if err := r.Run(ctx, add...); err != nil {
			return fmt.Errorf("iptables: adding jump %s -> %s: %w", j.From, j.To, err)
		}
	}
	return nil
}

// Cleanup removes the jumps into Weft's chains and the chains themselves. It
// succeeds when nothing is installed.
func Cleanup(ctx context.Context, r Runner) error {
	for _, j := range Jumps() {
		for i := 0; i < 100; i++ { // remove duplicates too, bounded
			check := append([]string{"-t", Table, "-C", j.From}, j.Spec()...)
			if r.Run(ctx, check...) != nil {
				break
			}
			del := append([]string{"-t", Table, "-D", j.From}, j.Spec()...)
			if err := r.Run(ctx, del...); err != nil {
				return fmt.Errorf("iptables: removing jump %s -> %s: %w", j.From, j.To, err)
			}
		}
	}
	// Flush every chain before deleting any, since ours refer to each other.
	var present []string
	for _, c := range Chains() {
		if r.Run(ctx, "-t", Table, "-S", c) == nil {
			present = append(present, c)
			if err := r.Run(ctx, "-t", Table, "-F", c); err != nil {
				return fmt.Errorf("iptables: flushing chain %s: %w", c, err)
			}
		}
	}
	for _, c := range present {
		if err := r.Run(ctx, "-t", Table, "-X", c); err != nil {
			return fmt.Errorf("iptables: deleting chain %s: %w", c, err)
		}
	}
	return nil
}

// Exec runs a real iptables binary.
type Exec struct {
	// Binary is "iptables" or "ip6tables" (or a path to one).
	Binary string
	// Prefix is prepended to the command line, for example
	// []string{"ip", "netns", "exec", "pod-a"}.
	Prefix []string
	// AmbientCaps are raised as ambient capabilities of the command
	// (Linux), so that a non-root caller passes the capabilities it holds
	// on (see NetCapabilities).
	AmbientCaps []uintptr
}

// Run runs the binary with args (and "-w" so it waits for the xtables lock).
func (e Exec) Run(ctx context.Context, args ...string) error {
	argv := slices.Concat(e.Prefix, []string{e.Binary, "-w", "5"}, args)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	withAmbient(cmd, e.AmbientCaps)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables: %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
