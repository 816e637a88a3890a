package inject_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

func seedAnnotations() map[string]string {
	return map[string]string{
		vocab.AnnotationInject:             "enabled",
		vocab.AnnotationProxyCPURequest:    "100m",
		vocab.AnnotationProxyMemoryRequest: "64Mi",
		vocab.AnnotationProxyCPULimit:      "1",
		vocab.AnnotationProxyMemoryLimit:   "250Mi",
		vocab.AnnotationProxyLogLevel:      "warn,linkerd=info",
	}
}

func TestRenderGivesTheSeedProxyExactlyTheAnnotatedResourcesAndLogLevel(t *testing.T) {
	pod := appPod("emojivoto", seedAnnotations())
	patch, report, err := inject.Render(pod, namespace("emojivoto", nil), testValues(t))
	require.NoError(t, err)
	require.True(t, report.Injected, report.Message)

	out := applyPatch(t, pod, patch)
	proxy := container(out, vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("250Mi")},
	}
	assert.True(t, equality(want, proxy.Resources), "resources: got %+v", proxy.Resources)
	assert.Equal(t, "warn,linkerd=info", env(proxy)[vocab.EnvLogLevel])

	for _, name := range []string{"proxy-cpu-request", "proxy-memory-request", "proxy-cpu-limit", "proxy-memory-limit", "proxy-log-level"} {
		s := setting(t, report, name)
		assert.Equal(t, inject.SourcePod, s.Source, name)
		assert.Equal(t, vocab.ConfigPrefix+name, s.Annotation, name)
	}
	assert.Equal(t, "100m", setting(t, report, "proxy-cpu-request").Value)
	assert.Equal(t, inject.SourceValues, setting(t, report, "inbound-port").Source)
}

// equality compares resource lists by value (quantities print differently).
func equality(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, q := range x {
			if o, ok := y[k]; !ok || q.Cmp(o) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

func TestRenderNativeSidecarPutsInitThenProxyBeforeApplicationInitContainers(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "example.com/migrate:1"}}
	patch, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	assert.Equal(t, "native", report.Sidecar)

	out := applyPatch(t, pod, patch)
	require.Len(t, out.Spec.InitContainers, 3)
	assert.Equal(t, vocab.InitContainerName, out.Spec.InitContainers[0].Name)
	assert.Equal(t, vocab.ProxyContainerName, out.Spec.InitContainers[1].Name)
	assert.Equal(t, "migrate", out.Spec.InitContainers[2].Name)
	proxy := out.Spec.InitContainers[1]
	require.NotNil(t, proxy.RestartPolicy)
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *proxy.RestartPolicy)
	require.NotNil(t, proxy.StartupProbe)
	assert.Equal(t, "/ready", proxy.StartupProbe.HTTPGet.Path)
	assert.Equal(t, int32(vocab.DefaultAdminPort), proxy.StartupProbe.HTTPGet.Port.IntVal)
	assert.Equal(t, "/live", proxy.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/ready", proxy.ReadinessProbe.HTTPGet.Path)
	require.Len(t, out.Spec.Containers, 1, "native mode leaves containers alone")
}

func TestRenderClassicModePutsProxyFirstWithAwaitAndInitLast(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationInject:                "enabled",
		vocab.AnnotationNativeSidecarBeta:     "false",
		vocab.AnnotationWaitBeforeExitSeconds: "5",
	})
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "example.com/migrate:1"}}
	patch, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	assert.Equal(t, "classic", report.Sidecar)
	s := setting(t, report, "proxy-enable-native-sidecar")
	assert.Equal(t, vocab.AnnotationNativeSidecarBeta, s.Annotation)

	out := applyPatch(t, pod, patch)
	require.Len(t, out.Spec.InitContainers, 2)
	assert.Equal(t, "migrate", out.Spec.InitContainers[0].Name)
	assert.Equal(t, vocab.InitContainerName, out.Spec.InitContainers[1].Name)
	require.Len(t, out.Spec.Containers, 2)
	proxy := out.Spec.Containers[0]
	assert.Equal(t, vocab.ProxyContainerName, proxy.Name)
	assert.Nil(t, proxy.RestartPolicy)
	require.NotNil(t, proxy.Lifecycle)
	require.NotNil(t, proxy.Lifecycle.PostStart)
	assert.Equal(t, inject.DefaultValues().Proxy.AwaitCommand, proxy.Lifecycle.PostStart.Exec.Command)
	require.NotNil(t, proxy.Lifecycle.PreStop)
	assert.Equal(t, int64(5), proxy.Lifecycle.PreStop.Sleep.Seconds)
}

