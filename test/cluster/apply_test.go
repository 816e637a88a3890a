//go:build clusterintegration

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/weftmesh/weft/mesh/install"
)

const fieldManager = "weft-cluster-test"

// applyObjects server-side applies objects (what `kubectl apply
// --server-side` does), with strict field validation.
func (e *env) applyObjects(t *testing.T, objs []runtime.Object) {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.kube.Discovery()))
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: m}
		ri, err := e.resource(mapper, u)
		require.NoError(t, err, "%s %s", u.GetKind(), u.GetName())
		data, err := json.Marshal(u)
		require.NoError(t, err)
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr(true), FieldValidation: "Strict"})
		require.NoError(t, err, "apply %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
}

func (e *env) resource(mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == "namespace" {
		return e.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return e.dyn.Resource(m.Resource), nil
}

// applyManifest decodes a manifest `weft install` printed and applies it.
func (e *env) applyManifest(t *testing.T, manifest []byte) []install.Object {
	t.Helper()
	objs, err := install.Decode(manifest)
	require.NoError(t, err)
	var rs []runtime.Object
	for _, o := range objs {
		rs = append(rs, o)
	}
	e.applyObjects(t, rs)
	return objs
}

// waitCRDsEstablished waits until every CRD of objs is Established.
func (e *env) waitCRDsEstablished(t *testing.T, objs []install.Object) {
	t.Helper()
	for _, o := range objs {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		eventually(t, time.Minute, "CRD "+crd.Name+" established", func(ctx context.Context) error {
			got, err := e.apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", got.Status.Conditions)
		})
	}
}

// rolledOut returns nil once Deployment ns/name runs its latest template on
// every replica, all available, with no pod of an older one left.
func (e *env) rolledOut(ctx context.Context, ns, name string) error {
	d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want || st.ReadyReplicas != want {
		return fmt.Errorf("deployment %s/%s: generation %d observed %d, replicas %d updated %d ready %d available %d (want %d)%s",
			ns, name, d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, want, e.podTrouble(ctx, ns, d))
	}
	return nil
}

// podTrouble describes why a Deployment's pods are not ready.
func (e *env) podTrouble(ctx context.Context, ns string, d *appsv1.Deployment) string {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return ""
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return ""
	}
	out := ""
	for _, p := range pods.Items {
		out += "; pod " + p.Name + " " + string(p.Status.Phase)
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				out += fmt.Sprintf(" [%s waiting %s: %s]", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				out += fmt.Sprintf(" [%s exited %d: %s]", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			case cs.RestartCount > 0:
				out += fmt.Sprintf(" [%s restarts %d]", cs.Name, cs.RestartCount)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				out += fmt.Sprintf(" [%s: %s]", c.Type, c.Message)
			}
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
