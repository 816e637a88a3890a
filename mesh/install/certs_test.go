package install_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

func TestRenderRefusesBadInputsNamingWhatIsWrongAndRendersNothing(t *testing.T) {
	f := newFixture(t, "weft")
	other := newFixture(t, "weft")
	expiredIssuer := f.anchor.Issuer(t, testutil.CertOptions{Name: "old issuer", NotBefore: time.Now().Add(-48 * time.Hour), Lifetime: 24 * time.Hour})
	notCA := f.anchor.Leaf(t, testutil.CertOptions{Name: "leaf"})
	wrongName := f.hookCA.Leaf(t, testutil.CertOptions{Name: "weft-proxy-injector.elsewhere.svc"})

	cases := []struct {
		name   string
		values func(*inject.Values)
		certs  func(*install.Certificates)
		opts   []install.Option
		want   string
	}{
		{name: "invalid values", values: func(v *inject.Values) { v.Proxy.UID = 0 }, want: "proxy.uid"},
		{name: "anchors in values differ", values: func(v *inject.Values) { v.IdentityTrustAnchorsPEM = string(other.anchor.CertPEM) }, want: "identityTrustAnchorsPEM differs"},
		{name: "no anchors", certs: func(c *install.Certificates) { c.Identity.TrustAnchorsPEM = nil }, want: "trust anchors: certpem: no PEM certificate found"},
		{name: "anchors not PEM certificates", certs: func(c *install.Certificates) { c.Identity.TrustAnchorsPEM = f.issuer.KeyPEM }, want: "trust anchors: certpem: PEM block 1 is \"EC PRIVATE KEY\""},
		{name: "anchor is not a CA", certs: func(c *install.Certificates) { c.Identity.TrustAnchorsPEM = notCA.CertPEM }, want: "is not a CA"},
		{name: "issuer from another anchor", certs: func(c *install.Certificates) {
			c.Identity.IssuerCertPEM, c.Identity.IssuerKeyPEM = other.issuer.CertPEM, other.issuer.KeyPEM
		}, want: "does not chain to the trust anchors"},
		{name: "issuer key of another certificate", certs: func(c *install.Certificates) { c.Identity.IssuerKeyPEM = other.issuer.KeyPEM }, want: "identity issuer"},
		{name: "issuer expired", certs: func(c *install.Certificates) {
			c.Identity.IssuerCertPEM, c.Identity.IssuerKeyPEM = expiredIssuer.CertPEM, expiredIssuer.KeyPEM
		}, want: "expired at"},
		{name: "issuer not a CA", certs: func(c *install.Certificates) {
			c.Identity.IssuerCertPEM, c.Identity.IssuerKeyPEM = notCA.CertPEM, notCA.KeyPEM
		}, want: "is not a CA"},
		{name: "issuer missing", certs: func(c *install.Certificates) { c.Identity.IssuerCertPEM = nil }, want: "identity issuer"},
		{name: "webhook cert for another namespace", certs: func(c *install.Certificates) {
			c.Webhook.CertPEM, c.Webhook.KeyPEM = wrongName.CertPEM, wrongName.KeyPEM
		}, want: "not valid for weft-proxy-injector.weft.svc"},
		{name: "webhook cert from another CA", certs: func(c *install.Certificates) { c.Webhook.CAPEM = other.hookCA.CertPEM }, want: "webhook serving certificate is not valid"},
		{name: "webhook key mismatch", certs: func(c *install.Certificates) { c.Webhook.KeyPEM = wrongName.KeyPEM }, want: "webhook serving certificate"},
		{name: "webhook CA missing", certs: func(c *install.Certificates) { c.Webhook.CAPEM = nil }, want: "webhook CA"},
		{name: "issuer scheme", opts: []install.Option{install.WithIssuerScheme("linkerd.io/pem")}, want: `issuer scheme "linkerd.io/pem"`},
		{name: "controller image", opts: []install.Option{install.WithControllerImage("bad image")}, want: `controller image "bad image"`},
		{name: "issuance lifetime", opts: []install.Option{install.WithIssuanceLifetime(time.Second)}, want: "issuance lifetime 1s"},
		{name: "clock after everything expired", opts: []install.Option{install.WithClock(func() time.Time { return time.Now().Add(3 * 365 * 24 * time.Hour) })}, want: "expired at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := inject.DefaultValues()
			if tc.values != nil {
				tc.values(&v)
			}
			c := f.certs
			if tc.certs != nil {
				tc.certs(&c)
			}
			m, err := install.Render(v, c, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Contains(t, err.Error(), tc.want)
			assert.Regexp(t, `^(install|inject): `, err.Error())
		})
	}
}