func TestRenderInitContainerCarriesPortsSkipPortsAndUID(t *testing.T) {
	pod := appPod("shop", map[string]string{
		vocab.AnnotationInject:            "enabled",
		vocab.AnnotationSkipInboundPorts:  "9000-9100, 8443",
		vocab.AnnotationSkipOutboundPorts: "5432,443",
		vocab.AnnotationSkipSubnets:       "10.0.0.0/8,fd00::/8",
		vocab.AnnotationProxyUID:          "3000",
	})
	patch, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	out := applyPatch(t, pod, patch)
	init := container(out, vocab.InitContainerName)
	require.NotNil(t, init)
	assert.Equal(t, []string{
		"--incoming-proxy-port", "4143",
		"--outgoing-proxy-port", "4140",
		"--proxy-uid", "3000",
		"--inbound-ports-to-ignore", "4190,4191,8443,9000-9100",
		"--outbound-ports-to-ignore", "443,5432",
		"--subnets-to-ignore", "10.0.0.0/8,fd00::/8",
	}, init.Args)
	assert.Equal(t, "10.0.0.0/8,fd00::/8", setting(t, report, "skip-subnets").Value)
	assert.NotContains(t, strings.Join(report.Warnings, "\n"), "skip-subnets", "the subnets are applied, not warned about")
	sc := init.SecurityContext
	assert.ElementsMatch(t, []corev1.Capability{"NET_ADMIN", "NET_RAW"}, sc.Capabilities.Add)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Equal(t, int64(65534), *sc.RunAsUser, "weft-init runs as a non-root user, as Linkerd's proxy-init does")
	assert.Equal(t, int64(65534), *sc.RunAsGroup)
	assert.True(t, *sc.RunAsNonRoot)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.Privileged)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	proxy := container(out, vocab.ProxyContainerName)
	assert.Equal(t, int64(3000), *proxy.SecurityContext.RunAsUser)
	e := env(proxy)
	assert.Equal(t, "8443,9000-9100", e[vocab.EnvInboundSkipPorts])
	assert.Equal(t, "443,5432", e[vocab.EnvOutboundSkipPorts])
}

