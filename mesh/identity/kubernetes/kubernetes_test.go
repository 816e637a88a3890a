package kubernetes_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/identitytest"
	"github.com/weftmesh/weft/mesh/identity/kubernetes"
)

// fakeAPI answers TokenReviews with review(spec) and records the specs.
func fakeAPI(t *testing.T, review func(spec authnv1.TokenReviewSpec) (*authnv1.TokenReview, error)) (*fake.Clientset, *[]authnv1.TokenReviewSpec) {
	t.Helper()
	client := fake.NewClientset()
	var seen []authnv1.TokenReviewSpec
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		seen = append(seen, tr.Spec)
		out, err := review(tr.Spec)
		return true, out, err
	})
	return client, &seen
}

func reviewed(status authnv1.TokenReviewStatus) func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
	return func(spec authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
		return &authnv1.TokenReview{Spec: spec, Status: status}, nil
	}
}

func TestAuthenticateAcceptsAServiceAccountTokenForTheAudience(t *testing.T) {
	ctx := testutil.Context(t, 0)
	client, seen := fakeAPI(t, reviewed(authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{kubernetes.DefaultAudience},
		User:          authnv1.UserInfo{Username: "system:serviceaccount:shop:web"},
	}))
	a, err := kubernetes.New(ctx, client)
	require.NoError(t, err)
	sa, err := a.Authenticate(ctx, []byte("jwt"))
	require.NoError(t, err)
	assert.Equal(t, identity.ServiceAccount{Namespace: "shop", Name: "web"}, sa)
	require.Len(t, *seen, 1)
	assert.Equal(t, "jwt", (*seen)[0].Token)
	assert.Equal(t, []string{"identity.l5d.io"}, (*seen)[0].Audiences, "the review must ask for our audience")
}

func TestAuthenticateUsesTheConfiguredAudience(t *testing.T) {
	ctx := testutil.Context(t, 0)
	client, seen := fakeAPI(t, reviewed(authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{"weft-identity"},
		User:          authnv1.UserInfo{Username: "system:serviceaccount:shop:web"},
	}))
	a, err := kubernetes.New(ctx, client, kubernetes.WithAudience("weft-identity"))
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, []byte("jwt"))
	require.NoError(t, err)
	assert.Equal(t, []string{"weft-identity"}, (*seen)[0].Audiences)
}

