package kubeenv

import (
	"io"
	"log/slog"
	"time"
)

// Defaults.
const (
	// DefaultStartTimeout bounds how long Start waits for etcd and then
	// kube-apiserver to become ready (binaries already built).
	DefaultStartTimeout = 2 * time.Minute
	// DefaultStopGrace is how long Stop waits after SIGTERM before SIGKILL.
	DefaultStopGrace = 10 * time.Second
	// DefaultServiceAccountIssuer is the issuer of service-account tokens.
	DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// DefaultServiceCIDR is the range Service cluster IPs are allocated from.
	DefaultServiceCIDR = "10.96.0.0/16"
)

// Environment variables FindBinaries reads.
const (
	EnvAPIServer = "WEFT_KUBE_APISERVER"
	EnvEtcd      = "WEFT_ETCD"
)

// Option tunes Start and New.
type Option func(*config)

type config struct {
	binaries     Binaries
	script       string
	startTimeout time.Duration
	stopGrace    time.Duration
	logger       *slog.Logger
	output       io.Writer
	issuer       string
	serviceCIDR  string
	extraArgs    []string
	attempts     int
}

func newConfig(opts []Option) config {
	c := config{
		startTimeout: DefaultStartTimeout,
		stopGrace:    DefaultStopGrace,
		logger:       slog.New(slog.DiscardHandler),
		issuer:       DefaultServiceAccountIssuer,
		serviceCIDR:  DefaultServiceCIDR,
		attempts:     3,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithBinaries sets the paths of kube-apiserver and etcd, bypassing the
// environment variables and the build script. An empty path is looked up as
// if the option were absent.
func WithBinaries(apiserver, etcd string) Option {
	return func(c *config) { c.binaries = Binaries{APIServer: apiserver, Etcd: etcd} }
}

// WithScript sets the path of the build script FindBinaries runs when the
// environment does not name the binaries (default: hack/kube-testenv.sh of
// the repository enclosing the working directory).
func WithScript(path string) Option {
	return func(c *config) { c.script = path }
}

// WithStartTimeout bounds how long Start waits for both processes to become
// ready (default DefaultStartTimeout). Building the binaries, when the script
// has to, is bounded by the context given to Start instead.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// WithStopGrace sets how long Stop waits for each process after SIGTERM
// before it kills it (default DefaultStopGrace).
func WithStopGrace(d time.Duration) Option {
	return func(c *config) { c.stopGrace = d }
}

// WithLogger sets the logger for progress messages (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithProcessOutput copies the output of etcd, kube-apiserver and the build
// script to w, as well as to the log files in the temporary directory.
// w must be safe for concurrent writes.
func WithProcessOutput(w io.Writer) Option {
	return func(c *config) { c.output = w }
}

// WithServiceAccountIssuer sets the issuer of service-account tokens
// (default DefaultServiceAccountIssuer). It is also the API audience.
func WithServiceAccountIssuer(iss string) Option {
	return func(c *config) { c.issuer = iss }
}

// WithAPIServerArgs appends flags to kube-apiserver's command line, after
// the ones Start sets: a single-valued flag given here overrides Start's
// (the last occurrence wins), while list flags such as
// --enable-admission-plugins add to it.
func WithAPIServerArgs(args ...string) Option {
	return func(c *config) { c.extraArgs = append(c.extraArgs, args...) }
}
