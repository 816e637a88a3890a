package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/kubernetes"
	"github.com/weftmesh/weft/mesh/identity/localca"
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

func bundleOf(t testing.TB, cas ...*testutil.CA) *identity.Bundle {
	t.Helper()
	b, err := identity.ParseBundle(testutil.BundlePEM(cas...))
	require.NoError(t, err)
	return b
}

func issueWith(t testing.TB, is identity.Issuer, ns, sa string) *identity.Issued {
	t.Helper()
	name, err := identity.DefaultDomain().Name(ns, sa)
	require.NoError(t, err)
	csr, err := identity.ParseCSR(testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String()))
	require.NoError(t, err)
	now := time.Now()
	out, err := is.Issue(context.Background(), identity.IssueRequest{CSR: csr, Name: name, NotBefore: now.Add(-20 * time.Second), NotAfter: now.Add(time.Hour)})
	require.NoError(t, err)
	return out
}

// reloads reads weft_identity_issuer_reloads_total{result}.
func reloads(t testing.TB, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "weft_identity_issuer_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestSecretIssuerLoadsAndFollowsTheSecret(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	first := anchor.Issuer(t, testutil.CertOptions{Name: "first"})
	second := anchor.Issuer(t, testutil.CertOptions{Name: "second"})
	client := fake.NewClientset(issuerSecret(first, false))

	is, err := kubernetes.NewSecretIssuer(ctx, client, "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })
	assert.True(t, is.Certificate().Equal(first.Cert))
	issueWith(t, is, "shop", "web")

	_, err = client.CoreV1().Secrets("weft").Update(ctx, issuerSecret(second, true), metav1.UpdateOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool { return is.Certificate().Equal(second.Cert) }, "the updated secret was not picked up")
	out := issueWith(t, is, "shop", "web")
	assert.Equal(t, second.Cert.SubjectKeyId, out.Leaf.AuthorityKeyId)
	require.NoError(t, is.Close())
	require.NoError(t, is.Close(), "Close is idempotent")
}

func TestSecretIssuerKeepsThePreviousPairWhenTheSecretGoesBad(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	good := anchor.Issuer(t, testutil.CertOptions{Name: "good"})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "stranger"})
	client := fake.NewClientset(issuerSecret(good, true))
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)

	is, err := kubernetes.NewSecretIssuer(ctx, client, "weft", "weft-identity-issuer", bundleOf(t, anchor), localca.WithMetrics(m))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })

	// An issuer from another root, then a Secret without the key pair: each
	// update is one refused reload, and the good pair stays in use.
	_, err = client.CoreV1().Secrets("weft").Update(ctx, issuerSecret(stranger, true), metav1.UpdateOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool { return reloads(t, reg, "error") >= 1 }, "the untrusted issuer was not refused")
	assert.True(t, is.Certificate().Equal(good.Cert))

	empty := issuerSecret(good, true)
	empty.Data = map[string][]byte{"ca.crt": good.CertPEM}
	_, err = client.CoreV1().Secrets("weft").Update(ctx, empty, metav1.UpdateOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool { return reloads(t, reg, "error") >= 2 }, "the empty secret was not refused")
	assert.True(t, is.Certificate().Equal(good.Cert))
	assert.Zero(t, reloads(t, reg, "ok"))
	issueWith(t, is, "shop", "web")
}

func TestSecretIssuerRefusesMissingOrBadSecrets(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "stranger"})

	_, err := kubernetes.NewSecretIssuer(testutil.Context(t, 0), fake.NewClientset(), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not found")

	_, err = kubernetes.NewSecretIssuer(testutil.Context(t, 0), fake.NewClientset(issuerSecret(stranger, true)), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not chain")

	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "weft", Name: "weft-identity-issuer"}, Data: map[string][]byte{"ca.crt": nil}}
	_, err = kubernetes.NewSecretIssuer(testutil.Context(t, 0), fake.NewClientset(empty), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "neither")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = kubernetes.NewSecretIssuer(ctx, fake.NewClientset(issuerSecret(stranger, true)), "weft", "weft-identity-issuer", bundleOf(t, anchor))
	assert.ErrorIs(t, err, context.Canceled, "a start that ctx cut short says so")
}
