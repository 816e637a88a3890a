package inject

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// Source says where a resolved setting came from.
type Source int

const (
	// SourceValues is the install-time Values.
	SourceValues Source = iota
	// SourceNamespace is an annotation on the pod's namespace.
	SourceNamespace
	// SourcePod is an annotation on the pod (or pod template).
	SourcePod
	// SourceCaller is the caller of the renderer, for example
	// `weft inject --manual`, which asks for injection when neither the pod
	// nor its namespace says anything.
	SourceCaller
)

// String returns "values", "namespace", "pod" or "caller".
func (s Source) String() string {
	switch s {
	case SourceValues:
		return "values"
	case SourceNamespace:
		return "namespace"
	case SourcePod:
		return "pod"
	case SourceCaller:
		return "caller"
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes Source print as its name in JSON reports.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the names MarshalText writes.
func (s *Source) UnmarshalText(b []byte) error {
	for _, c := range []Source{SourceValues, SourceNamespace, SourcePod, SourceCaller} {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("inject: unknown setting source %q", b)
}

// Setting is one resolved value and where it came from.
type Setting struct {
	// Name is the setting's name, the suffix of its annotation
	// ("proxy-cpu-request").
	Name string `json:"name"`
	// Value is the resolved value as text; empty means unset.
	Value string `json:"value"`
	// Source says which layer won.
	Source Source `json:"source"`
	// Annotation is the key that set the value when Source is namespace or
	// pod.
	Annotation string `json:"annotation,omitempty"`
}

// String prints "name=value (source)".
func (s Setting) String() string {
	v := s.Value
	if v == "" {
		v = "(unset)"
	}
	switch s.Source {
	case SourcePod, SourceNamespace:
		return fmt.Sprintf("%s=%s (%s annotation %s)", s.Name, v, s.Source, s.Annotation)
	}
	return fmt.Sprintf("%s=%s (%s)", s.Name, v, s.Source)
}

// Config is the proxy configuration resolved for one pod: pod annotations
// over namespace annotations over [Values]. Settings records the source of
// every value.
type Config struct {
	// Mode is the resolved linkerd.io/inject value: enabled, ingress,
	// disabled, or "" when nothing set it.
	Mode string

	// Version is the Weft version recorded in linkerd.io/created-by.
	Version string
	// ControlPlaneNamespace, TrustDomain and TrustAnchorsPEM come from
	// Values and build the proxy's identity inputs.
	ControlPlaneNamespace string
	TrustDomain           string
	TrustAnchorsPEM       string
	// IdentityAddr, DestinationAddr and PolicyAddr are the control-plane
	// addresses handed to the proxy.
	IdentityAddr    string
	DestinationAddr string
	PolicyAddr      string
	// CNI is true when a CNI plugin replaces weft-init.
	CNI bool
	// ClusterNetworks are handed to the proxy for the cluster-* policies.
	ClusterNetworks []netip.Prefix

	// ProxyImage and InitImage are full image references (name:tag);
	// ProxyVersion is the proxy's tag alone.
	ProxyImage   string
	ProxyVersion string
	InitImage    string
	// ProxyPull and InitPull are the containers' pull policies.
	ProxyPull corev1.PullPolicy
	InitPull  corev1.PullPolicy
	// Ports are the proxy's listening ports.
	Ports Ports
	// ProxyResources and InitResources are the containers' resources.
	ProxyResources corev1.ResourceRequirements
	InitResources  corev1.ResourceRequirements
	// UID and GID are the proxy's user and (when non-zero) group.
	UID int64
	GID int64

	// LogLevel and LogFormat configure the proxy's logs.
	LogLevel  string
	LogFormat string
	// OpaquePorts skip protocol detection; SkipInboundPorts,
	// SkipOutboundPorts and SkipSubnets are never redirected to the proxy.
	OpaquePorts       PortRanges
	SkipInboundPorts  PortRanges
	SkipOutboundPorts PortRanges
	SkipSubnets       []netip.Prefix
	// Await holds application containers until the proxy is ready (in
	// classic mode through AwaitCommand).
	Await        bool
	AwaitCommand []string
	// NativeSidecar selects the init-container sidecar.
	NativeSidecar bool
	// DefaultInboundPolicy, ShutdownGracePeriod and WaitBeforeExit (seconds)
	// are handed to the proxy.
	DefaultInboundPolicy string
	ShutdownGracePeriod  time.Duration
	WaitBeforeExit       int64
	// AdminShutdown enables the proxy's POST /shutdown.
	AdminShutdown bool
	// TapIdentities are the identities the proxy serves tap to; empty
	// turns tap off.
	TapIdentities []string
	// Extras holds the settings of the proxy's optional behaviour, the debug
	// sidecar, the network validator and weft-init's sysctl.
	Extras

	// Settings lists every setting with its value and source, in a fixed
	// order.
	Settings []Setting
	// Warnings are problems that did not stop resolution, such as an
	// annotation Weft does not support.
	Warnings []string
	// Inherited holds the namespace's config annotations the pod does not
	// set itself; the renderer copies them onto the pod so other components
	// (discovery reads opaque-ports) see what the proxy was given.
	Inherited map[string]string
}

// Setting returns the named setting.
func (c *Config) Setting(name string) (Setting, bool) {
	for _, s := range c.Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// workingConfig carries the raw text of settings while annotations are
// applied, so that images and resources are checked once, in full.
type workingConfig struct {
	Config
	proxyImageName, proxyVersion, initImageName, initVersion string
	proxyRes, initRes                                        Resources
	opaqueText                                               string
	named                                                    map[string]int32
	debugImageName, debugVersion                             string
}

// isConfigAnnotation reports whether key is in one of the config prefixes.
func isConfigAnnotation(key string) bool {
	return strings.HasPrefix(key, vocab.ConfigPrefix) || strings.HasPrefix(key, vocab.ConfigPrefixBeta) ||
		strings.HasPrefix(key, vocab.ConfigPrefixAlpha)
}

// AnnotationError is returned for an annotation whose value cannot be used.
// Its message names the object, the annotation and the value.
type AnnotationError struct {
	// Object is "pod \"ns/name\"" or "namespace \"name\"".
	Object string
	// Key and Value are the annotation as written.
	Key   string
	Value string
	// Err says what is wrong with the value.
	Err error
}

// Error formats the problem as
// inject: pod "ns/name": annotation key="value": reason.
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("inject: %s: annotation %s=%q: %v", e.Object, e.Key, e.Value, e.Err)
}

// Unwrap returns the reason.
func (e *AnnotationError) Unwrap() error { return e.Err }

// Resolve computes the proxy configuration of a pod: each setting comes from
// the pod's annotations if set there, else from the namespace's, else from
// values. ns may be nil (no namespace annotations). Every invalid value is
// reported (all at once, joined) as an [*AnnotationError]; values itself is
// validated first.
func Resolve(pod *corev1.Pod, ns *corev1.Namespace, values Values) (Config, error) {
	return resolve(pod, ns, values, "", "")
}

// resolve is Resolve with the caller's default inject mode and a
// description of the object for messages (empty: derived from the pod).
func resolve(pod *corev1.Pod, ns *corev1.Namespace, values Values, callerMode, podObj string) (Config, error) {
	if pod == nil {
		return Config{}, errors.New("inject: no pod")
	}
	if err := values.validate(false); err != nil {
		return Config{}, err
	}
	w := newWorkingConfig(pod, &values)
	if podObj == "" {
		podObj = describePod(pod, ns)
	}
	nsObj := ""
	var nsAnn map[string]string
	if ns != nil {
		nsObj = fmt.Sprintf("namespace %q", ns.Name)
		nsAnn = ns.Annotations
	}
	var errs []error

	// linkerd.io/inject
	mode := Setting{Name: "inject", Source: SourceValues}
	if v, ok := pod.Annotations[vocab.AnnotationInject]; ok {
		m, err := parseInjectMode(v)
		if err != nil {
			errs = append(errs, &AnnotationError{Object: podObj, Key: vocab.AnnotationInject, Value: v, Err: err})
		}
		mode = Setting{Name: "inject", Value: m, Source: SourcePod, Annotation: vocab.AnnotationInject}
	} else if v, ok := nsAnn[vocab.AnnotationInject]; ok {
		m, err := parseInjectMode(v)
		if err != nil {
			errs = append(errs, &AnnotationError{Object: nsObj, Key: vocab.AnnotationInject, Value: v, Err: err})
		}
		if m == vocab.InjectIngress {
			// Ingress mode is a per-workload decision; on a namespace it
			// means enabled, as in Linkerd.
			m = vocab.InjectEnabled
		}
		mode = Setting{Name: "inject", Value: m, Source: SourceNamespace, Annotation: vocab.AnnotationInject}
	} else if callerMode != "" {
		mode = Setting{Name: "inject", Value: callerMode, Source: SourceCaller}
	}
	table, known := settingsIndex()
	w.Mode = mode.Value
	// One entry for the mode, one per setting and one for the additional
	// environment (additionalEnv): sized once, not grown.
	w.Settings = make([]Setting, 0, 2+len(table))
	w.Settings = append(w.Settings, mode)

	var applyErrs []error
	for _, s := range table {
		key, val, src, found := lookup(s.keys, pod.Annotations, nsAnn)
		st := Setting{Name: s.name, Source: SourceValues}
		if found {
			obj := podObj
			if src == SourceNamespace {
				obj = nsObj
			}
			if err := s.apply(w, val); err != nil {
				applyErrs = append(applyErrs, &AnnotationError{Object: obj, Key: key, Value: val, Err: err})
			}
			st.Source, st.Annotation = src, key
		}
		st.Value = s.show(w)
		w.Settings = append(w.Settings, st)
	}
	errs = append(errs, applyErrs...)
	errs = append(errs, w.additionalEnv(&values, pod.Annotations, nsAnn, podObj, nsObj)...)

	// Warnings for config annotations Weft does not act on, and the
	// namespace annotations the pod inherits.
	w.Inherited = map[string]string{}
	for _, layer := range []struct {
		obj  string
		ann  map[string]string
		from Source
	}{{podObj, pod.Annotations, SourcePod}, {nsObj, nsAnn, SourceNamespace}} {
		for _, k := range sortedKeys(layer.ann) {
			if !isConfigAnnotation(k) {
				continue
			}
			idx, isKnown := known[k]
			if layer.from == SourceNamespace && !podSets(pod.Annotations, k, idx, isKnown, table) {
				w.Inherited[k] = layer.ann[k]
			}
			if reason, na := notApplicable(k); na {
				w.Warnings = append(w.Warnings, fmt.Sprintf("%s: annotation %s has no effect: %s", layer.obj, k, reason))
				continue
			}
			switch {
			case isKnown, k == vocab.AnnotationProxyAdditionalEnv:
			default:
				w.Warnings = append(w.Warnings, fmt.Sprintf("%s: unknown annotation %s has no effect", layer.obj, k))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, w.finish(podObj)...)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return w.Config, nil
}

// podSets reports whether the pod sets key itself or, for a known setting,
// any of the setting's keys (so an inherited alias cannot shadow it later).
func podSets(podAnn map[string]string, key string, idx int, isKnown bool, table []setting) bool {
	if _, ok := podAnn[key]; ok {
		return true
	}
	if !isKnown {
		return false
	}
	for _, k := range table[idx].keys {
		if _, ok := podAnn[k]; ok {
			return true
		}
	}
	return false
}

func newWorkingConfig(pod *corev1.Pod, v *Values) *workingConfig {
	w := &workingConfig{
		proxyImageName: v.Proxy.Image.Name,
		proxyVersion:   v.version(v.Proxy.Image.Version),
		initImageName:  v.ProxyInit.Image.Name,
		initVersion:    v.version(v.ProxyInit.Image.Version),
		proxyRes:       v.Proxy.Resources,
		initRes:        v.ProxyInit.Resources,
		named:          namedPorts(pod),
	}
	c := &w.Config
	c.Version = v.version("")
	c.ControlPlaneNamespace = v.ControlPlaneNamespace
	c.TrustDomain = v.IdentityTrustDomain
	c.TrustAnchorsPEM = v.IdentityTrustAnchorsPEM
	c.IdentityAddr = v.IdentityAddress()
	c.DestinationAddr = v.DestinationAddress()
	c.PolicyAddr = v.PolicyAddress()
	c.CNI = v.CNIEnabled
	c.ClusterNetworks, _ = parseSubnets(v.ClusterNetworks)
	c.AdminShutdown = v.Proxy.AdminShutdown
	c.TapIdentities, _ = parseTapIdentities(v.Proxy.TapIdentities)
	c.ProxyPull = orDefault(v.Proxy.Image.PullPolicy, corev1.PullIfNotPresent)
	c.InitPull = orDefault(v.ProxyInit.Image.PullPolicy, corev1.PullIfNotPresent)
	c.Ports = v.Proxy.Ports
	c.UID, c.GID = v.Proxy.UID, v.Proxy.GID
	c.LogLevel, c.LogFormat = v.Proxy.LogLevel, v.Proxy.LogFormat
	// Values were validated, so these parse.
	c.OpaquePorts, _ = ParsePorts(v.Proxy.OpaquePorts, nil)
	w.opaqueText = v.Proxy.OpaquePorts
	c.SkipInboundPorts, _ = ParsePorts(v.ProxyInit.IgnoreInboundPorts, nil)
	c.SkipOutboundPorts, _ = ParsePorts(v.ProxyInit.IgnoreOutboundPorts, nil)
	c.SkipSubnets, _ = parseSubnets(v.ProxyInit.SkipSubnets)
	c.Await = v.Proxy.Await
	c.AwaitCommand = append([]string(nil), v.Proxy.AwaitCommand...)
	c.NativeSidecar = v.Proxy.NativeSidecar
	c.DefaultInboundPolicy = v.Proxy.DefaultInboundPolicy
	c.ShutdownGracePeriod = v.Proxy.ShutdownGracePeriod.Duration
	c.WaitBeforeExit = v.Proxy.WaitBeforeExitSeconds
	w.initExtras(v)
	return w
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// finish composes images and resources and runs the checks that involve
// several settings; each error names the settings and their sources.
func (w *workingConfig) finish(podObj string) []error {
	var errs []error
	w.ProxyImage = imageRef(w.proxyImageName, w.proxyVersion)
	w.ProxyVersion = w.proxyVersion
	w.InitImage = imageRef(w.initImageName, w.initVersion)
	var err error
	if w.ProxyResources, err = parseResources(w.proxyRes); err != nil {
		errs = append(errs, fmt.Errorf("inject: %s: proxy resources (%s): %w", podObj, w.describe("proxy-cpu-request", "proxy-cpu-limit", "proxy-memory-request", "proxy-memory-limit", "proxy-ephemeral-storage-request", "proxy-ephemeral-storage-limit"), err))
	}
	w.InitResources, _ = parseResources(w.initRes)
	w.finishExtras(podObj)
	if err := distinctPorts(w.Ports); err != nil {
		errs = append(errs, fmt.Errorf("inject: %s: proxy ports (%s): %w", podObj, w.describe("inbound-port", "outbound-port", "admin-port", "control-port"), err))
	}
	return errs
}

// describe lists settings with their sources, for error messages.
func (w *workingConfig) describe(names ...string) string {
	var parts []string
	for _, n := range names {
		if s, ok := w.Setting(n); ok && s.Value != "" {
			parts = append(parts, s.String())
		}
	}
	return strings.Join(parts, ", ")
}

// lookup finds the first of keys on the pod, then on the namespace.
func lookup(keys []string, pod, ns map[string]string) (key, value string, src Source, found bool) {
	for _, k := range keys {
		if v, ok := pod[k]; ok {
			return k, v, SourcePod, true
		}
	}
	for _, k := range keys {
		if v, ok := ns[k]; ok {
			return k, v, SourceNamespace, true
		}
	}
	return "", "", SourceValues, false
}

// namedPorts maps the pod's container port names to numbers.
func namedPorts(pod *corev1.Pod) map[string]int32 {
	m := map[string]int32{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.Name != "" && p.ContainerPort > 0 && p.ContainerPort <= 65535 {
					m[p.Name] = p.ContainerPort
				}
			}
		}
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describePod names a pod for messages: pod "ns/name", falling back to
// generateName and to the namespace object's name.
func describePod(pod *corev1.Pod, ns *corev1.Namespace) string {
	name := pod.Name
	if name == "" && pod.GenerateName != "" {
		name = pod.GenerateName + "*"
	}
	if name == "" {
		name = "(unnamed)"
	}
	namespace := pod.Namespace
	if namespace == "" && ns != nil {
		namespace = ns.Name
	}
	if namespace == "" {
		return fmt.Sprintf("pod %q", name)
	}
	return fmt.Sprintf("pod %q", namespace+"/"+name)
}
