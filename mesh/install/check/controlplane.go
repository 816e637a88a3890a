package check

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

const installHint = "weft install | kubectl apply --server-side -f -"

// controlPlane checks the namespace, the Values and each component's pods.
// False means the namespace is missing and nothing in it can be checked.
func (r *run) controlPlane(ctx context.Context) bool {
	const nsName = "control-plane namespace exists"
	_, err := r.c.kube.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryControlPlane, nsName, fmt.Sprintf("namespace %q not found", r.ns), "install Weft ("+installHint+"), or name its namespace with --namespace")
		return false
	case err != nil:
		r.fail(CategoryControlPlane, nsName, r.apiError("get namespace "+r.ns, err), "check that you may read namespaces")
		return false
	}
	r.ok(CategoryControlPlane, nsName, r.ns)

	const cfgName = "the Values ConfigMap is valid"
	cm, err := r.c.kube.CoreV1().ConfigMaps(r.ns).Get(ctx, install.ConfigMapValues, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryControlPlane, cfgName, fmt.Sprintf("ConfigMap %s/%s not found", r.ns, install.ConfigMapValues), installHint)
	case err != nil:
		r.fail(CategoryControlPlane, cfgName, r.apiError("get ConfigMap", err), "check that you may read ConfigMaps in "+r.ns)
	default:
		data, ok := cm.Data[install.ValuesKey]
		if !ok {
			r.fail(CategoryControlPlane, cfgName, fmt.Sprintf("ConfigMap %s/%s has no key %s", r.ns, install.ConfigMapValues, install.ValuesKey), installHint)
			break
		}
		v, err := inject.ParseValues([]byte(data))
		if err != nil {
			r.fail(CategoryControlPlane, cfgName, fmt.Sprintf("%s/%s %s: %v", r.ns, install.ConfigMapValues, install.ValuesKey, err), "fix the values and render the install again")
			break
		}
		r.values = &v
		r.ok(CategoryControlPlane, cfgName, fmt.Sprintf("version %s, proxy image %s", versionOf(v), v.ProxyImage()))
	}

	for _, comp := range install.Components() {
		r.component(ctx, comp)
	}
	return true
}

func versionOf(v inject.Values) string {
	if v.Version != "" {
		return v.Version
	}
	return vocab.DefaultVersion
}

// component checks that a component's Deployment has as many ready pods as
// it wants.
func (r *run) component(ctx context.Context, comp install.Component) {
	name := comp.Name + " is ready"
	hint := fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", r.ns, comp.Deployment, r.ns, comp.Deployment)
	d, err := r.c.kube.AppsV1().Deployments(r.ns).Get(ctx, comp.Deployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.fail(CategoryControlPlane, name, fmt.Sprintf("Deployment %s/%s not found", r.ns, comp.Deployment), installHint)
		return
	case err != nil:
		r.fail(CategoryControlPlane, name, r.apiError("get Deployment", err), "check that you may read Deployments in "+r.ns)
		return
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	sel := labels.SelectorFromSet(labels.Set{install.LabelComponent: comp.Name})
	if d.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			sel = s
		}
	}
	pods, err := r.c.kube.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		r.fail(CategoryControlPlane, name, r.apiError("list pods", err), "check that you may list pods in "+r.ns)
		return
	}
	items := append([]corev1.Pod(nil), pods.Items...)
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	ready := 0
	var problems []string
	for i := range items {
		p := &items[i]
		if podReady(p) {
			ready++
			continue
		}
		problems = append(problems, fmt.Sprintf("pod %s not ready: %s", p.Name, podProblem(p)))
	}
	prefix := fmt.Sprintf("Deployment %s/%s: %d of %d pods ready", r.ns, comp.Deployment, ready, want)
	switch {
	case want == 0:
		r.warn(CategoryControlPlane, name, fmt.Sprintf("Deployment %s/%s is scaled to 0", r.ns, comp.Deployment), fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=1", r.ns, comp.Deployment))
	case len(items) == 0:
		reason, refused := noPodsReason(d)
		if refused {
			r.fail(CategoryControlPlane, name, prefix+"; no pods exist: "+reason, hint)
		} else {
			r.notReady(CategoryControlPlane, name, prefix+"; no pods exist: "+reason, hint)
		}
	case int32(ready) < want:
		r.notReady(CategoryControlPlane, name, prefix+"; "+list(problems, r.c.cfg.maxListed), hint)
	default:
		r.ok(CategoryControlPlane, name, prefix)
	}
}

// noPodsReason explains, from a Deployment's status, why it has no pods;
// refused is true when the cluster refused to create them (waiting does
// not help), false when they may still come.
func noPodsReason(d *appsv1.Deployment) (reason string, refused bool) {
	if d.Status.ObservedGeneration < d.Generation || d.Status.ObservedGeneration == 0 {
		return "the Deployment controller has not processed this Deployment (is kube-controller-manager running?)", false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return "creating pods failed" + suffix(c.Reason, c.Message), true
		}
	}
	return "the ReplicaSet has created none (a quota, an admission webhook or a scheduling constraint may be refusing them)", false
}
