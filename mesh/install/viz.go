package install

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// Observability pieces of the install: the tap component (weft-tap), the
// only identity the proxies serve tap to, with the tap API it serves
// behind the API server (APIService v1alpha1.tap.weftmesh.io) and the RBAC
// that decides who may tap what; and, on request, a PodMonitor for the
// Prometheus Operator.

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

	// ServiceTap fronts the tap API on port [TapServicePort] (the
	// APIService's); the pods listen on [TapPort]. The Deployment is
	// named alike.
	ServiceTap     = "weft-tap"
	TapServicePort = 443
	TapPort        = 8089
	// SecretTapTLS is the tap API's serving certificate
	// (kubernetes.io/tls, with its CA in ca.crt).
	SecretTapTLS = "weft-tap-tls"
	// TapAPIGroup and TapAPIVersion are the tap API's (package
	// mesh/viz/tapapi); TapAPIServiceName names its APIService.
	TapAPIGroup       = "tap.weftmesh.io"
	TapAPIVersion     = "v1alpha1"
	TapAPIServiceName = TapAPIVersion + "." + TapAPIGroup
	// TapAdminRole is the suffix of the ClusterRole ([ClusterRoleName])
	// that lets its holder tap every resource in the namespaces it is
	// bound in (a RoleBinding) or in all (a ClusterRoleBinding).
	TapAdminRole = "tap-admin"
)

// TapServerName is the DNS name the API server checks the tap API's
// serving certificate against.
func TapServerName(namespace string) string {
	return ServiceTap + "." + namespace + ".svc"
}

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
// pods (to find the proxies to tap), and, with a tap serving certificate,
// the tap API: its Secret, Service, Deployment and APIService, the right
// to ask the API server who may tap (system:auth-delegator) and to read
// how the API server authenticates itself (a RoleBinding in kube-system),
// and the ClusterRole that grants tapping to users.
func (r *renderer) tapObjects() []Object {
	name := ClusterRoleName(r.ns(), TapComponent)
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountTap, Namespace: r.ns()}}
	objs := []Object{
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
			Subjects:   sa,
		},
		// Who may tap: users bind this role (RoleBinding per namespace,
		// or ClusterRoleBinding) or write their own rules on
		// RESOURCE/tap in tap.weftmesh.io.
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: r.clusterMeta(ClusterRoleName(r.ns(), TapAdminRole), TapComponent),
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{TapAPIGroup}, Resources: []string{"*"}, Verbs: []string{"watch"}}},
		},
	}
	if len(r.certs.Tap.CertPEM) == 0 {
		return objs
	}
	delegator := ClusterRoleName(r.ns(), TapComponent+"-auth-delegator")
	reader := &rbacv1.RoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
		ObjectMeta: r.clusterMeta(ClusterRoleName(r.ns(), TapComponent+"-auth-reader"), TapComponent),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   sa,
	}
	reader.Namespace = "kube-system"
	objs = append(objs,
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: r.clusterMeta(delegator, TapComponent),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   sa,
		},
		reader,
		&corev1.Secret{
			TypeMeta:   typeMeta("v1", "Secret"),
			ObjectMeta: r.meta(SecretTapTLS, TapComponent),
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{
				corev1.TLSCertKey:       r.certs.Tap.CertPEM,
				corev1.TLSPrivateKeyKey: r.certs.Tap.KeyPEM,
				"ca.crt":                r.certs.Tap.CAPEM,
			},
		},
		&corev1.Service{
			TypeMeta:   typeMeta("v1", "Service"),
			ObjectMeta: r.meta(ServiceTap, TapComponent),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: map[string]string{LabelComponent: TapComponent},
				Ports:    []corev1.ServicePort{{Name: "https", Port: TapServicePort, TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP}},
			},
		},
		r.tapDeployment(),
		r.apiService(),
	)
	return objs
}

// tapTLSDir is where the tap API's serving certificate is mounted.
const tapTLSDir = "/var/run/weft/tap-tls"

// tapDeployment runs `weft-controller tap`. It has no proxy of its own:
// it holds the tapper identity itself, from the identity service with a
// projected token, as a proxy would, and dials the proxies' tap servers
// with it.
func (r *renderer) tapDeployment() Object {
	c := Component{Name: TapComponent, Deployment: ServiceTap, ServiceAccount: ServiceAccountTap}
	d := r.deployment(c, "").(*appsv1.Deployment)
	// The tap API reads its serving certificate at start-up: a new one
	// rolls the pods.
	sum := sha256.Sum256(r.certs.Tap.CertPEM)
	d.Spec.Template.Annotations[AnnotationConfigChecksum] = hex.EncodeToString(sum[:])
	pod := &d.Spec.Template.Spec
	ctr := r.container("tap", []string{
		"--addr=:" + strconv.Itoa(TapPort),
		"--tls-cert=" + tapTLSDir + "/" + corev1.TLSCertKey,
		"--tls-key=" + tapTLSDir + "/" + corev1.TLSPrivateKeyKey,
		"--identity-addr=" + r.values.IdentityAddress(),
		"--trust-anchors=" + trustRootsDir + "/" + TrustRootsKey,
		"--token-file=" + vocab.IdentityTokenFile,
		"--identity=" + TapperIdentity(r.values),
		"--trust-domain=" + r.values.IdentityTrustDomain,
	}, TapPort, 0)
	ctr.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: TapPort, Protocol: corev1.ProtocolTCP}}
	ctr.ReadinessProbe = &corev1.Probe{ProbeHandler: httpsGet("/readyz", "https"), PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
	ctr.LivenessProbe = &corev1.Probe{ProbeHandler: httpsGet("/livez", "https"), InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
	ctr.VolumeMounts = []corev1.VolumeMount{
		{Name: "trust-roots", MountPath: trustRootsDir, ReadOnly: true},
		{Name: "tls", MountPath: tapTLSDir, ReadOnly: true},
		{Name: vocab.TokenVolumeName, MountPath: vocab.IdentityTokenDir, ReadOnly: true},
	}
	exp := int64(vocab.IdentityTokenExpirationSeconds)
	pod.Containers = []corev1.Container{ctr}
	pod.Volumes = []corev1.Volume{
		{Name: "trust-roots", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapTrustRoots}}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretTapTLS}}},
		{Name: vocab.TokenVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: vocab.IdentityTokenAudience, ExpirationSeconds: &exp, Path: vocab.TokenVolumeName,
			}}},
		}}},
	}
	return d
}

// apiService registers the tap API with the API server's aggregation
// layer, verified against the tap CA.
func (r *renderer) apiService() Object {
	labels := map[string]any{}
	for k, v := range r.labels(TapComponent) {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": TapAPIServiceName, "labels": labels},
		"spec": map[string]any{
			"group":                TapAPIGroup,
			"version":              TapAPIVersion,
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(100),
			"service":              map[string]any{"name": ServiceTap, "namespace": r.ns(), "port": int64(TapServicePort)},
			"caBundle":             base64.StdEncoding.EncodeToString(r.certs.Tap.CAPEM),
		},
	}}
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
