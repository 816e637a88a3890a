package policy

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/ports"
)

// DefaultPolicy is the policy of a port that no Server selects. It is set
// for the cluster (Config), a namespace or a pod (the annotation
// config.linkerd.io/default-inbound-policy).
type DefaultPolicy uint8

// Default policies, as Linkerd names them.
const (
	AllUnauthenticated DefaultPolicy = iota
	AllAuthenticated
	ClusterAuthenticated
	ClusterUnauthenticated
	DenyAll
	AuditAll
)

var defaultPolicyNames = [...]string{"all-unauthenticated", "all-authenticated", "cluster-authenticated", "cluster-unauthenticated", "deny", "audit"}

// String returns the policy's name ("all-unauthenticated").
func (d DefaultPolicy) String() string {
	if int(d) < len(defaultPolicyNames) {
		return defaultPolicyNames[d]
	}
	return fmt.Sprintf("DefaultPolicy(%d)", uint8(d))
}

// ParseDefaultPolicy reads a default policy name.
func ParseDefaultPolicy(s string) (DefaultPolicy, error) {
	for i, n := range defaultPolicyNames {
		if s == n {
			return DefaultPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("policy: unknown default policy %q (want one of %s)", s, strings.Join(defaultPolicyNames[:], ", "))
}

// authorizations returns the authorizations the policy grants.
func (d DefaultPolicy) authorizations(cfg *Config) []authz.Authorization {
	meta := authz.DefaultMeta(d.String())
	clusterNets := make([]authz.Network, len(cfg.ClusterNetworks))
	for i, p := range cfg.ClusterNetworks {
		clusterNets[i] = authz.Network{Net: p}
	}
	anyID := authz.Authentication{Kind: authz.TLSAuthenticated, Suffixes: []string{""}}
	anyone := authz.Authentication{Kind: authz.Unauthenticated}
	switch d {
	case AllUnauthenticated:
		return []authz.Authorization{{Meta: meta, Networks: authz.AllNetworks(), Authentication: anyone}}
	case AllAuthenticated:
		return []authz.Authorization{{Meta: meta, Networks: authz.AllNetworks(), Authentication: anyID}}
	case ClusterAuthenticated:
		return []authz.Authorization{{Meta: meta, Networks: clusterNets, Authentication: anyID}}
	case ClusterUnauthenticated:
		return []authz.Authorization{{Meta: meta, Networks: clusterNets, Authentication: anyone}}
	case AuditAll:
		return []authz.Authorization{{Meta: meta, Audit: true, Networks: authz.AllNetworks(), Authentication: anyone}}
	}
	return nil
}

// withAuthenticatedOnly turns an allow policy into its authenticated
// form, for ports listed in config.linkerd.io/proxy-require-identity-inbound-ports.
func (d DefaultPolicy) withAuthenticatedOnly() DefaultPolicy {
	switch d {
	case AllUnauthenticated:
		return AllAuthenticated
	case ClusterUnauthenticated:
		return ClusterAuthenticated
	}
	return d
}

// Config holds the cluster-wide settings of the policy index. Build it with
// NewConfig and options; the zero value is not usable.
type Config struct {
	// TrustDomain and ControlPlaneNamespace make up identity names.
	TrustDomain           string
	ControlPlaneNamespace string
	// ClusterDomain is the DNS suffix of Services
	// (<name>.<namespace>.svc.<cluster-domain>).
	ClusterDomain string
	// DefaultPolicy applies to ports that no Server selects, unless a
	// namespace or pod annotation says otherwise.
	DefaultPolicy DefaultPolicy
	// ClusterNetworks are used by the cluster-* default policies and by
	// ServerAuthorizations that list no networks.
	ClusterNetworks []netip.Prefix
	// ProbeNetworks are the client networks from which kubelet probes are
	// authorized on ports without HTTPRoutes.
	ProbeNetworks []netip.Prefix
	// DetectTimeout is sent to proxies for ports of unknown protocol.
	DetectTimeout time.Duration
	// OpaquePorts are the default opaque ports (ports.DefaultOpaque): a
	// Service without an opaque-ports annotation (its own or its
	// namespace's) gets all of them, a pod those its containers declare.
	OpaquePorts ports.Set
	// GlobalEgressNamespace holds the EgressNetworks that apply to
	// clients of every namespace: a client's own namespace is searched
	// first, then this one (Linkerd's --global-egress-network-namespace,
	// default DefaultGlobalEgressNamespace).
	GlobalEgressNamespace string
	// Logger receives diagnostics; it discards them by default.
	Logger *slog.Logger
	// Clock returns the current time (time.Now by default); the indexer
	// times its builds with it.
	Clock func() time.Time
	// Metrics are the instruments the indexer and the servers report to
	// (WithMetrics); nil ones record nothing.
	Metrics Metrics
}

// Option changes a Config.
type Option func(*Config) error

// NewConfig returns Linkerd's defaults (trust domain cluster.local,
// control-plane namespace weft, default policy all-unauthenticated,
// cluster networks vocab.DefaultClusterNetworks, probes from anywhere, 10s
// detect timeout, global egress namespace linkerd-egress) changed by opts.
func NewConfig(opts ...Option) (*Config, error) {
	c := &Config{
		TrustDomain:           "cluster.local",
		ControlPlaneNamespace: "weft",
		ClusterDomain:         "cluster.local",
		DefaultPolicy:         AllUnauthenticated,
		ClusterNetworks:       vocab.DefaultClusterNetworks(),
		ProbeNetworks:         []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
		DetectTimeout:         10 * time.Second,
		OpaquePorts:           ports.DefaultOpaque(),
		GlobalEgressNamespace: DefaultGlobalEgressNamespace,
		Logger:                slog.New(slog.DiscardHandler),
		Clock:                 time.Now,
		Metrics:               DiscardMetrics(),
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithTrustDomain sets the trust domain of identity names.
func WithTrustDomain(td string) Option {
	return func(c *Config) error {
		if err := checkDNSName(td); err != nil {
			return fmt.Errorf("policy: trust domain %q: %w", td, err)
		}
		c.TrustDomain = td
		return nil
	}
}

// WithClusterDomain sets the DNS suffix of Services (default cluster.local).
func WithClusterDomain(d string) Option {
	return func(c *Config) error {
		if err := checkDNSName(d); err != nil {
			return fmt.Errorf("policy: cluster domain %q: %w", d, err)
		}
		c.ClusterDomain = d
		return nil
	}
}

// WithControlPlaneNamespace sets the control plane's namespace, part of
// identity names.
func WithControlPlaneNamespace(ns string) Option {
	return func(c *Config) error {
		if err := checkDNSName(ns); err != nil || strings.Contains(ns, ".") {
			return fmt.Errorf("policy: control-plane namespace %q is not a valid namespace name", ns)
		}
		c.ControlPlaneNamespace = ns
		return nil
	}
}

// WithDefaultPolicy sets the cluster's default policy by name.
func WithDefaultPolicy(name string) Option {
	return func(c *Config) error {
		d, err := ParseDefaultPolicy(name)
		if err != nil {
			return err
		}
		c.DefaultPolicy = d
		return nil
	}
}

// WithClusterNetworks sets the cluster networks from CIDRs.
func WithClusterNetworks(cidrs ...string) Option {
	return func(c *Config) error {
		ps, err := parsePrefixes("cluster network", cidrs)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return fmt.Errorf("policy: no cluster networks given")
		}
		c.ClusterNetworks = ps
		return nil
	}
}

// WithProbeNetworks sets the networks kubelet probes come from. An empty
// list turns the probe authorization off.
func WithProbeNetworks(cidrs ...string) Option {
	return func(c *Config) error {
		ps, err := parsePrefixes("probe network", cidrs)
		if err != nil {
			return err
		}
		c.ProbeNetworks = ps
		return nil
	}
}

// WithDetectTimeout sets the protocol detection timeout sent to proxies.
func WithDetectTimeout(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			return fmt.Errorf("policy: detect timeout must be positive, got %s", d)
		}
		c.DetectTimeout = d
		return nil
	}
}

// WithDefaultOpaquePorts sets the default opaque ports (the
// --default-opaque-ports flag the destination controller takes too).
func WithDefaultOpaquePorts(s ports.Set) Option {
	return func(c *Config) error {
		c.OpaquePorts = s
		return nil
	}
}

// DefaultGlobalEgressNamespace is Linkerd's global egress namespace,
// kept so that the EgressNetworks Linkerd users have there mean the same
// (vocab.DefaultGlobalEgressNamespace, which the install's value
// egress.globalEgressNetworkNamespace also defaults to).
const DefaultGlobalEgressNamespace = vocab.DefaultGlobalEgressNamespace

// WithGlobalEgressNamespace sets the namespace whose EgressNetworks apply
// to clients of every namespace (default DefaultGlobalEgressNamespace).
func WithGlobalEgressNamespace(ns string) Option {
	return func(c *Config) error {
		if err := checkDNSName(ns); err != nil || strings.Contains(ns, ".") {
			return fmt.Errorf("policy: global egress namespace %q is not a valid namespace name", ns)
		}
		c.GlobalEgressNamespace = ns
		return nil
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *Config) error {
		if l != nil {
			c.Logger = l
		}
		return nil
	}
}

// WithMetrics sets the instruments the indexer and the servers report to
// (default: DiscardMetrics); nil fields record nothing.
func WithMetrics(m Metrics) Option {
	return func(c *Config) error {
		c.Metrics = kitmetrics.Defaults(m)
		return nil
	}
}

// WithClock sets the clock the indexer times its builds with.
func WithClock(now func() time.Time) Option {
	return func(c *Config) error {
		if now != nil {
			c.Clock = now
		}
		return nil
	}
}

func parsePrefixes(what string, cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range cidrs {
		p, err := authz.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("policy: %s %q: %w", what, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func checkDNSName(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("invalid label %q", l)
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-') {
				return fmt.Errorf("invalid character %q", ch)
			}
		}
	}
	return nil
}

// ServiceAccountIdentity formats the mesh identity of a service account:
// <sa>.<ns>.serviceaccount.identity.<control-plane-ns>.<trust-domain>, the
// name Linkerd (and Weft's identity service) puts in workload certificates,
// as mesh/identity formats it.
func (c *Config) ServiceAccountIdentity(sa, ns string) string {
	return identity.Name{ServiceAccount: sa, Namespace: ns, Domain: c.identityDomain()}.String()
}

func (c *Config) identityDomain() identity.Domain {
	return identity.Domain{ControlPlaneNamespace: c.ControlPlaneNamespace, TrustDomain: c.TrustDomain}
}

// namespaceIdentitySuffix is the suffix shared by every identity of a
// namespace (for MeshTLSAuthentication identityRefs of kind Namespace).
func (c *Config) namespaceIdentitySuffix(ns string) string {
	return ns + ".serviceaccount.identity." + c.ControlPlaneNamespace + "." + c.TrustDomain
}
