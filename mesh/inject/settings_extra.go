package inject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// Extras are the resolved settings of the proxy's optional behaviour, the
// debug sidecar, the CNI network validator and weft-init's close-wait
// sysctl. Zero values keep the proxy's own defaults.
type Extras struct {
	// AccessLog is "apache", "json" or "" (off).
	AccessLog string
	// InboundConnectTimeout and OutboundConnectTimeout bound dialling the
	// application and remote endpoints.
	InboundConnectTimeout  time.Duration
	OutboundConnectTimeout time.Duration
	// OutboundDiscoveryIdleTimeout drops unused outbound destinations.
	OutboundDiscoveryIdleTimeout time.Duration
	// DisableInboundDetectTimeout and DisableOutboundDetectTimeout make
	// protocol detection wait for the client's first bytes.
	DisableInboundDetectTimeout  bool
	DisableOutboundDetectTimeout bool
	// RequireIdentityPorts refuse clients without a mesh identity.
	RequireIdentityPorts PortRanges
	// PodInboundPorts are application ports the pod spec does not declare.
	PodInboundPorts PortRanges
	// CPURatioLimit caps the proxy's worker threads at this fraction of
	// the node's CPUs (0: no cap).
	CPURatioLimit float64
	// AdditionalEnv is merged into the proxy's environment by name.
	AdditionalEnv []corev1.EnvVar

	// Debug adds the debug sidecar, with DebugImage and DebugPull.
	Debug      bool
	DebugImage string
	DebugPull  corev1.PullPolicy

	// CloseWaitTimeout makes weft-init set the conntrack close-wait
	// timeout (whole seconds); it needs a privileged init container.
	CloseWaitTimeout time.Duration

	// ValidatorConnectAddr, ValidatorListenAddr and ValidatorTimeout
	// configure the CNI-mode network validator.
	ValidatorConnectAddr string
	ValidatorListenAddr  string
	ValidatorTimeout     time.Duration

	// TraceCollector is the OTLP collector (HOST:PORT) the proxy sends
	// its spans to; empty leaves tracing off. TraceCollectorServiceAccount
	// is the collector's service account (see traceEnv).
	TraceCollector               string
	TraceCollectorServiceAccount string
}

// initExtras fills the extras from values.
func (w *workingConfig) initExtras(v *Values) {
	e := &w.Extras
	if v.Proxy.AccessLog != "" {
		e.AccessLog, _ = parseAccessLog(v.Proxy.AccessLog)
	}
	e.InboundConnectTimeout = v.Proxy.InboundConnectTimeout.Duration
	e.OutboundConnectTimeout = v.Proxy.OutboundConnectTimeout.Duration
	e.OutboundDiscoveryIdleTimeout = v.Proxy.OutboundDiscoveryCacheUnusedTimeout.Duration
	e.DisableInboundDetectTimeout = v.Proxy.DisableInboundProtocolDetectTimeout
	e.DisableOutboundDetectTimeout = v.Proxy.DisableOutboundProtocolDetectTimeout
	e.RequireIdentityPorts, _ = ParsePorts(v.Proxy.RequireIdentityOnInboundPorts, nil)
	e.PodInboundPorts, _ = ParsePorts(v.Proxy.PodInboundPorts, nil)
	e.CPURatioLimit = v.Proxy.CPURatioLimit
	e.AdditionalEnv = append([]corev1.EnvVar(nil), v.Proxy.AdditionalEnv...)
	e.DebugPull = orDefault(v.DebugContainer.Image.PullPolicy, corev1.PullIfNotPresent)
	e.CloseWaitTimeout = v.ProxyInit.CloseWaitTimeout.Duration
	e.ValidatorConnectAddr = v.NetworkValidator.ConnectAddr
	e.ValidatorListenAddr = v.NetworkValidator.ListenAddr
	e.ValidatorTimeout = v.NetworkValidator.Timeout.Duration
	w.debugImageName = v.DebugContainer.Image.Name
	w.debugVersion = v.version(v.DebugContainer.Image.Version)
}

// finishExtras composes the debug image and notes settings that the
// chosen mode cannot apply.
func (w *workingConfig) finishExtras(podObj string) {
	w.DebugImage = imageRef(w.debugImageName, w.debugVersion)
	if w.CNI && w.CloseWaitTimeout > 0 {
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s: close-wait-timeout (%s) is not applied in CNI mode: there is no weft-init container to set the sysctl", podObj, w.describe("close-wait-timeout")))
	}
	if !w.CNI && w.CloseWaitTimeout > 0 {
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s: close-wait-timeout (%s) makes weft-init run privileged, as root, to write the conntrack sysctl", podObj, w.describe("close-wait-timeout")))
	}
	if w.ValidatorListenAddr == "" {
		w.ValidatorListenAddr = "0.0.0.0:" + strconv.Itoa(int(w.Ports.Outbound))
	}
}

