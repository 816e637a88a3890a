package identity

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"
)

// Request is a Certify call as the service sees it, independent of the
// transport.
type Request struct {
	// Identity is the requested name in text form.
	Identity string
	// Token proves who the caller is (a projected service-account token, or
	// an entry of a static token file).
	Token []byte
	// CSR is the certificate signing request, DER or PEM.
	CSR []byte
}

// Service is the identity CA: it authenticates a token, derives the
// caller's identity, requires the requested identity to equal it, checks
// the CSR and has the Issuer sign a short-lived certificate. Register
// exposes it as io.linkerd.proxy.identity.Identity over gRPC; Certify is
// the same work without a transport.
type Service struct {
	authn  Authenticator
	issuer Issuer
	cfg    config
	limit  *limiter // nil when the rate limit is off
}

// NewService builds the service. ctx bounds the start only (NewService
// starts nothing and fails if ctx has already ended); each Certify runs
// under its caller's context. Options: WithDomain, WithLifetime,
// WithClockSkewAllowance, WithRequestTimeout, WithRateLimit, WithClock,
// WithLogger, WithMetrics.
func NewService(ctx context.Context, authn Authenticator, issuer Issuer, opts ...Option) (*Service, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if authn == nil {
		return nil, errors.New("identity: an Authenticator is required")
	}
	if issuer == nil {
		return nil, errors.New("identity: an Issuer is required")
	}
	cfg := newConfig(opts)
	if err := cfg.domain.Validate(); err != nil {
		return nil, err
	}
	if cfg.lifetime < time.Minute {
		return nil, fmt.Errorf("identity: issuance lifetime %s is shorter than one minute", cfg.lifetime)
	}
	if cfg.skew < 0 {
		return nil, fmt.Errorf("identity: clock skew allowance %s is negative", cfg.skew)
	}
	if cfg.skew >= cfg.lifetime {
		return nil, fmt.Errorf("identity: clock skew allowance %s is not shorter than the lifetime %s", cfg.skew, cfg.lifetime)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("identity: request timeout %s is not positive", cfg.timeout)
	}
	if err := cfg.rate.Validate(); err != nil {
		return nil, err
	}
	s := &Service{authn: authn, issuer: issuer, cfg: cfg}
	if !cfg.rate.Off() {
		s.limit = newLimiter(cfg.rate)
	}
	s.reportIssuerExpiry()
	return s, nil
}

// Domain returns the domain the service issues names in.
func (s *Service) Domain() Domain { return s.cfg.domain }

// Certify authenticates req.Token, checks that it proves req.Identity,
// checks the CSR and issues a certificate, within the request timeout.
// Every refusal wraps one of the package's sentinel errors; nothing is
// issued on any error.
func (s *Service) Certify(ctx context.Context, req Request) (*Issued, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	start := s.cfg.now()
	issued, err := s.certify(ctx, req, start)
	result := resultOf(err)
	s.cfg.metrics.Requests.With("result", result).Add(1)
	s.cfg.metrics.Latency.Observe(s.cfg.now().Sub(start).Seconds())
	if err != nil {
		s.cfg.logger.Info("certify refused", "identity", truncate(req.Identity, 300), "result", result, "error", err)
		return nil, err
	}
	s.cfg.logger.Debug("certified", "identity", req.Identity, "valid_until", issued.ValidUntil, "serial", issued.Leaf.SerialNumber)
	s.reportIssuerExpiry()
	return issued, nil
}

func (s *Service) certify(ctx context.Context, req Request, now time.Time) (*Issued, error) {
	// Cheap checks of the request's shape come first, so a malformed call
	// costs no token review.
	want, err := ParseName(req.Identity)
	if err != nil {
		return nil, fmt.Errorf("identity: requested identity: %w", err)
	}
	if want.Domain != s.cfg.domain {
		return nil, fmt.Errorf("identity: requested identity %q is outside this installation (%s.%s): %w",
			req.Identity, s.cfg.domain.ControlPlaneNamespace, s.cfg.domain.TrustDomain, ErrIdentityMismatch)
	}
	if err := CheckToken(req.Token); err != nil {
		return nil, err
	}
	csr, err := ParseCSR(req.CSR)
	if err != nil {
		return nil, err
	}

	sa, err := s.authn.Authenticate(ctx, req.Token)
	if err != nil {
		if !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrUnavailable) {
			// An authenticator that does not say why still fails closed.
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, err
	}
	got, err := s.cfg.domain.Name(sa.Namespace, sa.Name)
	if err != nil {
		return nil, fmt.Errorf("identity: token names an invalid service account %s: %w: %w", sa, ErrUnauthenticated, err)
	}
	// The limit is charged to the identity the token proves, whatever
	// was requested: nobody can spend another identity's budget.
	if s.limit != nil {
		if wait, ok := s.limit.take(got, now); !ok {
			return nil, fmt.Errorf("identity: too many certificate requests for %s (limit: %s); retry in %s: %w",
				got, s.cfg.rate, wait.Round(time.Millisecond), ErrRateLimited)
		}
	}
	if got != want {
		return nil, fmt.Errorf("identity: token proves %q, but %q was requested: %w", got, want, ErrIdentityMismatch)
	}
	if err := CheckCSR(csr, want); err != nil {
		return nil, err
	}

	issued, err := s.issuer.Issue(ctx, IssueRequest{
		CSR:       csr,
		Name:      want,
		NotBefore: now.Add(-s.cfg.skew),
		NotAfter:  now.Add(s.cfg.lifetime),
	})
	if err != nil {
		if !errors.Is(err, ErrInvalidCSR) && !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, err
	}
	if err := checkIssued(issued, want, csr.PublicKey, now); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// ValidUntil comes from the leaf, never from the issuer's say-so: a
	// proxy renews by it, and a date past NotAfter would have it present
	// an expired certificate. The issuer's value is left untouched.
	out := *issued
	out.ValidUntil = issued.Leaf.NotAfter
	return &out, nil
}

// checkIssued guards against an issuer (possibly remote) that returned a
// certificate the workload must not have.
func checkIssued(is *Issued, want Name, pub any, now time.Time) error {
	if is == nil || is.Leaf == nil {
		return errors.New("identity: issuer returned no certificate")
	}
	leaf := is.Leaf
	if leaf.IsCA {
		return errors.New("identity: issuer returned a CA certificate")
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != want.String() || len(leaf.URIs)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
		return fmt.Errorf("identity: issuer returned a certificate for %v, want only %q", leaf.DNSNames, want)
	}
	if !publicKeysEqual(leaf.PublicKey, pub) {
		return errors.New("identity: issuer returned a certificate for another key")
	}
	if !now.Before(leaf.NotAfter) {
		return fmt.Errorf("identity: issuer returned a certificate that expired at %s", leaf.NotAfter)
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

func (s *Service) reportIssuerExpiry() {
	if r, ok := s.issuer.(ExpiryReporter); ok {
		if exp := r.Expiry(); !exp.IsZero() {
			s.cfg.metrics.IssuerExpiry.Set(float64(exp.Unix()))
		}
	}
}

// resultOf names the outcome of a Certify call for metrics and logs.
func resultOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, ErrIdentityMismatch):
		return "identity_mismatch"
	case errors.Is(err, ErrInvalidCSR):
		return "invalid_csr"
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidRequest):
		return "invalid_request"
	case errors.Is(err, ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "error"
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
