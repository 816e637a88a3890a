package inject

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity/certpem"
)

// Values holds every install-time setting of the proxy and its init
// container. The install rendering and the injector share this one type:
// what `weft install` writes into the Values ConfigMap is what the injector
// reads back. Annotations on namespaces and pods override a subset of it
// (see [Resolve]).
//
// The JSON/YAML field names are stable; [ParseValues] reads them strictly.
type Values struct {
	// Version is the tag of the proxy and init images when their own
	// Image.Version is empty. Empty means [DefaultVersion].
	Version string `json:"version,omitempty"`
	// ControlPlaneNamespace is where the control plane runs ("weft").
	ControlPlaneNamespace string `json:"controlPlaneNamespace"`
	// ClusterDomain is the cluster's DNS domain ("cluster.local").
	ClusterDomain string `json:"clusterDomain"`
	// IdentityTrustDomain is the last part of every identity name.
	IdentityTrustDomain string `json:"identityTrustDomain"`
	// IdentityTrustAnchorsPEM holds the trust roots handed to every proxy
	// (one or more PEM certificates).
	IdentityTrustAnchorsPEM string `json:"identityTrustAnchorsPEM,omitempty"`
	// IdentityAddr, DestinationAddr and PolicyAddr are the control-plane
	// addresses handed to the proxy. Empty means the in-cluster Service
	// address derived from ControlPlaneNamespace and ClusterDomain.
	IdentityAddr    string `json:"identityAddr,omitempty"`
	DestinationAddr string `json:"destinationAddr,omitempty"`
	PolicyAddr      string `json:"policyAddr,omitempty"`
	// CNIEnabled means a CNI plugin installs the iptables rules, so no
	// weft-init container is injected.
	CNIEnabled bool `json:"cniEnabled"`
	// ClusterNetworks are the CIDRs the cluster-authenticated and
	// cluster-unauthenticated policies trust.
	ClusterNetworks string `json:"clusterNetworks"`
	// Proxy configures the proxy container.
	Proxy ProxyValues `json:"proxy"`
	// ProxyInit configures the weft-init container.
	ProxyInit InitValues `json:"proxyInit"`
}

