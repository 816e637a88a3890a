package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/inject"
)

// LinkerdValues is what a linkerd-control-plane Helm values file means for
// Weft: the Values it sets, the install settings of the identity service,
// and, key by key, what was mapped and what was not (with the reason).
type LinkerdValues struct {
	// Values are the base values with every understood key applied.
	Values inject.Values
	// IssuanceLifetime and ClockSkewAllowance come from
	// identity.issuer.*; zero means not set.
	IssuanceLifetime   time.Duration
	ClockSkewAllowance time.Duration
	// IssuerScheme is identity.issuer.scheme ("linkerd.io/tls" or
	// "kubernetes.io/tls"); empty means not set.
	IssuerScheme string
	// IssuerCertPEM and IssuerKeyPEM are identity.issuer.tls.crtPEM and
	// keyPEM when the file carries them.
	IssuerCertPEM, IssuerKeyPEM []byte
	// Mapped lists the keys applied, in dotted form ("proxy.logLevel").
	Mapped []string
	// NotMapped lists every other key set in the file with the reason.
	NotMapped []NotMapped
}

// NotMapped is a key of a Linkerd values file Weft does not apply.
type NotMapped struct {
	Key    string
	Reason string
}

// Reasons for keys that are not mapped.
const (
	reasonLinkerdImage  = "names a Linkerd image; Weft's images come from its own values"
	reasonFixed         = "Weft renders this itself and has no setting for it"
	reasonNotApplicable = "has no meaning for Weft's proxy"
	reasonOtherPart     = "not a proxy, proxyInit, identity or policy setting"
	reasonPerWorkload   = "a per-workload mode: use the linkerd.io/inject or config.linkerd.io annotations"
)

// maxLinkerdValuesBytes bounds a values file.
const maxLinkerdValuesBytes = 4 << 20

// FromLinkerdValues reads a linkerd-control-plane chart values file (YAML
// or JSON) and applies the keys of proxy, proxyInit, debugContainer,
// networkValidator, identity and the top-level cluster settings onto base.
// Every key the file sets is accounted for: applied, or named in
// NotMapped with the reason. A value of the wrong type or outside what
// Weft accepts is an error naming the key; the result is validated.
func FromLinkerdValues(base inject.Values, data []byte) (*LinkerdValues, error) {
	if len(data) > maxLinkerdValuesBytes {
		return nil, fmt.Errorf("install: linkerd values: larger than %d bytes", maxLinkerdValuesBytes)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("install: linkerd values: %w", err)
	}
	out := &LinkerdValues{Values: base}
	m := &linkerdMapper{out: out}
	m.walk("", tree)
	if len(m.errs) > 0 {
		sort.Slice(m.errs, func(i, j int) bool { return m.errs[i].Error() < m.errs[j].Error() })
		return nil, errors.Join(m.errs...)
	}
	if err := out.Values.Validate(); err != nil {
		return nil, fmt.Errorf("install: linkerd values: after mapping: %w", err)
	}
	sort.Strings(out.Mapped)
	sort.Slice(out.NotMapped, func(i, j int) bool { return out.NotMapped[i].Key < out.NotMapped[j].Key })
	return out, nil
}

type linkerdMapper struct {
	out  *LinkerdValues
	errs []error
}

// walk visits every leaf (a list, a scalar, or an empty map) of the tree.
func (m *linkerdMapper) walk(prefix string, v any) {
	if node, ok := v.(map[string]any); ok && len(node) > 0 && !m.isLeafMap(prefix) {
		keys := make([]string, 0, len(node))
		for k := range node {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			m.walk(key, node[k])
		}
		return
	}
	if prefix == "" {
		return
	}
	m.leaf(prefix, v)
}

// isLeafMap names maps that are values in their own right.
func (m *linkerdMapper) isLeafMap(key string) bool {
	switch key {
	case "proxy.securityContext", "networkValidator.securityContext", "proxy.additionalEnv", "proxy.experimentalEnv", "podAnnotations", "podLabels", "commonLabels", "nodeSelector", "nodeAffinity":
		return true
	}
	return false
}

func (m *linkerdMapper) skip(key, reason string) {
	m.out.NotMapped = append(m.out.NotMapped, NotMapped{Key: key, Reason: reason})
}

func (m *linkerdMapper) bad(key string, v any, why string) {
	m.errs = append(m.errs, fmt.Errorf("install: linkerd values: %s=%v: %s", key, v, why))
}

