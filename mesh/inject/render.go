package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
)

// Reason says why a pod was not injected.
type Reason string

// Reasons a pod is left alone. Each comes with a message in the [Report].
const (
	// ReasonAlreadyInjected: the pod already has a weft-proxy container.
	ReasonAlreadyInjected Reason = "already-injected"
	// ReasonHostNetwork: the pod shares the node's network namespace, where
	// iptables rules would capture the node's traffic.
	ReasonHostNetwork Reason = "host-network"
	// ReasonSystemNamespace: kube-system, kube-public and kube-node-lease
	// are never injected.
	ReasonSystemNamespace Reason = "system-namespace"
	// ReasonNamespaceOptedOut: the namespace carries the label
	// config.linkerd.io/admission-webhooks=disabled.
	ReasonNamespaceOptedOut Reason = "namespace-opted-out"
	// ReasonDisabled: linkerd.io/inject is "disabled" on the pod, or on the
	// namespace and the pod says nothing.
	ReasonDisabled Reason = "disabled"
	// ReasonNotEnabled: neither the pod nor its namespace asks for
	// injection.
	ReasonNotEnabled Reason = "not-enabled"
	// ReasonOtherMesh: the pod carries another mesh's sidecar (Istio,
	// Consul, Kuma, Open Service Mesh); two proxies would fight over its
	// traffic. `weft inject` turns this into an error.
	ReasonOtherMesh Reason = "other-mesh"
)