// additionalEnv merges proxy-additional-env by variable name: Values, then
// the namespace's annotation, then the pod's (Linkerd merges these layers
// the same way instead of letting one replace the other).
func (w *workingConfig) additionalEnv(v *Values, podAnn, nsAnn map[string]string, podObj, nsObj string) []error {
	layers := [][]corev1.EnvVar{v.Proxy.AdditionalEnv}
	st := Setting{Name: "proxy-additional-env", Source: SourceValues}
	var errs []error
	for _, l := range []struct {
		ann map[string]string
		obj string
		src Source
	}{{nsAnn, nsObj, SourceNamespace}, {podAnn, podObj, SourcePod}} {
		raw, ok := l.ann[vocab.AnnotationProxyAdditionalEnv]
		if !ok {
			continue
		}
		env, err := parseEnv(raw)
		if err != nil {
			errs = append(errs, &AnnotationError{Object: l.obj, Key: vocab.AnnotationProxyAdditionalEnv, Value: raw, Err: err})
			continue
		}
		layers = append(layers, env)
		st.Source, st.Annotation = l.src, vocab.AnnotationProxyAdditionalEnv
	}
	w.AdditionalEnv = mergeEnv(layers...)
	if len(w.AdditionalEnv) > maxAdditionalEnv {
		errs = append(errs, fmt.Errorf("inject: %s: proxy-additional-env: %d variables after merging (at most %d)", podObj, len(w.AdditionalEnv), maxAdditionalEnv))
	}
	for _, e := range w.AdditionalEnv {
		if strings.HasPrefix(e.Name, "LINKERD2_PROXY_") {
			w.Warnings = append(w.Warnings, fmt.Sprintf("%s: proxy-additional-env sets %s, which Weft's proxy does not read (its variables start with WEFT_PROXY_)", podObj, e.Name))
		}
	}
	st.Value = envNames(w.AdditionalEnv)
	w.Settings = append(w.Settings, st)
	return errs
}

