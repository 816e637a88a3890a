package cluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// corefile serves the cluster domain from the API server. There is no
// upstream to forward other names to: the node has no network beyond
// itself.
const corefile = `.:1053 {
    errors
    health :8080
    ready :8181
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
    loadbalance
}
`

const dnsNS = "kube-system"

func applyCoreDNS(ctx context.Context, kube kubernetes.Interface) error {
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := metav1.ObjectMeta{Name: "coredns", Namespace: dnsNS, Labels: labels}
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster: CoreDNS %s: %w", what, err)
		}
		return nil
	}
	if err := create("service account", func() error {
		_, err := kube.CoreV1().ServiceAccounts(dnsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	if err := create("cluster role", func() error {
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	if err := create("cluster role binding", func() error {
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: dnsNS}},
		}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	if err := create("config map", func() error {
		_, err := kube.CoreV1().ConfigMaps(dnsNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile}}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	if err := create("service", func() error {
		_, err := kube.CoreV1().Services(dnsNS).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: dnsNS, Labels: labels},
			Spec: corev1.ServiceSpec{
				Selector:  labels,
				ClusterIP: DNSServiceIP,
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(1053), Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(1053), Protocol: corev1.ProtocolTCP},
				},
			},
		}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	one := int32(1)
	return create("deployment", func() error {
		_, err := kube.AppsV1().Deployments(dnsNS).Create(ctx, &appsv1.Deployment{
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "coredns",
						DNSPolicy:          corev1.DNSDefault,
						PriorityClassName:  "system-cluster-critical",
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot:   ptr(true),
							RunAsUser:      ptr(int64(65532)),
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:            "coredns",
							Image:           CoreDNSImage,
							ImagePullPolicy: corev1.PullNever,
							Args:            []string{"-conf", "/etc/coredns/Corefile"},
							Ports: []corev1.ContainerPort{
								{Name: "dns", ContainerPort: 1053, Protocol: corev1.ProtocolUDP},
								{Name: "dns-tcp", ContainerPort: 1053, Protocol: corev1.ProtocolTCP},
							},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}, PeriodSeconds: 2},
							LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr(false),
								ReadOnlyRootFilesystem:   ptr(true),
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
							VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						}},
						Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"},
						}}}},
					},
				},
			},
		}, metav1.CreateOptions{})
		return err
	}())
}

func coreDNSReady(ctx context.Context, kube kubernetes.Interface) error {
	d, err := kube.AppsV1().Deployments(dnsNS).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Status.ReadyReplicas < 1 {
		pods, err := kube.CoreV1().Pods(dnsNS).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err == nil && len(pods.Items) > 0 {
			// The first pod's state says why CoreDNS is not ready.
			p := pods.Items[0]
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil {
					return fmt.Errorf("CoreDNS pod %s: %s: %s", p.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				}
			}
			return fmt.Errorf("CoreDNS pod %s: phase %s", p.Name, p.Status.Phase)
		}
		return fmt.Errorf("CoreDNS: %d ready replicas", d.Status.ReadyReplicas)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
