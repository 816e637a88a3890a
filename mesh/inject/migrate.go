package inject

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// Pods that Linkerd injected are migrated: Linkerd's proxy, init
// container, network validator and debug sidecar, their volumes and the
// linkerd.io/* metadata Linkerd's injector wrote are removed, and Weft's
// proxy is added in their place. The config.linkerd.io/* annotations stay
// and configure Weft's proxy. Pods carrying another mesh's sidecar are
// refused: two proxies would each try to capture the pod's traffic.

// linkerdContainers are the containers Linkerd's injector adds.
func isLinkerdContainer(name string) bool {
	switch name {
	case vocab.LinkerdProxyContainerName, vocab.LinkerdInitContainerName,
		vocab.LinkerdDebugContainerName, vocab.LinkerdValidatorContainerName:
		return true
	}
	return false
}

func isLinkerdVolume(name string) bool {
	switch name {
	case vocab.LinkerdEndEntityVolumeName, vocab.LinkerdXtablesLockVolumeName, vocab.LinkerdTokenVolumeName:
		return true
	}
	return false
}

// isWeftContainer reports the containers Weft's injector adds.
func isWeftContainer(name string) bool {
	switch name {
	case vocab.ProxyContainerName, vocab.InitContainerName, vocab.DebugContainerName, vocab.ValidatorContainerName:
		return true
	}
	return false
}

func isWeftVolume(name string) bool {
	return name == vocab.TokenVolumeName || name == vocab.XtablesLockVolumeName
}

// linkerdImagePrefixes are the images of Linkerd's proxy and init
// container; a container running one under another name is not a sidecar
// Weft can replace safely.
func linkerdImagePrefixes() []string {
	return []string{"cr.l5d.io/linkerd/proxy:", "cr.l5d.io/linkerd/proxy@", "cr.l5d.io/linkerd/proxy-init:", "cr.l5d.io/linkerd/proxy-init@"}
}

// foreignSidecar describes the sidecars of other meshes that Weft refuses
// to inject next to: the container names their injectors use and the
// images of their proxies.
type foreignSidecar struct {
	mesh   string
	names  []string
	images []string // prefixes
}

func foreignSidecars() []foreignSidecar {
	return []foreignSidecar{
		{mesh: "Istio", names: []string{"istio-proxy", "istio-init", "istio-validation"},
			images: []string{"gcr.io/istio-release/proxyv2:", "gcr.io/istio-release/proxy_init:", "docker.io/istio/proxyv2:", "istio/proxyv2:", "docker.io/istio/proxy_init:"}},
		{mesh: "Consul", names: []string{"consul-dataplane", "consul-connect-inject-init", "envoy-sidecar", "consul-sidecar"}},
		{mesh: "Kuma", names: []string{"kuma-sidecar", "kuma-init", "kuma-validation"}},
		{mesh: "Open Service Mesh", names: []string{"osm-init"}},
	}
}

// otherMesh returns a description of another mesh's sidecar in pod, or "".
func otherMesh(pod *corev1.Pod) string {
	foreign, linkerdImages := foreignSidecars(), linkerdImagePrefixes()
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if desc := foreignContainer(&list[i], foreign, linkerdImages); desc != "" {
				return desc
			}
		}
	}
	return ""
}

// foreignContainer describes c when it is another mesh's sidecar.
func foreignContainer(c *corev1.Container, foreign []foreignSidecar, linkerdImages []string) string {
	for _, f := range foreign {
		if slices.Contains(f.names, c.Name) {
			return fmt.Sprintf("the %s container of %s", c.Name, f.mesh)
		}
		for _, img := range f.images {
			if strings.HasPrefix(c.Image, img) {
				return fmt.Sprintf("container %s running %s's proxy image %s", c.Name, f.mesh, c.Image)
			}
		}
	}
	if !isLinkerdContainer(c.Name) {
		for _, img := range linkerdImages {
			if strings.HasPrefix(c.Image, img) {
				return fmt.Sprintf("container %s running Linkerd's proxy image %s under a name Linkerd's injector does not use", c.Name, c.Image)
			}
		}
	}
	return ""
}

func allContainers(pod *corev1.Pod) []corev1.Container {
	return slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
}

// stripped is a pod with some injected parts removed, and what went.
type stripped struct {
	pod        *corev1.Pod
	containers []string // removed container names, init containers first
	volumes    []string
	meta       bool // linkerd.io/* annotations or labels were removed
}

// changed reports whether anything was removed.
func (s stripped) changed() bool {
	return len(s.containers) > 0 || len(s.volumes) > 0 || s.meta
}