func TestRenderProxyEnvironmentCarriesAddressesIdentityAndContext(t *testing.T) {
	v := testValues(t)
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "ingress"})
	patch, report, err := inject.Render(pod, nil, v)
	require.NoError(t, err)
	assert.Equal(t, "ingress", report.Mode)
	proxy := container(applyPatch(t, pod, patch), vocab.ProxyContainerName)
	e := env(proxy)
	assert.Equal(t, "0.0.0.0:4143", e[vocab.EnvInboundAddr])
	assert.Equal(t, "127.0.0.1:4140", e[vocab.EnvOutboundAddr])
	assert.Equal(t, "0.0.0.0:4191", e[vocab.EnvAdminAddr])
	assert.Equal(t, "weft-identity-headless.weft.svc.cluster.local.:8080", e[vocab.EnvIdentityAddr])
	assert.Equal(t, "weft-dst-headless.weft.svc.cluster.local.:8086", e[vocab.EnvDestinationAddr])
	assert.Equal(t, "weft-policy.weft.svc.cluster.local.:8090", e[vocab.EnvPolicyAddr])
	assert.Equal(t, v.IdentityTrustAnchorsPEM, e[vocab.EnvTrustAnchors])
	assert.Equal(t, "/var/run/secrets/tokens/weft-identity-token", e[vocab.EnvIdentityTokenFile])
	assert.Equal(t, "$(_pod_sa).$(_pod_ns).serviceaccount.identity.weft.cluster.local", e[vocab.EnvIdentityName])
	assert.Equal(t, "$(_pod_ns)", e[vocab.EnvNamespace])
	assert.Equal(t, "$(_pod_name)", e[vocab.EnvPod])
	assert.Equal(t, "$(_pod_sa)", e[vocab.EnvServiceAccount])
	assert.Equal(t, vocab.DefaultOpaquePorts, e[vocab.EnvInboundOpaquePorts])
	assert.Equal(t, "warn,linkerd=info", e[vocab.EnvLogLevel])
	assert.Equal(t, "plain", e[vocab.EnvLogFormat])
	assert.Equal(t, "2m0s", e[vocab.EnvShutdownGracePeriod])
	assert.Equal(t, "all-unauthenticated", e[vocab.EnvDefaultInboundPolicy])
	assert.Equal(t, "true", e[vocab.EnvIngressMode])
	assert.Equal(t, "3306,8080", e[vocab.EnvInboundPorts], "the application's ports")
	assert.Equal(t, "10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8", e[vocab.EnvClusterNetworks], "Linkerd's default clusterNetworks")
	assert.Equal(t, "false", e[vocab.EnvAdminShutdown])
	var ctx map[string]string
	require.NoError(t, json.Unmarshal([]byte(e[vocab.EnvDestinationContext]), &ctx))
	assert.Equal(t, map[string]string{"ns": "$(_pod_ns)", "nodeName": "$(_pod_nodeName)", "pod": "$(_pod_name)"}, ctx)

	// $(var) references only expand to variables defined earlier.
	defined := map[string]bool{}
	for _, ev := range proxy.Env {
		for _, ref := range []string{"_pod_sa", "_pod_ns", "_pod_name", "_pod_nodeName"} {
			if strings.Contains(ev.Value, "$("+ref+")") {
				assert.True(t, defined[ref], "%s refers to %s before it is defined", ev.Name, ref)
			}
		}
		defined[ev.Name] = true
		if ev.ValueFrom != nil {
			assert.NotNil(t, ev.ValueFrom.FieldRef)
		}
	}
}

func TestRenderAddsProjectedTokenVolumeWithIdentityAudience(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	patch, _, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	out := applyPatch(t, pod, patch)
	require.Len(t, out.Spec.Volumes, 3)
	assert.Equal(t, "data", out.Spec.Volumes[0].Name)
	tok := out.Spec.Volumes[1]
	assert.Equal(t, vocab.TokenVolumeName, tok.Name)
	require.NotNil(t, tok.Projected)
	sat := tok.Projected.Sources[0].ServiceAccountToken
	assert.Equal(t, "identity.l5d.io", sat.Audience)
	assert.Equal(t, int64(86400), *sat.ExpirationSeconds)
	proxy := container(out, vocab.ProxyContainerName)
	assert.Contains(t, proxy.VolumeMounts, corev1.VolumeMount{Name: vocab.TokenVolumeName, MountPath: "/var/run/secrets/tokens", ReadOnly: true})
}

