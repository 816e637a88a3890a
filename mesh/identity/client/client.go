package client

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/weftmesh/weft/mesh/identity"
)

// Defaults of the renewal schedule, the same as Linkerd's proxy.
const (
	DefaultMinRefresh  = 10 * time.Second
	DefaultMaxRefresh  = 24 * time.Hour
	DefaultBackoffBase = 1 * time.Second
	DefaultBackoffMax  = 1 * time.Minute
	// RenewFraction is the share of a certificate's lifetime after which
	// it is renewed.
	RenewFraction = 0.7
)

// tokenFileSlack is what the token file may hold beyond the token itself
// (surrounding whitespace); the token is bounded by identity.MaxTokenSize.
const tokenFileSlack = 4 << 10

// ErrNoCertificate means the client holds no valid certificate: the last
// one expired and renewal has not succeeded since.
var ErrNoCertificate = errors.New("client: no valid certificate")

// Certifier asks an identity service for a certificate. *identity.Service
// satisfies it in-process; NewGRPCCertifier reaches one over gRPC.
type Certifier interface {
	Certify(ctx context.Context, req identity.Request) (*identity.Issued, error)
}

// Clock is the time source of the renewal loop. The default uses the
// time package; tests inject a fake to step through renewals.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config is what a workload needs to obtain its identity.
type Config struct {
	// Name is the identity to request (required).
	Name identity.Name
	// TokenFile is read before every request, so a rotated projected
	// token is picked up (required unless WithToken is given).
	TokenFile string
	// Bundle holds the trust anchors that issued certificates and peers
	// are verified against (required).
	Bundle identity.BundleSource
	// Certifier reaches the identity service (required).
	Certifier Certifier
}

// Option tunes New.
type Option func(*options)

type options struct {
	clock       Clock
	logger      *slog.Logger
	minRefresh  time.Duration
	maxRefresh  time.Duration
	backoffBase time.Duration
	backoffMax  time.Duration
	token       func() ([]byte, error)
	newKey      func() (crypto.Signer, error)
}

// WithClock injects the clock (default: the time package).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithRefreshBounds bounds the time between renewals (defaults 10s, 24h).
func WithRefreshBounds(minRefresh, maxRefresh time.Duration) Option {
	return func(o *options) { o.minRefresh, o.maxRefresh = minRefresh, maxRefresh }
}

// WithBackoff sets the retry delays after a failed renewal: doubling from
// base up to max, each delay jittered to between half and all of its value
// (defaults 1s, 1m).
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) { o.backoffBase, o.backoffMax = base, max }
}

// WithToken replaces Config.TokenFile with a function returning the token.
func WithToken(f func() ([]byte, error)) Option { return func(o *options) { o.token = f } }

// Client holds a workload's certificate and keeps it fresh. It is a
// source in the go-spiffe sense: New returns once the first certificate is
// there, Updated signals each renewal, Close stops it.
type Client struct {
	cfg  Config
	opts options

	mu   sync.RWMutex
	cert *tls.Certificate

	updated chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// New validates cfg, obtains the first certificate (retrying with backoff
// until ctx ends) and starts renewing it in the background. ctx bounds the
// start only (the wait for the first certificate); renewal runs until
// Close.
func New(ctx context.Context, cfg Config, opts ...Option) (*Client, error) {
	o := options{
		clock:       realClock{},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		minRefresh:  DefaultMinRefresh,
		maxRefresh:  DefaultMaxRefresh,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
		newKey: func() (crypto.Signer, error) {
			return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		},
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := cfg.Name.Validate(); err != nil {
		return nil, fmt.Errorf("client: name: %w", err)
	}
	switch {
	case cfg.Bundle == nil:
		return nil, errors.New("client: a trust bundle is required")
	case cfg.Certifier == nil:
		return nil, errors.New("client: a Certifier is required")
	case cfg.TokenFile == "" && o.token == nil:
		return nil, errors.New("client: a token file is required")
	case o.minRefresh <= 0 || o.maxRefresh < o.minRefresh:
		return nil, fmt.Errorf("client: refresh bounds [%s, %s] are invalid", o.minRefresh, o.maxRefresh)
	case o.backoffBase <= 0 || o.backoffMax < o.backoffBase:
		return nil, fmt.Errorf("client: backoff bounds [%s, %s] are invalid", o.backoffBase, o.backoffMax)
	}
	if o.token == nil {
		path := cfg.TokenFile
		o.token = func() ([]byte, error) { return readToken(path) }
	}
	c := &Client{cfg: cfg, opts: o, updated: make(chan struct{}, 1), done: make(chan struct{})}

	for attempt := 0; ; attempt++ {
		err := c.renew(ctx)
		if err == nil {
			break
		}
		wait := c.backoff(attempt)
		o.logger.Warn("identity: first certificate failed; retrying", "identity", cfg.Name.String(), "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: first certificate for %s: %w (last error: %w)", cfg.Name, ctx.Err(), err)
		case <-o.clock.After(wait):
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(runCtx)
	return c, nil
}

func readToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("client: token: %w", err)
	}
	defer f.Close()
	const limit = identity.MaxTokenSize + tokenFileSlack
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("client: token %s: %w", path, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("client: token file %s exceeds %d bytes", path, limit)
	}
	b = bytes.TrimSpace(b)
	// The server's rule, checked here so a token it would refuse is not
	// sent, and the error names the file.
	if err := identity.CheckToken(b); err != nil {
		return nil, fmt.Errorf("client: token file %s: %w", path, err)
	}
	return b, nil
}

// run renews the certificate until ctx ends.
func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	attempt := 0
	wait := c.refreshIn(c.current())
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.opts.clock.After(wait):
		}
		if err := c.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = c.backoff(attempt)
			attempt++
			leaf := c.current().Leaf
			c.opts.logger.Warn("identity: renewal failed; keeping the current certificate", "identity", c.cfg.Name.String(),
				"error", err, "retry_in", wait, "current_expires", leaf.NotAfter)
			continue
		}
		attempt = 0
		wait = c.refreshIn(c.current())
	}
}