// Report says what the renderer did with one pod and why.
type Report struct {
	// Kind, Namespace and Name identify the object (a Pod for the webhook,
	// the workload for `weft inject`).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Injected is true when the patch adds the proxy (or, in annotate-only
	// mode, the annotation that will make the webhook add it).
	Injected bool `json:"injected"`
	// Reason and Message say why the object was left alone.
	Reason  Reason `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Mode is the resolved linkerd.io/inject value (enabled or ingress).
	Mode string `json:"mode,omitempty"`
	// Sidecar is "native" or "classic" when injected.
	Sidecar string `json:"sidecar,omitempty"`
	// Init is "weft-init" or "cni" when injected.
	Init string `json:"init,omitempty"`
	// Settings lists every resolved value with its source.
	Settings []Setting `json:"settings,omitempty"`
	// Replaced lists the containers of Linkerd's injector that were
	// removed to make room for Weft's proxy (a migration).
	Replaced []string `json:"replaced,omitempty"`
	// Annotated is true for a Namespace or Service that got annotations
	// (`weft inject` annotates namespaces so the webhook injects their pods).
	Annotated bool `json:"annotated,omitempty"`
	// Uninjected is true when `weft uninject` removed sidecars or mesh
	// metadata; Removed names the containers it removed.
	Uninjected bool     `json:"uninjected,omitempty"`
	Removed    []string `json:"removed,omitempty"`
	// Warnings are problems that did not stop injection.
	Warnings []string `json:"warnings,omitempty"`
}

// Summary is the one-line form used by `weft inject`:
// `deployment "web" injected`, `deployment "web" injected (replaced
// linkerd-proxy)`, `namespace "shop" annotated`, `deployment "web"
// uninjected` or `pod "db" skipped: <message>`.
func (r Report) Summary() string {
	if r.Kind == "" {
		return "document skipped: " + r.Message
	}
	subject := fmt.Sprintf("%s %q", strings.ToLower(r.Kind), r.Name)
	switch {
	case r.Uninjected:
		return subject + " uninjected"
	case r.Annotated:
		return subject + " annotated"
	}
	if r.Injected {
		if len(r.Replaced) > 0 {
			return subject + " injected (replaced " + replacedSummary(r.Replaced) + ")"
		}
		return subject + " injected"
	}
	return subject + " skipped: " + r.Message
}

// Operation is one RFC 6902 JSON Patch operation.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Patch is an RFC 6902 JSON Patch. Marshalled with encoding/json it is the
// document an AdmissionResponse carries.
type Patch []Operation

// WithPrefix returns the patch with prefix (a JSON Pointer such as
// "/spec/template") put in front of every path, to apply a pod patch to a
// pod template inside a workload.
func (p Patch) WithPrefix(prefix string) Patch {
	out := make(Patch, len(p))
	for i, op := range p {
		op.Path = prefix + op.Path
		out[i] = op
	}
	return out
}

// RenderOption tunes [Render].
type RenderOption func(*renderConfig)

type renderConfig struct {
	defaultMode string
	kind, name  string
}

// WithDefaultMode sets the inject mode used when neither the pod nor its
// namespace sets linkerd.io/inject. `weft inject --manual` uses
// [InjectEnabled]: the user asked for the proxy, but an explicit
// "disabled" still wins.
func WithDefaultMode(mode string) RenderOption {
	return func(c *renderConfig) { c.defaultMode = mode }
}

// WithObject names the object in the report and in error messages, for
// callers that render a pod template of a workload (kind "Deployment",
// name "web").
func WithObject(kind, name string) RenderOption {
	return func(c *renderConfig) { c.kind, c.name = kind, name }
}

// Render decides whether pod should get the proxy and, if so, returns the
// JSON Patch that adds it. It is a pure function of its arguments: pod
// annotations over namespace annotations (ns may be nil) over values.
//
// A pod that is not to be injected yields an empty patch and a report with
// the reason; an invalid annotation, a name clash or a port clash is an
// error and nothing is patched. Rendering an injected pod again yields an
// empty patch.
func Render(pod *corev1.Pod, ns *corev1.Namespace, values Values, opts ...RenderOption) (Patch, Report, error) {
	var rc renderConfig
	for _, o := range opts {
		o(&rc)
	}
	if pod == nil {
		return nil, Report{}, errors.New("inject: no pod to render")
	}
	nsName := pod.Namespace
	if nsName == "" && ns != nil {
		nsName = ns.Name
	}
	report := Report{Kind: "Pod", Namespace: nsName, Name: pod.Name}
	if report.Name == "" {
		report.Name = pod.GenerateName
	}
	if rc.kind != "" {
		report.Kind, report.Name = rc.kind, rc.name
	}
	object := describePod(pod, ns)
	if rc.kind != "" {
		object = fmt.Sprintf("%s %q", strings.ToLower(rc.kind), qualify(nsName, rc.name))
	}
	skip := func(r Reason, format string, args ...any) (Patch, Report, error) {
		report.Reason, report.Message = r, fmt.Sprintf(format, args...)
		return nil, report, nil
	}

	if c, where := findContainer(pod, vocab.ProxyContainerName); c != nil {
		if pod.Labels[vocab.LabelControlPlaneNamespace] != "" {
			return skip(ReasonAlreadyInjected, "already injected (%s container in %s)", vocab.ProxyContainerName, where)
		}
		return skip(ReasonAlreadyInjected, "a container named %s is already in %s; treating the pod as injected", vocab.ProxyContainerName, where)
	}
	if pod.Spec.HostNetwork {
		return skip(ReasonHostNetwork, "pod uses the host network (hostNetwork: true)")
	}
	if isSystemNamespace(nsName) {
		return skip(ReasonSystemNamespace, "namespace %q is never injected", nsName)
	}
	if ns != nil && ns.Labels[vocab.LabelAdmissionWebhooks] == "disabled" {
		return skip(ReasonNamespaceOptedOut, "namespace %q is labelled %s=disabled", ns.Name, vocab.LabelAdmissionWebhooks)
	}

	// A pod Linkerd injected is migrated: Linkerd's sidecar goes, Weft's
	// comes. Everything below looks at the pod without it.
	mig := stripLinkerd(pod)
	work := mig.pod

	cfg, err := resolve(work, ns, values, rc.defaultMode, object)
	if err != nil {
		return nil, report, err
	}
	report.Warnings = cfg.Warnings
	mode, _ := cfg.Setting("inject")
	switch mode.Value {
	case vocab.InjectDisabled:
		if mode.Source == SourceNamespace {
			return skip(ReasonDisabled, "namespace %q has %s: disabled", nsName, vocab.AnnotationInject)
		}
		return skip(ReasonDisabled, "pod has %s: disabled", vocab.AnnotationInject)
	case "":
		return skip(ReasonNotEnabled, "neither the pod nor namespace %q has %s: enabled", nsName, vocab.AnnotationInject)
	}
	if desc := otherMesh(work); desc != "" {
		// A warning too, so that kubectl shows why the pod runs without
		// Weft's proxy.
		msg := fmt.Sprintf("pod has %s; Weft does not inject next to another mesh's proxy", desc)
		report.Warnings = append(report.Warnings, object+": "+msg)
		return skip(ReasonOtherMesh, "%s", msg)
	}
	if len(work.Spec.Containers) == 0 {
		return nil, report, fmt.Errorf("inject: %s: no application container is left once Linkerd's sidecar is removed", object)
	}
	if err := checkClashes(work, &cfg, object); err != nil {
		return nil, report, err
	}

	report.Injected = true
	report.Mode = cfg.Mode
	report.Settings = cfg.Settings
	report.Sidecar, report.Init = "classic", "weft-init"
	if cfg.NativeSidecar {
		report.Sidecar = "native"
	}
	if cfg.CNI {
		report.Init = "cni"
	}
	if cfg.TrustAnchorsPEM == "" {
		report.Warnings = append(report.Warnings, warnNoTrustAnchors)
	}
	var owner map[string]string
	if key, name, ok := ownerLabel(work, rc.kind, rc.name); ok {
		owner = map[string]string{key: name}
	}
	patch, overridden := buildPatch(work, &cfg, nsName, owner)
	report.Warnings = append(report.Warnings, renderWarnings(work, overridden, object)...)
	if mig.changed() {
		patch = append(replaceOps(pod, mig), patch...)
		report.Replaced = mig.containers
	}
	return patch, report, nil
}

const warnNoTrustAnchors = "no trust anchors in values: the proxy cannot verify peers and will not become ready"

func qualify(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// findContainer looks for a container by name among init and regular
// containers.
func findContainer(pod *corev1.Pod, name string) (*corev1.Container, string) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], "initContainers"
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], "containers"
		}
	}
	return nil, ""
}

