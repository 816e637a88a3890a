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
	// DebugContainer configures the debug sidecar added to pods annotated
	// config.linkerd.io/enable-debug-sidecar: "true".
	DebugContainer DebugValues `json:"debugContainer"`
	// NetworkValidator configures the init container that, in CNI mode,
	// checks that the pod's outbound traffic reaches the proxy.
	NetworkValidator ValidatorValues `json:"networkValidator"`
	// Egress configures the policy controller's EgressNetwork lookups
	// (Linkerd's chart keys egress.*). The injector does not read it.
	Egress EgressValues `json:"egress"`
}

// EgressValues configures where the policy controller looks for
// EgressNetworks.
type EgressValues struct {
	// GlobalEgressNetworkNamespace is the namespace whose EgressNetworks
	// apply to clients of every namespace, after those of the client's
	// own namespace (the policy controller's
	// --global-egress-network-namespace; Linkerd's default,
	// linkerd-egress).
	GlobalEgressNetworkNamespace string `json:"globalEgressNetworkNamespace"`
}

// DebugValues configures the debug sidecar.
type DebugValues struct {
	// Image is the debug container's image; an empty Version falls back to
	// [Values.Version].
	Image Image `json:"image"`
}

// ValidatorValues configures the CNI-mode network validator (weft-init
// validate). It listens on the proxy's outbound port and connects to
// ConnectAddr: only the redirection the CNI plugin installs can bring that
// connection back to its own listener.
type ValidatorValues struct {
	// ConnectAddr is an address outside the pod ("1.1.1.1:20001"; nothing
	// needs to listen there). Use an IPv6 address in IPv6-only clusters.
	ConnectAddr string `json:"connectAddr"`
	// ListenAddr is where the validator listens; empty means
	// 0.0.0.0:<proxy outbound port>.
	ListenAddr string `json:"listenAddr,omitempty"`
	// Timeout bounds the whole check.
	Timeout metav1.Duration `json:"timeout"`
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
	// TapIdentities lists, comma-separated, the mesh identities the proxy
	// serves tap to (io.linkerd.proxy.tap over mutual TLS on
	// Ports.Control). Empty turns tap off. `weft install` sets it to the
	// tapper's identity (tap.<controlPlaneNamespace>.serviceaccount...).
	TapIdentities string `json:"tapIdentities,omitempty"`
	// AccessLog is "apache" or "json" to make the inbound proxy write one
	// line per HTTP request (Linkerd's formats); empty means off.
	AccessLog string `json:"accessLog,omitempty"`
	// InboundConnectTimeout and OutboundConnectTimeout bound dialling the
	// application and remote endpoints; zero keeps the proxy's default.
	InboundConnectTimeout  metav1.Duration `json:"inboundConnectTimeout,omitempty"`
	OutboundConnectTimeout metav1.Duration `json:"outboundConnectTimeout,omitempty"`
	// OutboundDiscoveryCacheUnusedTimeout is how long an outbound
	// destination nobody uses keeps its discovery watch; zero keeps the
	// proxy's default.
	OutboundDiscoveryCacheUnusedTimeout metav1.Duration `json:"outboundDiscoveryCacheUnusedTimeout,omitempty"`
	// DisableInboundProtocolDetectTimeout and
	// DisableOutboundProtocolDetectTimeout make protocol detection wait
	// for the client's first bytes (up to a year) instead of treating a
	// silent client as opaque after the detect timeout.
	DisableInboundProtocolDetectTimeout  bool `json:"disableInboundProtocolDetectTimeout,omitempty"`
	DisableOutboundProtocolDetectTimeout bool `json:"disableOutboundProtocolDetectTimeout,omitempty"`
	// RequireIdentityOnInboundPorts lists ports and ranges on which the
	// proxy refuses clients without a mesh identity, whatever the policy.
	RequireIdentityOnInboundPorts string `json:"requireIdentityOnInboundPorts,omitempty"`
	// PodInboundPorts lists application ports that the pod spec does not
	// declare (containers added after injection); the proxy fetches their
	// policy at startup as for declared ports.
	PodInboundPorts string `json:"podInboundPorts,omitempty"`
	// CPURatioLimit, in (0, 1], caps the proxy's worker threads at this
	// fraction of the node's CPUs; zero means no cap beyond the CPU limit.
	CPURatioLimit float64 `json:"cpuRatioLimit,omitempty"`
	// AdditionalEnv is added to the proxy's environment (entries with the
	// name of a variable the injector sets replace it). Namespace and pod
	// annotations config.linkerd.io/proxy-additional-env merge over it by
	// name.
	AdditionalEnv []corev1.EnvVar `json:"additionalEnv,omitempty"`
}

