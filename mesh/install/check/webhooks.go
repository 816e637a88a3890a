package check

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/install"
)

// webhooks checks the injector's serving certificate and that every
// webhook configuration reaches a Service with ready endpoints whose
// certificate its caBundle trusts.
func (r *run) webhooks(ctx context.Context) {
	serving := r.servingCert(ctx)
	type cfg struct {
		name  string
		hooks []admissionregv1.WebhookClientConfig
		fp    []string
	}
	var cfgs []cfg
	mwc, err := r.c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, install.MutatingWebhookConfiguration, metav1.GetOptions{})
	c := cfg{name: "MutatingWebhookConfiguration " + install.MutatingWebhookConfiguration}
	if r.fetched(c.name, err) {
		for _, w := range mwc.Webhooks {
			c.hooks = append(c.hooks, w.ClientConfig)
			c.fp = append(c.fp, failurePolicy(w.FailurePolicy))
		}
		cfgs = append(cfgs, c)
	}
	for _, name := range []string{install.ServiceProfileValidatorConfiguration, install.PolicyValidatorConfiguration} {
		vwc, err := r.c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		c := cfg{name: "ValidatingWebhookConfiguration " + name}
		if r.fetched(c.name, err) {
			for _, w := range vwc.Webhooks {
				c.hooks = append(c.hooks, w.ClientConfig)
				c.fp = append(c.fp, failurePolicy(w.FailurePolicy))
			}
			cfgs = append(cfgs, c)
		}
	}
	for _, c := range cfgs {
		name := c.name + " points at a live service"
		if len(c.hooks) == 0 {
			r.fail(CategoryWebhooks, name, "it has no webhooks", installHint)
			continue
		}
		var problems, fine []string
		onlyNotReady := true
		for i, cc := range c.hooks {
			msg, err := r.clientConfig(ctx, cc, serving)
			if err != nil {
				problems = append(problems, err.Error())
				onlyNotReady = onlyNotReady && errors.Is(err, errNoReadyEndpoints)
				continue
			}
			fine = append(fine, msg+", failurePolicy "+c.fp[i])
		}
		if len(problems) > 0 {
			report := r.fail
			if onlyNotReady {
				report = r.notReady
			}
			report(CategoryWebhooks, name, strings.Join(problems, "; "),
				fmt.Sprintf("kubectl -n %s get endpointslices,pods -l %s=proxy-injector; kubectl -n %s describe deployment weft-proxy-injector", r.ns, install.LabelComponent, r.ns))
			continue
		}
		r.ok(CategoryWebhooks, name, strings.Join(fine, "; "))
	}
}

// fetched records a failure when a webhook configuration could not be read.
func (r *run) fetched(what string, err error) bool {
	name := what + " points at a live service"
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryWebhooks, name, "not found", installHint)
		return false
	case err != nil:
		r.fail(CategoryWebhooks, name, r.apiError("get", err), "check that you may read webhook configurations")
		return false
	}
	return true
}

func failurePolicy(p *admissionregv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionregv1.Fail)
	}
	return string(*p)
}

// errNoReadyEndpoints is the one webhook problem that waiting may cure.
var errNoReadyEndpoints = errors.New("the API server cannot reach the webhook")

