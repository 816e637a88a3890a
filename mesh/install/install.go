package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/inject"
)

// Object is a Kubernetes object of the install: typed (k8s.io/api or
// apiextensions), with its apiVersion and kind set.
type Object interface {
	runtime.Object
	metav1.Object
}

// Manifest is a rendered install: objects in the order they are applied,
// and warnings about the inputs (certificates close to expiry).
type Manifest struct {
	Objects  []Object
	Warnings []string
}

// Option tunes [Render].
type Option func(*config)

type config struct {
	ha              bool
	controllerImage string
	controllerPull  corev1.PullPolicy
	lifetime        time.Duration
	skew            time.Duration
	issuerScheme    string
	now             func() time.Time
	podMonitor      bool
}

// WithHA renders the high-availability variant: three replicas of every
// component spread over nodes by required pod anti-affinity, a
// PodDisruptionBudget per component (at most one pod down) and webhooks
// with failurePolicy Fail, so no pod starts un-meshed while the injector
// is down.
func WithHA() Option { return func(c *config) { c.ha = true } }

// WithControllerImage sets the weft-controller image reference (name:tag or
// name@digest). The default is [DefaultControllerImage] tagged with the
// Values version.
func WithControllerImage(ref string) Option { return func(c *config) { c.controllerImage = ref } }

// WithControllerImagePullPolicy sets the imagePullPolicy of the
// control-plane containers (default IfNotPresent): Always, IfNotPresent or
// Never (images loaded on the nodes beforehand, as on a local cluster).
func WithControllerImagePullPolicy(p corev1.PullPolicy) Option {
	return func(c *config) { c.controllerPull = p }
}

// WithIssuanceLifetime sets the lifetime of workload certificates
// (default 24h).
func WithIssuanceLifetime(d time.Duration) Option { return func(c *config) { c.lifetime = d } }

// WithClockSkewAllowance sets how far back the identity service dates the
// certificates it issues (default 20s).
func WithClockSkewAllowance(d time.Duration) Option { return func(c *config) { c.skew = d } }

// WithIssuerScheme chooses the layout of the issuer Secret:
// vocab.IssuerSchemeKubernetes ("kubernetes.io/tls": tls.crt, tls.key and the
// anchors in ca.crt; the default, what cert-manager writes) or
// vocab.IssuerSchemeLinkerd ("linkerd.io/tls": an Opaque Secret with crt.pem and
// key.pem).
func WithIssuerScheme(s string) Option { return func(c *config) { c.issuerScheme = s } }

// WithClock sets the time certificates are checked against (default
// time.Now). The rendered objects never depend on it.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// CRDs returns the CustomResourceDefinitions Weft serves (apis/crds), as
// `weft install --crds` prints them.
func CRDs() (*Manifest, error) { return crdManifest(crds.All) }

// GatewayAPICRDs returns the Gateway API CRDs Weft reads (HTTPRoute and
// GRPCRoute from the standard channel, TCPRoute and TLSRoute from the
// experimental channel, at the version of sigs.k8s.io/gateway-api Weft is
// built with), as `weft install --crds --gateway-api` appends them
// for clusters that cannot fetch them from the Gateway API release. They
// are upstream's manifests (apis/crds.GatewayAPI); Render never includes
// them and `weft uninstall` never deletes them.
func GatewayAPICRDs() (*Manifest, error) { return crdManifest(crds.GatewayAPI) }

// crdManifest is the manifest of the CRDs load returns, typed for
// printing.
func crdManifest(load func() ([]*apiextensionsv1.CustomResourceDefinition, error)) (*Manifest, error) {
	all, err := load()
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	m := &Manifest{}
	for _, crd := range all {
		crd.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
		m.Objects = append(m.Objects, crd)
	}
	return m, nil
}

