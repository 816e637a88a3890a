package inject_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// envVar returns the proxy's variable name, with its downward-API source.
func envVar(c *corev1.Container, name string) (corev1.EnvVar, int) {
	for i, e := range c.Env {
		if e.Name == name {
			return e, i
		}
	}
	return corev1.EnvVar{}, -1
}

func TestLinkerdTraceCollectorAnnotationsTurnTheProxysTracingOn(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationInject:                       "enabled",
		vocab.AnnotationTraceCollector:               "collector.tracing:4317",
		vocab.AnnotationTraceCollectorServiceAccount: "otel-collector",
	})
	patch, report, err := inject.Render(pod, namespace("shop", nil), testValues(t))
	require.NoError(t, err)
	require.True(t, report.Injected, report.Message)
	proxy := container(applyPatch(t, pod, patch), vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	e := env(proxy)
	assert.Equal(t, "collector.tracing:4317", e[vocab.EnvTraceCollectorAddr])
	assert.Equal(t, "otel-collector.tracing.serviceaccount.identity.weft.cluster.local", e[vocab.EnvTraceCollectorIdentity],
		"the collector's namespace is its host's second label, as Linkerd derives it")
	assert.Equal(t, "k8s.pod.ip=$(_pod_ip)\nk8s.pod.uid=$(_pod_uid)\nk8s.container.name=weft-proxy", e[vocab.EnvTraceAttributes])
	// Kubernetes expands $(name) only for variables defined before.
	ip, ipAt := envVar(proxy, "_pod_ip")
	uid, uidAt := envVar(proxy, "_pod_uid")
	_, attrsAt := envVar(proxy, vocab.EnvTraceAttributes)
	require.NotNil(t, ip.ValueFrom)
	assert.Equal(t, "status.podIP", ip.ValueFrom.FieldRef.FieldPath)
	require.NotNil(t, uid.ValueFrom)
	assert.Equal(t, "metadata.uid", uid.ValueFrom.FieldRef.FieldPath)
	assert.Less(t, ipAt, attrsAt)
	assert.Less(t, uidAt, attrsAt)

	assert.Equal(t, inject.SourcePod, setting(t, report, "trace-collector").Source)
	assert.Equal(t, "otel-collector", setting(t, report, "trace-collector-service-account").Value)
}

func TestTraceCollectorFromTheNamespaceAndInTheSameNamespace(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationTraceCollectorServiceAccount: "collector"})
	ns := namespace("shop", map[string]string{vocab.AnnotationTraceCollector: "collector:4317"})
	patch, report, err := inject.Render(pod, ns, testValues(t))
	require.NoError(t, err)
	e := env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.Equal(t, "collector:4317", e[vocab.EnvTraceCollectorAddr])
	assert.Equal(t, "collector.$(_pod_ns).serviceaccount.identity.weft.cluster.local", e[vocab.EnvTraceCollectorIdentity],
		"a one-label host is in the pod's own namespace")
	assert.Equal(t, inject.SourceNamespace, setting(t, report, "trace-collector").Source)
}

func TestWithoutATraceCollectorTheProxyGetsNoTraceSettings(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationTraceCollectorServiceAccount: "collector"})
	patch, _, err := inject.Render(pod, namespace("shop", nil), testValues(t))
	require.NoError(t, err)
	proxy := container(applyPatch(t, pod, patch), vocab.ProxyContainerName)
	for _, name := range []string{vocab.EnvTraceCollectorAddr, vocab.EnvTraceCollectorIdentity, vocab.EnvTraceAttributes, "_pod_ip"} {
		_, at := envVar(proxy, name)
		assert.Equal(t, -1, at, name)
	}
}

func TestABadTraceCollectorAnnotationIsRefusedNamingIt(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{vocab.AnnotationTraceCollector, "collector.tracing", "not HOST:PORT"},
		{vocab.AnnotationTraceCollector, "collector.tracing:http", "not a port number"},
		{vocab.AnnotationTraceCollector, "collector.tracing:0", "not a port"},
		{vocab.AnnotationTraceCollector, "Coll_ector:4317", "not a DNS name or an IP address"},
		{vocab.AnnotationTraceCollector, "http://collector:4317", "not HOST:PORT"},
		{vocab.AnnotationTraceCollectorServiceAccount, "otel.collector", "not a service account name"},
		{vocab.AnnotationTraceCollectorServiceAccount, "", "not a service account name"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			pod := appPod("shop", map[string]string{tc.key: tc.value})
			_, err := inject.Resolve(pod, nil, testValues(t))
			require.Error(t, err)
			var ae *inject.AnnotationError
			require.True(t, errors.As(err, &ae), "want an AnnotationError, got %v", err)
			assert.Equal(t, tc.key, ae.Key)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