func TestRenderLabelsAndAnnotatesTheInjectedPod(t *testing.T) {
	v := testValues(t)
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	ns := namespace("shop", map[string]string{vocab.AnnotationProxyLogFormat: "json"})
	patch, _, err := inject.Render(pod, ns, v)
	require.NoError(t, err)
	out := applyPatch(t, pod, patch)
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace])
	assert.Equal(t, "shop", out.Labels[vocab.LabelWorkloadNamespace])
	assert.Equal(t, "web", out.Labels["app"], "existing labels are kept")
	assert.Equal(t, "v0.1.0", out.Annotations[vocab.AnnotationProxyVersion])
	assert.Equal(t, "weft/inject v0.1.0", out.Annotations[vocab.AnnotationCreatedBy])
	assert.Len(t, out.Annotations[vocab.AnnotationTrustRootSHA256], 64)
	assert.Equal(t, "json", out.Annotations[vocab.AnnotationProxyLogFormat], "namespace config is recorded on the pod")
	assert.Equal(t, vocab.DefaultOpaquePorts, out.Annotations[vocab.AnnotationOpaquePorts], "default opaque ports are recorded for discovery")
}

func TestRenderCNIModeAddsNoInitContainer(t *testing.T) {
	v := testValues(t)
	v.CNIEnabled = true
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	patch, report, err := inject.Render(pod, nil, v)
	require.NoError(t, err)
	assert.Equal(t, "cni", report.Init)
	out := applyPatch(t, pod, patch)
	assert.Nil(t, container(out, vocab.InitContainerName))
	require.NotNil(t, container(out, vocab.ProxyContainerName))
	for _, vol := range out.Spec.Volumes {
		assert.NotEqual(t, vocab.XtablesLockVolumeName, vol.Name)
	}
}

func TestRenderIsIdempotent(t *testing.T) {
	for _, native := range []string{"true", "false"} {
		pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationNativeSidecar: native})
		patch, _, err := inject.Render(pod, nil, testValues(t))
		require.NoError(t, err)
		require.NotEmpty(t, patch)
		injected := applyPatch(t, pod, patch)

		again, report, err := inject.Render(injected, nil, testValues(t))
		require.NoError(t, err)
		assert.Empty(t, again, "native=%s: an injected pod yields no patch", native)
		assert.False(t, report.Injected)
		assert.Equal(t, inject.ReasonAlreadyInjected, report.Reason)
	}
}

func TestRenderLeavesPodsAloneWithTheReason(t *testing.T) {
	enabled := map[string]string{vocab.AnnotationInject: "enabled"}
	hostNet := appPod("shop", enabled)
	hostNet.Spec.HostNetwork = true
	optedOut := namespace("shop", enabled)
	optedOut.Labels = map[string]string{vocab.LabelAdmissionWebhooks: "disabled"}
	userProxy := appPod("shop", enabled)
	userProxy.Spec.Containers = append(userProxy.Spec.Containers, corev1.Container{Name: vocab.ProxyContainerName, Image: "mine"})

	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		ns     *corev1.Namespace
		reason inject.Reason
		msg    string
	}{
		{"host network", hostNet, nil, inject.ReasonHostNetwork, "host network"},
		{"kube-system", appPod("kube-system", enabled), nil, inject.ReasonSystemNamespace, "kube-system"},
		{"kube-public", appPod("kube-public", enabled), nil, inject.ReasonSystemNamespace, "kube-public"},
		{"opted-out namespace", appPod("shop", nil), optedOut, inject.ReasonNamespaceOptedOut, "admission-webhooks=disabled"},
		{"disabled pod", appPod("shop", map[string]string{vocab.AnnotationInject: "disabled"}), namespace("shop", enabled), inject.ReasonDisabled, "pod has linkerd.io/inject: disabled"},
		{"disabled namespace", appPod("shop", nil), namespace("shop", map[string]string{vocab.AnnotationInject: "disabled"}), inject.ReasonDisabled, `namespace "shop"`},
		{"nothing asks", appPod("shop", nil), namespace("shop", nil), inject.ReasonNotEnabled, "neither"},
		{"container named like the proxy", userProxy, nil, inject.ReasonAlreadyInjected, "already in containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, report, err := inject.Render(tc.pod, tc.ns, testValues(t))
			require.NoError(t, err)
			assert.Empty(t, patch)
			assert.False(t, report.Injected)
			assert.Equal(t, tc.reason, report.Reason)
			assert.Contains(t, report.Message, tc.msg)
		})
	}
}