// strip returns a copy of pod without the containers and volumes drop
// selects, and without linkerd.io/* labels and annotations when meta is
// set; keepAnnotation says which linkerd.io/* annotations stay.
func strip(pod *corev1.Pod, dropContainer, dropVolume func(string) bool, meta bool, keepAnnotation func(k, v string) bool) stripped {
	out := stripped{pod: pod.DeepCopy()}
	p := out.pod
	filter := func(list []corev1.Container) []corev1.Container {
		var kept []corev1.Container
		for _, c := range list {
			if dropContainer(c.Name) {
				out.containers = append(out.containers, c.Name)
				continue
			}
			kept = append(kept, c)
		}
		return kept
	}
	p.Spec.InitContainers = filter(p.Spec.InitContainers)
	p.Spec.Containers = filter(p.Spec.Containers)
	var vols []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if dropVolume(v.Name) {
			out.volumes = append(out.volumes, v.Name)
			continue
		}
		vols = append(vols, v)
	}
	p.Spec.Volumes = vols
	if meta {
		maps.DeleteFunc(p.Annotations, func(k, v string) bool {
			drop := strings.HasPrefix(k, vocab.LinkerdPrefix) && !keepAnnotation(k, v)
			out.meta = out.meta || drop
			return drop
		})
		maps.DeleteFunc(p.Labels, func(k, _ string) bool {
			drop := strings.HasPrefix(k, vocab.LinkerdPrefix)
			out.meta = out.meta || drop
			return drop
		})
	}
	return out
}

// stripLinkerd removes what Linkerd's injector added, keeping
// linkerd.io/inject (which is how the pod asks for Weft's proxy too).
func stripLinkerd(pod *corev1.Pod) stripped {
	hasLinkerd := false
	for _, c := range allContainers(pod) {
		hasLinkerd = hasLinkerd || isLinkerdContainer(c.Name)
	}
	if !hasLinkerd {
		return stripped{pod: pod}
	}
	return strip(pod, isLinkerdContainer, isLinkerdVolume, true, func(k, _ string) bool { return k == vocab.AnnotationInject })
}

// replaceOps turns the difference between pod and its stripped copy into
// JSON Patch operations that replace (or remove) each changed list and map
// whole; later operations can then address the stripped pod's indices.
func replaceOps(pod *corev1.Pod, s stripped) Patch {
	var p Patch
	list := func(path string, after any, nBefore, nAfter int) {
		switch {
		case nBefore == nAfter:
		case nAfter == 0:
			p = append(p, Operation{Op: "remove", Path: path})
		default:
			p = append(p, Operation{Op: "replace", Path: path, Value: after})
		}
	}
	list("/spec/initContainers", s.pod.Spec.InitContainers, len(pod.Spec.InitContainers), len(s.pod.Spec.InitContainers))
	list("/spec/containers", s.pod.Spec.Containers, len(pod.Spec.Containers), len(s.pod.Spec.Containers))
	list("/spec/volumes", s.pod.Spec.Volumes, len(pod.Spec.Volumes), len(s.pod.Spec.Volumes))
	list("/metadata/annotations", s.pod.Annotations, len(pod.Annotations), len(s.pod.Annotations))
	list("/metadata/labels", s.pod.Labels, len(pod.Labels), len(s.pod.Labels))
	return p
}

// replacedSummary names what a migration replaced, for the report line:
// the Linkerd proxy when it was there, else the first container removed.
func replacedSummary(names []string) string {
	if len(names) == 0 {
		return ""
	}
	if slices.Contains(names, vocab.LinkerdProxyContainerName) {
		return vocab.LinkerdProxyContainerName
	}
	return names[0]
}

// Uninject removes Weft's and Linkerd's sidecars from pod: the proxies,
// init containers, network validators and debug sidecars, their volumes,
// and the linkerd.io/* labels and annotations (linkerd.io/inject stays
// only when it says disabled, as linkerd uninject does). It returns the
// JSON Patch and the names of the containers removed; an empty patch means
// nothing was injected.
//
// The metadata of control-plane components (labelled
// linkerd.io/control-plane-component) stays, as with linkerd uninject:
// only their sidecars go.
func Uninject(pod *corev1.Pod) (Patch, []string) {
	_, controlPlane := pod.Labels[vocab.LabelControlPlaneComponent]
	s := strip(pod,
		func(n string) bool { return isWeftContainer(n) || isLinkerdContainer(n) },
		func(n string) bool { return isWeftVolume(n) || isLinkerdVolume(n) },
		!controlPlane,
		func(k, v string) bool { return k == vocab.AnnotationInject && v == vocab.InjectDisabled })
	if !s.changed() {
		return nil, nil
	}
	return replaceOps(pod, s), s.containers
}
