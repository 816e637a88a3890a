package identity

import (
	"io"
	"log/slog"
	"time"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Defaults of the Certify service. The lifetime and skew allowance are
// Linkerd's.
const (
	DefaultLifetime           = 24 * time.Hour
	DefaultClockSkewAllowance = 20 * time.Second
	// DefaultRequestTimeout bounds one Certify call, from the moment it
	// reaches the service's gRPC handler: receipt of the request, the
	// token review and the signature.
	DefaultRequestTimeout = 10 * time.Second
)

// Option tunes a constructor of this package (NewService, NewCA,
// NewBundleFile). Each constructor reads the options that concern it and
// ignores the rest.
type Option func(*config)

type config struct {
	logger   *slog.Logger
	metrics  Metrics
	now      func() time.Time
	domain   Domain
	lifetime time.Duration
	skew     time.Duration
	interval time.Duration
	timeout  time.Duration
	rate     RateLimit
}

func newConfig(opts []Option) config {
	c := config{
		logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		metrics:  DiscardMetrics(),
		now:      time.Now,
		domain:   DefaultDomain(),
		lifetime: DefaultLifetime,
		skew:     DefaultClockSkewAllowance,
		timeout:  DefaultRequestTimeout,
		rate:     DefaultRateLimit,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMetrics sets the metrics (default: DiscardMetrics).
func WithMetrics(m Metrics) Option {
	return func(c *config) { c.metrics = kitmetrics.Defaults(m) }
}

// WithClock sets the clock (default: time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithDomain sets the installation's domain, which every requested and
// derived name must belong to (default: DefaultDomain). Empty fields take
// their defaults.
func WithDomain(d Domain) Option {
	return func(c *config) { c.domain = d.withDefaults() }
}

// WithLifetime sets the lifetime of issued certificates (default 24h).
func WithLifetime(d time.Duration) Option {
	return func(c *config) { c.lifetime = d }
}

// WithClockSkewAllowance sets how far back issued certificates are dated,
// so peers whose clocks lag accept them (default 20s).
func WithClockSkewAllowance(d time.Duration) Option {
	return func(c *config) { c.skew = d }
}

// WithPollInterval sets how often a file-backed source polls its file in
// addition to filesystem notifications (default 2s).
func WithPollInterval(d time.Duration) Option {
	return func(c *config) { c.interval = d }
}

// WithRequestTimeout sets the deadline of one Certify call (default
// DefaultRequestTimeout). Over gRPC it runs from the moment the call
// reaches the handler, so a client that sends half a request, or never
// ends it, is answered DEADLINE_EXCEEDED instead of holding the stream.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithRateLimit sets the per-identity limit on Certify calls (default
// DefaultRateLimit); the zero RateLimit turns it off.
func WithRateLimit(r RateLimit) Option {
	return func(c *config) { c.rate = r }
}
