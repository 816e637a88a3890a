package discovery

import (
	"fmt"
	"log/slog"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
	"github.com/weftmesh/weft/mesh/ports"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Option tunes NewIndex, NewServer and the Resolve functions. Each reads
// the options that concern it and ignores the rest.
type Option func(*config)

type config struct {
	clusterDomain  string
	controlPlaneNS string
	trustDomain    string
	defaultOpaque  PortSet
	h2Upgrade      bool
	logger         *slog.Logger
	metrics        Metrics
}

func newConfig(opts []Option) (config, error) {
	c := config{
		clusterDomain:  defaultClusterDomain,
		controlPlaneNS: defaultControlPlaneNS,
		trustDomain:    defaultTrustDomain,
		defaultOpaque:  ports.DefaultOpaque(),
		h2Upgrade:      true,
		logger:         slog.New(slog.DiscardHandler),
		metrics:        DiscardMetrics(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if err := validateClusterDomain(c.clusterDomain); err != nil {
		return c, err
	}
	if errs := validation.IsDNS1123Label(c.controlPlaneNS); len(errs) > 0 {
		return c, fmt.Errorf("discovery: control plane namespace %q: %s", c.controlPlaneNS, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(c.trustDomain); len(errs) > 0 {
		return c, fmt.Errorf("discovery: trust domain %q: %s", c.trustDomain, errs[0])
	}
	return c, nil
}

// DefaultOpaquePorts returns the ports treated as opaque when neither the
// pod, the service nor the namespace says otherwise, as in Linkerd: SMTP,
// MySQL, Galera, PostgreSQL, Redis, Elasticsearch and memcached ports
// (25,587,3306,4444,5432,6379,9300,11211).
func DefaultOpaquePorts() PortSet { return ports.DefaultOpaque() }

// WithClusterDomain sets the cluster's DNS domain (default cluster.local):
// service names are <svc>.<ns>.svc.<domain>.
func WithClusterDomain(d string) Option { return func(c *config) { c.clusterDomain = d } }

// WithControlPlaneNamespace sets the namespace of the control plane
// (default weft). Pods injected by it (label linkerd.io/control-plane-ns
// with this value) get TLS identities, and the namespace is part of every
// identity name.
func WithControlPlaneNamespace(ns string) Option { return func(c *config) { c.controlPlaneNS = ns } }

// WithTrustDomain sets the identity trust domain (default cluster.local),
// the last part of identity names.
func WithTrustDomain(td string) Option { return func(c *config) { c.trustDomain = td } }

// WithDefaultOpaquePorts sets the ports that are opaque unless a pod,
// service or namespace annotation says otherwise (default
// DefaultOpaquePorts).
func WithDefaultOpaquePorts(ps PortSet) Option { return func(c *config) { c.defaultOpaque = ps } }

// WithH2Upgrade sets whether meshed endpoints are hinted as speaking
// HTTP/2 between proxies (default true).
func WithH2Upgrade(on bool) Option { return func(c *config) { c.h2Upgrade = on } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMetrics sets the metrics (default: DiscardMetrics).
func WithMetrics(m Metrics) Option { return func(c *config) { c.metrics = kitmetrics.Defaults(m) } }
