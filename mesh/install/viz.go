package install

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// Observability pieces of the install: the tapper identity the proxies
// serve tap to, and, on request, a PodMonitor for the Prometheus Operator.

const (
	// ServiceAccountTap is the tapper's service account in the
	// control-plane namespace: a workload running under it holds the mesh
	// identity [TapperIdentity], the only one the injected proxies serve
	// tap to (unless the Values or a pod's weftmesh.io/tap-identities say
	// otherwise). It is the identity of Linkerd's tap service, for Weft.
	ServiceAccountTap = "weft-tap"
	// TapComponent is the tapper's value of [LabelComponent] and the
	// suffix of its ClusterRole's name.
	TapComponent = "tap"
	// PodMonitorName is the PodMonitor [WithPrometheusOperator] renders.
	PodMonitorName = "weft-proxies"
)

// TapperIdentity is the mesh identity of [ServiceAccountTap] under values:
// weft-tap.<controlPlaneNamespace>.serviceaccount.identity.<controlPlaneNamespace>.<trustDomain>,
// the form the injector gives every proxy's identity.
func TapperIdentity(values inject.Values) string {
	ns := values.ControlPlaneNamespace
	return ServiceAccountTap + "." + ns + ".serviceaccount.identity." + ns + "." + values.IdentityTrustDomain
}

// WithPrometheusOperator adds a PodMonitor (monitoring.coreos.com/v1)
// selecting every meshed pod in any namespace and scraping its proxy's
// admin port (weft-admin, /metrics), for clusters whose Prometheus the
// Prometheus Operator runs. Its CRD must exist before it is applied.
func WithPrometheusOperator() Option { return func(c *config) { c.podMonitor = true } }

// tapObjects are the tapper's service account and its read access to
// pods (to find the proxies to tap).
func (r *renderer) tapObjects() []Object {
	name := ClusterRoleName(r.ns(), TapComponent)
	return []Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: r.meta(ServiceAccountTap, TapComponent)},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: r.clusterMeta(name, TapComponent),
			Rules:      Rules(TapComponent),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: r.clusterMeta(name, TapComponent),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountTap, Namespace: r.ns()}},
		},
	}
}

// podMonitor selects the pods this control plane meshes (label
// linkerd.io/control-plane-ns=<namespace>) in every namespace and scrapes
// their proxies' admin port, keeping the pod's namespace, name and
// container as Linkerd's scrape configuration does.
func (r *renderer) podMonitor() Object {
	labels := map[string]any{}
	for k, v := range r.labels("prometheus") {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PodMonitor",
		"metadata":   map[string]any{"name": PodMonitorName, "namespace": r.ns(), "labels": labels},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"any": true},
			"selector": map[string]any{"matchLabels": map[string]any{
				vocab.LabelControlPlaneNamespace: r.ns(),
			}},
			"podMetricsEndpoints": []any{map[string]any{
				"port":     vocab.AdminPortName,
				"path":     "/metrics",
				"interval": "10s",
				"relabelings": []any{
					map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_container_name"}, "action": "keep", "regex": vocab.ProxyContainerName},
					map[string]any{"sourceLabels": []any{"__meta_kubernetes_namespace"}, "targetLabel": "namespace"},
					map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_name"}, "targetLabel": "pod"},
				},
			}},
		},
	}}
	return u
}
