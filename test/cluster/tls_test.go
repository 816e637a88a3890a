//go:build clusterintegration

package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// peerChain opens a TLS connection to pod's application port from the
// node, the way a meshed client's proxy does (SNI set to the pod's
// identity), and returns the certificate chain its proxy presents. No
// client certificate is sent; the chain is read whatever happens next.
func (e *env) peerChain(t *testing.T, pod corev1.Pod, identity string) []*x509.Certificate {
	t.Helper()
	ctx := timeout(t, 30*time.Second)
	raw, err := e.state.DialInNode(ctx, net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(httpPort)))
	require.NoError(t, err)
	defer raw.Close()
	var chain []*x509.Certificate
	c := tls.Client(raw, &tls.Config{
		ServerName:         identity,
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // the chain is checked by the caller
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			for _, der := range rawCerts {
				cert, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				chain = append(chain, cert)
			}
			return nil
		},
	})
	_ = c.HandshakeContext(ctx)
	require.NotEmpty(t, chain, "the proxy of %s presented no certificate", pod.Name)
	return chain
}

// peerIdentity is the identity (DNS SAN) in the leaf pod's proxy presents
// for its own identity name.
func (e *env) peerIdentity(t *testing.T, pod corev1.Pod) string {
	t.Helper()
	id := identityOf(pod.Spec.ServiceAccountName, pod.Namespace)
	leaf := e.peerChain(t, pod, id)[0]
	require.Len(t, leaf.DNSNames, 1, "leaf of %s", pod.Name)
	return leaf.DNSNames[0]
}
