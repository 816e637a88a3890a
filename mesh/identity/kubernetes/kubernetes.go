package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/mesh/identity"
)

// Defaults.
const (
	DefaultAudience = "identity.l5d.io"
	DefaultTimeout  = 10 * time.Second
)

// TokenReviewer is the part of the Kubernetes client the Authenticator
// uses; a clientset's AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, review *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Option tunes New.
type Option func(*Authenticator)

// WithAudience sets the audience tokens must be bound to
// (default "identity.l5d.io").
func WithAudience(aud string) Option { return func(a *Authenticator) { a.audience = aud } }

// WithTimeout bounds each TokenReview call (default 10s).
func WithTimeout(d time.Duration) Option { return func(a *Authenticator) { a.timeout = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(a *Authenticator) {
		if l != nil {
			a.logger = l
		}
	}
}

// Authenticator is an identity.Authenticator backed by TokenReview.
type Authenticator struct {
	reviews  TokenReviewer
	audience string
	timeout  time.Duration
	logger   *slog.Logger
}

// New builds an Authenticator over client. ctx bounds the start only
// (New starts nothing and fails if ctx has already ended); each
// Authenticate runs under its caller's context and WithTimeout.
func New(ctx context.Context, client k8s.Interface, opts ...Option) (*Authenticator, error) {
	if client == nil {
		return nil, errors.New("kubernetes: a client is required")
	}
	return NewFromReviewer(ctx, client.AuthenticationV1().TokenReviews(), opts...)
}

// NewFromReviewer builds an Authenticator over any TokenReviewer; ctx
// means what it means for New.
func NewFromReviewer(ctx context.Context, reviews TokenReviewer, opts ...Option) (*Authenticator, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if reviews == nil {
		return nil, errors.New("kubernetes: a TokenReviewer is required")
	}
	a := &Authenticator{
		reviews:  reviews,
		audience: DefaultAudience,
		timeout:  DefaultTimeout,
		logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(a)
	}
	if a.audience == "" {
		return nil, errors.New("kubernetes: the token audience must not be empty")
	}
	if a.timeout <= 0 {
		return nil, fmt.Errorf("kubernetes: timeout %s must be positive", a.timeout)
	}
	return a, nil
}

// Authenticate reviews token and returns the service account it belongs
// to. Errors wrap identity.ErrUnauthenticated (the token is refused) or
// identity.ErrUnavailable (the API could not answer in time).
func (a *Authenticator) Authenticate(ctx context.Context, token []byte) (identity.ServiceAccount, error) {
	if err := identity.CheckToken(token); err != nil {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: %w", err)
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
		Token:     string(token),
		Audiences: []string{a.audience},
	}}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()

	// The call runs in its own goroutine so the deadline holds even for a
	// client that ignores its context; the goroutine ends when the call
	// returns, and the buffered channel lets it finish unobserved.
	type answer struct {
		review *authnv1.TokenReview
		err    error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := a.reviews.Create(ctx, review, metav1.CreateOptions{})
		ch <- answer{r, err}
	}()
	var ans answer
	select {
	case ans = <-ch:
	case <-ctx.Done():
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: %w: %w", identity.ErrUnavailable, ctx.Err())
	}
	if ans.err != nil {
		a.logger.Warn("token review failed", "error", ans.err)
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: %w: %w", identity.ErrUnavailable, ans.err)
	}
	return a.judge(ans.review)
}

// judge turns a TokenReview answer into a decision.
func (a *Authenticator) judge(r *authnv1.TokenReview) (identity.ServiceAccount, error) {
	if r == nil {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: empty answer: %w", identity.ErrUnavailable)
	}
	st := r.Status
	if st.Error != "" {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: %s: %w", st.Error, identity.ErrUnauthenticated)
	}
	if !st.Authenticated {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: not authenticated: %w", identity.ErrUnauthenticated)
	}
	if !slices.Contains(st.Audiences, a.audience) {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: audiences %q do not include %q: %w", st.Audiences, a.audience, identity.ErrUnauthenticated)
	}
	sa, err := identity.ParseServiceAccountUsername(st.User.Username)
	if err != nil {
		return identity.ServiceAccount{}, fmt.Errorf("kubernetes: token review: %w", err)
	}
	return sa, nil
}

var _ identity.Authenticator = (*Authenticator)(nil)
