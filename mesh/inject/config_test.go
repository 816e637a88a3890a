package inject_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

func TestResolvePrefersPodOverNamespaceOverValues(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationProxyLogLevel: "info"})
	ns := namespace("shop", map[string]string{
		vocab.AnnotationProxyLogLevel:       "debug",
		vocab.AnnotationProxyCPURequest:     "200m",
		vocab.AnnotationShutdownGracePeriod: "30s",
	})
	cfg, err := inject.Resolve(pod, ns, testValues(t))
	require.NoError(t, err)

	assert.Equal(t, "info", cfg.LogLevel)
	s, _ := cfg.Setting("proxy-log-level")
	assert.Equal(t, inject.Setting{Name: "proxy-log-level", Value: "info", Source: inject.SourcePod, Annotation: vocab.AnnotationProxyLogLevel}, s)

	s, _ = cfg.Setting("proxy-cpu-request")
	assert.Equal(t, inject.Setting{Name: "proxy-cpu-request", Value: "200m", Source: inject.SourceNamespace, Annotation: vocab.AnnotationProxyCPURequest}, s)
	assert.Equal(t, "200m", cfg.ProxyResources.Requests.Cpu().String())

	assert.Equal(t, 30*time.Second, cfg.ShutdownGracePeriod)
	s, _ = cfg.Setting("admin-port")
	assert.Equal(t, inject.Setting{Name: "admin-port", Value: "4191", Source: inject.SourceValues}, s)
	assert.Equal(t, `admin-port=4191 (values)`, s.String())

	assert.Equal(t, map[string]string{
		vocab.AnnotationProxyCPURequest:     "200m",
		vocab.AnnotationShutdownGracePeriod: "30s",
	}, cfg.Inherited, "only namespace settings the pod does not set are inherited")
}

func TestResolveEverySettingHasASource(t *testing.T) {
	cfg, err := inject.Resolve(appPod("shop", nil), nil, testValues(t))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, s := range cfg.Settings {
		assert.False(t, names[s.Name], "setting %s listed twice", s.Name)
		names[s.Name] = true
		if s.Name != "inject" {
			assert.Equal(t, inject.SourceValues, s.Source, s.Name)
		}
	}
	for _, n := range []string{"inject", "proxy-image", "proxy-version", "proxy-cpu-request", "proxy-memory-limit", "proxy-log-level",
		"proxy-log-format", "skip-inbound-ports", "skip-outbound-ports", "opaque-ports", "proxy-await", "default-inbound-policy",
		"shutdown-grace-period", "proxy-enable-native-sidecar", "proxy-uid", "inbound-port", "outbound-port", "admin-port"} {
		assert.True(t, names[n], "missing setting %s", n)
	}
}

func TestResolveRejectsInvalidAnnotationValuesNamingAnnotationObjectAndValue(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       string
	}{
		{vocab.AnnotationInject, "enabled|disabled", "not one of enabled, disabled, ingress"},
		{vocab.AnnotationProxyCPURequest, "100x", "not a quantity"},
		{vocab.AnnotationProxyMemoryLimit, "-1Gi", "negative"},
		{vocab.AnnotationSkipInboundPorts, "9000-8000", "backwards"},
		{vocab.AnnotationSkipOutboundPorts, "70000", "not a port"},
		{vocab.AnnotationOpaquePorts, "3306,,5432", "empty"},
		{vocab.AnnotationOpaquePorts, "postgres", "nor the name of a container port"},
		{vocab.AnnotationInboundPort, "0", "not a port"},
		{vocab.AnnotationProxyLogLevel, "warn,linkerd=loud", "not a level"},
		{vocab.AnnotationProxyLogLevel, "warn,,info", "empty"},
		{vocab.AnnotationProxyLogFormat, "xml", "not a log format"},
		{vocab.AnnotationProxyAwait, "true", "not enabled or disabled"},
		{vocab.AnnotationNativeSidecarBeta, "yes", "not true or false"},
		{vocab.AnnotationDefaultInboundPolicy, "allow-all", "not a default inbound policy"},
		{vocab.AnnotationShutdownGracePeriod, "30", "not a duration"},
		{vocab.AnnotationShutdownGracePeriod, "-5s", "negative"},
		{vocab.AnnotationProxyUID, "0", "non-root"},
		{vocab.AnnotationProxyUID, "abc", "not a user or group ID"},
		{vocab.AnnotationProxyImage, "Bad Image", "not an image name"},
		{vocab.AnnotationProxyVersionOverride, "v1 beta", "not an image tag"},
		{vocab.AnnotationImagePullPolicy, "Sometimes", "not a pull policy"},
		{vocab.AnnotationSkipSubnets, "10.0.0.1/8", "host bits"},
		{vocab.AnnotationSkipSubnets, "10.0.0.0/33", "not a CIDR"},
		{vocab.AnnotationWaitBeforeExitSeconds, "-3", "not a number of seconds"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			pod := appPod("shop", map[string]string{tc.key: tc.value})
			_, err := inject.Resolve(pod, nil, testValues(t))
			require.Error(t, err)
			var ae *inject.AnnotationError
			require.True(t, errors.As(err, &ae), "want an AnnotationError, got %v", err)
			assert.Equal(t, tc.key, ae.Key)
			assert.Equal(t, tc.value, ae.Value)
			msg := err.Error()
			assert.Contains(t, msg, `pod "shop/web-7d9f8"`)
			assert.Contains(t, msg, tc.key)
			assert.Contains(t, msg, tc.want)
			assert.True(t, strings.HasPrefix(msg, "inject: "), msg)
		})
	}
}

