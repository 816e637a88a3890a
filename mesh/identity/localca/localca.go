package local

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/internal/filewatch"
)

// Issuer secret schemes and their file names.
const (
	SchemeLinkerd    = "linkerd.io/tls"
	SchemeKubernetes = "kubernetes.io/tls"
)

var layouts = map[string][2]string{
	SchemeLinkerd:    {"crt.pem", "key.pem"},
	SchemeKubernetes: {"tls.crt", "tls.key"},
}

// maxFileSize bounds each file read.
const maxFileSize = 1 << 20

// Option tunes New and NewFromSecret.
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
// (IssuerReloads, IssuerExpiry).
func WithMetrics(m identity.Metrics) Option { return func(c *config) { c.metrics = m } }

// WithClock sets the clock used to check validity (default time.Now).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithPollInterval sets how often the directory is polled besides
// filesystem notifications (default 2s).
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithScheme forces the directory layout (SchemeLinkerd or
// SchemeKubernetes) instead of detecting it.
func WithScheme(s string) Option { return func(c *config) { c.scheme = s } }

func newConfig(opts []Option) config {
	c := config{
		logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		metrics: identity.DiscardMetrics(),
		now:     time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.metrics.IssuerReloads == nil || c.metrics.IssuerExpiry == nil {
		d := identity.DiscardMetrics()
		if c.metrics.IssuerReloads == nil {
			c.metrics.IssuerReloads = d.IssuerReloads
		}
		if c.metrics.IssuerExpiry == nil {
			c.metrics.IssuerExpiry = d.IssuerExpiry
		}
	}
	return c
}

// Issuer is an identity.Issuer over a key pair that can be replaced while
// it runs. It is safe for concurrent use.
type Issuer struct {
	cfg    config
	bundle identity.BundleSource
	source string
	ca     atomic.Pointer[identity.CA]

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New loads the issuer key pair from dir, checks it against bundle, and
// follows the directory until Close.
func New(ctx context.Context, dir string, bundle identity.BundleSource, opts ...Option) (*Issuer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if bundle == nil {
		return nil, errors.New("local: a trust bundle is required")
	}
	cfg := newConfig(opts)
	scheme, err := detectScheme(dir, cfg.scheme)
	if err != nil {
		return nil, err
	}
	names := layouts[scheme]
	crtPath, keyPath := filepath.Join(dir, names[0]), filepath.Join(dir, names[1])
	w := filewatch.New(cfg.interval, crtPath, keyPath)
	is := &Issuer{cfg: cfg, bundle: bundle, source: dir + " (" + scheme + ")"}
	ca, err := is.build(readFile(crtPath), readFile(keyPath))
	if err != nil {
		return nil, err
	}
	is.install(ca, "loaded")
	runCtx, cancel := context.WithCancel(context.Background())
	is.cancel, is.done = cancel, make(chan struct{})
	go func() {
		defer close(is.done)
		_ = w.Run(runCtx, func() { is.reload(readFile(crtPath), readFile(keyPath)) })
	}()
	return is, nil
}

// fileResult is a read that may have failed, so a reload can report which
// file was the problem.
type fileResult struct {
	path string
	data []byte
	err  error
}

func readFile(path string) fileResult {
	f, err := os.Open(path)
	if err != nil {
		return fileResult{path: path, err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err == nil && len(data) > maxFileSize {
		err = fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return fileResult{path: path, data: data, err: err}
}

// detectScheme picks the layout of dir: the forced one, else the one whose
// two files exist (linkerd.io/tls when both do).
func detectScheme(dir, forced string) (string, error) {
	if forced != "" {
		if _, ok := layouts[forced]; !ok {
			return "", fmt.Errorf("local: unknown issuer scheme %q (want %s or %s)", forced, SchemeLinkerd, SchemeKubernetes)
		}
		return forced, nil
	}
	for _, s := range []string{SchemeLinkerd, SchemeKubernetes} {
		n := layouts[s]
		if exists(filepath.Join(dir, n[0])) && exists(filepath.Join(dir, n[1])) {
			return s, nil
		}
	}
	return "", fmt.Errorf("local: issuer directory %s holds neither crt.pem and key.pem (%s) nor tls.crt and tls.key (%s)", dir, SchemeLinkerd, SchemeKubernetes)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// build parses and checks a key pair.
func (is *Issuer) build(crt, key fileResult) (*identity.CA, error) {
	for _, f := range []fileResult{crt, key} {
		if f.err != nil {
			return nil, fmt.Errorf("local: issuer %s: %w", f.path, f.err)
		}
	}
	cert, chain, signer, err := ParseKeyPair(crt.data, key.data)
	if err != nil {
		return nil, fmt.Errorf("%w (files %s, %s)", err, crt.path, key.path)
	}
	ca, err := identity.NewCA(cert, signer, chain, is.bundle.Bundle(), identity.WithClock(is.cfg.now))
	if err != nil {
		return nil, fmt.Errorf("local: issuer from %s: %w", is.source, err)
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

func (is *Issuer) reload(crt, key fileResult) {
	ca, err := is.build(crt, key)
	if err != nil {
		is.cfg.metrics.IssuerReloads.With("result", "error").Add(1)
		is.cfg.logger.Error("issuer reload failed; keeping the previous issuer", "source", is.source, "error", err)
		return
	}
	if ca.Certificate().Equal(is.ca.Load().Certificate()) {
		return
	}
	is.install(ca, "reloaded")
	is.cfg.metrics.IssuerReloads.With("result", "ok").Add(1)
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

// ParseKeyPair parses an issuer certificate PEM (the issuer first, then
// any intermediates) and its private key PEM.
func ParseKeyPair(certPEM, keyPEM []byte) (*x509.Certificate, []*x509.Certificate, crypto.Signer, error) {
	var certs []*x509.Certificate
	rest := certPEM
	for i := 0; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, nil, nil, fmt.Errorf("local: issuer certificate: PEM block %d is %q, want CERTIFICATE", i, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("local: issuer certificate: PEM block %d: %w", i, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, nil, nil, errors.New("local: issuer certificate: no PEM certificate found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, nil, nil, errors.New("local: issuer certificate: data that is not PEM after the last certificate")
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, nil, nil, err
	}
	return certs[0], certs[1:], key, nil
}

// ParsePrivateKey parses a PEM private key: SEC 1, PKCS#8 or PKCS#1.
func ParsePrivateKey(keyPEM []byte) (crypto.Signer, error) {
	b, rest := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("local: issuer key: no PEM block found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("local: issuer key: data after the key's PEM block")
	}
	var (
		k   any
		err error
	)
	switch b.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("local: issuer key: PEM block is %q, want EC PRIVATE KEY, PRIVATE KEY or RSA PRIVATE KEY", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("local: issuer key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("local: issuer key: %T cannot sign", k)
	}
	return s, nil
}

var (
	_ identity.Issuer         = (*Issuer)(nil)
	_ identity.ExpiryReporter = (*Issuer)(nil)
)
