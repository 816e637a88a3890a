package identity_test

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

func TestBundleWithOldAndNewRootsVerifiesChainsToEither(t *testing.T) {
	oldRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "old-root"})
	newRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "new-root"})
	b, err := identity.ParseBundle(testutil.BundlePEM(oldRoot, newRoot))
	require.NoError(t, err)
	assert.Len(t, b.Roots(), 2)

	for _, root := range []*testutil.CA{oldRoot, newRoot} {
		issuer := root.Issuer(t, testutil.CertOptions{Name: "issuer"})
		leaf := issuer.Leaf(t, testutil.CertOptions{Name: "web.shop.serviceaccount.identity.weft.cluster.local"})
		_, err := b.Verify(leaf.Cert, []*x509.Certificate{issuer.Cert}, time.Now(), x509.ExtKeyUsageServerAuth)
		assert.NoError(t, err, "chain to %s", root.Cert.Subject)
	}

	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "stranger"})
	leaf := stranger.Leaf(t, testutil.CertOptions{Name: "x"})
	_, err = b.Verify(leaf.Cert, nil, time.Now())
	assert.Error(t, err)
}

func TestParseBundleRefusesBadFiles(t *testing.T) {
	root := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	leaf := root.Leaf(t, testutil.CertOptions{Name: "leaf"})
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":          {nil, "no PEM certificate found"},
		"garbage":        {[]byte("garbage"), "no PEM certificate found"},
		"a private key":  {root.KeyPEM, "want CERTIFICATE"},
		"a leaf":         {leaf.CertPEM, "is not a CA"},
		"trailing bytes": {append(bytes.Clone(root.CertPEM), []byte("oops")...), "not PEM"},
		"bad DER":        {[]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), "PEM block 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := identity.ParseBundle(tc.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "identity: trust bundle")
		})
	}
}

func TestBundleFileReloadsWhenTheFileChanges(t *testing.T) {
	ctx := testutil.Context(t, 0)
	oldRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "old-root"})
	newRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "new-root"})
	path := filepath.Join(t.TempDir(), "ca-bundle.crt")
	testutil.WriteFile(t, path, testutil.BundlePEM(oldRoot))

	logs := &testutil.SyncBuffer{}
	f, err := identity.NewBundleFile(ctx, path, identity.WithPollInterval(50*time.Millisecond), identity.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	require.True(t, f.Bundle().Contains(oldRoot.Cert))
	require.False(t, f.Bundle().Contains(newRoot.Cert))

	testutil.WriteFile(t, path, testutil.BundlePEM(oldRoot, newRoot))
	select {
	case <-f.Updated():
	case <-ctx.Done():
		t.Fatal("no update after the bundle file changed")
	}
	assert.True(t, f.Bundle().Contains(oldRoot.Cert))
	assert.True(t, f.Bundle().Contains(newRoot.Cert))

	// A broken write keeps the last good bundle: once the failed reload is
	// logged, the bundle is still the good one.
	testutil.WriteFile(t, path, []byte("not a bundle"))
	testutil.Eventually(t, 0, func() bool { return strings.Contains(logs.String(), "trust bundle reload failed") }, "the broken bundle's reload to fail")
	assert.True(t, f.Bundle().Contains(newRoot.Cert))

	require.NoError(t, f.Close())
	require.NoError(t, f.Close(), "Close is idempotent")
}

func TestNewBundleFileNamesTheFileOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.pem")
	require.NoError(t, os.WriteFile(path, []byte("junk"), 0o600))
	_, err := identity.NewBundleFile(testutil.Context(t, 0), path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)

	_, err = identity.NewBundleFile(testutil.Context(t, 0), filepath.Join(t.TempDir(), "missing.pem"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.pem")
}
