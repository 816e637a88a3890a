package localca

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/identity/internal/filewatch"
	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Issuer key pair layouts, for WithScheme.
const (
	SchemeLinkerd    = vocab.IssuerSchemeLinkerd
	SchemeKubernetes = vocab.IssuerSchemeKubernetes
)

var layouts = map[string][2]string{
	SchemeLinkerd:    {vocab.IssuerCertLinkerd, vocab.IssuerKeyLinkerd},
	SchemeKubernetes: {vocab.IssuerCertKubernetes, vocab.IssuerKeyKubernetes},
}

// maxFileSize bounds each file read.
const maxFileSize = 1 << 20

// Option tunes New and NewFromLoader.
type Option func(*config)

type config struct {
	logger   *slog.Logger
	metrics  identity.Metrics
	now      func() time.Time
	interval time.Duration
	scheme   string
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMetrics sets where reloads and the issuer expiry are reported
// (IssuerReloads, IssuerExpiry); nil fields record nothing (default:
// identity.DiscardMetrics).
func WithMetrics(m identity.Metrics) Option { return func(c *config) { c.metrics = m } }

// WithClock sets the clock used to check validity (default time.Now).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithPollInterval sets how often New polls the directory besides
// filesystem notifications (default 2s).
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithScheme forces New's directory layout (SchemeLinkerd or
// SchemeKubernetes) instead of detecting it.
func WithScheme(s string) Option { return func(c *config) { c.scheme = s } }

func newConfig(opts []Option) config {
	c := config{
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:    time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.metrics = kitmetrics.Defaults(c.metrics)
	return c
}

// Loader reads the issuer key pair from where it is kept: the certificate
// PEM (issuer first, then intermediates) and the private key PEM. An error
// says why the pair could not be read.
type Loader func() (certPEM, keyPEM []byte, err error)

// Issuer is an identity.Issuer over a key pair that can be replaced while
// it runs. It is safe for concurrent use.
type Issuer struct {
	cfg    config
	bundle identity.BundleSource
	source string
	load   Loader
	ca     atomic.Pointer[identity.CA]
	mu     sync.Mutex // serialises Reload
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New loads the issuer key pair from dir, checks it against bundle, and
// follows the directory (filesystem notifications and polling) until
// Close. ctx bounds the start only; the issuer lives until Close.
func New(ctx context.Context, dir string, bundle identity.BundleSource, opts ...Option) (*Issuer, error) {
	cfg := newConfig(opts)
	scheme, err := detectScheme(dir, cfg.scheme)
	if err != nil {
		return nil, err
	}
	names := layouts[scheme]
	crtPath, keyPath := filepath.Join(dir, names[0]), filepath.Join(dir, names[1])
	// The watcher records the files before the first load, so a change
	// landing in between is seen as a change.
	w := filewatch.New(cfg.interval, crtPath, keyPath)
	is, err := NewFromLoader(ctx, dir+" ("+scheme+")", func() ([]byte, []byte, error) { return readPair(crtPath, keyPath) }, bundle, opts...)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	is.cancel, is.done = cancel, make(chan struct{})
	go func() {
		defer close(is.done)
		_ = w.Run(runCtx, func() { _ = is.Reload() })
	}()
	return is, nil
}

// NewFromLoader loads the issuer key pair with load and checks it against
// bundle; source names where the pair comes from in logs and errors. The
// issuer reads the pair again each time Reload is called: a source that
// can notice changes (a Secret informer in
// mesh/identity/kubernetes) calls Reload when it does. ctx bounds the
// start only; Close releases nothing here, as no goroutine is started.
func NewFromLoader(ctx context.Context, source string, load Loader, bundle identity.BundleSource, opts ...Option) (*Issuer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localca: %w", err)
	}
	if bundle == nil {
		return nil, errors.New("localca: a trust bundle is required")
	}
	if load == nil {
		return nil, errors.New("localca: a key pair loader is required")
	}
	is := &Issuer{cfg: newConfig(opts), bundle: bundle, source: source, load: load}
	ca, err := is.build()
	if err != nil {
		return nil, err
	}
	is.install(ca, "loaded")
	return is, nil
}

func readPair(crtPath, keyPath string) ([]byte, []byte, error) {
	crt, err := readFile(crtPath)
	if err != nil {
		return nil, nil, err
	}
	key, err := readFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	return crt, key, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

// detectScheme picks the layout of dir: the forced one, else the one whose
// two files exist (linkerd.io/tls when both do).
func detectScheme(dir, forced string) (string, error) {
	if forced != "" {
		if _, ok := layouts[forced]; !ok {
			return "", fmt.Errorf("localca: unknown issuer scheme %q (want %s or %s)", forced, SchemeLinkerd, SchemeKubernetes)
		}
		return forced, nil
	}
	for _, s := range []string{SchemeLinkerd, SchemeKubernetes} {
		n := layouts[s]
		if exists(filepath.Join(dir, n[0])) && exists(filepath.Join(dir, n[1])) {
			return s, nil
		}
	}
	return "", fmt.Errorf("localca: issuer directory %s holds neither %s and %s (%s) nor %s and %s (%s)", dir,
		vocab.IssuerCertLinkerd, vocab.IssuerKeyLinkerd, SchemeLinkerd, vocab.IssuerCertKubernetes, vocab.IssuerKeyKubernetes, SchemeKubernetes)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// build loads, parses and checks a key pair.
func (is *Issuer) build() (*identity.CA, error) {
	crt, key, err := is.load()
	if err != nil {
		return nil, fmt.Errorf("localca: issuer from %s: %w", is.source, err)
	}
	cert, chain, signer, err := certpem.ParseKeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("localca: issuer from %s: %w", is.source, err)
	}
	ca, err := identity.NewCA(cert, signer, chain, is.bundle.Bundle(), identity.WithClock(is.cfg.now))
	if err != nil {
		return nil, fmt.Errorf("localca: issuer from %s: %w", is.source, err)
	}
	return ca, nil
}

func (is *Issuer) install(ca *identity.CA, what string) {
	is.ca.Store(ca)
	c := ca.Certificate()
	is.cfg.metrics.IssuerExpiry.Set(float64(c.NotAfter.Unix()))
	is.cfg.logger.Info("issuer "+what, "source", is.source, "subject", c.Subject.String(),
		"not_after", c.NotAfter.UTC().Format(time.RFC3339), "serial", c.SerialNumber.String())
}

// Reload reads the key pair again and, when it is fit, swaps it in; the
// same pair again changes nothing. An unfit pair (unreadable, not PEM, a
// key of another certificate, not a CA, expired, not chaining to the
// bundle) is refused: the previous pair stays in use, the failure is
// logged and counted as IssuerReloads{result="error"}, and returned.
func (is *Issuer) Reload() error {
	is.mu.Lock()
	defer is.mu.Unlock()
	ca, err := is.build()
	if err != nil {
		is.cfg.metrics.IssuerReloads.With("result", "error").Add(1)
		is.cfg.logger.Error("issuer reload failed; keeping the previous issuer", "source", is.source, "error", err)
		return err
	}
	if ca.Certificate().Equal(is.ca.Load().Certificate()) {
		return nil
	}
	is.install(ca, "reloaded")
	is.cfg.metrics.IssuerReloads.With("result", "ok").Add(1)
	return nil
}

// Issue signs with the key pair in use.
func (is *Issuer) Issue(ctx context.Context, req identity.IssueRequest) (*identity.Issued, error) {
	return is.ca.Load().Issue(ctx, req)
}

// Certificate returns the issuer certificate in use.
func (is *Issuer) Certificate() *x509.Certificate { return is.ca.Load().Certificate() }

// Expiry returns the NotAfter of the issuer certificate in use.
func (is *Issuer) Expiry() time.Time { return is.ca.Load().Expiry() }

// Close stops following the source. It is safe to call more than once.
func (is *Issuer) Close() error {
	is.once.Do(func() {
		if is.cancel != nil {
			is.cancel()
			<-is.done
		}
	})
	return nil
}

var (
	_ identity.Issuer         = (*Issuer)(nil)
	_ identity.ExpiryReporter = (*Issuer)(nil)
)