// checkClashes refuses pods whose names or ports collide with what
// injection adds.
func checkClashes(pod *corev1.Pod, cfg *Config, object string) error {
	var errs []error
	names := []string{vocab.ValidatorContainerName}
	if !cfg.CNI {
		names = []string{vocab.InitContainerName}
	}
	if cfg.Debug {
		names = append(names, vocab.DebugContainerName)
	}
	for _, n := range names {
		if _, where := findContainer(pod, n); where != "" {
			errs = append(errs, fmt.Errorf("inject: %s: a container named %s is already in %s", object, n, where))
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == vocab.TokenVolumeName || (!cfg.CNI && v.Name == vocab.XtablesLockVolumeName) {
			errs = append(errs, fmt.Errorf("inject: %s: a volume named %s already exists", object, v.Name))
		}
	}
	// The ports the proxy binds in the pod's network namespace.
	proxyPorts := map[int32]string{
		cfg.Ports.Inbound: "inbound-port", cfg.Ports.Outbound: "outbound-port", cfg.Ports.Admin: "admin-port",
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if name, ok := proxyPorts[p.ContainerPort]; ok {
					s, _ := cfg.Setting(name)
					errs = append(errs, fmt.Errorf("inject: %s: container %q listens on port %d, which the proxy needs (%s)", object, c.Name, p.ContainerPort, s))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// escapePointer escapes one JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// buildPatch turns the typed additions into JSON Patch operations against
// pod as it is.
// The second result names the proxy variables proxy-additional-env
// replaced.
func buildPatch(pod *corev1.Pod, cfg *Config, nsName string, owner map[string]string) (Patch, []string) {
	var p Patch
	labels := map[string]string{vocab.LabelControlPlaneNamespace: cfg.ControlPlaneNamespace}
	if nsName != "" {
		labels[vocab.LabelWorkloadNamespace] = nsName
	}
	for k, v := range owner {
		labels[k] = v
	}
	p = append(p, mapOps("/metadata/labels", pod.Labels, labels)...)

	annotations := map[string]string{
		vocab.AnnotationCreatedBy:    "weft/inject " + cfg.Version,
		vocab.AnnotationProxyVersion: cfg.ProxyVersion,
		vocab.AnnotationIdentityMode: "default",
	}
	if cfg.TrustAnchorsPEM != "" {
		sum := sha256.Sum256([]byte(cfg.TrustAnchorsPEM))
		annotations[vocab.AnnotationTrustRootSHA256] = hex.EncodeToString(sum[:])
	}
	for k, v := range cfg.Inherited {
		annotations[k] = v
	}
	if _, ok := pod.Annotations[vocab.AnnotationOpaquePorts]; !ok {
		if _, inherited := cfg.Inherited[vocab.AnnotationOpaquePorts]; !inherited && len(cfg.OpaquePorts) > 0 {
			annotations[vocab.AnnotationOpaquePorts] = cfg.OpaquePorts.String()
		}
	}
	p = append(p, mapOps("/metadata/annotations", pod.Annotations, annotations)...)

	proxy, overridden := proxyContainer(cfg, append(applicationPorts(pod, cfg), cfg.PodInboundPorts...).normalize())
	var inits []corev1.Container
	if cfg.CNI {
		inits = append(inits, validatorContainer(cfg))
	} else {
		ic := initContainer(cfg)
		initExtras(&ic, cfg)
		inits = append(inits, ic)
	}
	if cfg.NativeSidecar {
		// weft-init, then the proxy, before the application's init
		// containers so that those already run inside the mesh.
		inits = append(inits, proxy)
		p = append(p, insertOps("/spec/initContainers", len(pod.Spec.InitContainers), 0, inits)...)
	} else {
		// weft-init last: the application's init containers run before
		// traffic is redirected to a proxy that is not started yet. The
		// proxy goes first among containers so that its postStart await
		// holds the others back until it is ready.
		p = append(p, insertOps("/spec/initContainers", len(pod.Spec.InitContainers), len(pod.Spec.InitContainers), inits)...)
		p = append(p, insertOps("/spec/containers", len(pod.Spec.Containers), 0, []corev1.Container{proxy})...)
	}
	if cfg.Debug {
		n := len(pod.Spec.Containers)
		if !cfg.NativeSidecar {
			n++ // the proxy was inserted first
		}
		p = append(p, insertOps("/spec/containers", n, n, []corev1.Container{debugContainer(cfg)})...)
	}

	vols := []corev1.Volume{tokenVolume()}
	if !cfg.CNI {
		vols = append(vols, corev1.Volume{Name: vocab.XtablesLockVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	p = append(p, insertOps("/spec/volumes", len(pod.Spec.Volumes), len(pod.Spec.Volumes), vols)...)
	return p, overridden
}

// mapOps adds entries to a string map at path, creating the map when the
// object has none and skipping entries already equal. An empty map is
// replaced whole: it is omitted when the object is serialized, so the
// server's copy may not have it.
func mapOps(path string, have, want map[string]string) Patch {
	if len(want) == 0 {
		return nil
	}
	if len(have) == 0 {
		m := make(map[string]string, len(want))
		for k, v := range want {
			m[k] = v
		}
		return Patch{{Op: "add", Path: path, Value: m}}
	}
	var p Patch
	for _, k := range sortedKeys(want) {
		if cur, ok := have[k]; ok && cur == want[k] {
			continue
		}
		p = append(p, Operation{Op: "add", Path: path + "/" + escapePointer(k), Value: want[k]})
	}
	return p
}

// insertOps inserts items at index at of the array at path, whose current
// length is n; a missing or empty array is added whole.
func insertOps[T any](path string, n, at int, items []T) Patch {
	if len(items) == 0 {
		return nil
	}
	if n == 0 {
		return Patch{{Op: "add", Path: path, Value: items}}
	}
	p := make(Patch, 0, len(items))
	for i, it := range items {
		idx := "-"
		if at+i < n+i {
			idx = strconv.Itoa(at + i)
		}
		p = append(p, Operation{Op: "add", Path: path + "/" + idx, Value: it})
	}
	return p
}

// applicationPorts lists the TCP ports the pod's containers declare,
// without those that are never redirected to the proxy.
func applicationPorts(pod *corev1.Pod, cfg *Config) PortRanges {
	var out PortRanges
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
					continue
				}
				if p.ContainerPort < 1 || p.ContainerPort > 65535 || cfg.SkipInboundPorts.Contains(p.ContainerPort) {
					continue
				}
				out = append(out, PortRange{From: uint16(p.ContainerPort), To: uint16(p.ContainerPort)})
			}
		}
	}
	return out.normalize()
}

func tokenVolume() corev1.Volume {
	exp := int64(vocab.IdentityTokenExpirationSeconds)
	return corev1.Volume{
		Name: vocab.TokenVolumeName,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          vocab.IdentityTokenAudience,
				ExpirationSeconds: &exp,
				Path:              vocab.TokenVolumeName,
			}}},
		}},
	}
}

