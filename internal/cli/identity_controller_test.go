package cli_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

// identityStartController runs `weft-controller identity` until the test
// ends and returns a connection to it.
func identityStartController(t *testing.T, args ...string) (*grpc.ClientConn, *testutil.SyncBuffer) {
	t.Helper()
	addr, logs := startController(t, cli.IdentityControllerCommand(), "identity service", append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn, logs
}

func identityOpenSSL(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("openssl", args...).CombinedOutput()
	require.NoError(t, err, "openssl %v: %s", args, out)
	return string(out)
}

func identityWritePEMChain(t *testing.T, path string, ders ...[]byte) {
	t.Helper()
	var buf bytes.Buffer
	for _, d := range ders {
		require.NoError(t, pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: d}))
	}
	testutil.WriteFile(t, path, buf.Bytes())
}

const identityWebName = "web.shop.serviceaccount.identity.weft.cluster.local"

// identityOpenSSLCSR makes a P-256 key and a DER CSR whose only DNS SAN is
// name, with openssl.
func identityOpenSSLCSR(t *testing.T, dir, name string) []byte {
	t.Helper()
	key, csr := filepath.Join(dir, "key.pem"), filepath.Join(dir, "csr.der")
	identityOpenSSL(t, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
	identityOpenSSL(t, "req", "-new", "-key", key, "-subj", "/CN="+name, "-addext", "subjectAltName=DNS:"+name, "-outform", "DER", "-out", csr)
	der, err := os.ReadFile(csr)
	require.NoError(t, err)
	return der
}

// TestIdentityControllerCertifiesAnOpenSSLCSR is the acceptance test of
// issue 3: an openssl CSR and a static token get a certificate from
// `weft-controller identity` over gRPC, and openssl verifies it against
// the trust anchor.
func TestIdentityControllerCertifiesAnOpenSSLCSR(t *testing.T) {
	ctx := testutil.Context(t, 0)
	anchorDir, issuerDir := identityMakePKI(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens:\n- token: \"web-token-0123456789\"\n  namespace: shop\n  serviceAccount: web\n"))

	conn, _ := identityStartController(t,
		"--trust-anchors", filepath.Join(anchorDir, "ca.crt"),
		"--issuer-dir", issuerDir,
		"--token-backend", "static", "--static-tokens", tokens)

	csr := identityOpenSSLCSR(t, dir, identityWebName)
	resp, err := pb.NewIdentityClient(conn).Certify(ctx, &pb.CertifyRequest{
		Identity: identityWebName, Token: []byte("web-token-0123456789"), CertificateSigningRequest: csr,
	})
	require.NoError(t, err)

	leafPath, interPath := filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "intermediates.pem")
	identityWritePEMChain(t, leafPath, resp.GetLeafCertificate())
	identityWritePEMChain(t, interPath, resp.GetIntermediateCertificates()...)
	out := identityOpenSSL(t, "verify", "-CAfile", filepath.Join(anchorDir, "ca.crt"), "-untrusted", interPath, leafPath)
	assert.Contains(t, out, leafPath+": OK")
	text := identityOpenSSL(t, "x509", "-in", leafPath, "-noout", "-text")
	assert.Contains(t, text, "DNS:"+identityWebName)
	assert.Contains(t, text, "CA:FALSE")
	assert.Contains(t, text, "TLS Web Server Authentication, TLS Web Client Authentication")

	// A token for another workload is refused.
	_, err = pb.NewIdentityClient(conn).Certify(ctx, &pb.CertifyRequest{
		Identity: identityWebName, Token: []byte("not-a-known-token-000"), CertificateSigningRequest: csr,
	})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))

	// Health and reflection are registered.
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "io.linkerd.proxy.identity.Identity"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, hc.GetStatus())
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	rr, err := stream.Recv()
	require.NoError(t, err)
	var services []string
	for _, s := range rr.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	assert.Contains(t, services, "io.linkerd.proxy.identity.Identity")
	require.NoError(t, stream.CloseSend())
}

