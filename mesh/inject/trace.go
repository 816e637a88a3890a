package inject

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// Downward-API variables the trace attributes expand (defined before the
// variable that uses them, as Kubernetes expands only earlier ones).
const (
	envPodIP  = "_pod_ip"
	envPodUID = "_pod_uid"
)

// traceEnv is the proxy's tracing environment, rendered when
// config.linkerd.io/trace-collector names a collector: its address, the
// resource attributes Linkerd's injector gives the proxy's spans (the
// pod's IP and UID and the proxy container's name; the proxy adds the pod
// and namespace names itself), and, with
// config.alpha.linkerd.io/trace-collector-service-account, the
// collector's identity.
func traceEnv(cfg *Config) []corev1.EnvVar {
	if cfg.TraceCollector == "" {
		return nil
	}
	env := []corev1.EnvVar{
		fieldEnv(envPodIP, "status.podIP"),
		fieldEnv(envPodUID, "metadata.uid"),
		{Name: vocab.EnvTraceCollectorAddr, Value: cfg.TraceCollector},
		{Name: vocab.EnvTraceAttributes, Value: fmt.Sprintf("k8s.pod.ip=$(%s)\nk8s.pod.uid=$(%s)\nk8s.container.name=%s", envPodIP, envPodUID, vocab.ProxyContainerName)},
	}
	if sa := cfg.TraceCollectorServiceAccount; sa != "" {
		env = append(env, corev1.EnvVar{Name: vocab.EnvTraceCollectorIdentity,
			Value: fmt.Sprintf("%s.%s.serviceaccount.identity.%s.%s", sa, collectorNamespace(cfg.TraceCollector), cfg.ControlPlaneNamespace, cfg.TrustDomain)})
	}
	return env
}

// collectorNamespace is the namespace of the collector's service account:
// the second label of the collector's host name (collector.tracing:4317
// is in tracing), as Linkerd's injector derives it, or the pod's own
// namespace for a one-label name or an IP address.
func collectorNamespace(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	if _, err := netip.ParseAddr(host); err != nil {
		if labels := strings.Split(host, "."); len(labels) > 1 && labels[1] != "" {
			return labels[1]
		}
	}
	return "$(" + envPodNS + ")"
}

// parseCollectorAddr checks a trace collector address: HOST:PORT, the
// host a DNS name or an IP address.
func parseCollectorAddr(v string) (string, error) {
	v = strings.TrimSpace(v)
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("%q is not HOST:PORT", v)
	}
	if _, err := parsePort(port); err != nil {
		return "", fmt.Errorf("%q: %w", v, err)
	}
	if _, err := netip.ParseAddr(host); err != nil && !isDNSName(strings.TrimSuffix(host, ".")) {
		return "", fmt.Errorf("%q: host %q is not a DNS name or an IP address", v, host)
	}
	return v, nil
}