// Image names a container image. An empty Version falls back to
// [Values.Version].
type Image struct {
	Name       string            `json:"name"`
	Version    string            `json:"version,omitempty"`
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`
}

// Resource is a request and a limit written as Kubernetes quantities
// ("100m", "64Mi"); empty means unset.
type Resource struct {
	Request string `json:"request,omitempty"`
	Limit   string `json:"limit,omitempty"`
}

// Resources are a container's compute resources.
type Resources struct {
	CPU              Resource `json:"cpu"`
	Memory           Resource `json:"memory"`
	EphemeralStorage Resource `json:"ephemeralStorage"`
}

// Ports are the proxy's listening ports.
type Ports struct {
	Inbound  int32 `json:"inbound"`
	Outbound int32 `json:"outbound"`
	Admin    int32 `json:"admin"`
	Control  int32 `json:"control"`
}

// ProxyValues configures the proxy container.
type ProxyValues struct {
	Image Image `json:"image"`
	// UID is the proxy's user ID; weft-init excludes its traffic from
	// redirection. GID, when non-zero, becomes runAsGroup.
	UID       int64     `json:"uid"`
	GID       int64     `json:"gid,omitempty"`
	Ports     Ports     `json:"ports"`
	Resources Resources `json:"resources"`
	// LogLevel uses the proxy's filter syntax ("warn,linkerd=info").
	LogLevel string `json:"logLevel"`
	// LogFormat is "plain" or "json".
	LogFormat string `json:"logFormat"`
	// OpaquePorts are ports and ranges ("25,587,1000-2000") on which the
	// proxy skips protocol detection.
	OpaquePorts string `json:"opaquePorts"`
	// Await makes application containers wait until the proxy is ready. In
	// native-sidecar mode the startup probe does this; in classic mode a
	// postStart hook runs AwaitCommand.
	Await bool `json:"await"`
	// AwaitCommand is the postStart command used for Await in classic mode.
	// It must block until the proxy's /ready answers.
	AwaitCommand []string `json:"awaitCommand,omitempty"`
	// NativeSidecar injects the proxy as an init container with
	// restartPolicy Always (Kubernetes >= 1.29).
	NativeSidecar bool `json:"nativeSidecar"`
	// DefaultInboundPolicy applies to ports no Server selects.
	DefaultInboundPolicy string `json:"defaultInboundPolicy"`
	// ShutdownGracePeriod bounds how long the proxy drains on SIGTERM.
	ShutdownGracePeriod metav1.Duration `json:"shutdownGracePeriod"`
	// WaitBeforeExitSeconds, when non-zero, delays the proxy's SIGTERM with
	// a preStop sleep so that applications finish their last requests.
	WaitBeforeExitSeconds int64 `json:"waitBeforeExitSeconds,omitempty"`
	// AdminShutdown enables POST /shutdown on the admin port (loopback
	// clients only). Off by default: an SSRF in the application could
	// otherwise stop the proxy.
	AdminShutdown bool `json:"adminShutdown,omitempty"`
}

// InitValues configures the weft-init container.
type InitValues struct {
	Image     Image     `json:"image"`
	Resources Resources `json:"resources"`
	// IgnoreInboundPorts and IgnoreOutboundPorts are ports and ranges
	// never redirected to the proxy; SkipSubnets are CIDRs whose outbound
	// traffic is never redirected.
	IgnoreInboundPorts  string `json:"ignoreInboundPorts,omitempty"`
	IgnoreOutboundPorts string `json:"ignoreOutboundPorts,omitempty"`
	SkipSubnets         string `json:"skipSubnets,omitempty"`
}

// DefaultValues returns the settings Weft ships with.
func DefaultValues() Values {
	return Values{
		Version:               vocab.DefaultVersion,
		ControlPlaneNamespace: vocab.DefaultControlPlaneNamespace,
		ClusterDomain:         vocab.DefaultClusterDomain,
		IdentityTrustDomain:   vocab.DefaultTrustDomain,
		ClusterNetworks:       vocab.DefaultClusterNetworks,
		Proxy: ProxyValues{
			Image: Image{Name: vocab.DefaultProxyImage, PullPolicy: corev1.PullIfNotPresent},
			UID:   vocab.DefaultProxyUID,
			Ports: Ports{
				Inbound:  vocab.DefaultInboundPort,
				Outbound: vocab.DefaultOutboundPort,
				Admin:    vocab.DefaultAdminPort,
				Control:  vocab.DefaultControlPort,
			},
			LogLevel:             "warn,linkerd=info",
			LogFormat:            vocab.LogFormatPlain,
			OpaquePorts:          vocab.DefaultOpaquePorts,
			Await:                true,
			AwaitCommand:         []string{"/usr/lib/weft/weft-proxy", "await", "--timeout=2m"},
			NativeSidecar:        true,
			DefaultInboundPolicy: vocab.PolicyAllUnauthenticated,
			ShutdownGracePeriod:  metav1.Duration{Duration: 2 * time.Minute},
		},
		ProxyInit: InitValues{
			Image: Image{Name: vocab.DefaultInitImage, PullPolicy: corev1.PullIfNotPresent},
			Resources: Resources{
				CPU:    Resource{Request: "10m", Limit: "100m"},
				Memory: Resource{Request: "20Mi", Limit: "20Mi"},
			},
		},
	}
}

// ParseValues reads Values from YAML or JSON on top of [DefaultValues]:
// fields the document leaves out keep their defaults. Unknown and duplicate
// fields are errors, and the result is validated.
func ParseValues(data []byte) (Values, error) {
	v := DefaultValues()
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		return Values{}, fmt.Errorf("inject: values: %w", err)
	}
	if err := v.Validate(); err != nil {
		return Values{}, err
	}
	return v, nil
}

// IdentityAddress returns the identity service address handed to proxies.
func (v *Values) IdentityAddress() string {
	return v.serviceAddr(v.IdentityAddr, vocab.ServiceIdentity, vocab.IdentityPort)
}

// DestinationAddress returns the destination service address handed to
// proxies.
func (v *Values) DestinationAddress() string {
	return v.serviceAddr(v.DestinationAddr, vocab.ServiceDestination, vocab.DestinationPort)
}

// PolicyAddress returns the policy service address handed to proxies.
func (v *Values) PolicyAddress() string {
	return v.serviceAddr(v.PolicyAddr, vocab.ServicePolicy, vocab.PolicyPort)
}

func (v *Values) serviceAddr(set, svc string, port int) string {
	if set != "" {
		return set
	}
	// The trailing dot makes the name absolute so resolvers skip the
	// pod's search domains.
	return fmt.Sprintf("%s.%s.svc.%s.:%d", svc, v.ControlPlaneNamespace, v.ClusterDomain, port)
}

// ProxyImage returns the proxy image reference (name:tag).
func (v *Values) ProxyImage() string {
	return imageRef(v.Proxy.Image.Name, v.version(v.Proxy.Image.Version))
}

// InitImage returns the weft-init image reference (name:tag).
func (v *Values) InitImage() string {
	return imageRef(v.ProxyInit.Image.Name, v.version(v.ProxyInit.Image.Version))
}

func (v *Values) version(own string) string {
	switch {
	case own != "":
		return own
	case v.Version != "":
		return v.Version
	default:
		return vocab.DefaultVersion
	}
}

// imageRef joins an image name and a tag; a name pinned by digest is kept
// as it is.
func imageRef(name, version string) string {
	if strings.Contains(name, "@") {
		return name
	}
	return name + ":" + version
}

// Validate checks every field and returns all problems at once, each naming
// its field.
func (v *Values) Validate() error { return v.validate(true) }

// validate checks the values; the renderer skips re-parsing the trust
// anchors (they are handed to the proxy as text) since every constructor
// that accepts Values has checked them in full.
func (v *Values) validate(anchors bool) error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("inject: values: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !isDNSLabel(v.ControlPlaneNamespace) {
		bad("controlPlaneNamespace", "%q is not a namespace name", v.ControlPlaneNamespace)
	}
	if !isDNSName(v.ClusterDomain) {
		bad("clusterDomain", "%q is not a DNS name", v.ClusterDomain)
	}
	if !isDNSName(v.IdentityTrustDomain) {
		bad("identityTrustDomain", "%q is not a DNS name", v.IdentityTrustDomain)
	}
	if anchors && v.IdentityTrustAnchorsPEM != "" {
		if _, err := certpem.ParseCertificates([]byte(v.IdentityTrustAnchorsPEM)); err != nil {
			bad("identityTrustAnchorsPEM", "%v", err)
		}
	}
	for field, tag := range map[string]string{"version": v.Version, "proxy.image.version": v.Proxy.Image.Version, "proxyInit.image.version": v.ProxyInit.Image.Version} {
		if tag != "" && !isImageTag(tag) {
			bad(field, "%q is not an image tag", tag)
		}
	}
	for field, img := range map[string]Image{"proxy.image": v.Proxy.Image, "proxyInit.image": v.ProxyInit.Image} {
		if !isImageName(img.Name) {
			bad(field+".name", "%q is not an image name", img.Name)
		}
		if img.PullPolicy != "" {
			if _, err := parsePullPolicy(string(img.PullPolicy)); err != nil {
				bad(field+".pullPolicy", "%v", err)
			}
		}
	}
	if v.Proxy.UID <= 0 {
		bad("proxy.uid", "%d: the proxy must run as a non-root user", v.Proxy.UID)
	}
	if v.Proxy.GID < 0 {
		bad("proxy.gid", "%d is negative", v.Proxy.GID)
	}
	ports := map[string]int32{
		"proxy.ports.inbound": v.Proxy.Ports.Inbound, "proxy.ports.outbound": v.Proxy.Ports.Outbound,
		"proxy.ports.admin": v.Proxy.Ports.Admin, "proxy.ports.control": v.Proxy.Ports.Control,
	}
	for field, p := range ports {
		if p < 1 || p > 65535 {
			bad(field, "%d is not a port (1-65535)", p)
		}
	}
	if err := distinctPorts(v.Proxy.Ports); err != nil {
		bad("proxy.ports", "%v", err)
	}
	for field, r := range map[string]Resources{"proxy.resources": v.Proxy.Resources, "proxyInit.resources": v.ProxyInit.Resources} {
		if _, err := parseResources(r); err != nil {
			bad(field, "%v", err)
		}
	}
	if err := checkLogLevel(v.Proxy.LogLevel); err != nil {
		bad("proxy.logLevel", "%v", err)
	}
	if _, err := parseLogFormat(v.Proxy.LogFormat); err != nil {
		bad("proxy.logFormat", "%v", err)
	}
	if _, err := ParsePorts(v.Proxy.OpaquePorts, nil); err != nil {
		bad("proxy.opaquePorts", "%v", err)
	}
	if _, err := parseInboundPolicy(v.Proxy.DefaultInboundPolicy); err != nil {
		bad("proxy.defaultInboundPolicy", "%v", err)
	}
	if v.Proxy.ShutdownGracePeriod.Duration < 0 {
		bad("proxy.shutdownGracePeriod", "%s is negative", v.Proxy.ShutdownGracePeriod.Duration)
	}
	if v.Proxy.WaitBeforeExitSeconds < 0 {
		bad("proxy.waitBeforeExitSeconds", "%d is negative", v.Proxy.WaitBeforeExitSeconds)
	}
	if v.Proxy.Await && !v.Proxy.NativeSidecar && len(v.Proxy.AwaitCommand) == 0 {
		bad("proxy.awaitCommand", "empty while await is on in classic mode")
	}
	for field, s := range map[string]string{"proxyInit.ignoreInboundPorts": v.ProxyInit.IgnoreInboundPorts, "proxyInit.ignoreOutboundPorts": v.ProxyInit.IgnoreOutboundPorts} {
		if _, err := ParsePorts(s, nil); err != nil {
			bad(field, "%v", err)
		}
	}
	if _, err := parseSubnets(v.ClusterNetworks); err != nil {
		bad("clusterNetworks", "%v", err)
	}
	if _, err := parseSubnets(v.ProxyInit.SkipSubnets); err != nil {
		bad("proxyInit.skipSubnets", "%v", err)
	}
	sortErrors(errs)
	return errors.Join(errs...)
}

func distinctPorts(p Ports) error {
	seen := map[int32]string{}
	for _, e := range []struct {
		name string
		port int32
	}{{"inbound", p.Inbound}, {"outbound", p.Outbound}, {"admin", p.Admin}, {"control", p.Control}} {
		if other, ok := seen[e.port]; ok {
			return fmt.Errorf("%s and %s ports are both %d", other, e.name, e.port)
		}
		seen[e.port] = e.name
	}
	return nil
}
