package kubeenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/weftmesh/weft/internal/testutil"
)

// files are the credentials Start writes for kube-apiserver.
type files struct {
	caPEM        []byte
	servingCert  string
	servingKey   string
	saKey        string
	tokenFile    string
	adminToken   string
	adminUser    string
	adminGroups  []string
	kubeconfig   string
	etcdDataDir  string
	etcdLog      string
	apiserverLog string
}

// AdminUser is the user name of the admin identity; it is in the group
// system:masters, which RBAC lets do everything.
const AdminUser = "weft-admin"

// makeFiles generates the serving CA and certificate, the service-account
// signing key and the admin token under dir, with internal/testutil's PKI.
func makeFiles(dir string) (files, error) {
	f := files{
		servingCert:  filepath.Join(dir, "pki", "apiserver.crt"),
		servingKey:   filepath.Join(dir, "pki", "apiserver.key"),
		saKey:        filepath.Join(dir, "pki", "service-account.key"),
		tokenFile:    filepath.Join(dir, "pki", "tokens.csv"),
		adminUser:    AdminUser,
		adminGroups:  []string{"system:masters"},
		kubeconfig:   filepath.Join(dir, "kubeconfig"),
		etcdDataDir:  filepath.Join(dir, "etcd"),
		etcdLog:      filepath.Join(dir, "etcd.log"),
		apiserverLog: filepath.Join(dir, "kube-apiserver.log"),
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return files{}, fmt.Errorf("kubeenv: admin token: %w", err)
	}
	f.adminToken = hex.EncodeToString(tok)

	err := withTB(func(t testing.TB) {
		ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "kubeenv serving CA"})
		leaf := ca.Leaf(t, testutil.CertOptions{
			Name:     "kube-apiserver",
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		})
		f.caPEM = ca.CertPEM
		testutil.WriteFile(t, f.servingCert, leaf.ChainPEM)
		testutil.WriteFile(t, f.servingKey, leaf.KeyPEM)
		// The API server signs tokens with the private key and verifies them
		// with the public half, which it reads from the same file.
		testutil.WriteFile(t, f.saKey, testutil.KeyPEM(t, testutil.GenerateKey(t, testutil.ECDSAP256)))
		// token,user,uid,"group1,group2"
		testutil.WriteFile(t, f.tokenFile, fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", f.adminToken, f.adminUser, f.adminUser))
	})
	if err != nil {
		return files{}, err
	}
	return f, nil
}

// withTB runs fn with a testing.TB whose Fatal and Error methods abort fn
// and turn into the returned error. internal/testutil reports failures
// through a testing.TB, and Start has none when it runs in TestMain.
func withTB(fn func(testing.TB)) (err error) {
	tb := &errTB{}
	defer func() {
		if r := recover(); r != nil {
			if r == tb {
				err = fmt.Errorf("kubeenv: %s", tb.msg)
				return
			}
			err = fmt.Errorf("kubeenv: test helper failed: %v", r)
		}
	}()
	fn(tb)
	return nil
}

// errTB is the testing.TB of withTB. Only the methods internal/testutil's
// PKI and file helpers call are implemented; the embedded nil interface
// makes any other call fail, which withTB reports as an error.
type errTB struct {
	testing.TB
	msg string
}

func (t *errTB) Helper() {}

func (t *errTB) Fatalf(format string, args ...any) {
	t.msg = fmt.Sprintf(format, args...)
	panic(t)
}

func (t *errTB) Fatal(args ...any) {
	t.msg = fmt.Sprint(args...)
	panic(t)
}

func (t *errTB) Errorf(format string, args ...any) { t.Fatalf(format, args...) }

func (t *errTB) Error(args ...any) { t.Fatal(args...) }
