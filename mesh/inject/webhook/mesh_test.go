package webhook_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

func TestInjectorRefusesToInjectNextToAnotherMeshsSidecarAndSaysWhy(t *testing.T) {
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	_, url, client := newInjector(t, nss)
	pod := appPod("shop", nil)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.22.0"})

	status, body := post(t, client, url, podReview(t, "mesh", pod))
	require.Equal(t, http.StatusOK, status)
	resp := decodeResponse(t, body)
	assert.True(t, resp.Allowed, "the pod runs, without Weft's proxy")
	assert.Nil(t, resp.Patch)
	assert.Equal(t, "false", resp.AuditAnnotations["injected"])
	assert.Equal(t, "other-mesh", resp.AuditAnnotations["reason"])
	require.Len(t, resp.Warnings, 1, "kubectl shows the reason")
	assert.Contains(t, resp.Warnings[0], "istio-proxy")
	assert.Contains(t, resp.Warnings[0], "Istio")
}

func TestInjectorReplacesLinkerdsSidecarWithWefts(t *testing.T) {
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	_, url, client := newInjector(t, nss)
	// A pod made from a template `linkerd inject --manual` wrote.
	pod := appPod("shop", map[string]string{
		vocab.AnnotationCreatedBy: "linkerd/cli stable-2.14.0", vocab.AnnotationProxyCPURequest: "150m",
	})
	pod.Labels[vocab.LabelControlPlaneNamespace] = "linkerd"
	pod.Labels["pod-template-hash"] = "6d8f7b9c5"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6d8f7b9c5", UID: "u", Controller: ptrTo(true)}}
	pod.Spec.InitContainers = []corev1.Container{
		{Name: vocab.LinkerdInitContainerName, Image: "cr.l5d.io/linkerd/proxy:stable-2.14.0"},
		{Name: vocab.LinkerdProxyContainerName, Image: "cr.l5d.io/linkerd/proxy:stable-2.14.0", Ports: []corev1.ContainerPort{{ContainerPort: 4143}, {ContainerPort: 4191}}},
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: vocab.LinkerdEndEntityVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}

	status, body := post(t, client, url, podReview(t, "migrate", pod))
	require.Equal(t, http.StatusOK, status, string(body))
	resp := decodeResponse(t, body)
	require.True(t, resp.Allowed)
	out := applyResponse(t, pod, resp)
	var names []string
	for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{vocab.InitContainerName, vocab.ProxyContainerName, "web"}, names, "exactly one proxy, Weft's")
	for _, v := range out.Spec.Volumes {
		assert.False(t, strings.HasPrefix(v.Name, "linkerd-"), v.Name)
	}
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace])
	assert.Equal(t, "web", out.Labels[vocab.LabelProxyDeployment], "the Deployment, from the ReplicaSet's name and the pod-template-hash")
	assert.True(t, strings.HasPrefix(out.Annotations[vocab.AnnotationCreatedBy], "weft/"))
	assert.Equal(t, "150m", out.Annotations[vocab.AnnotationProxyCPURequest])
}