// Render builds everything a cluster needs from values and certs: the CRDs,
// then the control plane (namespace, service accounts, RBAC, ConfigMaps,
// Secrets, Services, Deployments, PodDisruptionBudgets in HA, and the
// webhook configurations). It is a function of its inputs: the same values,
// certificates and options give the same objects, sorted by kind and name.
//
// values must validate; certs.Identity.TrustAnchorsPEM becomes the trust
// roots (values.IdentityTrustAnchorsPEM must be empty or the same). Every
// problem with the inputs is reported at once, each naming what is wrong,
// and nothing is rendered then.
func Render(values inject.Values, certs Certificates, opts ...Option) (*Manifest, error) {
	cfg := config{lifetime: identity.DefaultLifetime, skew: identity.DefaultClockSkewAllowance, issuerScheme: vocab.IssuerSchemeKubernetes, now: time.Now, controllerPull: corev1.PullIfNotPresent}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.controllerImage == "" {
		cfg.controllerImage = DefaultControllerImage + ":" + versionOf(values)
	}
	var errs []error
	if err := values.Validate(); err != nil {
		errs = append(errs, err)
	}
	if values.IdentityTrustAnchorsPEM != "" && strings.TrimSpace(values.IdentityTrustAnchorsPEM) != strings.TrimSpace(string(certs.Identity.TrustAnchorsPEM)) {
		errs = append(errs, errors.New("install: values: identityTrustAnchorsPEM differs from the trust anchors given; leave it empty or give the same bundle"))
	}
	if cfg.skew < 0 || cfg.skew >= cfg.lifetime {
		errs = append(errs, fmt.Errorf("install: clock skew allowance %s must be at least zero and shorter than the issuance lifetime %s", cfg.skew, cfg.lifetime))
	}
	if cfg.lifetime < time.Minute {
		errs = append(errs, fmt.Errorf("install: issuance lifetime %s is shorter than a minute", cfg.lifetime))
	}
	if cfg.issuerScheme != vocab.IssuerSchemeKubernetes && cfg.issuerScheme != vocab.IssuerSchemeLinkerd {
		errs = append(errs, fmt.Errorf("install: issuer scheme %q: want %s or %s", cfg.issuerScheme, vocab.IssuerSchemeKubernetes, vocab.IssuerSchemeLinkerd))
	}
	switch cfg.controllerPull {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("install: controller image pull policy %q: want Always, IfNotPresent or Never", cfg.controllerPull))
	}
	if !validImageRef(cfg.controllerImage) {
		errs = append(errs, fmt.Errorf("install: controller image %q is not an image reference", cfg.controllerImage))
	}
	now := cfg.now()
	var warnings []string
	if w, err := checkIdentity(certs.Identity, now); err != nil {
		errs = append(errs, err)
	} else {
		warnings = append(warnings, w...)
	}
	if w, err := checkWebhook(certs.Webhook, values.ControlPlaneNamespace, now); err != nil {
		errs = append(errs, err)
	} else {
		warnings = append(warnings, w...)
	}
	if len(certs.Tap.CertPEM) == 0 {
		warnings = append(warnings, "no tap serving certificate: the tap API (weft-tap, APIService "+TapAPIServiceName+") is not installed, so weft viz tap and top cannot reach this cluster's proxies")
	} else if w, err := checkServing("tap", certs.Tap, TapServerName(values.ControlPlaneNamespace), now); err != nil {
		errs = append(errs, err)
	} else {
		warnings = append(warnings, w...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	values.IdentityTrustAnchorsPEM = string(certs.Identity.TrustAnchorsPEM)
	if values.Proxy.TapIdentities == "" {
		values.Proxy.TapIdentities = TapperIdentity(values)
	}

	m, err := CRDs()
	if err != nil {
		return nil, err
	}
	r := renderer{values: values, certs: certs, cfg: cfg}
	objs, err := r.controlPlane()
	if err != nil {
		return nil, err
	}
	sortObjects(objs)
	m.Objects = append(m.Objects, objs...)
	m.Warnings = warnings
	return m, nil
}

// kindOrder is the apply order: what others refer to comes first, and the
// webhook configurations last, once the injector they call exists.
var kindOrder = map[string]int{
	"CustomResourceDefinition":       0,
	"Namespace":                      1,
	"ServiceAccount":                 2,
	"ClusterRole":                    3,
	"ClusterRoleBinding":             4,
	"RoleBinding":                    5,
	"ConfigMap":                      6,
	"Secret":                         7,
	"Service":                        8,
	"Deployment":                     9,
	"PodDisruptionBudget":            10,
	"MutatingWebhookConfiguration":   11,
	"ValidatingWebhookConfiguration": 12,
	"APIService":                     13,
	"PodMonitor":                     14,
}

func sortObjects(objs []Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		ki, kj := kindOrder[objs[i].GetObjectKind().GroupVersionKind().Kind], kindOrder[objs[j].GetObjectKind().GroupVersionKind().Kind]
		if ki != kj {
			return ki < kj
		}
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
}

// YAML serializes the objects as a stream of YAML documents, each starting
// with "---". Every object goes through its typed Go struct and JSON, so
// field names and types are the API's own; keys come out sorted. Fields
// the API server sets (status, a null creationTimestamp) are left out.
func (m *Manifest) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range m.Objects {
		doc, err := objectYAML(o)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// JSON serializes the objects as one v1 List (kubectl apply -f takes it),
// indented, with the same fields as YAML.
func (m *Manifest) JSON() ([]byte, error) {
	items := make([]any, 0, len(m.Objects))
	for _, o := range m.Objects {
		tree, err := objectTree(o)
		if err != nil {
			return nil, err
		}
		items = append(items, tree)
	}
	out, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	return append(out, '\n'), nil
}

func objectYAML(o Object) ([]byte, error) {
	tree, err := objectTree(o)
	if err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("install: %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	return out, nil
}

// objectTree is o as generic JSON, without the fields the API server sets.
func objectTree(o Object) (map[string]any, error) {
	js, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("install: %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("install: %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	delete(tree, "status")
	prune(tree)
	return tree, nil
}

// prune removes the null creationTimestamp that metav1.ObjectMeta always
// marshals, at every depth (pod templates carry one too).
func prune(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, c := range t {
			prune(c)
		}
	case []any:
		for _, c := range t {
			prune(c)
		}
	}
}

func versionOf(v inject.Values) string {
	if v.Version != "" {
		return v.Version
	}
	return vocab.DefaultVersion
}

// validImageRef is a light check of an image reference: non-empty, no
// whitespace or control characters, a name before any tag or digest.
func validImageRef(ref string) bool {
	if ref == "" || len(ref) > 512 || strings.HasPrefix(ref, ":") || strings.HasPrefix(ref, "@") || strings.HasSuffix(ref, ":") {
		return false
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