func TestRenderPodAnnotationOverridesDisabledNamespace(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	_, report, err := inject.Render(pod, namespace("shop", map[string]string{vocab.AnnotationInject: "disabled"}), testValues(t))
	require.NoError(t, err)
	assert.True(t, report.Injected)
	assert.Equal(t, inject.SourcePod, setting(t, report, "inject").Source)
}

func TestRenderRejectsClashingNamesAndPorts(t *testing.T) {
	initClash := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	initClash.Spec.InitContainers = []corev1.Container{{Name: vocab.InitContainerName, Image: "mine"}}
	portClash := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	portClash.Spec.Containers[0].Ports = append(portClash.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 4191})
	annotatedClash := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationInboundPort: "8080"})
	volClash := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	volClash.Spec.Volumes = []corev1.Volume{{Name: vocab.TokenVolumeName}}
	dupPorts := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationAdminPort: "4143"})

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"init container name", initClash, []string{"weft-init", "initContainers"}},
		{"app listens on admin port", portClash, []string{`container "web"`, "4191", "admin-port=4191 (values)"}},
		{"inbound port annotated onto an app port", annotatedClash, []string{"8080", "inbound-port=8080 (pod annotation config.linkerd.io/inbound-port)"}},
		{"token volume name", volClash, []string{vocab.TokenVolumeName}},
		{"duplicate proxy ports", dupPorts, []string{"inbound and admin ports are both 4143", "config.linkerd.io/admin-port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, _, err := inject.Render(tc.pod, nil, testValues(t))
			require.Error(t, err)
			assert.Empty(t, patch)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), `pod "shop/web-7d9f8"`)
		})
	}
}

func TestRenderEscapesJSONPointerTokensInAnnotationKeys(t *testing.T) {
	pod := appPod("shop", map[string]string{"example.com/a~b": "x", vocab.AnnotationInject: "enabled"})
	ns := namespace("shop", map[string]string{
		"config.linkerd.io/odd~key/with-slash": "1",
		vocab.AnnotationProxyLogFormat:         "json",
	})
	patch, report, err := inject.Render(pod, ns, testValues(t))
	require.NoError(t, err)
	var paths []string
	for _, op := range patch {
		paths = append(paths, op.Path)
	}
	assert.Contains(t, paths, "/metadata/annotations/config.linkerd.io~1odd~0key~1with-slash")
	assert.Contains(t, paths, "/metadata/labels/linkerd.io~1control-plane-ns")
	out := applyPatch(t, pod, patch)
	assert.Equal(t, "1", out.Annotations["config.linkerd.io/odd~key/with-slash"])
	assert.Equal(t, "x", out.Annotations["example.com/a~b"])
	require.NotEmpty(t, report.Warnings)
	assert.Contains(t, strings.Join(report.Warnings, "\n"), "unknown annotation config.linkerd.io/odd~key/with-slash")
}

func TestRenderPatchAppliesToPodsWithoutLabelsAnnotationsOrVolumes(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
	pod.Namespace = "bare"
	patch, _, err := inject.Render(pod, nil, testValues(t), inject.WithDefaultMode(vocab.InjectEnabled))
	require.NoError(t, err)
	out := applyPatch(t, pod, patch)
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace])
	assert.NotEmpty(t, out.Annotations[vocab.AnnotationProxyVersion])
	assert.Len(t, out.Spec.Volumes, 2)
	assert.Len(t, out.Spec.InitContainers, 2)
}

func TestRenderOwnPatchApplierAgreesWithTheIndependentLibrary(t *testing.T) {
	pod := appPod("shop", seedAnnotations())
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for _, native := range []string{"true", "false"} {
		pod.Annotations[vocab.AnnotationNativeSidecar] = native
		patch, _, err := inject.Render(pod, nil, testValues(t))
		require.NoError(t, err)
		doc, err := json.Marshal(pod)
		require.NoError(t, err)
		ours, err := patch.Apply(doc)
		require.NoError(t, err)
		assert.Equal(t, applyPatch(t, pod, patch), strictPod(t, ours))
	}
}

