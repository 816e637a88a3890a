package identitytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/identity"
)

// AuthenticatorFixture is one backend prepared for RunAuthenticator. Valid and Other are
// required; a case whose token is nil is one the backend has no notion of,
// and the reason is logged instead of running it.
type AuthenticatorFixture struct {
	// Authn is the checker under test.
	Authn identity.Authenticator
	// Valid proves SA.
	Valid []byte
	SA    identity.ServiceAccount
	// Other proves OtherSA, an account other than SA.
	Other   []byte
	OtherSA identity.ServiceAccount
	// WrongAudience is a token of SA issued for another audience.
	WrongAudience []byte
	// Expired is a token of SA that was good once and is no longer: past
	// its expiry, or revoked.
	Expired []byte
	// NotApplicable says, per nil token above, why the backend has no
	// such token ("no audiences in a token file").
	NotApplicable map[string]string
	// Calls, if set, counts how often the backend was consulted (a
	// lookup, an API call); the table checks that malformed tokens never
	// reach it.
	Calls func() int
}

// RunAuthenticator attacks f.Authn with the shared table of refusals.
func RunAuthenticator(t *testing.T, f AuthenticatorFixture) {
	t.Helper()
	require.NotNil(t, f.Authn, "identitytest: AuthenticatorFixture.Authn")
	require.NotEmpty(t, f.Valid, "identitytest: AuthenticatorFixture.Valid")
	require.NotEmpty(t, f.Other, "identitytest: AuthenticatorFixture.Other")
	require.NotEqual(t, f.SA, f.OtherSA, "identitytest: Other must prove another account")

	t.Run("a valid token proves its service account", func(t *testing.T) {
		sa, err := f.Authn.Authenticate(ctx(t), f.Valid)
		require.NoError(t, err)
		assert.Equal(t, f.SA, sa)
	})

	refused := []struct {
		name, key string
		token     []byte
	}{
		{"an empty token is refused", "", []byte{}},
		{"a nil token is refused", "", nil},
		{"a token over MaxTokenSize is refused", "", oversized(f.Valid)},
		{"a token nobody issued is refused", "", forged(f.Valid)},
		{"a token for another audience is refused", "WrongAudience", f.WrongAudience},
		{"an expired or revoked token is refused", "Expired", f.Expired},
	}
	for _, tc := range refused {
		if tc.key != "" && tc.token == nil {
			t.Logf("%s: not applicable: %s", tc.name, f.NotApplicable[tc.key])
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			sa, err := f.Authn.Authenticate(ctx(t), tc.token)
			require.Error(t, err)
			assert.ErrorIs(t, err, identity.ErrUnauthenticated)
			assert.False(t, errors.Is(err, identity.ErrUnavailable), "a refusal, not an outage: %v", err)
			assert.Zero(t, sa, "a refused token proves nobody")
		})
	}

	if f.Calls != nil {
		t.Run("malformed tokens never reach the backend", func(t *testing.T) {
			before := f.Calls()
			for _, tok := range [][]byte{nil, {}, make([]byte, identity.MaxTokenSize+1)} {
				_, err := f.Authn.Authenticate(ctx(t), tok)
				require.ErrorIs(t, err, identity.ErrUnauthenticated)
			}
			assert.Equal(t, before, f.Calls())
		})
	}

	t.Run("another service account's token does not prove this one", func(t *testing.T) {
		sa, err := f.Authn.Authenticate(ctx(t), f.Other)
		require.NoError(t, err)
		assert.Equal(t, f.OtherSA, sa)
		assert.NotEqual(t, f.SA, sa)

		// The service asked for SA's certificate with Other's token
		// refuses before the issuer is reached.
		iss := &refusingIssuer{t: t}
		svc, err := identity.NewService(ctx(t), f.Authn, iss, identity.WithRateLimit(identity.RateLimit{}))
		require.NoError(t, err)
		want, err := identity.DefaultDomain().Name(f.SA.Namespace, f.SA.Name)
		require.NoError(t, err)
		_, err = svc.Certify(ctx(t), identity.Request{Identity: want.String(), Token: f.Other, CSR: csr(t, want)})
		require.Error(t, err)
		assert.ErrorIs(t, err, identity.ErrIdentityMismatch)
		assert.Zero(t, iss.calls, "nothing was signed")
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// oversized repeats valid past identity.MaxTokenSize, so a backend that
// only looked at a prefix would still see the valid token.
func oversized(valid []byte) []byte {
	out := make([]byte, 0, identity.MaxTokenSize+len(valid)+1)
	for len(out) <= identity.MaxTokenSize {
		out = append(out, valid...)
	}
	return out
}

// forged flips one bit of the last byte of valid.
func forged(valid []byte) []byte {
	out := append([]byte(nil), valid...)
	out[len(out)-1] ^= 0x01
	return out
}

func csr(t *testing.T, name identity.Name) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name.String()}}, key)
	require.NoError(t, err)
	return der
}

// refusingIssuer fails the test if anything reaches it.
type refusingIssuer struct {
	t     *testing.T
	calls int
}

func (r *refusingIssuer) Issue(context.Context, identity.IssueRequest) (*identity.Issued, error) {
	r.calls++
	r.t.Error("identitytest: the issuer was reached")
	return nil, errors.New("identitytest: refusing issuer")
}