func ptr[T any](v T) *T { return &v }

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// proxyEnv is the proxy's environment. The downward-API variables come
// first: Kubernetes expands $(name) only for variables defined earlier.
func proxyEnv(cfg *Config, appPorts PortRanges) []corev1.EnvVar {
	ctx, _ := json.Marshal(map[string]string{
		"ns": "$(" + envPodNS + ")", "nodeName": "$(" + envPodNodeName + ")", "pod": "$(" + envPodName + ")",
	})
	env := []corev1.EnvVar{
		fieldEnv(envPodName, "metadata.name"),
		fieldEnv(envPodNS, "metadata.namespace"),
		fieldEnv(envPodNodeName, "spec.nodeName"),
		fieldEnv(envPodSA, "spec.serviceAccountName"),
		{Name: vocab.EnvInboundAddr, Value: "0.0.0.0:" + strconv.Itoa(int(cfg.Ports.Inbound))},
		{Name: vocab.EnvOutboundAddr, Value: "127.0.0.1:" + strconv.Itoa(int(cfg.Ports.Outbound))},
		{Name: vocab.EnvAdminAddr, Value: "0.0.0.0:" + strconv.Itoa(int(cfg.Ports.Admin))},
		{Name: vocab.EnvIdentityAddr, Value: cfg.IdentityAddr},
		{Name: vocab.EnvDestinationAddr, Value: cfg.DestinationAddr},
		{Name: vocab.EnvPolicyAddr, Value: cfg.PolicyAddr},
		{Name: vocab.EnvTrustAnchors, Value: cfg.TrustAnchorsPEM},
		{Name: vocab.EnvIdentityTokenFile, Value: vocab.IdentityTokenFile},
		{Name: vocab.EnvIdentityName, Value: fmt.Sprintf("$(%s).$(%s).serviceaccount.identity.%s.%s", envPodSA, envPodNS, cfg.ControlPlaneNamespace, cfg.TrustDomain)},
		{Name: vocab.EnvNamespace, Value: "$(" + envPodNS + ")"},
		{Name: vocab.EnvPod, Value: "$(" + envPodName + ")"},
		{Name: vocab.EnvServiceAccount, Value: "$(" + envPodSA + ")"},
		{Name: vocab.EnvInboundPorts, Value: appPorts.String()},
		{Name: vocab.EnvInboundOpaquePorts, Value: cfg.OpaquePorts.String()},
		{Name: vocab.EnvInboundSkipPorts, Value: cfg.SkipInboundPorts.String()},
		{Name: vocab.EnvOutboundSkipPorts, Value: cfg.SkipOutboundPorts.String()},
		{Name: vocab.EnvLogLevel, Value: cfg.LogLevel},
		{Name: vocab.EnvLogFormat, Value: cfg.LogFormat},
		{Name: vocab.EnvShutdownGracePeriod, Value: cfg.ShutdownGracePeriod.String()},
		{Name: vocab.EnvDefaultInboundPolicy, Value: cfg.DefaultInboundPolicy},
		{Name: vocab.EnvDestinationContext, Value: string(ctx)},
		{Name: vocab.EnvClusterNetworks, Value: subnetsString(cfg.ClusterNetworks)},
		{Name: vocab.EnvAdminShutdown, Value: strconv.FormatBool(cfg.AdminShutdown)},
	}
	if len(cfg.TapIdentities) > 0 {
		env = append(env,
			corev1.EnvVar{Name: vocab.EnvTapAddr, Value: "0.0.0.0:" + strconv.Itoa(int(cfg.Ports.Control))},
			corev1.EnvVar{Name: vocab.EnvTapIdentities, Value: strings.Join(cfg.TapIdentities, ",")})
	}
	if cfg.Mode == vocab.InjectIngress {
		env = append(env, corev1.EnvVar{Name: vocab.EnvIngressMode, Value: "true"})
	}
	return env
}

