package cli_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity/smallstep/smallsteptest"
)

// TestIdentityControllerIssuesThroughStepCA wires `weft-controller
// identity --issuer smallstep` to a real step-ca on loopback, once with the
// JWK provisioner and once with the X5C one.
func TestIdentityControllerIssuesThroughStepCA(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	a, err := smallsteptest.Start(ctx, smallsteptest.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })

	dir := t.TempDir()
	root := filepath.Join(dir, "root_ca.crt")
	testutil.WriteFile(t, root, a.RootPEM)
	jwk, err := json.Marshal(a.Key)
	require.NoError(t, err)
	jwkFile := filepath.Join(dir, "provisioner.json")
	testutil.WriteFile(t, jwkFile, jwk)
	x5cCert, x5cKey := filepath.Join(dir, "x5c.crt"), filepath.Join(dir, "x5c.key")
	testutil.WriteFile(t, x5cCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.X5CChain[0].Raw}))
	testutil.WriteFile(t, x5cKey, testutil.KeyPEM(t, a.X5CKey))
	tokens := filepath.Join(dir, "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens:\n- token: \"web-token-0123456789\"\n  namespace: shop\n  serviceAccount: web\n"))
	csr := identityOpenSSLCSR(t, dir, identityWebName)

	for label, creds := range map[string][]string{
		"JWK": {"--step-provisioner", a.Provisioner, "--step-provisioner-key", jwkFile},
		"X5C": {"--step-provisioner", a.X5CProvisioner, "--step-x5c-cert", x5cCert, "--step-x5c-key", x5cKey},
	} {
		t.Run(label, func(t *testing.T) {
			args := append([]string{"--trust-anchors", root, "--issuer", "smallstep",
				"--step-ca-url", a.URL, "--step-ca-root", root,
				"--token-backend", "static", "--static-tokens", tokens}, creds...)
			conn, _ := identityStartController(t, args...)
			resp, err := pb.NewIdentityClient(conn).Certify(ctx, &pb.CertifyRequest{
				Identity: identityWebName, Token: []byte("web-token-0123456789"), CertificateSigningRequest: csr,
			})
			require.NoError(t, err)
			inter, err := x509.ParseCertificate(resp.GetIntermediateCertificates()[0])
			require.NoError(t, err)
			assert.True(t, inter.Equal(a.Intermediate))

			leafPath, interPath := filepath.Join(dir, label+"-leaf.pem"), filepath.Join(dir, label+"-inter.pem")
			identityWritePEMChain(t, leafPath, resp.GetLeafCertificate())
			identityWritePEMChain(t, interPath, resp.GetIntermediateCertificates()...)
			out := identityOpenSSL(t, "verify", "-CAfile", root, "-untrusted", interPath, leafPath)
			assert.Contains(t, out, leafPath+": OK")
		})
	}
}