func TestRenderReportsEveryProblemAtOnce(t *testing.T) {
	f := newFixture(t, "weft")
	v := inject.DefaultValues()
	v.Proxy.UID = 0
	c := f.certs
	c.Webhook.CAPEM = nil
	_, err := install.Render(v, c, install.WithIssuerScheme("x"))
	require.Error(t, err)
	for _, want := range []string{"proxy.uid", "webhook CA", `issuer scheme "x"`} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestRenderWarnsAboutCertificatesCloseToExpiry(t *testing.T) {
	f := newFixture(t, "weft")
	soon := f.anchor.Issuer(t, testutil.CertOptions{Name: "short issuer", Lifetime: 10 * 24 * time.Hour})
	c := f.certs
	c.Identity.IssuerCertPEM, c.Identity.IssuerKeyPEM = soon.CertPEM, soon.KeyPEM
	m := render(t, inject.DefaultValues(), c)
	require.Len(t, m.Warnings, 1)
	assert.Contains(t, m.Warnings[0], "identity issuer CN=short issuer expires in")
	assert.Empty(t, render(t, inject.DefaultValues(), f.certs).Warnings)
}

func TestGeneratedCertificatesAreAcceptedAndServeTLSToTheAPIServerName(t *testing.T) {
	now := time.Now()
	id, anchorKey, err := install.GenerateIdentity(now)
	require.NoError(t, err)
	require.NotEmpty(t, anchorKey)
	hook, err := install.GenerateWebhook("mesh-system", "corp.example", now)
	require.NoError(t, err)
	tap, err := install.GenerateTap("mesh-system", "corp.example", now)
	require.NoError(t, err)
	v := inject.DefaultValues()
	v.ControlPlaneNamespace = "mesh-system"
	m := render(t, v, install.Certificates{Identity: id, Webhook: hook, Tap: tap})
	assert.Empty(t, m.Warnings)

	// The issuer can issue: a leaf under it verifies against the anchors.
	anchors := x509.NewCertPool()
	require.True(t, anchors.AppendCertsFromPEM(id.TrustAnchorsPEM))
	issuerCert, err := tls.X509KeyPair(id.IssuerCertPEM, id.IssuerKeyPEM)
	require.NoError(t, err)
	require.NotNil(t, issuerCert.Leaf)
	assert.True(t, issuerCert.Leaf.IsCA)

	// The API server dials the Service with ServerName <svc>.<ns>.svc and
	// trusts the caBundle: do the same over a real loopback handshake.
	serving, err := tls.X509KeyPair(hook.CertPEM, hook.KeyPEM)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"weft-proxy-injector.mesh-system.svc", "weft-proxy-injector.mesh-system.svc.corp.example"}, serving.Leaf.DNSNames)
	l := testutil.Listen(t)
	done := make(chan error, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		srv := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12})
		_ = srv.SetDeadline(time.Now().Add(testutil.DefaultTimeout))
		done <- srv.Handshake()
	}()
	caPool := x509.NewCertPool()
	require.True(t, caPool.AppendCertsFromPEM(hook.CAPEM))
	dialer := &net.Dialer{Timeout: testutil.DefaultTimeout}
	conn, err := tls.DialWithDialer(dialer, "tcp", l.Addr().String(), &tls.Config{RootCAs: caPool, ServerName: install.InjectorServerName("mesh-system"), MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("handshake did not finish")
	}

	// Another namespace's name is refused by the same client check.
	_, err = serving.Leaf.Verify(x509.VerifyOptions{Roots: caPool, DNSName: install.InjectorServerName("weft")})
	assert.Error(t, err)
}

func TestLoadIdentityReadsBothIssuerLayoutsAndLoadWebhookItsDirectory(t *testing.T) {
	f := newFixture(t, "weft")
	dir := t.TempDir()
	anchors := filepath.Join(dir, "ca.crt")
	testutil.WriteFile(t, anchors, f.anchor.CertPEM)
	for _, kube := range []bool{false, true} {
		issuerDir := f.issuer.WriteIssuerDir(t, filepath.Join(dir, map[bool]string{false: "linkerd", true: "kube"}[kube]), kube)
		id, err := install.LoadIdentity(anchors, issuerDir)
		require.NoError(t, err)
		assert.Equal(t, f.certs.Identity, id)
	}

	_, err := install.LoadIdentity(anchors, t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds neither crt.pem and key.pem nor tls.crt and tls.key")

	half := t.TempDir()
	testutil.WriteFile(t, filepath.Join(half, "crt.pem"), f.issuer.CertPEM)
	_, err = install.LoadIdentity(anchors, half)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key.pem")

	_, err = install.LoadIdentity(filepath.Join(dir, "missing.crt"), half)
	assert.ErrorIs(t, err, os.ErrNotExist)

	hookDir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(hookDir, install.WebhookCAFile), f.certs.Webhook.CAPEM)
	testutil.WriteFile(t, filepath.Join(hookDir, install.WebhookCertFile), f.certs.Webhook.CertPEM)
	_, err = install.LoadWebhook(hookDir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tls.key")
	testutil.WriteFile(t, filepath.Join(hookDir, install.WebhookKeyFile), f.certs.Webhook.KeyPEM)
	w, err := install.LoadWebhook(hookDir)
	require.NoError(t, err)
	assert.Equal(t, f.certs.Webhook, w)
}
