package static_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/identitytest"
	"github.com/weftmesh/weft/mesh/identity/static"
)

const file = `tokens:
- token: "web-token-0123456789"
  namespace: shop
  serviceAccount: web
- token: "db-token-0123456789ab"
  namespace: shop
  serviceAccount: db
`

func TestParseAuthenticatesListedTokensOnly(t *testing.T) {
	s, err := static.Parse([]byte(file))
	require.NoError(t, err)
	assert.Equal(t, 2, s.Len())

	sa, err := s.Authenticate(context.Background(), []byte("web-token-0123456789"))
	require.NoError(t, err)
	assert.Equal(t, identity.ServiceAccount{Namespace: "shop", Name: "web"}, sa)

	for _, bad := range []string{"", "web-token-012345678", "WEB-TOKEN-0123456789", "web-token-0123456789 "} {
		_, err := s.Authenticate(context.Background(), []byte(bad))
		assert.ErrorIs(t, err, identity.ErrUnauthenticated, "%q", bad)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	cases := map[string]struct{ data, want string }{
		"unknown field":     {"tokens:\n- token: \"0123456789abcdef0\"\n  namespace: shop\n  sa: web\n", "unknown field"},
		"short token":       {"tokens:\n- token: short\n  namespace: shop\n  serviceAccount: web\n", "tokens[0]"},
		"bad namespace":     {"tokens:\n- token: \"0123456789abcdef0\"\n  namespace: Shop\n  serviceAccount: web\n", "namespace \"Shop\""},
		"missing sa":        {"tokens:\n- token: \"0123456789abcdef0\"\n  namespace: shop\n", "service account"},
		"duplicate token":   {file + "- token: \"web-token-0123456789\"\n  namespace: bank\n  serviceAccount: web\n", "tokens[2] (bank/web): the same token"},
		"empty file":        {"  \n", "empty"},
		"not yaml":          {"tokens: [", "static: token file"},
		"tokens not a list": {"tokens: 3", "static: token file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := static.Parse([]byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTokensFollowTheFile(t *testing.T) {
	ctx := testutil.Context(t, 0)
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, path, []byte(file))
	logs := &testutil.SyncBuffer{}
	tokens, err := static.New(ctx, path, static.WithPollInterval(50*time.Millisecond), static.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tokens.Close() })

	_, err = tokens.Authenticate(ctx, []byte("web-token-0123456789"))
	require.NoError(t, err)

	// Revoke web, add api.
	testutil.WriteFile(t, path, []byte("tokens:\n- token: \"api-token-0123456789\"\n  namespace: shop\n  serviceAccount: api\n"))
	select {
	case <-tokens.Updated():
	case <-ctx.Done():
		t.Fatal("no reload after the token file changed")
	}
	testutil.Eventually(t, 0, func() bool {
		_, err := tokens.Authenticate(ctx, []byte("web-token-0123456789"))
		return err != nil
	}, "the removed token still authenticates")
	sa, err := tokens.Authenticate(ctx, []byte("api-token-0123456789"))
	require.NoError(t, err)
	assert.Equal(t, "api", sa.Name)

	// A broken file keeps the last good set: once the failed reload is
	// logged, the old token still works.
	testutil.WriteFile(t, path, []byte("tokens: ["))
	testutil.Eventually(t, 0, func() bool { return strings.Contains(logs.String(), "token file reload failed") }, "the broken file's reload to fail")
	_, err = tokens.Authenticate(ctx, []byte("api-token-0123456789"))
	assert.NoError(t, err)
	require.NoError(t, tokens.Close())
	require.NoError(t, tokens.Close())
}

func TestNewNamesTheFileOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, path, []byte("tokens: ["))
	_, err := static.New(testutil.Context(t, 0), path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
}

func TestParseRefusesATokenNoCallerCouldPresent(t *testing.T) {
	long := strings.Repeat("x", identity.MaxTokenSize+1)
	_, err := static.Parse([]byte("tokens:\n- token: \"" + long + "\"\n  namespace: shop\n  serviceAccount: web\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tokens[0] (shop/web): token of 16385 bytes exceeds 16384")
}

func TestSetPassesTheSharedAuthenticatorTable(t *testing.T) {
	s, err := static.Parse([]byte(file))
	require.NoError(t, err)
	identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
		Authn: s,
		Valid: []byte("web-token-0123456789"), SA: identity.ServiceAccount{Namespace: "shop", Name: "web"},
		Other: []byte("db-token-0123456789ab"), OtherSA: identity.ServiceAccount{Namespace: "shop", Name: "db"},
		NotApplicable: map[string]string{
			"WrongAudience": "a token file carries no audience",
			"Expired":       "a parsed Set is fixed; revocation is the followed file's (TestTokensPassTheSharedAuthenticatorTable)",
		},
	})
}

// TestTokensPassTheSharedAuthenticatorTable runs the table against the
// file-following Tokens, whose expired token is one revoked from the file.
func TestTokensPassTheSharedAuthenticatorTable(t *testing.T) {
	ctx := testutil.Context(t, 0)
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, path, []byte(file+"- token: \"old-token-0123456789\"\n  namespace: shop\n  serviceAccount: web\n"))
	tokens, err := static.New(ctx, path, static.WithPollInterval(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tokens.Close() })
	_, err = tokens.Authenticate(ctx, []byte("old-token-0123456789"))
	require.NoError(t, err, "the old token works before it is revoked")

	testutil.WriteFile(t, path, []byte(file))
	select {
	case <-tokens.Updated():
	case <-ctx.Done():
		t.Fatal("no reload after the old token was revoked")
	}
	identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
		Authn: tokens,
		Valid: []byte("web-token-0123456789"), SA: identity.ServiceAccount{Namespace: "shop", Name: "web"},
		Other: []byte("db-token-0123456789ab"), OtherSA: identity.ServiceAccount{Namespace: "shop", Name: "db"},
		Expired:       []byte("old-token-0123456789"),
		NotApplicable: map[string]string{"WrongAudience": "a token file carries no audience"},
	})
}