// InitValues configures the weft-init container.
type InitValues struct {
	Image     Image     `json:"image"`
	Resources Resources `json:"resources"`
	// IgnoreInboundPorts and IgnoreOutboundPorts are ports and ranges
	// never redirected to the proxy; SkipSubnets are CIDRs whose outbound
	// traffic is never redirected.
	IgnoreInboundPorts  string `json:"ignoreInboundPorts"`
	IgnoreOutboundPorts string `json:"ignoreOutboundPorts"`
	SkipSubnets         string `json:"skipSubnets,omitempty"`
	// CloseWaitTimeout, when non-zero, makes weft-init set the pod's
	// nf_conntrack_tcp_timeout_close_wait (whole seconds). Writing that
	// sysctl needs a privileged init container.
	CloseWaitTimeout metav1.Duration `json:"closeWaitTimeout,omitempty"`
}

// DefaultValues returns the settings Weft ships with.
func DefaultValues() Values {
	return Values{
		Version:               vocab.DefaultVersion,
		ControlPlaneNamespace: vocab.DefaultControlPlaneNamespace,
		ClusterDomain:         vocab.DefaultClusterDomain,
		IdentityTrustDomain:   vocab.DefaultTrustDomain,
		ClusterNetworks:       subnetsString(vocab.DefaultClusterNetworks()),
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
			IgnoreInboundPorts:  vocab.DefaultSkipPorts,
			IgnoreOutboundPorts: vocab.DefaultSkipPorts,
		},
		DebugContainer: DebugValues{Image: Image{Name: vocab.DefaultDebugImage, PullPolicy: corev1.PullIfNotPresent}},
		NetworkValidator: ValidatorValues{
			ConnectAddr: "1.1.1.1:20001",
			Timeout:     metav1.Duration{Duration: 10 * time.Second},
		},
		Egress: EgressValues{GlobalEgressNetworkNamespace: vocab.DefaultGlobalEgressNamespace},
	}
}

// ParseValues reads Values from YAML or JSON on top of [DefaultValues]:
// fields the document leaves out keep their defaults. Unknown and duplicate
// fields are errors, and the result is validated.
func ParseValues(data []byte) (Values, error) {
	return ParseValuesOnto(DefaultValues(), data)
}

// ParseValuesOnto is ParseValues over base instead of the defaults (for
// example values mapped from a Linkerd values file).
func ParseValuesOnto(base Values, data []byte) (Values, error) {
	v := base
	v.Proxy.AwaitCommand = append([]string(nil), base.Proxy.AwaitCommand...)
	v.Proxy.AdditionalEnv = append([]corev1.EnvVar(nil), base.Proxy.AdditionalEnv...)
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

// DebugImage returns the debug sidecar's image reference (name:tag).
func (v *Values) DebugImage() string {
	return imageRef(v.DebugContainer.Image.Name, v.version(v.DebugContainer.Image.Version))
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
	if !isDNSLabel(v.Egress.GlobalEgressNetworkNamespace) {
		bad("egress.globalEgressNetworkNamespace", "%q is not a namespace name", v.Egress.GlobalEgressNetworkNamespace)
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
	for field, tag := range map[string]string{"version": v.Version, "proxy.image.version": v.Proxy.Image.Version, "proxyInit.image.version": v.ProxyInit.Image.Version, "debugContainer.image.version": v.DebugContainer.Image.Version} {
		if tag != "" && !isImageTag(tag) {
			bad(field, "%q is not an image tag", tag)
		}
	}
	for field, img := range map[string]Image{"proxy.image": v.Proxy.Image, "proxyInit.image": v.ProxyInit.Image, "debugContainer.image": v.DebugContainer.Image} {
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
	if _, err := parseTapIdentities(v.Proxy.TapIdentities); err != nil {
		bad("proxy.tapIdentities", "%v", err)
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
	errs = append(errs, v.validateExtras()...)
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

// parseTapIdentities reads a comma-separated list of mesh identities
// (DNS names, lower-cased); empty entries are skipped.
func parseTapIdentities(s string) ([]string, error) {
	var out []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.ToLower(strings.TrimSpace(id)); id == "" {
			continue
		}
		if !isDNSName(id) {
			return nil, fmt.Errorf("%q is not an identity name", id)
		}
		out = append(out, id)
	}
	return out, nil
}
