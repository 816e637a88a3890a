package inject_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

func owned(pod *corev1.Pod, kind, name string) *corev1.Pod {
	yes := true
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "u", Controller: &yes}}
	return pod
}

func TestRenderLabelsThePodWithTheWorkloadItBelongsTo(t *testing.T) {
	enabled := map[string]string{vocab.AnnotationInject: "enabled"}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		opts      []inject.RenderOption
		key, want string
	}{
		{"a Deployment's ReplicaSet", func() *corev1.Pod {
			p := owned(appPod("shop", enabled), "ReplicaSet", "web-5c6d7f8b9")
			p.Labels["pod-template-hash"] = "5c6d7f8b9"
			return p
		}(), nil, vocab.LabelProxyDeployment, "web"},
		{"a bare ReplicaSet", owned(appPod("shop", enabled), "ReplicaSet", "legacy"), nil, vocab.LabelProxyReplicaSet, "legacy"},
		{"a ReplicaSet whose name does not end with the hash", func() *corev1.Pod {
			p := owned(appPod("shop", enabled), "ReplicaSet", "legacy")
			p.Labels["pod-template-hash"] = "5c6d7f8b9"
			return p
		}(), nil, vocab.LabelProxyReplicaSet, "legacy"},
		{"a StatefulSet", owned(appPod("shop", enabled), "StatefulSet", "db"), nil, vocab.LabelProxyStatefulSet, "db"},
		{"a DaemonSet", owned(appPod("shop", enabled), "DaemonSet", "agent"), nil, vocab.LabelProxyDaemonSet, "agent"},
		{"a Job", owned(appPod("shop", enabled), "Job", "backfill-28312"), nil, vocab.LabelProxyJob, "backfill-28312"},
		{"a workload named by the CLI", appPod("shop", enabled), []inject.RenderOption{inject.WithObject("CronJob", "nightly")}, vocab.LabelProxyCronJob, "nightly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, _, err := inject.Render(tc.pod, nil, testValues(t), tc.opts...)
			require.NoError(t, err)
			out := applyPatch(t, tc.pod, patch)
			assert.Equal(t, tc.want, out.Labels[tc.key])
		})
	}
	patch, _, err := inject.Render(appPod("shop", enabled), nil, testValues(t))
	require.NoError(t, err)
	for k := range applyPatch(t, appPod("shop", enabled), patch).Labels {
		assert.False(t, strings.HasPrefix(k, "linkerd.io/proxy-"), "a pod without an owner gets no owner label: %s", k)
	}
}

func TestRenderRefusesPodsWithAnotherMeshsSidecar(t *testing.T) {
	for name, c := range map[string]corev1.Container{
		"Istio by name":                 {Name: "istio-proxy", Image: "example.com/whatever:1"},
		"Istio by image":                {Name: "sidecar", Image: "gcr.io/istio-release/proxyv2:1.20.0"},
		"Consul":                        {Name: "consul-dataplane", Image: "hashicorp/consul-dataplane:1.4"},
		"Kuma":                          {Name: "kuma-sidecar", Image: "kumahq/kuma-dp:2.6"},
		"Linkerd's proxy under a alias": {Name: "mesh", Image: "cr.l5d.io/linkerd/proxy:stable-2.14.0"},
	} {
		pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
		pod.Spec.Containers = append(pod.Spec.Containers, c)
		patch, report, err := inject.Render(pod, nil, testValues(t))
		require.NoError(t, err, name)
		assert.Empty(t, patch, name)
		assert.Equal(t, inject.ReasonOtherMesh, report.Reason, name)
		assert.Contains(t, report.Message, c.Name, name)
	}
	// An application's own Envoy is no mesh.
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "envoy", Image: "envoyproxy/envoy:v1.30.0"})
	_, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	assert.True(t, report.Injected)
}

func TestRenderMigratesALinkerdSidecarAndRefusesAPodLeftWithoutContainers(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationProxyVersion: "stable-2.14.0"})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: vocab.LinkerdProxyContainerName, Ports: []corev1.ContainerPort{{ContainerPort: 4143}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: vocab.LinkerdTokenVolumeName}, {Name: "keep"}}
	patch, report, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err, "Linkerd's proxy port is not a clash: the proxy goes")
	assert.Equal(t, []string{vocab.LinkerdProxyContainerName}, report.Replaced)
	assert.Equal(t, `pod "web-7d9f8" injected (replaced linkerd-proxy)`, report.Summary())
	out := applyPatch(t, pod, patch)
	assert.Nil(t, container(out, vocab.LinkerdProxyContainerName))
	assert.NotNil(t, container(out, vocab.ProxyContainerName))
	assert.Equal(t, "v0.1.0", out.Annotations[vocab.AnnotationProxyVersion], "Weft's version, not Linkerd's")
	var vols []string
	for _, v := range out.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	assert.Equal(t, []string{"keep", vocab.TokenVolumeName, vocab.XtablesLockVolumeName}, vols)

	// Rendering the result again changes nothing.
	again, report, err := inject.Render(out, nil, testValues(t))
	require.NoError(t, err)
	assert.Empty(t, again)
	assert.Equal(t, inject.ReasonAlreadyInjected, report.Reason)

	lonely := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	lonely.Spec.Containers = []corev1.Container{{Name: vocab.LinkerdProxyContainerName}}
	_, _, err = inject.Render(lonely, nil, testValues(t))
	assert.ErrorContains(t, err, "no application container is left")
}

