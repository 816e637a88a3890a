package localca_test

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/localca"
)

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

func TestNewLoadsEitherDirectoryLayout(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity"})
	bundle := bundleOf(t, anchor)
	for _, kube := range []bool{false, true} {
		dir := issuer.WriteIssuerDir(t, t.TempDir(), kube)
		is, err := localca.New(testutil.Context(t, 0), dir, bundle)
		require.NoError(t, err, "kubernetes layout: %v", kube)
		out := issueWith(t, is, "shop", "web")
		_, err = bundle.Verify(out.Leaf, out.Intermediates, time.Now(), x509.ExtKeyUsageServerAuth)
		assert.NoError(t, err)
		assert.Equal(t, issuer.Cert.NotAfter, is.Expiry())
		require.NoError(t, is.Close())
		require.NoError(t, is.Close())
	}
}

func TestNewRefusesUnfitIssuers(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	bundle := bundleOf(t, anchor)
	good := anchor.Issuer(t, testutil.CertOptions{Name: "identity"})
	leaf := good.Leaf(t, testutil.CertOptions{Name: "leaf"})
	expired := anchor.Issuer(t, testutil.CertOptions{Name: "old", NotBefore: time.Now().Add(-48 * time.Hour), Lifetime: time.Hour})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "stranger"})

	write := func(t *testing.T, crt, key []byte) string {
		dir := t.TempDir()
		testutil.WriteFile(t, filepath.Join(dir, "crt.pem"), crt)
		testutil.WriteFile(t, filepath.Join(dir, "key.pem"), key)
		return dir
	}
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"not a CA", func(t *testing.T) string { return write(t, leaf.CertPEM, leaf.KeyPEM) }, "is not a CA"},
		{"expired", func(t *testing.T) string { return write(t, expired.CertPEM, expired.KeyPEM) }, "expired"},
		{"other trust anchor", func(t *testing.T) string { return write(t, stranger.CertPEM, stranger.KeyPEM) }, "does not chain to the trust anchors"},
		{"key of another issuer", func(t *testing.T) string { return write(t, good.CertPEM, stranger.KeyPEM) }, "does not belong to the certificate"},
		{"garbage key", func(t *testing.T) string { return write(t, good.CertPEM, []byte("garbage")) }, "no PEM private key found"},
		{"garbage certificate", func(t *testing.T) string { return write(t, []byte("garbage"), good.KeyPEM) }, "no PEM certificate found"},
		{"empty directory", func(t *testing.T) string { return t.TempDir() }, "neither crt.pem and key.pem"},
		{"half a pair", func(t *testing.T) string {
			dir := t.TempDir()
			testutil.WriteFile(t, filepath.Join(dir, "tls.crt"), good.CertPEM)
			return dir
		}, "neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := localca.New(testutil.Context(t, 0), tc.dir(t), bundle)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "localca: ")
		})
	}
}

// TestReplacingIssuerFilesRotatesWithoutRestart is the issuer-rotation
// acceptance test: new leaves chain to the new issuer, and a bundle with
// the old and new roots verifies leaves from both.
func TestReplacingIssuerFilesRotatesWithoutRestart(t *testing.T) {
	ctx := testutil.Context(t, 0)
	oldRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "old-root"})
	newRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "new-root"})
	bundle := bundleOf(t, oldRoot, newRoot)
	oldIssuer := oldRoot.Issuer(t, testutil.CertOptions{Name: "old-issuer"})
	newIssuer := newRoot.Issuer(t, testutil.CertOptions{Name: "new-issuer"})

	dir := oldIssuer.WriteIssuerDir(t, t.TempDir(), true)
	logs := &testutil.SyncBuffer{}
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	is, err := localca.New(ctx, dir, bundle,
		localca.WithPollInterval(50*time.Millisecond),
		localca.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		localca.WithMetrics(m))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })

	before := issueWith(t, is, "shop", "web")
	assert.Equal(t, oldIssuer.Cert.SubjectKeyId, before.Leaf.AuthorityKeyId)

	newIssuer.WriteIssuerDir(t, dir, true)
	// The swap, its log line and its counter are three steps of one
	// reload; wait for all of them rather than assume their order.
	testutil.Eventually(t, 0, func() bool {
		return is.Certificate().Equal(newIssuer.Cert) && strings.Contains(logs.String(), "issuer reloaded") && counter(t, reg, "ok") >= 1
	}, "the new issuer was not picked up, logged and counted")

	after := issueWith(t, is, "shop", "web")
	assert.Equal(t, newIssuer.Cert.SubjectKeyId, after.Leaf.AuthorityKeyId)
	for _, out := range []*identity.Issued{before, after} {
		_, err := bundle.Verify(out.Leaf, out.Intermediates, time.Now(), x509.ExtKeyUsageClientAuth)
		assert.NoError(t, err, "leaf from %s", out.Intermediates[0].Subject)
	}
	assert.Contains(t, logs.String(), "issuer reloaded")
	assert.GreaterOrEqual(t, counter(t, reg, "ok"), 1.0)
	assert.Equal(t, float64(newIssuer.Cert.NotAfter.Unix()), gauge(t, reg))
}

