package identity_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/identitytest"
)

func TestTokensPassTheSharedAuthenticatorTable(t *testing.T) {
	identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
		Authn: identity.Tokens{
			"web-token-0123456789": {Namespace: "shop", Name: "web"},
			"db-token-0123456789a": {Namespace: "shop", Name: "db"},
		},
		Valid: []byte("web-token-0123456789"), SA: identity.ServiceAccount{Namespace: "shop", Name: "web"},
		Other: []byte("db-token-0123456789a"), OtherSA: identity.ServiceAccount{Namespace: "shop", Name: "db"},
		NotApplicable: map[string]string{
			"WrongAudience": "in-memory tokens carry no audience",
			"Expired":       "in-memory tokens never expire; the map is fixed",
		},
	})
}

func TestCheckTokenIsTheOneShapeRule(t *testing.T) {
	require.NoError(t, identity.CheckToken([]byte("t")))
	require.NoError(t, identity.CheckToken(make([]byte, identity.MaxTokenSize)))
	for name, tok := range map[string][]byte{
		"nil":       nil,
		"empty":     {},
		"oversized": make([]byte, identity.MaxTokenSize+1),
	} {
		err := identity.CheckToken(tok)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, identity.ErrUnauthenticated, name)
		assert.Contains(t, err.Error(), "identity: ", name)
	}
}