func TestResolveNamesTheNamespaceWhenItsAnnotationIsInvalid(t *testing.T) {
	ns := namespace("shop", map[string]string{vocab.AnnotationProxyCPULimit: "lots"})
	_, err := inject.Resolve(appPod("shop", nil), ns, testValues(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `namespace "shop": annotation config.linkerd.io/proxy-cpu-limit="lots"`)
}

func TestResolveReportsEveryInvalidAnnotationAtOnce(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationProxyCPURequest:  "100x",
		vocab.AnnotationSkipInboundPorts: "9000-8000",
	})
	_, err := inject.Resolve(pod, nil, testValues(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "proxy-cpu-request")
	assert.Contains(t, err.Error(), "skip-inbound-ports")
}

func TestResolveRejectsRequestAboveLimitNamingBothSources(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationProxyCPURequest: "2"})
	ns := namespace("shop", map[string]string{vocab.AnnotationProxyCPULimit: "1"})
	_, err := inject.Resolve(pod, ns, testValues(t))
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "cpu request 2 exceeds limit 1")
	assert.Contains(t, msg, "proxy-cpu-request=2 (pod annotation config.linkerd.io/proxy-cpu-request)")
	assert.Contains(t, msg, "proxy-cpu-limit=1 (namespace annotation config.linkerd.io/proxy-cpu-limit)")
}

func TestResolveResolvesNamedOpaquePortsAgainstThePodsContainers(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationOpaquePorts: "mysql, 9000-9010"})
	cfg, err := inject.Resolve(pod, nil, testValues(t))
	require.NoError(t, err)
	assert.Equal(t, "3306,9000-9010", cfg.OpaquePorts.String())
}

func TestResolveNativeSidecarAliasesPreferTheStableKey(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationNativeSidecarAlpha: "false",
		vocab.AnnotationNativeSidecarBeta:  "true",
	})
	cfg, err := inject.Resolve(pod, nil, testValues(t))
	require.NoError(t, err)
	s, _ := cfg.Setting("proxy-enable-native-sidecar")
	assert.Equal(t, vocab.AnnotationNativeSidecarBeta, s.Annotation)
	assert.True(t, cfg.NativeSidecar)

	// A namespace alias does not override a pod alias, and is not copied
	// onto the pod where it could win on a later resolution.
	pod = appPod("shop", map[string]string{vocab.AnnotationNativeSidecarAlpha: "false"})
	ns := namespace("shop", map[string]string{vocab.AnnotationNativeSidecarBeta: "true"})
	cfg, err = inject.Resolve(pod, ns, testValues(t))
	require.NoError(t, err)
	assert.False(t, cfg.NativeSidecar)
	assert.NotContains(t, cfg.Inherited, vocab.AnnotationNativeSidecarBeta)
}

func TestResolveWarnsAboutAnnotationsWithoutEffect(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationAccessLog:             "apache",
		"config.linkerd.io/proxy-cpu-requets": "1",
	})
	cfg, err := inject.Resolve(pod, nil, testValues(t))
	require.NoError(t, err)
	all := strings.Join(cfg.Warnings, "\n")
	assert.NotContains(t, all, "access-log", "access-log is applied")
	assert.Contains(t, all, "unknown annotation config.linkerd.io/proxy-cpu-requets")
}

func TestResolveTreatsIngressOnANamespaceAsEnabled(t *testing.T) {
	cfg, err := inject.Resolve(appPod("shop", nil), namespace("shop", map[string]string{vocab.AnnotationInject: "ingress"}), testValues(t))
	require.NoError(t, err)
	assert.Equal(t, vocab.InjectEnabled, cfg.Mode)
}

func TestResolveRejectsInvalidValues(t *testing.T) {
	v := testValues(t)
	v.Proxy.Ports.Admin = 0
	_, err := inject.Resolve(appPod("shop", nil), nil, v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "proxy.ports.admin")
}
