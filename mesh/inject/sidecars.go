package inject

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// detectTimeoutDisabled is the protocol detection timeout rendered when an
// annotation disables it: a year, as Linkerd does, so a silent client is
// waited for rather than treated as opaque.
const detectTimeoutDisabled = 365 * 24 * time.Hour

// extraEnv is the proxy's environment for the optional settings; only the
// settings that differ from the proxy's defaults are rendered.
func extraEnv(cfg *Config) []corev1.EnvVar {
	var env []corev1.EnvVar
	add := func(name, value string) { env = append(env, corev1.EnvVar{Name: name, Value: value}) }
	if cfg.AccessLog != "" {
		add(vocab.EnvAccessLog, cfg.AccessLog)
	}
	if cfg.InboundConnectTimeout > 0 {
		add(vocab.EnvInboundConnectTimeout, cfg.InboundConnectTimeout.String())
	}
	if cfg.OutboundConnectTimeout > 0 {
		add(vocab.EnvOutboundConnectTimeout, cfg.OutboundConnectTimeout.String())
	}
	if cfg.DisableInboundDetectTimeout {
		add(vocab.EnvInboundDetectTimeout, detectTimeoutDisabled.String())
	}
	if cfg.DisableOutboundDetectTimeout {
		add(vocab.EnvOutboundDetectTimeout, detectTimeoutDisabled.String())
	}
	if cfg.OutboundDiscoveryIdleTimeout > 0 {
		add(vocab.EnvOutboundDiscoveryIdleTimeout, cfg.OutboundDiscoveryIdleTimeout.String())
	}
	if len(cfg.RequireIdentityPorts) > 0 {
		add(vocab.EnvInboundRequireIdentityPorts, cfg.RequireIdentityPorts.String())
	}
	if cfg.CPURatioLimit > 0 {
		add(vocab.EnvCPURatioLimit, strconv.FormatFloat(cfg.CPURatioLimit, 'g', -1, 64))
	}
	return append(env, traceEnv(cfg)...)
}

// ownerLabel returns the linkerd.io/proxy-<kind> label naming the workload
// the pod belongs to. For a workload rendered by `weft inject` (kind set)
// the workload is known; for a pod the webhook sees, it comes from the
// controller owner reference: a ReplicaSet whose name is a Deployment's
// name plus the pod-template-hash (which is how the Deployment controller
// names them) is labelled with the Deployment.
func ownerLabel(pod *corev1.Pod, kind, name string) (string, string, bool) {
	if kind == "" {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			return "", "", false
		}
		kind, name = ref.Kind, ref.Name
		if kind == "ReplicaSet" {
			if hash := pod.Labels["pod-template-hash"]; hash != "" && strings.HasSuffix(name, "-"+hash) && len(name) > len(hash)+1 {
				kind, name = "Deployment", strings.TrimSuffix(name, "-"+hash)
			}
		}
	}
	var key string
	switch kind {
	case "Deployment":
		key = vocab.LabelProxyDeployment
	case "ReplicaSet":
		key = vocab.LabelProxyReplicaSet
	case "ReplicationController":
		key = vocab.LabelProxyReplicationController
	case "StatefulSet":
		key = vocab.LabelProxyStatefulSet
	case "DaemonSet":
		key = vocab.LabelProxyDaemonSet
	case "Job":
		key = vocab.LabelProxyJob
	case "CronJob":
		key = vocab.LabelProxyCronJob
	default:
		return "", "", false
	}
	if name == "" || len(name) > 63 {
		// A label value holds at most 63 characters; longer names (valid
		// for some kinds) are not recorded rather than truncated.
		return "", "", false
	}
	return key, name, true
}

// debugContainer is the debug sidecar: a shell with network tools next to
// the application, with probes that always pass (some clusters require
// probes on every container).
func debugContainer(cfg *Config) corev1.Container {
	always := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	return corev1.Container{
		Name:                     vocab.DebugContainerName,
		Image:                    cfg.DebugImage,
		ImagePullPolicy:          cfg.DebugPull,
		LivenessProbe:            &corev1.Probe{ProbeHandler: always},
		ReadinessProbe:           &corev1.Probe{ProbeHandler: always},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// validatorContainer checks, in CNI mode, that the CNI plugin redirected
// the pod's traffic: `weft-init validate` listens on the proxy's outbound
// port and connects to an address outside the pod. It runs as an
// unprivileged user other than the proxy's, so its connection is
// redirected; only the redirection can bring the connection back to its
// own listener, where it checks a random token and the original
// destination. If it cannot, the container fails and the pod does not
// start, instead of running with traffic that bypasses the proxy.
func validatorContainer(cfg *Config) corev1.Container {
	nobody := int64(65534)
	return corev1.Container{
		Name:            vocab.ValidatorContainerName,
		Image:           cfg.InitImage,
		ImagePullPolicy: cfg.InitPull,
		Args: []string{"validate",
			"--listen-addr", cfg.ValidatorListenAddr,
			"--connect-addr", cfg.ValidatorConnectAddr,
			"--timeout", cfg.ValidatorTimeout.String(),
		},
		Resources: cfg.InitResources,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr(true),
			RunAsNonRoot:             ptr(true),
			RunAsUser:                ptr(nobody),
			RunAsGroup:               ptr(nobody),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// initExtras adjusts the weft-init container for skip-subnets and the
// close-wait sysctl. Writing /proc/sys/net/netfilter needs a privileged
// container running as root; weft-init gets that only when asked.
func initExtras(c *corev1.Container, cfg *Config) {
	if len(cfg.SkipSubnets) > 0 {
		c.Args = append(c.Args, "--subnets-to-ignore", subnetsString(cfg.SkipSubnets))
	}
	if cfg.CloseWaitTimeout > 0 {
		secs := int64(cfg.CloseWaitTimeout / time.Second)
		c.Args = append(c.Args, "--close-wait-timeout", fmt.Sprintf("%ds", secs))
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		sc := c.SecurityContext
		sc.Privileged = ptr(true)
		sc.AllowPrivilegeEscalation = ptr(true)
		sc.RunAsUser = ptr(int64(0))
		sc.RunAsGroup = ptr(int64(0))
		sc.RunAsNonRoot = ptr(false)
	}
}

// proxyEnvWithExtras appends the optional settings to env and then merges
// the additional environment by name (an entry with the name of a variable
// already set replaces it in place).
func proxyEnvWithExtras(env []corev1.EnvVar, cfg *Config) ([]corev1.EnvVar, []string) {
	env = append(env, extraEnv(cfg)...)
	if len(cfg.AdditionalEnv) == 0 {
		return env, nil
	}
	var overridden []string
	set := map[string]bool{}
	for _, e := range env {
		set[e.Name] = true
	}
	for _, e := range cfg.AdditionalEnv {
		if set[e.Name] {
			overridden = append(overridden, e.Name)
		}
	}
	return mergeEnv(env, cfg.AdditionalEnv), overridden
}

// renderWarnings notes what the rendered pod does that its author may not
// expect: UDP ports the proxy does not carry, and additional environment
// entries that replace variables the injector sets.
func renderWarnings(pod *corev1.Pod, overridden []string, object string) []string {
	var out []string
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.Protocol == corev1.ProtocolUDP {
				out = append(out, fmt.Sprintf("%s: container %q declares UDP port %d: UDP is not proxied (it bypasses the proxy, without mTLS or policy)", object, c.Name, p.ContainerPort))
			}
		}
	}
	for _, n := range overridden {
		out = append(out, fmt.Sprintf("%s: proxy-additional-env replaces %s, which the injector sets", object, n))
	}
	return out
}
