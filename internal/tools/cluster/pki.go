package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certLifetime is long enough for any cluster someone leaves running.
const certLifetime = 365 * 24 * time.Hour

type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func keyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newAuthority(cn string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		IsCA:     true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// leaf is a certificate and key in PEM.
type leaf struct{ cert, key []byte }

// issue signs a leaf: a client certificate for cn in groups, and a server
// certificate too when it has names.
func (a *authority) issue(cn string, groups []string, dns []string, ips []net.IP) (leaf, error) {
	key, err := newKey()
	if err != nil {
		return leaf{}, err
	}
	sn, err := serialNumber()
	if err != nil {
		return leaf{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:    dns, IPAddresses: ips,
	}
	if len(dns)+len(ips) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return leaf{}, err
	}
	k, err := keyPEM(key)
	if err != nil {
		return leaf{}, err
	}
	return leaf{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: k}, nil
}

// clientIdentity is one kubeconfig Up writes.
type clientIdentity struct {
	file   string // under pki/
	cn     string
	groups []string
	server string
}

// writePKI generates the cluster's CA, the API server's serving
// certificate, the service-account key pair and one kubeconfig per client,
// and returns the CA in PEM.
func writePKI(l Layout, forwardAddr string) error {
	if err := os.MkdirAll(l.path("pki"), 0o700); err != nil {
		return err
	}
	ca, err := newAuthority("weft-cluster-" + l.Name + " CA")
	if err != nil {
		return fmt.Errorf("cluster: CA: %w", err)
	}
	files := map[string][]byte{"ca.crt": ca.certPEM}
	caKey, err := keyPEM(ca.key)
	if err != nil {
		return err
	}
	files["ca.key"] = caKey

	serving, err := ca.issue("kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain},
		[]net.IP{net.ParseIP(NodeIP), net.ParseIP(APIServiceIP), net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return fmt.Errorf("cluster: API server certificate: %w", err)
	}
	files["apiserver.crt"], files["apiserver.key"] = serving.cert, serving.key
	kc, err := ca.issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	files["apiserver-kubelet-client.crt"], files["apiserver-kubelet-client.key"] = kc.cert, kc.key

	// The aggregation layer's front proxy, as kubeadm sets it up: its own
	// CA (extension API servers trust the user headers only from a
	// certificate of it) and the client certificate the API server
	// presents when it proxies to an APIService (the tap API).
	fp, err := newAuthority("weft-cluster-" + l.Name + " front-proxy CA")
	if err != nil {
		return fmt.Errorf("cluster: front-proxy CA: %w", err)
	}
	fpc, err := fp.issue(frontProxyClient, nil, nil, nil)
	if err != nil {
		return err
	}
	files["front-proxy-ca.crt"] = fp.certPEM
	files["front-proxy-client.crt"], files["front-proxy-client.key"] = fpc.cert, fpc.key

	sa, err := newKey()
	if err != nil {
		return err
	}
	saPEM, err := keyPEM(sa)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	files["sa.key"] = saPEM
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	for name, data := range files {
		if err := os.WriteFile(l.pki(name), data, 0o600); err != nil {
			return err
		}
	}

	inNode := fmt.Sprintf("https://127.0.0.1:%d", apiServerPort)
	for _, c := range []clientIdentity{
		{file: l.Kubeconfig(), cn: "weft-cluster-admin", groups: []string{"system:masters"}, server: "https://" + forwardAddr},
		{file: l.pki("controller-manager.kubeconfig"), cn: "system:kube-controller-manager", server: inNode},
		{file: l.pki("scheduler.kubeconfig"), cn: "system:kube-scheduler", server: inNode},
		{file: l.pki("kubelet.kubeconfig"), cn: "system:node:" + NodeName, groups: []string{"system:nodes"}, server: inNode},
		{file: l.pki("kube-proxy.kubeconfig"), cn: "system:kube-proxy", server: inNode},
	} {
		lf, err := ca.issue(c.cn, c.groups, nil, nil)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(c.file, c.server, ca.certPEM, lf); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(path, server string, caPEM []byte, lf leaf) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["weft"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["weft"] = &clientcmdapi.AuthInfo{ClientCertificateData: lf.cert, ClientKeyData: lf.key}
	cfg.Contexts["weft"] = &clientcmdapi.Context{Cluster: "weft", AuthInfo: "weft"}
	cfg.CurrentContext = "weft"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cluster: kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
