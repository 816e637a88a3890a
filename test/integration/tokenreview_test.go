//go:build kubeintegration

package integration_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/identitytest"
	identitykube "github.com/weftmesh/weft/mesh/identity/kubernetes"
)

func TestTokenReviewAuthenticatorAgainstRealServiceAccountTokens(t *testing.T) {
	c := cluster(t)
	ctx := timeout(t, time.Minute)
	ns := newNamespace(t, c, "identity", nil, nil)
	_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// token asks the TokenRequest API for a token of web, as the kubelet
	// does for the projected volume the injector adds.
	token := func(audience string) []byte {
		t.Helper()
		tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "web", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, tr.Status.Token)
		return []byte(tr.Status.Token)
	}

	authn, err := identitykube.New(ctx, c.kube)
	require.NoError(t, err)

	good := token(identitykube.DefaultAudience)
	other := token("vault.example.com")

	t.Run("a token for identity.l5d.io proves its service account", func(t *testing.T) {
		sa, err := authn.Authenticate(timeout(t, 15*time.Second), good)
		require.NoError(t, err)
		assert.Equal(t, identity.ServiceAccount{Namespace: ns, Name: "web"}, sa)
	})

	t.Run("a token of the same service account for another audience is refused", func(t *testing.T) {
		_, err := authn.Authenticate(timeout(t, 15*time.Second), other)
		require.Error(t, err)
		assert.ErrorIs(t, err, identity.ErrUnauthenticated)
		assert.False(t, errors.Is(err, identity.ErrUnavailable), "a refusal, not an outage: %v", err)
	})

	t.Run("a token for identity.l5d.io is refused by an authenticator expecting another audience", func(t *testing.T) {
		strict, err := identitykube.New(ctx, c.kube, identitykube.WithAudience("vault.example.com"))
		require.NoError(t, err)
		_, err = strict.Authenticate(timeout(t, 15*time.Second), good)
		assert.ErrorIs(t, err, identity.ErrUnauthenticated)
		sa, err := strict.Authenticate(timeout(t, 15*time.Second), other)
		require.NoError(t, err, "the other audience's token is fine for an authenticator expecting it")
		assert.Equal(t, "web", sa.Name)
	})

	t.Run("the shared authenticator table holds against real tokens", func(t *testing.T) {
		_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "db", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{identitykube.DefaultAudience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
			Authn: authn,
			Valid: good, SA: identity.ServiceAccount{Namespace: ns, Name: "web"},
			Other: []byte(tr.Status.Token), OtherSA: identity.ServiceAccount{Namespace: ns, Name: "db"},
			WrongAudience: other,
			NotApplicable: map[string]string{"Expired": "kube-apiserver issues tokens for at least 10 minutes; the fake API's table covers expiry (mesh/identity/kubernetes)"},
		})
	})

	t.Run("a forged token is refused", func(t *testing.T) {
		forged := append([]byte(nil), good...)
		forged[len(forged)-2] ^= 0x01 // break the signature
		_, err := authn.Authenticate(timeout(t, 15*time.Second), forged)
		assert.ErrorIs(t, err, identity.ErrUnauthenticated)
	})

	t.Run("the token of a deleted service account is refused", func(t *testing.T) {
		// A service account of its own, whose token was never reviewed:
		// kube-apiserver caches successful token reviews for 10s (not
		// configurable by flag), so a token reviewed before the deletion
		// keeps passing until its cache entry expires. That is the API
		// server's behaviour, noted in docs/testing-kube.md, not ours.
		_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "gone", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{identitykube.DefaultAudience}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		old := []byte(tr.Status.Token)
		require.NoError(t, c.kube.CoreV1().ServiceAccounts(ns).Delete(ctx, "gone", metav1.DeleteOptions{}))
		deleted := time.Now()

		// The API server looks service accounts up through an informer, so
		// the deletion may take a moment to reach it.
		testutil.Eventually(t, 10*time.Second, func() bool {
			_, err = authn.Authenticate(timeout(t, 15*time.Second), old)
			return err != nil
		}, "the deleted service account's token to be refused")
		assert.ErrorIs(t, err, identity.ErrUnauthenticated)
		t.Logf("the deleted service account's token was refused %s after the deletion", time.Since(deleted).Round(time.Millisecond))

		// A new service account with the same name is another account: the
		// old token, bound to the old UID, stays refused while the new
		// account's own token works.
		_, err = c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err = c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "gone", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{identitykube.DefaultAudience}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		var sa identity.ServiceAccount
		testutil.Eventually(t, 10*time.Second, func() bool {
			sa, err = authn.Authenticate(timeout(t, 15*time.Second), []byte(tr.Status.Token))
			return err == nil
		}, "the new account's own token to work")
		assert.Equal(t, identity.ServiceAccount{Namespace: ns, Name: "gone"}, sa)
		_, err = authn.Authenticate(timeout(t, 15*time.Second), old)
		assert.ErrorIs(t, err, identity.ErrUnauthenticated, "a token of the deleted account works for its namesake")
	})
}