// leaf applies one key.
func (m *linkerdMapper) leaf(key string, v any) {
	v2 := &m.out.Values
	p := &v2.Proxy
	str := func(dst *string) {
		s, ok := scalarString(v)
		if !ok {
			m.bad(key, v, "not a string")
			return
		}
		if s == "" {
			m.skip(key, "empty: Weft keeps its own value")
			return
		}
		*dst = s
		m.out.Mapped = append(m.out.Mapped, key)
	}
	boolean := func(dst *bool) {
		b, ok := v.(bool)
		if !ok {
			m.bad(key, v, "not true or false")
			return
		}
		*dst = b
		m.out.Mapped = append(m.out.Mapped, key)
	}
	integer := func(set func(int64) error) {
		n, ok := scalarInt(v)
		if !ok {
			m.bad(key, v, "not a whole number")
			return
		}
		if err := set(n); err != nil {
			m.bad(key, v, err.Error())
			return
		}
		m.out.Mapped = append(m.out.Mapped, key)
	}
	duration := func(dst *time.Duration) {
		s, ok := scalarString(v)
		if !ok {
			m.bad(key, v, "not a duration")
			return
		}
		if s == "" {
			m.skip(key, "empty: Weft keeps its own value")
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			m.bad(key, v, "not a duration (like 100ms or 5s)")
			return
		}
		*dst = d
		m.out.Mapped = append(m.out.Mapped, key)
	}
	metaDuration := func(dst *metav1.Duration) { duration(&dst.Duration) }
	port := func(dst *int32) {
		integer(func(n int64) error {
			if n < 1 || n > 65535 {
				return errors.New("not a port (1-65535)")
			}
			*dst = int32(n)
			return nil
		})
	}
	pull := func(dsts ...*corev1.PullPolicy) {
		var s string
		str(&s)
		if s != "" {
			for _, d := range dsts {
				*d = corev1.PullPolicy(s)
			}
		}
	}

	switch key {
	// Top-level cluster settings.
	case "clusterDomain":
		str(&v2.ClusterDomain)
	case "clusterNetworks":
		str(&v2.ClusterNetworks)
	case "identityTrustDomain":
		str(&v2.IdentityTrustDomain)
	case "identityTrustAnchorsPEM":
		str(&v2.IdentityTrustAnchorsPEM)
	case "cniEnabled":
		boolean(&v2.CNIEnabled)
	case "imagePullPolicy":
		pull(&p.Image.PullPolicy, &v2.ProxyInit.Image.PullPolicy, &v2.DebugContainer.Image.PullPolicy)
	case "linkerdVersion":
		m.skip(key, reasonLinkerdImage)
	case "egress.globalEgressNetworkNamespace":
		str(&v2.Egress.GlobalEgressNetworkNamespace)
	case "disableIPv6":
		m.skip(key, "weft-init installs IPv6 rules whenever ip6tables is present; the network validator's address is networkValidator.connectAddr")

	// proxy.*
	case "proxy.image.name", "proxy.image.version":
		m.skip(key, reasonLinkerdImage)
	case "proxy.image.pullPolicy":
		pull(&p.Image.PullPolicy)
	case "proxy.logLevel":
		str(&p.LogLevel)
	case "proxy.logFormat":
		str(&p.LogFormat)
	case "proxy.ports.admin":
		port(&p.Ports.Admin)
	case "proxy.ports.control":
		port(&p.Ports.Control)
	case "proxy.ports.inbound":
		port(&p.Ports.Inbound)
	case "proxy.ports.outbound":
		port(&p.Ports.Outbound)
	case "proxy.resources.cpu.request":
		str(&p.Resources.CPU.Request)
	case "proxy.resources.cpu.limit":
		str(&p.Resources.CPU.Limit)
	case "proxy.resources.memory.request":
		str(&p.Resources.Memory.Request)
	case "proxy.resources.memory.limit":
		str(&p.Resources.Memory.Limit)
	case "proxy.resources.ephemeral-storage.request":
		str(&p.Resources.EphemeralStorage.Request)
	case "proxy.resources.ephemeral-storage.limit":
		str(&p.Resources.EphemeralStorage.Limit)
	case "proxy.uid":
		integer(func(n int64) error {
			if n <= 0 {
				return errors.New("the proxy must run as a non-root user")
			}
			p.UID = n
			return nil
		})
	case "proxy.gid":
		integer(func(n int64) error {
			if n < 0 {
				p.GID = 0 // Linkerd's -1: no runAsGroup
				return nil
			}
			p.GID = n
			return nil
		})
	case "proxy.await":
		boolean(&p.Await)
	case "proxy.nativeSidecar":
		boolean(&p.NativeSidecar)
	case "proxy.enableShutdownEndpoint":
		boolean(&p.AdminShutdown)
	case "proxy.opaquePorts":
		str(&p.OpaquePorts)
	case "proxy.defaultInboundPolicy":
		str(&p.DefaultInboundPolicy)
	case "proxy.shutdownGracePeriod":
		metaDuration(&p.ShutdownGracePeriod)
	case "proxy.waitBeforeExitSeconds":
		integer(func(n int64) error {
			if n < 0 {
				return errors.New("negative")
			}
			p.WaitBeforeExitSeconds = n
			return nil
		})
	case "proxy.accessLog":
		str(&p.AccessLog)
	case "proxy.inboundConnectTimeout":
		metaDuration(&p.InboundConnectTimeout)
	case "proxy.outboundConnectTimeout":
		metaDuration(&p.OutboundConnectTimeout)
	case "proxy.outboundDiscoveryCacheUnusedTimeout":
		metaDuration(&p.OutboundDiscoveryCacheUnusedTimeout)
	case "proxy.disableInboundProtocolDetectTimeout":
		boolean(&p.DisableInboundProtocolDetectTimeout)
	case "proxy.disableOutboundProtocolDetectTimeout":
		boolean(&p.DisableOutboundProtocolDetectTimeout)
	case "proxy.requireIdentityOnInboundPorts":
		str(&p.RequireIdentityOnInboundPorts)
	case "proxy.podInboundPorts":
		str(&p.PodInboundPorts)
	case "proxy.runtime.workers.maximumCPURatio":
		f, ok := scalarFloat(v)
		if !ok || f <= 0 || f > 1 {
			m.bad(key, v, "not a ratio in (0, 1]")
			return
		}
		p.CPURatioLimit = f
		m.out.Mapped = append(m.out.Mapped, key)
	case "proxy.runtime.workers.minimum", "proxy.runtime.workers.maximum", "proxy.cores":
		m.skip(key, "Weft's proxy takes its worker threads from the CPU limit (and proxy.runtime.workers.maximumCPURatio)")
	case "proxy.additionalEnv":
		b, _ := json.Marshal(v)
		var env []corev1.EnvVar
		if err := json.Unmarshal(b, &env); err != nil {
			m.bad(key, v, "not a list of environment variables")
			return
		}
		p.AdditionalEnv = env
		m.out.Mapped = append(m.out.Mapped, key)
	case "proxy.enableExternalProfiles":
		m.skip(key, reasonNotApplicable+": it already looks up ServiceProfiles for every destination")
	case "proxy.inboundDiscoveryCacheUnusedTimeout":
		m.skip(key, reasonNotApplicable+": the inbound side keeps one policy watch per port")
	case "proxy.metrics.hostnameLabels":
		m.skip(key, reasonNotApplicable+": outbound metrics always carry the destination authority")
	case "proxy.logHTTPHeaders":
		m.skip(key, reasonNotApplicable+": it never logs HTTP header values")
	case "proxy.isIngress", "proxy.isGateway":
		m.skip(key, reasonPerWorkload)
	case "proxy.outboundTransportMode":
		m.skip(key, "Weft proxies always use their own transport header between proxies")

	// proxyInit.*
	case "proxyInit.ignoreInboundPorts":
		m.anyString(key, v, &v2.ProxyInit.IgnoreInboundPorts)
	case "proxyInit.ignoreOutboundPorts":
		m.anyString(key, v, &v2.ProxyInit.IgnoreOutboundPorts)
	case "proxyInit.skipSubnets":
		m.anyString(key, v, &v2.ProxyInit.SkipSubnets)
	case "proxyInit.closeWaitTimeoutSecs":
		integer(func(n int64) error {
			if n < 0 {
				return errors.New("negative")
			}
			v2.ProxyInit.CloseWaitTimeout = metav1.Duration{Duration: time.Duration(n) * time.Second}
			return nil
		})
	case "proxyInit.resources.cpu.request":
		str(&v2.ProxyInit.Resources.CPU.Request)
	case "proxyInit.resources.cpu.limit":
		str(&v2.ProxyInit.Resources.CPU.Limit)
	case "proxyInit.resources.memory.request":
		str(&v2.ProxyInit.Resources.Memory.Request)
	case "proxyInit.resources.memory.limit":
		str(&v2.ProxyInit.Resources.Memory.Limit)
	case "proxyInit.resources.ephemeral-storage.request":
		str(&v2.ProxyInit.Resources.EphemeralStorage.Request)
	case "proxyInit.resources.ephemeral-storage.limit":
		str(&v2.ProxyInit.Resources.EphemeralStorage.Limit)
	case "proxyInit.iptablesMode":
		m.skip(key, "weft-init runs the iptables binary of its image")

	// debugContainer.*, networkValidator.*
	case "debugContainer.image.name":
		str(&v2.DebugContainer.Image.Name)
	case "debugContainer.image.version":
		str(&v2.DebugContainer.Image.Version)
	case "debugContainer.image.pullPolicy":
		pull(&v2.DebugContainer.Image.PullPolicy)
	case "networkValidator.connectAddr":
		str(&v2.NetworkValidator.ConnectAddr)
	case "networkValidator.listenAddr":
		str(&v2.NetworkValidator.ListenAddr)
	case "networkValidator.timeout":
		metaDuration(&v2.NetworkValidator.Timeout)

	// identity.*
	case "identity.issuer.issuanceLifetime":
		duration(&m.out.IssuanceLifetime)
	case "identity.issuer.clockSkewAllowance":
		duration(&m.out.ClockSkewAllowance)
	case "identity.issuer.scheme":
		str(&m.out.IssuerScheme)
	case "identity.issuer.tls.crtPEM":
		var s string
		if str(&s); s != "" {
			m.out.IssuerCertPEM = []byte(s)
		}
	case "identity.issuer.tls.keyPEM":
		var s string
		if str(&s); s != "" {
			m.out.IssuerKeyPEM = []byte(s)
		}
	case "identity.serviceAccountTokenProjection":
		if b, ok := v.(bool); ok && b {
			m.out.Mapped = append(m.out.Mapped, key) // Weft always projects the token
			return
		}
		m.skip(key, "Weft's proxies always present a projected service-account token")
	case "identity.externalCA":
		m.skip(key, "give the trust anchors with identityTrustAnchorsPEM or --identity-trust-anchors-file")

	default:
		switch {
		case strings.HasPrefix(key, "proxy.securityContext"), strings.HasPrefix(key, "proxy.capabilities"),
			strings.HasPrefix(key, "proxy.saMountPath"), strings.HasPrefix(key, "proxy.livenessProbe"),
			strings.HasPrefix(key, "proxy.readinessProbe"), strings.HasPrefix(key, "proxy.startupProbe"),
			strings.HasPrefix(key, "proxy.control."), strings.HasPrefix(key, "proxy.inbound."),
			strings.HasPrefix(key, "proxy.outbound."), strings.HasPrefix(key, "proxyInit."),
			strings.HasPrefix(key, "networkValidator."), strings.HasPrefix(key, "identity."):
			m.skip(key, reasonFixed)
		case strings.HasPrefix(key, "proxy.tracing"):
			m.skip(key, "Weft's proxy does not export traces")
		case strings.HasPrefix(key, "proxy.experimentalEnv"):
			m.skip(key, "LINKERD2_PROXY_* variables have no meaning for Weft's proxy")
		case strings.HasPrefix(key, "policyController."), strings.HasPrefix(key, "policyValidator."):
			m.skip(key, "the policy controller and its webhook take no settings from Values in Weft")
		case strings.HasPrefix(key, "proxy."):
			m.skip(key, reasonFixed)
		default:
			m.skip(key, reasonOtherPart)
		}
	}
}

// anyString maps a key Linkerd writes as a string or a number.
func (m *linkerdMapper) anyString(key string, v any, dst *string) {
	s, ok := scalarString(v)
	if !ok {
		m.bad(key, v, "not a string")
		return
	}
	*dst = s
	m.out.Mapped = append(m.out.Mapped, key)
}

// scalarString accepts strings and numbers (YAML writes "4567" or 4567).
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

func scalarInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x != float64(int64(x)) {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func scalarFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}