func TestABadReplacementKeepsThePreviousIssuer(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity"})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "stranger"})
	dir := issuer.WriteIssuerDir(t, t.TempDir(), false)
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	logs := &testutil.SyncBuffer{}
	is, err := localca.New(ctx, dir, bundleOf(t, anchor), localca.WithPollInterval(50*time.Millisecond), localca.WithMetrics(m),
		localca.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })

	// An issuer from an untrusted root is refused at reload.
	stranger.WriteIssuerDir(t, dir, false)
	// The count comes before the log line: wait for both.
	testutil.Eventually(t, 0, func() bool {
		return counter(t, reg, "error") >= 1 && strings.Contains(logs.String(), "issuer reload failed")
	}, "the bad reload was not counted and logged")
	assert.True(t, is.Certificate().Equal(issuer.Cert))
	issueWith(t, is, "shop", "web") // still issuing

	// A half-written pair (the key gone) is another failed reload, counted
	// before it is judged: the count is the event to wait for.
	require.NoError(t, os.Remove(filepath.Join(dir, "key.pem")))
	testutil.Eventually(t, 0, func() bool { return counter(t, reg, "error") >= 2 }, "the reload without a key was not counted")
	assert.True(t, is.Certificate().Equal(issuer.Cert))
	assert.Zero(t, counter(t, reg, "ok"), "no reload succeeded")
}

func counter(t testing.TB, reg *prometheus.Registry, result string) float64 {
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

func gauge(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "weft_identity_issuer_expiry_timestamp_seconds" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no expiry gauge")
	return 0
}

func TestTheClockDecidesWhetherTheIssuerIsValid(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root", Lifetime: 30 * 24 * time.Hour})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity", Lifetime: 48 * time.Hour})
	dir := issuer.WriteIssuerDir(t, t.TempDir(), false)
	later := func() time.Time { return time.Now().Add(72 * time.Hour) }
	_, err := localca.New(testutil.Context(t, 0), dir, bundleOf(t, anchor), localca.WithClock(later))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expired", "seen from three days on, the two-day issuer has expired")
}

func TestWithSchemeChoosesTheLayoutWhenADirectoryHoldsBoth(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	linkerd := anchor.Issuer(t, testutil.CertOptions{Name: "linkerd-layout"})
	kube := anchor.Issuer(t, testutil.CertOptions{Name: "kubernetes-layout"})
	dir := t.TempDir()
	linkerd.WriteIssuerDir(t, dir, false)
	kube.WriteIssuerDir(t, dir, true)
	bundle := bundleOf(t, anchor)

	is, err := localca.New(testutil.Context(t, 0), dir, bundle)
	require.NoError(t, err)
	assert.Equal(t, "linkerd-layout", is.Certificate().Subject.CommonName, "linkerd.io/tls wins when both are there")
	require.NoError(t, is.Close())

	is, err = localca.New(testutil.Context(t, 0), dir, bundle, localca.WithScheme(localca.SchemeKubernetes))
	require.NoError(t, err)
	assert.Equal(t, "kubernetes-layout", is.Certificate().Subject.CommonName)
	require.NoError(t, is.Close())

	_, err = localca.New(testutil.Context(t, 0), dir, bundle, localca.WithScheme("example.com/tls"))
	assert.ErrorContains(t, err, `unknown issuer scheme "example.com/tls"`)
}

// An embedder may wire only some instruments: the others record nothing
// (before the shared defaults, localca filled the two it uses by hand).
func TestWithMetricsTakesAPartialSet(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity"})
	dir := issuer.WriteIssuerDir(t, t.TempDir(), false)
	reg := prometheus.NewRegistry()
	all, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	is, err := localca.New(ctx, dir, bundleOf(t, anchor), localca.WithMetrics(identity.Metrics{IssuerExpiry: all.IssuerExpiry}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = is.Close() })

	assert.Equal(t, float64(issuer.Cert.NotAfter.Unix()), gauge(t, reg))

	next := anchor.Issuer(t, testutil.CertOptions{Name: "identity-2"})
	next.WriteIssuerDir(t, dir, false)
	require.NoError(t, is.Reload(), "a reload counts on the discarding counter")
	assert.True(t, is.Certificate().Equal(next.Cert))
	assert.Zero(t, counter(t, reg, "ok"), "the reload counter was not wired")
}
