package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// dataPlane checks every pod injected by this control plane (label
// linkerd.io/control-plane-ns=<namespace>), in all namespaces.
func (r *run) dataPlane(ctx context.Context) {
	const readyName, versionName, rootsName = "meshed pods' proxies are ready", "meshed pods run the control plane's proxy", "meshed pods carry the current trust roots"
	pods, err := r.c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: vocab.LabelControlPlaneNamespace + "=" + r.ns})
	if err != nil {
		msg := r.apiError("list pods in all namespaces", err)
		r.fail(CategoryDataPlane, readyName, msg, "check that you may list pods cluster-wide")
		r.skip(CategoryDataPlane, versionName, "pods could not be listed")
		r.skip(CategoryDataPlane, rootsName, "pods could not be listed")
		return
	}
	items := append([]corev1.Pod(nil), pods.Items...)
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	if len(items) == 0 {
		msg := fmt.Sprintf("no pod carries %s=%s", vocab.LabelControlPlaneNamespace, r.ns)
		r.ok(CategoryDataPlane, readyName, msg)
		r.ok(CategoryDataPlane, versionName, msg)
		r.ok(CategoryDataPlane, rootsName, msg)
		return
	}

	wantImage := ""
	if r.values != nil {
		wantImage = r.values.ProxyImage()
	}
	wantRoots := ""
	if r.anchorsPEM != "" {
		sum := sha256.Sum256([]byte(r.anchorsPEM))
		wantRoots = hex.EncodeToString(sum[:])
	}
	var notReady, noProxy, oldImage, oldRoots []string
	for i := range items {
		p := &items[i]
		id := p.Namespace + "/" + p.Name
		c, status, ok := proxyOf(p)
		if !ok {
			noProxy = append(noProxy, id)
			continue
		}
		if status == nil || !status.Ready {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", id, proxyProblem(p, status)))
		}
		if wantImage != "" && c.Image != wantImage {
			oldImage = append(oldImage, fmt.Sprintf("%s runs %s (version %q)", id, c.Image, p.Annotations[vocab.AnnotationProxyVersion]))
		}
		if wantRoots != "" && p.Annotations[vocab.AnnotationTrustRootSHA256] != wantRoots {
			oldRoots = append(oldRoots, id)
		}
	}
	n := r.c.cfg.maxListed
	total := len(items)
	switch {
	case len(notReady)+len(noProxy) > 0:
		var all []string
		for _, id := range noProxy {
			all = append(all, id+" (labelled as meshed but has no "+vocab.ProxyContainerName+" container)")
		}
		all = append(all, notReady...)
		report := r.fail
		if len(noProxy) == 0 {
			report = r.notReady
		}
		report(CategoryDataPlane, readyName, fmt.Sprintf("%d of %d meshed pods: %s", len(all), total, list(all, n)),
			"kubectl -n NAMESPACE logs POD -c "+vocab.ProxyContainerName+"; kubectl -n NAMESPACE describe pod POD")
	default:
		r.ok(CategoryDataPlane, readyName, fmt.Sprintf("%d meshed pods, all proxies ready", total))
	}
	switch {
	case wantImage == "":
		r.skip(CategoryDataPlane, versionName, "the Values ConfigMap could not be read (see above)")
	case len(oldImage) > 0:
		r.warn(CategoryDataPlane, versionName, fmt.Sprintf("%d of %d pods do not run %s: %s", len(oldImage), total, wantImage, list(oldImage, n)),
			"restart their workloads (kubectl rollout restart) so the injector gives them the current proxy")
	default:
		r.ok(CategoryDataPlane, versionName, fmt.Sprintf("%d pods run %s", total, wantImage))
	}
	switch {
	case wantRoots == "":
		r.skip(CategoryDataPlane, rootsName, "the trust roots could not be read (see above)")
	case len(oldRoots) > 0:
		r.warn(CategoryDataPlane, rootsName, fmt.Sprintf("%d of %d pods were injected with other trust roots: %s", len(oldRoots), total, list(oldRoots, n)),
			"restart their workloads so the proxies get the current roots; keep the old root in the bundle until then")
	default:
		r.ok(CategoryDataPlane, rootsName, fmt.Sprintf("%d pods, trust-root-sha256 %s…", total, wantRoots[:12]))
	}
}

// proxyOf finds the proxy container of a pod, as a native sidecar (init
// container) or a classic container, with its status.
func proxyOf(p *corev1.Pod) (corev1.Container, *corev1.ContainerStatus, bool) {
	find := func(cs []corev1.Container, st []corev1.ContainerStatus) (corev1.Container, *corev1.ContainerStatus, bool) {
		for _, c := range cs {
			if c.Name != vocab.ProxyContainerName {
				continue
			}
			for i := range st {
				if st[i].Name == c.Name {
					return c, &st[i], true
				}
			}
			return c, nil, true
		}
		return corev1.Container{}, nil, false
	}
	if c, s, ok := find(p.Spec.InitContainers, p.Status.InitContainerStatuses); ok {
		return c, s, true
	}
	return find(p.Spec.Containers, p.Status.ContainerStatuses)
}

func proxyProblem(p *corev1.Pod, s *corev1.ContainerStatus) string {
	switch {
	case s == nil:
		return "no status for the proxy: " + podProblem(p)
	case s.State.Waiting != nil:
		return "proxy waiting" + suffix(s.State.Waiting.Reason, s.State.Waiting.Message)
	case s.State.Terminated != nil:
		return fmt.Sprintf("proxy exited %d%s", s.State.Terminated.ExitCode, suffix(s.State.Terminated.Reason, ""))
	}
	return fmt.Sprintf("proxy running but not ready, %d restarts", s.RestartCount)
}
