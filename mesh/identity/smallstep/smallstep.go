package smallstep

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/smallstep/certificates/api"
	"github.com/smallstep/certificates/ca"
	"go.step.sm/crypto/jose"

	"github.com/weftmesh/weft/mesh/identity"
)

// DefaultTokenLifetime is how long a one-time token is valid.
const DefaultTokenLifetime = 5 * time.Minute

// Config says how to reach step-ca and sign as its provisioner.
type Config struct {
	// URL is the authority's base URL, e.g. https://ca.internal:9000.
	URL string
	// Roots verifies the authority's TLS certificate (its root CA).
	Roots *x509.CertPool
	// Provisioner is the name of a JWK provisioner.
	Provisioner string
	// Key is the private JWK of a JWK provisioner (see LoadJWK). Give
	// either Key or X5C.
	Key *jose.JSONWebKey
	// X5C, instead of Key, signs tokens for an X5C provisioner: a
	// certificate chain that chains to the provisioner's roots, with the
	// leaf's private key.
	X5C *X5CCredentials
}

// X5CCredentials authenticate to an X5C provisioner. The leaf must allow
// digitalSignature and clientAuth; step-ca checks the chain against the
// provisioner's roots on every request.
type X5CCredentials struct {
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// Option tunes New.
type Option func(*options)

type options struct {
	logger        *slog.Logger
	tokenLifetime time.Duration
	now           func() time.Time
	timeout       time.Duration
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithTokenLifetime sets how long each one-time token is valid (default 5m).
func WithTokenLifetime(d time.Duration) Option { return func(o *options) { o.tokenLifetime = d } }

// WithClock sets the clock used for token validity (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTimeout bounds each signing call (default 10s).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Issuer signs through step-ca.
type Issuer struct {
	cfg      Config
	opts     options
	client   *ca.Client
	audience string
	signer   jose.Signer
}

// New connects to the authority at cfg.URL and checks that it answers its
// health endpoint. ctx bounds the start only (that check); each Issue
// runs under its caller's context.
func New(ctx context.Context, cfg Config, opts ...Option) (*Issuer, error) {
	o := options{
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		tokenLifetime: DefaultTokenLifetime,
		now:           time.Now,
		timeout:       10 * time.Second,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, errors.New("smallstep: the authority URL is required")
	case err != nil:
		return nil, fmt.Errorf("smallstep: authority URL %q: %w", cfg.URL, err)
	case u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("smallstep: authority URL %q: want https://host[:port]", cfg.URL)
	case cfg.Roots == nil:
		return nil, errors.New("smallstep: the authority's root certificates are required")
	case cfg.Provisioner == "":
		return nil, errors.New("smallstep: the provisioner name is required")
	case cfg.Key != nil && cfg.X5C != nil:
		return nil, errors.New("smallstep: give either a JWK or X5C credentials, not both")
	case cfg.X5C != nil && (len(cfg.X5C.Chain) == 0 || cfg.X5C.Key == nil):
		return nil, errors.New("smallstep: X5C credentials need a certificate chain and its key")
	case cfg.X5C == nil && (cfg.Key == nil || cfg.Key.IsPublic() || !cfg.Key.Valid()):
		return nil, errors.New("smallstep: the provisioner's private JWK is required")
	case o.tokenLifetime <= 0 || o.timeout <= 0:
		return nil, errors.New("smallstep: token lifetime and timeout must be positive")
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: cfg.Roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	client, err := ca.NewClient(cfg.URL, ca.WithTransport(tr))
	if err != nil {
		return nil, fmt.Errorf("smallstep: client for %s: %w", cfg.URL, err)
	}
	hctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := client.HealthWithContext(hctx); err != nil {
		return nil, fmt.Errorf("smallstep: authority %s is not healthy: %w", cfg.URL, err)
	}
	base := strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	is := &Issuer{cfg: cfg, opts: o, client: client, audience: base + "/1.0/sign"}
	if cfg.X5C != nil {
		// The fragment names the provisioner, as step-ca expects for X5C.
		is.audience += "#x5c/" + cfg.Provisioner
		if is.signer, err = x5cSigner(cfg.X5C); err != nil {
			return nil, err
		}
	} else {
		is.signer, err = jose.NewSigner(
			jose.SigningKey{Algorithm: jose.SignatureAlgorithm(cfg.Key.Algorithm), Key: cfg.Key.Key},
			new(jose.SignerOptions).WithType("JWT").WithHeader("kid", cfg.Key.KeyID))
		if err != nil {
			return nil, fmt.Errorf("smallstep: token signer: %w", err)
		}
	}
	return is, nil
}

// LoadJWK reads a provisioner key written by `step crypto jwk create`
// (encrypted with password, or plain when password is nil).
func LoadJWK(path string, password []byte) (*jose.JSONWebKey, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("smallstep: provisioner key: %w", err)
	}
	var opts []jose.Option
	if password != nil {
		opts = append(opts, jose.WithPassword(password))
	}
	k, err := jose.ReadKey(path, opts...)
	if err != nil {
		return nil, fmt.Errorf("smallstep: provisioner key %s: %w", path, err)
	}
	return k, nil
}

// tokenClaims are the claims step-ca's JWK provisioner reads.
type tokenClaims struct {
	jose.Claims
	SANs []string `json:"sans"`
}

// Token mints a one-time token for name. It is exported so operators can
// check a provisioner by hand.
func (is *Issuer) Token(name identity.Name) (string, error) {
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("smallstep: token id: %w", err)
	}
	now := is.opts.now()
	claims := tokenClaims{
		Claims: jose.Claims{
			ID:        hex.EncodeToString(jti[:]),
			Issuer:    is.cfg.Provisioner,
			Subject:   name.String(),
			Audience:  jose.Audience{is.audience},
			NotBefore: jose.NewNumericDate(now),
			IssuedAt:  jose.NewNumericDate(now),
			Expiry:    jose.NewNumericDate(now.Add(is.opts.tokenLifetime)),
		},
		SANs: []string{name.String()},
	}
	tok, err := jose.Signed(is.signer).Claims(claims).CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("smallstep: sign token: %w", err)
	}
	return tok, nil
}