// refreshIn is the delay before renewing cert: RenewFraction of its
// lifetime after NotBefore, bounded by the refresh bounds.
func (c *Client) refreshIn(cert *tls.Certificate) time.Duration {
	leaf := cert.Leaf
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	at := leaf.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
	d := at.Sub(c.opts.clock.Now())
	return max(c.opts.minRefresh, min(d, c.opts.maxRefresh))
}

// backoff returns the delay before retry number attempt (from 0).
func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.backoffBase
	for i := 0; i < attempt && d < c.opts.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.opts.backoffMax)
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}

// renew generates a key, requests a certificate, checks it and installs it.
func (c *Client) renew(ctx context.Context) error {
	token, err := c.opts.token()
	if err != nil {
		return err
	}
	key, err := c.opts.newKey()
	if err != nil {
		return fmt.Errorf("client: generate key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{c.cfg.Name.String()}}, key)
	if err != nil {
		return fmt.Errorf("client: CSR: %w", err)
	}
	issued, err := c.cfg.Certifier.Certify(ctx, identity.Request{Identity: c.cfg.Name.String(), Token: token, CSR: csr})
	if err != nil {
		return fmt.Errorf("client: certify %s: %w", c.cfg.Name, err)
	}
	cert, err := c.check(issued, key)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.cert = cert
	c.mu.Unlock()
	c.opts.logger.Info("identity: certificate renewed", "identity", c.cfg.Name.String(), "not_after", cert.Leaf.NotAfter)
	select {
	case c.updated <- struct{}{}:
	default:
	}
	return nil
}

// check refuses a certificate the identity service should not have sent:
// not for our name, not for our key, not chaining to the bundle, expired.
func (c *Client) check(is *identity.Issued, key crypto.Signer) (*tls.Certificate, error) {
	if is == nil || is.Leaf == nil {
		return nil, errors.New("client: the identity service returned no certificate")
	}
	raw := make([][]byte, 0, 1+len(is.Intermediates))
	raw = append(raw, is.Leaf.Raw)
	for _, ic := range is.Intermediates {
		raw = append(raw, ic.Raw)
	}
	now := c.opts.clock.Now()
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		name, err := identity.VerifyPeer(c.cfg.Bundle.Bundle(), raw, now, usage)
		if err != nil {
			return nil, fmt.Errorf("client: issued certificate: %w", err)
		}
		if name != c.cfg.Name {
			return nil, fmt.Errorf("client: issued certificate is for %s, want %s", name, c.cfg.Name)
		}
	}
	pub, ok := is.Leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("client: issued certificate is not for the key this client generated")
	}
	return &tls.Certificate{Certificate: raw, PrivateKey: key, Leaf: is.Leaf}, nil
}

func (c *Client) current() *tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert
}

// Certificate returns the current certificate, or ErrNoCertificate when
// it has expired and no renewal has succeeded since. The certificate stays
// in use until it expires even while the identity service is down.
func (c *Client) Certificate() (*tls.Certificate, error) {
	cert := c.current()
	if cert == nil || !c.opts.clock.Now().Before(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("%w for %s", ErrNoCertificate, c.cfg.Name)
	}
	return cert, nil
}

// Name returns the identity this client holds.
func (c *Client) Name() identity.Name { return c.cfg.Name }

// Bundle returns the current trust bundle.
func (c *Client) Bundle() *identity.Bundle { return c.cfg.Bundle.Bundle() }

// Updated receives a value after each successful renewal. Notifications
// are coalesced: a slow reader sees one for several renewals.
func (c *Client) Updated() <-chan struct{} { return c.updated }

// Close stops renewing. It is safe to call more than once.
func (c *Client) Close() error {
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
	})
	return nil
}