// TestAuthenticateFailsClosed covers BAD-INPUTS T19.
func TestAuthenticateFailsClosed(t *testing.T) {
	ok := authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{kubernetes.DefaultAudience},
		User:          authnv1.UserInfo{Username: "system:serviceaccount:shop:web"},
	}
	with := func(f func(*authnv1.TokenReviewStatus)) func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
		st := ok
		f(&st)
		return reviewed(st)
	}
	cases := []struct {
		name   string
		review func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error)
		want   error
	}{
		{"wrong audience (API server refuses)", with(func(s *authnv1.TokenReviewStatus) {
			s.Authenticated = false
			s.Error = "[invalid bearer token, token audiences [\"api\"] is invalid for the target audiences [\"identity.l5d.io\"]]"
			s.Audiences = nil
		}), identity.ErrUnauthenticated},
		{"audience missing from the answer", with(func(s *authnv1.TokenReviewStatus) { s.Audiences = nil }), identity.ErrUnauthenticated},
		{"another audience in the answer", with(func(s *authnv1.TokenReviewStatus) { s.Audiences = []string{"api"} }), identity.ErrUnauthenticated},
		{"expired token", with(func(s *authnv1.TokenReviewStatus) {
			s.Authenticated = false
			s.Error = "[invalid bearer token, square/go-jose/jwt: validation failed, token is expired (exp)]"
		}), identity.ErrUnauthenticated},
		{"token of a deleted pod", with(func(s *authnv1.TokenReviewStatus) {
			s.Authenticated = false
			s.Error = "pods \"web-1\" not found"
		}), identity.ErrUnauthenticated},
		{"authenticated=false without error", with(func(s *authnv1.TokenReviewStatus) { s.Authenticated = false }), identity.ErrUnauthenticated},
		{"error with authenticated=true", with(func(s *authnv1.TokenReviewStatus) { s.Error = "odd" }), identity.ErrUnauthenticated},
		{"a user, not a service account", with(func(s *authnv1.TokenReviewStatus) { s.User.Username = "alice" }), identity.ErrUnauthenticated},
		{"malformed service account username", with(func(s *authnv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:shop" }), identity.ErrUnauthenticated},
		{"service account with a colon", with(func(s *authnv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:shop:web:x" }), identity.ErrUnauthenticated},
		{"invalid namespace", with(func(s *authnv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:Shop:web" }), identity.ErrUnauthenticated},
		{"API returns 500", func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
			return nil, apierrors.NewInternalError(assert.AnError)
		}, identity.ErrUnavailable},
		{"API forbids the review", func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
			return nil, apierrors.NewForbidden(authnv1.Resource("tokenreviews"), "", assert.AnError)
		}, identity.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Context(t, 0)
			client, _ := fakeAPI(t, tc.review)
			a, err := kubernetes.New(ctx, client)
			require.NoError(t, err)
			sa, err := a.Authenticate(ctx, []byte("jwt"))
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			assert.Zero(t, sa)
		})
	}
}

func TestAuthenticateGivesUpWhenTheAPITimesOut(t *testing.T) {
	ctx := testutil.Context(t, 0)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	client, _ := fakeAPI(t, func(authnv1.TokenReviewSpec) (*authnv1.TokenReview, error) {
		<-release // an API server that never answers
		return nil, context.DeadlineExceeded
	})
	a, err := kubernetes.New(ctx, client, kubernetes.WithTimeout(100*time.Millisecond))
	require.NoError(t, err)
	start := time.Now()
	_, err = a.Authenticate(ctx, []byte("jwt"))
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrUnavailable)
	assert.Less(t, time.Since(start), 2*time.Second, "the deadline bounds the wait")
}

func TestAuthenticateRefusesEmptyAndHugeTokensWithoutCallingTheAPI(t *testing.T) {
	ctx := testutil.Context(t, 0)
	client, seen := fakeAPI(t, reviewed(authnv1.TokenReviewStatus{Authenticated: true}))
	a, err := kubernetes.New(ctx, client)
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, nil)
	assert.ErrorIs(t, err, identity.ErrUnauthenticated)
	_, err = a.Authenticate(ctx, make([]byte, identity.MaxTokenSize+1))
	assert.ErrorIs(t, err, identity.ErrUnauthenticated)
	assert.Empty(t, *seen)
}

func TestNewRefusesBadSettings(t *testing.T) {
	ctx := testutil.Context(t, 0)
	_, err := kubernetes.New(ctx, fake.NewClientset(), kubernetes.WithAudience(""))
	assert.Error(t, err)
	_, err = kubernetes.New(ctx, fake.NewClientset(), kubernetes.WithTimeout(0))
	assert.Error(t, err)
	_, err = kubernetes.New(ctx, nil)
	assert.Error(t, err)
}

// issuedToken is what fakeTokenAPI knows of a token it issued.
type issuedToken struct {
	username  string
	audiences []string
	expired   bool
}

// fakeTokenAPI answers TokenReviews as kube-apiserver does for the tokens
// it issued: an unknown token, an expired one, or one whose audiences do
// not meet the review's are unauthenticated with an error; a good one is
// authenticated for the audiences both share.
func fakeTokenAPI(t *testing.T, issued map[string]issuedToken) (*fake.Clientset, *atomic.Int32) {
	t.Helper()
	client := fake.NewClientset()
	var calls atomic.Int32
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		spec := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).Spec
		out := &authnv1.TokenReview{Spec: spec}
		tok, ok := issued[spec.Token]
		var shared []string
		for _, a := range spec.Audiences {
			if slices.Contains(tok.audiences, a) {
				shared = append(shared, a)
			}
		}
		switch {
		case !ok:
			out.Status.Error = "[invalid bearer token, square/go-jose: error in cryptographic primitive]"
		case tok.expired:
			out.Status.Error = "[invalid bearer token, service account token has expired]"
		case len(shared) == 0:
			out.Status.Error = fmt.Sprintf("[invalid bearer token, token audiences %q is invalid for the target audiences %q]", tok.audiences, spec.Audiences)
		default:
			out.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: shared, User: authnv1.UserInfo{Username: tok.username}}
		}
		return true, out, nil
	})
	return client, &calls
}

func TestAuthenticatorPassesTheSharedAuthenticatorTable(t *testing.T) {
	ctx := testutil.Context(t, 0)
	aud := []string{kubernetes.DefaultAudience}
	client, calls := fakeTokenAPI(t, map[string]issuedToken{
		"jwt-web":       {username: "system:serviceaccount:shop:web", audiences: aud},
		"jwt-db":        {username: "system:serviceaccount:shop:db", audiences: aud},
		"jwt-web-vault": {username: "system:serviceaccount:shop:web", audiences: []string{"vault.example.com"}},
		"jwt-web-old":   {username: "system:serviceaccount:shop:web", audiences: aud, expired: true},
	})
	a, err := kubernetes.New(ctx, client)
	require.NoError(t, err)
	identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
		Authn: a,
		Valid: []byte("jwt-web"), SA: identity.ServiceAccount{Namespace: "shop", Name: "web"},
		Other: []byte("jwt-db"), OtherSA: identity.ServiceAccount{Namespace: "shop", Name: "db"},
		WrongAudience: []byte("jwt-web-vault"),
		Expired:       []byte("jwt-web-old"),
		Calls:         func() int { return int(calls.Load()) },
	})
}
