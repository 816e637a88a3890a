package check

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/mesh/identity/certpem"
	idkube "github.com/weftmesh/weft/mesh/identity/kubernetes"
	"github.com/weftmesh/weft/mesh/install"
)

// ExpiryWarning is how close to expiry a certificate must be for a warning.
const ExpiryWarning = install.ExpiryWarning

// Hints for certificates that need replacing.
const (
	anchorHint = "rotate the trust anchor: add a new one (weft certs create-anchor) to the bundle beside the old one, render and apply the install, restart meshed workloads, then drop the old anchor"
	issuerHint = "issue a new issuer under the anchor (weft certs create-issuer), render the install with --identity-issuer-dir and apply it; the identity service reloads it without a restart"
)

// identity checks the trust anchors and the issuer the identity service
// signs with.
func (r *run) identity(ctx context.Context) {
	const anchorsName, issuerName = "trust anchors are valid", "issuer certificate is valid and chains to the trust anchors"
	cm, err := r.c.kube.CoreV1().ConfigMaps(r.ns).Get(ctx, install.ConfigMapTrustRoots, metav1.GetOptions{})
	var anchors []*x509.Certificate
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryIdentity, anchorsName, fmt.Sprintf("ConfigMap %s/%s not found", r.ns, install.ConfigMapTrustRoots), installHint)
	case err != nil:
		r.fail(CategoryIdentity, anchorsName, r.apiError("get ConfigMap", err), "check that you may read ConfigMaps in "+r.ns)
	default:
		pemText := cm.Data[install.TrustRootsKey]
		anchors, err = certpem.ParseCertificates([]byte(pemText))
		if err != nil {
			r.fail(CategoryIdentity, anchorsName, fmt.Sprintf("%s/%s %s: %v", r.ns, install.ConfigMapTrustRoots, install.TrustRootsKey, err), installHint)
			anchors = nil
			break
		}
		r.anchorsPEM = pemText
		var bad, soon, desc []string
		for _, a := range anchors {
			desc = append(desc, describe(a))
			switch {
			case !a.IsCA:
				bad = append(bad, a.Subject.String()+" is not a CA")
			case validAt(a, r.now) != nil:
				bad = append(bad, a.Subject.String()+" "+validAt(a, r.now).Error())
			case a.NotAfter.Sub(r.now) < ExpiryWarning:
				soon = append(soon, fmt.Sprintf("%s expires in %s", a.Subject, a.NotAfter.Sub(r.now).Round(time.Hour)))
			}
		}
		switch {
		case len(bad) > 0:
			r.fail(CategoryIdentity, anchorsName, strings.Join(bad, "; "), anchorHint)
			anchors = nil
		case len(soon) > 0:
			r.warn(CategoryIdentity, anchorsName, strings.Join(soon, "; ")+" (less than 30 days)", anchorHint)
		default:
			r.ok(CategoryIdentity, anchorsName, strings.Join(desc, "; "))
		}
		if r.values != nil && strings.TrimSpace(r.values.IdentityTrustAnchorsPEM) != strings.TrimSpace(pemText) {
			r.warn(CategoryIdentity, "the Values carry the same trust anchors", fmt.Sprintf("%s %s and %s %s differ", install.ConfigMapValues, install.ValuesKey, install.ConfigMapTrustRoots, install.TrustRootsKey),
				"render and apply the install again so both hold the same bundle")
		}
	}

	s, err := r.c.kube.CoreV1().Secrets(r.ns).Get(ctx, install.SecretIssuer, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryIdentity, issuerName, fmt.Sprintf("Secret %s/%s not found", r.ns, install.SecretIssuer), installHint)
		return
	case err != nil:
		r.fail(CategoryIdentity, issuerName, r.apiError("get Secret", err), "check that you may read Secrets in "+r.ns)
		return
	}
	certPEM, keyPEM, err := idkube.SecretKeyPair(s)
	if err != nil {
		r.fail(CategoryIdentity, issuerName, fmt.Sprintf("Secret %s/%s: %v", r.ns, install.SecretIssuer, err), installHint)
		return
	}
	issuer, chain, _, err := certpem.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		r.fail(CategoryIdentity, issuerName, fmt.Sprintf("Secret %s/%s: %v", r.ns, install.SecretIssuer, err), issuerHint)
		return
	}
	var problems []string
	if !issuer.IsCA {
		problems = append(problems, "the certificate is not a CA")
	}
	if err := validAt(issuer, r.now); err != nil {
		problems = append(problems, err.Error())
	}
	switch {
	case anchors == nil:
		problems = append(problems, "cannot be checked against the trust anchors (see above)")
	default:
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		for _, a := range anchors {
			roots.AddCert(a)
		}
		for _, c := range chain {
			inter.AddCert(c)
		}
		if _, err := issuer.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: r.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			problems = append(problems, "does not chain to the trust anchors: "+err.Error())
		}
	}
	switch {
	case len(problems) > 0:
		r.fail(CategoryIdentity, issuerName, describe(issuer)+": "+strings.Join(problems, "; "), issuerHint)
	case issuer.NotAfter.Sub(r.now) < ExpiryWarning:
		r.warn(CategoryIdentity, issuerName, fmt.Sprintf("%s expires in %s (less than 30 days)", describe(issuer), issuer.NotAfter.Sub(r.now).Round(time.Hour)), issuerHint)
	default:
		r.ok(CategoryIdentity, issuerName, describe(issuer))
	}
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("%s valid until %s", c.Subject, c.NotAfter.UTC().Format(time.RFC3339))
}

func validAt(c *x509.Certificate, now time.Time) error {
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