// Issue has step-ca sign req.CSR for req.Name over [NotBefore, NotAfter].
// Transport and authority errors wrap identity.ErrUnavailable.
func (is *Issuer) Issue(ctx context.Context, req identity.IssueRequest) (*identity.Issued, error) {
	if req.CSR == nil {
		return nil, fmt.Errorf("smallstep: no CSR: %w", identity.ErrInvalidCSR)
	}
	tok, err := is.Token(req.Name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, is.opts.timeout)
	defer cancel()
	resp, err := is.client.SignWithContext(ctx, &api.SignRequest{
		CsrPEM:    api.NewCertificateRequest(req.CSR),
		OTT:       tok,
		NotBefore: api.NewTimeDuration(req.NotBefore),
		NotAfter:  api.NewTimeDuration(req.NotAfter),
	})
	if err != nil {
		is.opts.logger.Warn("step-ca refused or failed to sign", "identity", req.Name.String(), "error", err)
		return nil, fmt.Errorf("smallstep: sign %s: %w: %w", req.Name, identity.ErrUnavailable, err)
	}
	if resp.ServerPEM.Certificate == nil {
		return nil, fmt.Errorf("smallstep: sign %s: no certificate in the answer: %w", req.Name, identity.ErrUnavailable)
	}
	out := &identity.Issued{Leaf: resp.ServerPEM.Certificate, ValidUntil: resp.ServerPEM.NotAfter}
	chain := resp.CertChainPEM
	if len(chain) == 0 && resp.CaPEM.Certificate != nil {
		chain = []api.Certificate{resp.ServerPEM, resp.CaPEM}
	}
	for i, c := range chain {
		if i == 0 || c.Certificate == nil {
			continue // the leaf itself
		}
		out.Intermediates = append(out.Intermediates, c.Certificate)
	}
	return out, nil
}

// x5cSigner signs tokens with the X5C leaf key and carries the chain in
// the x5c header.
func x5cSigner(c *X5CCredentials) (jose.Signer, error) {
	var alg jose.SignatureAlgorithm
	switch k := c.Key.Public().(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		default:
			return nil, fmt.Errorf("smallstep: X5C key curve %s is not supported", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		alg = jose.EdDSA
	case *rsa.PublicKey:
		alg = jose.RS256
	default:
		return nil, fmt.Errorf("smallstep: X5C key type %T is not supported", k)
	}
	chain := make([]string, len(c.Chain))
	for i, cert := range c.Chain {
		chain[i] = base64.StdEncoding.EncodeToString(cert.Raw)
	}
	var key any = c.Key
	switch c.Key.(type) {
	case *ecdsa.PrivateKey, ed25519.PrivateKey, *rsa.PrivateKey:
	default:
		key = jose.NewOpaqueSigner(c.Key)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		new(jose.SignerOptions).WithType("JWT").WithHeader("x5c", chain))
	if err != nil {
		return nil, fmt.Errorf("smallstep: X5C token signer: %w", err)
	}
	return s, nil
}

var _ identity.Issuer = (*Issuer)(nil)
