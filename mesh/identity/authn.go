package identity

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
)

// ServiceAccount is what a token proves: a Kubernetes service account in a
// namespace. The service turns it into a Name in its Domain.
type ServiceAccount struct {
	Namespace string
	Name      string
}

// String formats sa as namespace/name.
func (sa ServiceAccount) String() string { return sa.Namespace + "/" + sa.Name }

// Validate reports whether the namespace is a DNS-1123 label and the name a
// DNS-1123 subdomain.
func (sa ServiceAccount) Validate() error {
	if err := checkLabel(sa.Namespace); err != nil {
		return fmt.Errorf("identity: namespace %q: %w", sa.Namespace, err)
	}
	if err := checkSubdomain(sa.Name); err != nil {
		return fmt.Errorf("identity: service account %q: %w", sa.Name, err)
	}
	return nil
}

// ParseServiceAccountUsername parses a Kubernetes service-account username,
// system:serviceaccount:<namespace>:<name>.
func ParseServiceAccountUsername(u string) (ServiceAccount, error) {
	rest, ok := strings.CutPrefix(u, "system:serviceaccount:")
	if !ok {
		return ServiceAccount{}, fmt.Errorf("identity: username %q is not a service account: %w", u, ErrUnauthenticated)
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || strings.Contains(name, ":") {
		return ServiceAccount{}, fmt.Errorf("identity: username %q: want system:serviceaccount:<namespace>:<name>: %w", u, ErrUnauthenticated)
	}
	sa := ServiceAccount{Namespace: ns, Name: name}
	if err := sa.Validate(); err != nil {
		return ServiceAccount{}, fmt.Errorf("%w: %w", err, ErrUnauthenticated)
	}
	return sa, nil
}

// MaxTokenSize bounds a token, wherever it is checked: the Certify service,
// every Authenticator, the token a client reads from its file. A projected
// service-account token is about 1 KiB; 16 KiB leaves room for long claims
// while keeping what one request makes a backend hash or forward small.
const MaxTokenSize = 16 << 10

// CheckToken is the one rule for a token's shape, applied before any
// backend looks at it: it is not empty and at most MaxTokenSize bytes.
// Errors wrap ErrUnauthenticated. The Service and every Authenticator in
// this module call it first, so a malformed token costs no lookup, hash
// or API call.
func CheckToken(token []byte) error {
	switch {
	case len(token) == 0:
		return fmt.Errorf("identity: empty token: %w", ErrUnauthenticated)
	case len(token) > MaxTokenSize:
		return fmt.Errorf("identity: token of %d bytes exceeds %d: %w", len(token), MaxTokenSize, ErrUnauthenticated)
	}
	return nil
}

// Authenticator is the one token checker: it turns a token into the
// service account it proves. Errors wrap ErrUnauthenticated when the token
// is refused and ErrUnavailable when the backend could not decide; either
// way nothing is issued. Implementations call CheckToken before anything
// else. It must be safe for concurrent use.
// Implementations: Tokens (in memory), static.Set and static.Tokens (a
// file), kubernetes.Authenticator (TokenReview).
type Authenticator interface {
	Authenticate(ctx context.Context, token []byte) (ServiceAccount, error)
}

// Tokens is the in-memory Authenticator: a fixed map from token to service
// account. Use it in tests and embedded setups.
type Tokens map[string]ServiceAccount

// Authenticate looks the token up.
func (t Tokens) Authenticate(_ context.Context, token []byte) (ServiceAccount, error) {
	if err := CheckToken(token); err != nil {
		return ServiceAccount{}, err
	}
	sa, ok := t[string(token)]
	if !ok {
		return ServiceAccount{}, fmt.Errorf("identity: unknown token (sha256 %x): %w", sha256.Sum256(token), ErrUnauthenticated)
	}
	return sa, nil
}
