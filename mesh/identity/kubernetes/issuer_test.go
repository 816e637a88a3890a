package local_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity/local"
)

func issuerSecret(ca *testutil.CA, kube bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "weft", Name: "weft-identity-issuer"}}
	if kube {
		s.Type = corev1.SecretTypeTLS
		s.Data = map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": ca.KeyPEM, "ca.crt": ca.CertPEM}
	} else {
		s.Type = "linkerd.io/tls"
		s.Data = map[string][]byte{"crt.pem": ca.CertPEM, "key.pem": ca.KeyPEM}
	}
	return s
}

func TestNewFromSecretLoadsAndFollowsTheSecret(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	first := anchor.Issuer(t, testutil.CertOptions{Name: "first"})
	second := anchor.Issuer(t, testutil.CertOptions{Name: "second"})
	client := fake.NewClientset(issuerSecret(first, false))

	is, err := local.NewFromSecret(ctx, client, "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })
	assert.True(t, is.Certificate().Equal(first.Cert))
	issueWith(t, is, "shop", "web")

	_, err = client.CoreV1().Secrets("weft").Update(ctx, issuerSecret(second, true), metav1.UpdateOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool { return is.Certificate().Equal(second.Cert) }, "the updated secret was not picked up")
	out := issueWith(t, is, "shop", "web")
	assert.Equal(t, second.Cert.SubjectKeyId, out.Leaf.AuthorityKeyId)
}

func TestNewFromSecretRefusesMissingOrBadSecrets(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "stranger"})

	_, err := local.NewFromSecret(testutil.Context(t, 0), fake.NewClientset(), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not found")

	_, err = local.NewFromSecret(testutil.Context(t, 0), fake.NewClientset(issuerSecret(stranger, true)), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not chain")

	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "weft", Name: "weft-identity-issuer"}, Data: map[string][]byte{"ca.crt": nil}}
	_, err = local.NewFromSecret(testutil.Context(t, 0), fake.NewClientset(empty), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "neither")
}