func httpProbe(path string, port int32) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}
}

func proxyContainer(cfg *Config, appPorts PortRanges) (corev1.Container, []string) {
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		RunAsUser:                ptr(cfg.UID),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if cfg.GID != 0 {
		sc.RunAsGroup = ptr(cfg.GID)
	}
	env, overridden := proxyEnvWithExtras(proxyEnv(cfg, appPorts), cfg)
	c := corev1.Container{
		Name:            vocab.ProxyContainerName,
		Image:           cfg.ProxyImage,
		ImagePullPolicy: cfg.ProxyPull,
		Env:             env,
		Ports: []corev1.ContainerPort{
			{Name: vocab.ProxyPortName, ContainerPort: cfg.Ports.Inbound, Protocol: corev1.ProtocolTCP},
			{Name: vocab.AdminPortName, ContainerPort: cfg.Ports.Admin, Protocol: corev1.ProtocolTCP},
		},
		Resources: cfg.ProxyResources,
		LivenessProbe: &corev1.Probe{ProbeHandler: httpProbe("/live", cfg.Ports.Admin),
			InitialDelaySeconds: 10, TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3},
		ReadinessProbe: &corev1.Probe{ProbeHandler: httpProbe("/ready", cfg.Ports.Admin),
			InitialDelaySeconds: 2, TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3},
		SecurityContext:          sc,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: vocab.TokenVolumeName, MountPath: vocab.IdentityTokenDir, ReadOnly: true}},
	}
	if cfg.NativeSidecar {
		c.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		// Kubelet starts the next init container only once this probe
		// passes, which is how native sidecars await the proxy.
		c.StartupProbe = &corev1.Probe{ProbeHandler: httpProbe("/ready", cfg.Ports.Admin),
			TimeoutSeconds: 1, PeriodSeconds: 1, FailureThreshold: 120}
	} else if cfg.Await {
		c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cfg.AwaitCommand}}}
	}
	if cfg.WaitBeforeExit > 0 {
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: cfg.WaitBeforeExit}}
	}
	return c, overridden
}