func TestUninjectRemovesWeftsAndLinkerdsSidecarsAndMetadata(t *testing.T) {
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationEnableDebugSidecar: "true"})
	patch, _, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	injected := applyPatch(t, pod, patch)
	injected.Spec.Containers = append(injected.Spec.Containers, corev1.Container{Name: vocab.LinkerdDebugContainerName})

	undo, removed := inject.Uninject(injected)
	assert.ElementsMatch(t, []string{vocab.InitContainerName, vocab.ProxyContainerName, vocab.DebugContainerName, vocab.LinkerdDebugContainerName}, removed)
	out := applyPatch(t, injected, undo)
	assert.Equal(t, pod.Spec.Containers, out.Spec.Containers)
	assert.Empty(t, out.Spec.InitContainers)
	assert.Empty(t, out.Spec.Volumes)
	assert.Equal(t, map[string]string{vocab.AnnotationEnableDebugSidecar: "true", vocab.AnnotationOpaquePorts: vocab.DefaultOpaquePorts}, out.Annotations,
		"config.linkerd.io keys stay (as with linkerd uninject), linkerd.io/inject: enabled goes")
	assert.Equal(t, map[string]string{"app": "web"}, out.Labels)

	disabled := appPod("shop", map[string]string{vocab.AnnotationInject: "disabled"})
	p, removed := inject.Uninject(disabled)
	assert.Empty(t, p, "nothing to remove: an opt-out stays")
	assert.Empty(t, removed)
}

func TestResolveMergesAdditionalEnvironmentByName(t *testing.T) {
	v := testValues(t)
	v.Proxy.AdditionalEnv = []corev1.EnvVar{{Name: "A", Value: "values"}, {Name: "B", Value: "values"}}
	ns := namespace("shop", map[string]string{vocab.AnnotationProxyAdditionalEnv: `[{"name":"B","value":"namespace"},{"name":"C","value":"namespace"}]`})
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationProxyAdditionalEnv: `[{"name":"C","value":"pod"},{"name":"WEFT_PROXY_LOG_LEVEL","value":"debug"}]`})
	patch, report, err := inject.Render(pod, ns, v)
	require.NoError(t, err)
	e := env(container(applyPatch(t, pod, patch), vocab.ProxyContainerName))
	assert.Equal(t, "values", e["A"])
	assert.Equal(t, "namespace", e["B"])
	assert.Equal(t, "pod", e["C"])
	assert.Equal(t, "debug", e[vocab.EnvLogLevel], "an entry named like an injector variable replaces it")
	assert.Contains(t, strings.Join(report.Warnings, "\n"), "proxy-additional-env replaces WEFT_PROXY_LOG_LEVEL")

	for _, bad := range []string{`{"name":"A"}`, `[{"name":"A","valu":"x"}]`, `[{"name":"A=B"}]`, `[{"name":"A"},{"name":"A"}]`, `[{"name":"A","value":"x","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]`} {
		_, _, err := inject.Render(appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationProxyAdditionalEnv: bad}), nil, v)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), vocab.AnnotationProxyAdditionalEnv, bad)
	}
}

func TestResolveRefusesBadValuesOfTheLinkerdParitySettings(t *testing.T) {
	for key, val := range map[string]string{
		vocab.AnnotationAccessLog:                   "common",
		vocab.AnnotationProxyCPURatioLimit:          "1.5",
		vocab.AnnotationProxyInboundConnectTime:     "0s",
		vocab.AnnotationProxyOutboundConnectTime:    "fast",
		vocab.AnnotationCloseWaitTimeout:            "500ms",
		vocab.AnnotationEnableDebugSidecar:          "yes please",
		vocab.AnnotationDebugImage:                  "Not An Image",
		vocab.AnnotationRequireIdentityInboundPorts: "nope",
		vocab.AnnotationPodInboundPorts:             "70000",
		vocab.AnnotationDisableInboundDetectTimeout: "maybe",
	} {
		_, err := inject.Resolve(appPod("shop", map[string]string{key: val}), nil, testValues(t))
		require.Error(t, err, key)
		assert.Contains(t, err.Error(), key, key)
	}
}