// clientConfig checks one webhook's target: the Service exists, exposes the
// port, has ready endpoints, and the caBundle trusts the serving
// certificate for the Service's DNS name.
func (r *run) clientConfig(ctx context.Context, cc admissionregv1.WebhookClientConfig, serving *x509.Certificate) (string, error) {
	if cc.Service == nil {
		return "", fmt.Errorf("calls URL %q instead of a Service", deref(cc.URL))
	}
	ref := cc.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	key := ref.Namespace + "/" + ref.Name
	svc, err := r.c.kube.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		//lint:ignore ST1005 "Service" is the Kubernetes kind, spelt as kubectl spells it
		return "", fmt.Errorf("Service %s not found", key)
	case err != nil:
		return "", fmt.Errorf("%s", r.apiError("get Service "+key, err))
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		//lint:ignore ST1005 "Service" is the Kubernetes kind, spelt as kubectl spells it
		return "", fmt.Errorf("Service %s has no port %d", key, port)
	}
	slices, err := r.c.kube.DiscoveryV1().EndpointSlices(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + ref.Name})
	if err != nil {
		return "", fmt.Errorf("%s", r.apiError("list EndpointSlices of "+key, err))
	}
	ready := readyEndpoints(slices.Items, sp)
	if ready == 0 {
		//lint:ignore ST1005 "Service" is the Kubernetes kind, spelt as kubectl spells it
		return "", fmt.Errorf("Service %s has no ready endpoints for port %d (%d EndpointSlices): %w", key, port, len(slices.Items), errNoReadyEndpoints)
	}
	if len(cc.CABundle) == 0 {
		return "", fmt.Errorf("no caBundle for Service %s", key)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cc.CABundle) {
		return "", fmt.Errorf("the caBundle for Service %s holds no PEM certificate", key)
	}
	dns := ref.Name + "." + ref.Namespace + ".svc"
	if serving == nil {
		return "", fmt.Errorf("the serving certificate could not be read, so the caBundle for %s cannot be checked", dns)
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: dns, CurrentTime: r.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", fmt.Errorf("the caBundle does not trust the serving certificate for %s: %v", dns, err)
	}
	return fmt.Sprintf("Service %s:%d has %d ready endpoints, caBundle trusts %s", key, port, ready, dns), nil
}

// readyEndpoints counts ready endpoints of slices that serve the Service
// port (by name).
func readyEndpoints(slices []discoveryv1.EndpointSlice, sp *corev1.ServicePort) int {
	n := 0
	for _, s := range slices {
		serves := len(s.Ports) == 0
		for _, p := range s.Ports {
			if deref(p.Name) == sp.Name {
				serves = true
			}
		}
		if !serves {
			continue
		}
		for _, e := range s.Endpoints {
			// A nil Ready means unknown, which consumers read as ready.
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// servingCert checks the injector's serving certificate Secret and returns
// the certificate for the caBundle checks (nil when unreadable).
func (r *run) servingCert(ctx context.Context) *x509.Certificate {
	const name = "webhook serving certificate is valid"
	s, err := r.c.kube.CoreV1().Secrets(r.ns).Get(ctx, install.SecretInjectorTLS, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryWebhooks, name, fmt.Sprintf("Secret %s/%s not found", r.ns, install.SecretInjectorTLS), installHint)
		return nil
	case err != nil:
		r.fail(CategoryWebhooks, name, r.apiError("get Secret", err), "check that you may read Secrets in "+r.ns)
		return nil
	}
	leaf, _, _, err := certpem.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		r.fail(CategoryWebhooks, name, fmt.Sprintf("Secret %s/%s: %v", r.ns, install.SecretInjectorTLS, err), "render the install again to make a new serving certificate")
		return nil
	}
	var problems []string
	if err := validAt(leaf, r.now); err != nil {
		problems = append(problems, err.Error())
	}
	if err := leaf.VerifyHostname(install.InjectorServerName(r.ns)); err != nil {
		problems = append(problems, err.Error())
	}
	switch {
	case len(problems) > 0:
		r.fail(CategoryWebhooks, name, describe(leaf)+": "+strings.Join(problems, "; "), "render the install again to make a new serving certificate, then restart the injector")
	case leaf.NotAfter.Sub(r.now) < ExpiryWarning:
		r.warn(CategoryWebhooks, name, fmt.Sprintf("%s expires in %s (less than 30 days)", describe(leaf), leaf.NotAfter.Sub(r.now).Round(time.Hour)),
			"render the install again to make a new serving certificate, then restart the injector")
	default:
		r.ok(CategoryWebhooks, name, describe(leaf))
	}
	return leaf
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