// extraSettings are the settings added for parity with Linkerd's
// annotations beyond the original set.
func extraSettings() []setting {
	duration := func(get func(w *workingConfig) *time.Duration) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			d, err := parsePositiveDuration(strings.TrimSpace(v))
			if err != nil {
				return err
			}
			*get(w) = d
			return nil
		}
	}
	showDuration := func(get func(w *workingConfig) time.Duration) func(*workingConfig) string {
		return func(w *workingConfig) string {
			if d := get(w); d > 0 {
				return d.String()
			}
			return ""
		}
	}
	boolean := func(get func(w *workingConfig) *bool) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			b, err := parseBool(strings.TrimSpace(v))
			*get(w) = b
			return err
		}
	}
	ports := func(get func(w *workingConfig) *PortRanges) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			r, err := ParsePorts(v, w.named)
			*get(w) = r
			return err
		}
	}
	return []setting{
		{name: "access-log", keys: []string{vocab.AnnotationAccessLog},
			apply: func(w *workingConfig, v string) error {
				f, err := parseAccessLog(v)
				w.AccessLog = f
				return err
			},
			show: func(w *workingConfig) string { return w.AccessLog }},
		{name: "proxy-inbound-connect-timeout", keys: []string{vocab.AnnotationProxyInboundConnectTime},
			apply: duration(func(w *workingConfig) *time.Duration { return &w.InboundConnectTimeout }),
			show:  showDuration(func(w *workingConfig) time.Duration { return w.InboundConnectTimeout })},
		{name: "proxy-outbound-connect-timeout", keys: []string{vocab.AnnotationProxyOutboundConnectTime},
			apply: duration(func(w *workingConfig) *time.Duration { return &w.OutboundConnectTimeout }),
			show:  showDuration(func(w *workingConfig) time.Duration { return w.OutboundConnectTimeout })},
		{name: "proxy-outbound-discovery-cache-unused-timeout", keys: []string{vocab.AnnotationOutboundDiscoveryUnusedTimeout},
			apply: duration(func(w *workingConfig) *time.Duration { return &w.OutboundDiscoveryIdleTimeout }),
			show:  showDuration(func(w *workingConfig) time.Duration { return w.OutboundDiscoveryIdleTimeout })},
		{name: "proxy-disable-inbound-protocol-detect-timeout", keys: []string{vocab.AnnotationDisableInboundDetectTimeout},
			apply: boolean(func(w *workingConfig) *bool { return &w.DisableInboundDetectTimeout }),
			show:  func(w *workingConfig) string { return strconv.FormatBool(w.DisableInboundDetectTimeout) }},
		{name: "proxy-disable-outbound-protocol-detect-timeout", keys: []string{vocab.AnnotationDisableOutboundDetectTimeout},
			apply: boolean(func(w *workingConfig) *bool { return &w.DisableOutboundDetectTimeout }),
			show:  func(w *workingConfig) string { return strconv.FormatBool(w.DisableOutboundDetectTimeout) }},
		{name: "proxy-require-identity-inbound-ports", keys: []string{vocab.AnnotationRequireIdentityInboundPorts},
			apply: ports(func(w *workingConfig) *PortRanges { return &w.RequireIdentityPorts }),
			show:  func(w *workingConfig) string { return w.RequireIdentityPorts.String() }},
		{name: "pod-inbound-ports", keys: []string{vocab.AnnotationPodInboundPorts},
			apply: ports(func(w *workingConfig) *PortRanges { return &w.PodInboundPorts }),
			show:  func(w *workingConfig) string { return w.PodInboundPorts.String() }},
		{name: "proxy-cpu-ratio-limit", keys: []string{vocab.AnnotationProxyCPURatioLimit},
			apply: func(w *workingConfig, v string) error {
				r, err := parseCPURatio(v)
				w.CPURatioLimit = r
				return err
			},
			show: func(w *workingConfig) string {
				if w.CPURatioLimit == 0 {
					return ""
				}
				return strconv.FormatFloat(w.CPURatioLimit, 'g', -1, 64)
			}},
		{name: "enable-debug-sidecar", keys: []string{vocab.AnnotationEnableDebugSidecar},
			apply: boolean(func(w *workingConfig) *bool { return &w.Debug }),
			show:  func(w *workingConfig) string { return strconv.FormatBool(w.Debug) }},
		{name: "debug-image", keys: []string{vocab.AnnotationDebugImage},
			apply: func(w *workingConfig, v string) error {
				if !isImageName(v) {
					return fmt.Errorf("%q is not an image name (without tag; the tag is debug-image-version)", v)
				}
				w.debugImageName = v
				return nil
			},
			show: func(w *workingConfig) string { return w.debugImageName }},
		{name: "debug-image-version", keys: []string{vocab.AnnotationDebugImageVersion},
			apply: func(w *workingConfig, v string) error {
				if !isImageTag(v) {
					return fmt.Errorf("%q is not an image tag", v)
				}
				w.debugVersion = v
				return nil
			},
			show: func(w *workingConfig) string { return w.debugVersion }},
		{name: "debug-image-pull-policy", keys: []string{vocab.AnnotationDebugImagePullPolicy},
			apply: func(w *workingConfig, v string) error {
				p, err := parsePullPolicy(v)
				w.DebugPull = p
				return err
			},
			show: func(w *workingConfig) string { return string(w.DebugPull) }},
		{name: "trace-collector", keys: []string{vocab.AnnotationTraceCollector},
			apply: func(w *workingConfig, v string) error {
				a, err := parseCollectorAddr(v)
				w.TraceCollector = a
				return err
			},
			show: func(w *workingConfig) string { return w.TraceCollector }},
		{name: "trace-collector-service-account", keys: []string{vocab.AnnotationTraceCollectorServiceAccount},
			apply: func(w *workingConfig, v string) error {
				v = strings.TrimSpace(v)
				if !isDNSLabel(v) {
					return fmt.Errorf("%q is not a service account name", v)
				}
				w.TraceCollectorServiceAccount = v
				return nil
			},
			show: func(w *workingConfig) string { return w.TraceCollectorServiceAccount }},
		{name: "close-wait-timeout", keys: []string{vocab.AnnotationCloseWaitTimeout},
			apply: func(w *workingConfig, v string) error {
				d, err := parsePositiveDuration(strings.TrimSpace(v))
				if err != nil {
					return err
				}
				if d < time.Second {
					return errors.New("under a second (the sysctl counts whole seconds)")
				}
				w.CloseWaitTimeout = d
				return nil
			},
			show: showDuration(func(w *workingConfig) time.Duration { return w.CloseWaitTimeout })},
	}
}