func TestRenderWarnsWithoutTrustAnchors(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	_, report, err := inject.Render(pod, nil, inject.DefaultValues())
	require.NoError(t, err)
	assert.True(t, report.Injected)
	assert.Contains(t, strings.Join(report.Warnings, "\n"), "no trust anchors")
}

// An empty labels map is dropped when a pod is serialized, so the patch
// must not assume the map exists (found by FuzzInjectorPod).
func TestRenderPatchAppliesWhenLabelsAndAnnotationsAreEmptyMaps(t *testing.T) {
	pod := appPod("shop", map[string]string{})
	pod.Labels = map[string]string{}
	pod.Spec.InitContainers = []corev1.Container{}
	patch, _, err := inject.Render(pod, nil, testValues(t), inject.WithDefaultMode(vocab.InjectEnabled))
	require.NoError(t, err)
	out := applyPatch(t, pod, patch)
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace])
	assert.NotEmpty(t, out.Annotations[vocab.AnnotationProxyVersion])
}

func TestRenderProxyAdminShutdownIsOffUnlessEnabled(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationProxyAdminShutdown: "enabled"})
	patch, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	assert.Equal(t, "true", env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))[vocab.EnvAdminShutdown])
	assert.Equal(t, inject.SourcePod, setting(t, report, "proxy-admin-shutdown").Source)

	pod.Annotations[vocab.AnnotationProxyAdminShutdown] = "true"
	_, _, err = inject.Render(pod, nil, testValues(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config.linkerd.io/proxy-admin-shutdown="true"`)
}

func TestRenderServesTapToTheValuesTappersUnlessThePodSaysOtherwise(t *testing.T) {
	const tapper = "weft-tap.weft.serviceaccount.identity.weft.cluster.local"
	v := testValues(t)
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})

	// No tappers in the values: no tap listener.
	patch, _, err := inject.Render(pod, nil, v)
	require.NoError(t, err)
	e := env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.NotContains(t, e, vocab.EnvTapIdentities)
	assert.NotContains(t, e, vocab.EnvTapAddr)

	v.Proxy.TapIdentities = tapper
	patch, report, err := inject.Render(pod, nil, v)
	require.NoError(t, err)
	e = env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.Equal(t, tapper, e[vocab.EnvTapIdentities])
	assert.Equal(t, "0.0.0.0:4190", e[vocab.EnvTapAddr], "the control port, which weft-init never redirects")
	assert.Equal(t, inject.SourceValues, setting(t, report, "tap-identities").Source)

	// A pod names its own tappers...
	pod.Annotations[vocab.AnnotationTapIdentities] = "a.x.serviceaccount.identity.weft.cluster.local, B.x.serviceaccount.identity.weft.cluster.local"
	patch, _, err = inject.Render(pod, nil, v)
	require.NoError(t, err)
	e = env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.Equal(t, "a.x.serviceaccount.identity.weft.cluster.local,b.x.serviceaccount.identity.weft.cluster.local", e[vocab.EnvTapIdentities])

	// ...or turns tap off (Linkerd's key), whatever the lists say.
	pod.Annotations[vocab.AnnotationDisableTap] = "true"
	patch, _, err = inject.Render(pod, nil, v)
	require.NoError(t, err)
	e = env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.NotContains(t, e, vocab.EnvTapIdentities)
	assert.NotContains(t, e, vocab.EnvTapAddr)

	// A list that is not identities is refused, naming the annotation.
	delete(pod.Annotations, vocab.AnnotationDisableTap)
	pod.Annotations[vocab.AnnotationTapIdentities] = "tap.x,not a name"
	_, _, err = inject.Render(pod, nil, v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), vocab.AnnotationTapIdentities)
}