// TestIdentityControllerRotatesItsIssuerWithoutRestart replaces the issuer
// files while the controller runs; new certificates chain to the new
// issuer, and a bundle of old and new anchors verifies both.
func TestIdentityControllerRotatesItsIssuerWithoutRestart(t *testing.T) {
	ctx := testutil.Context(t, 20*time.Second)
	oldAnchor, issuerDir := identityMakePKI(t)
	newAnchor, newIssuer := identityMakePKI(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle.pem")
	oldPEM, err := os.ReadFile(filepath.Join(oldAnchor, "ca.crt"))
	require.NoError(t, err)
	newPEM, err := os.ReadFile(filepath.Join(newAnchor, "ca.crt"))
	require.NoError(t, err)
	testutil.WriteFile(t, bundle, append(append([]byte{}, oldPEM...), newPEM...))
	tokens := filepath.Join(dir, "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens:\n- token: \"web-token-0123456789\"\n  namespace: shop\n  serviceAccount: web\n"))

	conn, logs := identityStartController(t, "--trust-anchors", bundle, "--issuer-dir", issuerDir,
		"--token-backend", "static", "--static-tokens", tokens)
	client := pb.NewIdentityClient(conn)
	csr := identityOpenSSLCSR(t, dir, identityWebName)
	certify := func() *pb.CertifyResponse {
		resp, err := client.Certify(ctx, &pb.CertifyRequest{Identity: identityWebName, Token: []byte("web-token-0123456789"), CertificateSigningRequest: csr})
		require.NoError(t, err)
		return resp
	}
	issuerOf := func(r *pb.CertifyResponse) string {
		c, err := x509.ParseCertificate(r.GetIntermediateCertificates()[0])
		require.NoError(t, err)
		return string(c.Raw)
	}
	before := certify()
	oldIssuerRaw := issuerOf(before)

	for _, f := range []string{"crt.pem", "key.pem"} {
		data, err := os.ReadFile(filepath.Join(newIssuer, f))
		require.NoError(t, err)
		testutil.WriteFile(t, filepath.Join(issuerDir, f), data)
	}
	var after *pb.CertifyResponse
	// The new issuer signs before its log line is written: wait for both.
	testutil.Eventually(t, 0, func() bool {
		after = certify()
		return issuerOf(after) != oldIssuerRaw && strings.Contains(logs.String(), "issuer reloaded")
	}, "certificates still come from the old issuer, or the reload was not logged")

	for i, r := range []*pb.CertifyResponse{before, after} {
		leaf, inter := filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "inter.pem")
		identityWritePEMChain(t, leaf, r.GetLeafCertificate())
		identityWritePEMChain(t, inter, r.GetIntermediateCertificates()...)
		out := identityOpenSSL(t, "verify", "-CAfile", bundle, "-untrusted", inter, leaf)
		assert.Contains(t, out, ": OK", "certificate %d", i)
	}
}

func TestIdentityControllerRejectsBadFlags(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	anchors := filepath.Join(anchorDir, "ca.crt")
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	testutil.WriteFile(t, tokens, []byte("tokens: []\n"))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--issuer-dir", issuerDir}, cli.ExitUsage, "--trust-anchors is required"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--token-backend", "static"}, cli.ExitUsage, "--static-tokens"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--token-backend", "ldap"}, cli.ExitUsage, "ldap"},
		{[]string{"--trust-anchors", anchors, "--token-backend", "static", "--static-tokens", "x"}, cli.ExitUsage, "--issuer-dir"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--issuer", "vault"}, cli.ExitUsage, "vault"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--tls-cert", "c"}, cli.ExitUsage, "--tls-key"},
		{[]string{"--trust-anchors", anchors, "--issuer", "smallstep", "--step-ca-url", "https://127.0.0.1:1"}, cli.ExitUsage, "--step-ca-root"},
		{[]string{"--trust-anchors", anchors, "--issuer", "smallstep", "--step-ca-url", "https://127.0.0.1:1", "--step-ca-root", anchors, "--step-provisioner", "p"}, cli.ExitUsage, "either --step-provisioner-key"},
		{[]string{"--trust-anchors", anchors, "--issuer", "smallstep", "--step-ca-url", "https://127.0.0.1:1", "--step-ca-root", anchors, "--step-provisioner", "p", "--step-provisioner-key", "k", "--step-x5c-cert", "c", "--step-x5c-key", "k"}, cli.ExitUsage, "either --step-provisioner-key"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--issuer-secret", "weft/issuer"}, cli.ExitUsage, "exactly one"},
		{[]string{"--trust-anchors", anchors, "--issuer-secret", "issuer"}, cli.ExitUsage, "NAMESPACE/NAME"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--log-level", "loud"}, cli.ExitUsage, "log-level"},
		{[]string{"--trust-anchors", filepath.Join(anchorDir, "missing.crt"), "--issuer-dir", issuerDir, "--token-backend", "static", "--static-tokens", "x"}, cli.ExitFailure, "missing.crt"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", anchorDir, "--token-backend", "static", "--static-tokens", "x"}, cli.ExitFailure, "neither crt.pem"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--token-backend", "static", "--static-tokens", filepath.Join(anchorDir, "none.yaml")}, cli.ExitFailure, "none.yaml"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--token-backend", "static", "--static-tokens", anchors}, cli.ExitFailure, "static: token file"},
		{[]string{"--trust-anchors", anchors, "--issuer-dir", issuerDir, "--token-backend", "static", "--static-tokens", tokens, "--trust-domain", "Bad_Domain"}, cli.ExitFailure, "trust domain"},
	}
	for _, tc := range cases {
		st, _, errs := runCommand(t, cli.IdentityControllerCommand(), "", tc.args...)
		assert.Equal(t, tc.code, st, "%v: %s", tc.args, errs)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}