func TestRenderDebugSidecarAndCNIValidatorFollowTheMode(t *testing.T) {
	v := testValues(t)
	v.DebugContainer.Image = inject.Image{Name: "example.com/debug", Version: "7"}
	classic := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationEnableDebugSidecar: "true", vocab.AnnotationNativeSidecar: "false"})
	patch, _, err := inject.Render(classic, nil, v)
	require.NoError(t, err)
	out := applyPatch(t, classic, patch)
	var names []string
	for _, c := range out.Spec.Containers {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{vocab.ProxyContainerName, "web", vocab.DebugContainerName}, names, "the debug sidecar comes last, as in Linkerd")
	assert.Equal(t, "example.com/debug:7", container(out, vocab.DebugContainerName).Image)

	v.CNIEnabled = true
	v.NetworkValidator.ConnectAddr = "[fd00::1]:20001"
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationCloseWaitTimeout: "1h"})
	patch, report, err := inject.Render(pod, nil, v)
	require.NoError(t, err)
	out = applyPatch(t, pod, patch)
	assert.Equal(t, vocab.ValidatorContainerName, out.Spec.InitContainers[0].Name)
	assert.Contains(t, out.Spec.InitContainers[0].Args, "[fd00::1]:20001")
	assert.Contains(t, strings.Join(report.Warnings, "\n"), "close-wait-timeout (close-wait-timeout=1h0m0s (pod annotation config.linkerd.io/close-wait-timeout)) is not applied in CNI mode")

	clash := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	clash.Spec.InitContainers = []corev1.Container{{Name: vocab.ValidatorContainerName}}
	_, _, err = inject.Render(clash, nil, v)
	assert.ErrorContains(t, err, "a container named "+vocab.ValidatorContainerName)
}

func TestValuesAnnotationsCarryWhatAnnotationsCanAndNameTheRest(t *testing.T) {
	base := inject.DefaultValues()
	v := base
	v.Proxy.LogLevel = "debug"
	v.Proxy.InboundConnectTimeout = metav1.Duration{Duration: 250 * time.Millisecond}
	v.Proxy.AdditionalEnv = []corev1.EnvVar{{Name: "X", Value: "1"}}
	v.ProxyInit.IgnoreInboundPorts = ""
	v.ProxyInit.CloseWaitTimeout = metav1.Duration{Duration: time.Hour}
	v.ClusterDomain = "corp.example"
	v.Proxy.ShutdownGracePeriod = metav1.Duration{}
	ann, lost := inject.ValuesAnnotations(v, base)
	assert.Equal(t, map[string]string{
		vocab.AnnotationProxyLogLevel:           "debug",
		vocab.AnnotationProxyInboundConnectTime: "250ms",
		vocab.AnnotationProxyAdditionalEnv:      `[{"name":"X","value":"1"}]`,
		vocab.AnnotationSkipInboundPorts:        "",
		vocab.AnnotationCloseWaitTimeout:        "1h0m0s",
		vocab.AnnotationShutdownGracePeriod:     "0s",
	}, ann)
	assert.Equal(t, []string{"clusterDomain"}, lost)

	// The annotations mean what the values meant.
	pod := appPod("shop", ann)
	cfg, err := inject.Resolve(pod, nil, base)
	require.NoError(t, err)
	assert.Equal(t, "debug", cfg.LogLevel)
	assert.Empty(t, cfg.SkipInboundPorts)
	assert.Equal(t, time.Hour, cfg.CloseWaitTimeout)
}

func TestUninjectKeepsTheMetadataOfControlPlaneComponents(t *testing.T) {
	pod := appPod("weft", map[string]string{vocab.AnnotationInject: "enabled"})
	pod.Labels[vocab.LabelControlPlaneComponent] = "destination"
	patch, _, err := inject.Render(pod, nil, testValues(t))
	require.NoError(t, err)
	injected := applyPatch(t, pod, patch)
	undo, removed := inject.Uninject(injected)
	assert.Contains(t, removed, vocab.ProxyContainerName)
	out := applyPatch(t, injected, undo)
	assert.Nil(t, container(out, vocab.ProxyContainerName))
	assert.Equal(t, "destination", out.Labels[vocab.LabelControlPlaneComponent])
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace], "a control-plane component keeps its linkerd.io metadata, as with linkerd uninject")
}