// initUID is the user weft-init runs as (Linkerd's proxy-init default,
// "nobody"). It holds exactly NET_ADMIN and NET_RAW: the container adds
// them to its bounding set and the weft-init image gives its binary the
// file capabilities cap_net_admin,cap_net_raw+ep, which weft-init hands on
// to the iptables commands it runs.
const initUID int64 = 65534

func initContainer(cfg *Config) corev1.Container {
	ignoreIn := append(PortRanges{
		{From: uint16(cfg.Ports.Control), To: uint16(cfg.Ports.Control)},
		{From: uint16(cfg.Ports.Admin), To: uint16(cfg.Ports.Admin)},
	}, cfg.SkipInboundPorts...).normalize()
	args := []string{
		"--incoming-proxy-port", strconv.Itoa(int(cfg.Ports.Inbound)),
		"--outgoing-proxy-port", strconv.Itoa(int(cfg.Ports.Outbound)),
		"--proxy-uid", strconv.FormatInt(cfg.UID, 10),
		"--inbound-ports-to-ignore", ignoreIn.String(),
	}
	if len(cfg.SkipOutboundPorts) > 0 {
		args = append(args, "--outbound-ports-to-ignore", cfg.SkipOutboundPorts.String())
	}
	return corev1.Container{
		Name:            vocab.InitContainerName,
		Image:           cfg.InitImage,
		ImagePullPolicy: cfg.InitPull,
		Args:            args,
		Resources:       cfg.InitResources,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Privileged:               ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			RunAsNonRoot:             ptr(true),
			RunAsUser:                ptr(initUID),
			RunAsGroup:               ptr(initUID),
			Capabilities: &corev1.Capabilities{
				Add:  []corev1.Capability{"NET_ADMIN", "NET_RAW"},
				Drop: []corev1.Capability{"ALL"},
			},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: vocab.XtablesLockVolumeName, MountPath: "/run"}},
	}
}
