package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// Where the control-plane containers find their mounted files.
const (
	trustRootsDir = "/var/run/weft/identity/trust-roots"
	issuerDir     = "/var/run/weft/identity/issuer"
	webhookTLSDir = "/var/run/weft/tls"
	configDir     = "/var/run/weft/config"
)

// Replica counts.
const (
	replicas   = 1
	haReplicas = 3
)

type renderer struct {
	values inject.Values
	certs  Certificates
	cfg    config
}

func (r *renderer) ns() string { return r.values.ControlPlaneNamespace }

// labels returns the labels every object carries, plus the component's
// when component is not empty.
func (r *renderer) labels(component string) map[string]string {
	l := map[string]string{
		LabelPartOf:    "weft",
		LabelManagedBy: "weft-install",
		LabelVersion:   versionOf(r.values),
	}
	if component != "" {
		l[LabelComponent] = component
		l[LabelName] = "weft-" + component
	}
	return l
}

func (r *renderer) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.ns(), Labels: r.labels(component)}
}

func (r *renderer) clusterMeta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: r.labels(component)}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func (r *renderer) controlPlane() ([]Object, error) {
	valuesYAML, err := yaml.Marshal(r.values)
	if err != nil {
		return nil, fmt.Errorf("install: values: %w", err)
	}
	// The injector reads values.yaml back with inject.ParseValues; a
	// rendering it would refuse must never leave here.
	if _, err := inject.ParseValues(valuesYAML); err != nil {
		return nil, fmt.Errorf("install: the rendered values do not parse back: %w", err)
	}
	sum := sha256.New()
	sum.Write(valuesYAML)
	sum.Write(r.certs.Identity.TrustAnchorsPEM)
	checksum := hex.EncodeToString(sum.Sum(nil))

	objs := []Object{r.namespace()}
	objs = append(objs,
		&corev1.ConfigMap{
			TypeMeta:   typeMeta("v1", "ConfigMap"),
			ObjectMeta: r.meta(ConfigMapValues, ""),
			Data:       map[string]string{ValuesKey: string(valuesYAML)},
		},
		&corev1.ConfigMap{
			TypeMeta:   typeMeta("v1", "ConfigMap"),
			ObjectMeta: r.meta(ConfigMapTrustRoots, "identity"),
			Data:       map[string]string{TrustRootsKey: string(r.certs.Identity.TrustAnchorsPEM)},
		},
		r.issuerSecret(),
		&corev1.Secret{
			TypeMeta:   typeMeta("v1", "Secret"),
			ObjectMeta: r.meta(SecretInjectorTLS, "proxy-injector"),
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{
				corev1.TLSCertKey:       r.certs.Webhook.CertPEM,
				corev1.TLSPrivateKeyKey: r.certs.Webhook.KeyPEM,
				"ca.crt":                r.certs.Webhook.CAPEM,
			},
		},
	)
	for _, c := range Components() {
		objs = append(objs,
			&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: r.meta(c.ServiceAccount, c.Name)},
			&rbacv1.ClusterRole{
				TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
				ObjectMeta: r.clusterMeta(ClusterRoleName(r.ns(), c.Name), c.Name),
				Rules:      Rules(c.Name),
			},
			&rbacv1.ClusterRoleBinding{
				TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
				ObjectMeta: r.clusterMeta(ClusterRoleName(r.ns(), c.Name), c.Name),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName(r.ns(), c.Name)},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: c.ServiceAccount, Namespace: r.ns()}},
			},
			r.service(c),
			r.deployment(c, checksum),
		)
		if r.cfg.ha {
			objs = append(objs, r.pdb(c))
		}
	}
	objs = append(objs, r.tapObjects()...)
	objs = append(objs, r.mutatingWebhook(), r.serviceProfileValidator(), r.policyValidator())
	if r.cfg.podMonitor {
		objs = append(objs, r.podMonitor())
	}
	return objs, nil
}

func (r *renderer) namespace() Object {
	return &corev1.Namespace{
		TypeMeta: typeMeta("v1", "Namespace"),
		ObjectMeta: metav1.ObjectMeta{
			Name: r.ns(),
			Labels: mergeLabels(r.labels(""), map[string]string{
				LabelIsControlPlane: "true",
				// The webhooks never act on the control plane itself: with
				// failurePolicy Fail, an injector that is down could
				// otherwise not be restarted.
				vocab.LabelAdmissionWebhooks: "disabled",
				// The control plane is not meshed and needs nothing
				// privileged.
				"pod-security.kubernetes.io/enforce": "restricted",
			}),
			Annotations: map[string]string{vocab.AnnotationInject: vocab.InjectDisabled},
		},
	}
}

func (r *renderer) issuerSecret() Object {
	s := &corev1.Secret{TypeMeta: typeMeta("v1", "Secret"), ObjectMeta: r.meta(SecretIssuer, "identity")}
	if r.cfg.issuerScheme == vocab.IssuerSchemeLinkerd {
		s.Type = corev1.SecretTypeOpaque
		s.Data = map[string][]byte{vocab.IssuerCertLinkerd: r.certs.Identity.IssuerCertPEM, vocab.IssuerKeyLinkerd: r.certs.Identity.IssuerKeyPEM}
		return s
	}
	s.Type = corev1.SecretTypeTLS
	s.Data = map[string][]byte{
		corev1.TLSCertKey:       r.certs.Identity.IssuerCertPEM,
		corev1.TLSPrivateKeyKey: r.certs.Identity.IssuerKeyPEM,
		"ca.crt":                r.certs.Identity.TrustAnchorsPEM,
	}
	return s
}

// Rules returns the RBAC rules of a component's ClusterRole: exactly what
// its code reads or writes, read-only everywhere except the identity
// service's TokenReviews.
//
//   - identity creates TokenReviews to authenticate proxies (its issuer
//     comes from a mounted Secret, so it reads no Secrets);
//   - destination watches Pods, Services, Namespaces, EndpointSlices and
//     ServiceProfiles;
//   - policy watches Pods, Services, ServiceAccounts, Namespaces, the
//     policy.linkerd.io resources and the Gateway API HTTPRoutes,
//     GRPCRoutes, TCPRoutes and TLSRoutes, and the CRDs of those kinds by
//     name, to start and
//     stop watching their routes as the CRDs come and go; it patches the
//     status of HTTPRoutes, GRPCRoutes, TCPRoutes, TLSRoutes and
//     EgressNetworks, and holds the Lease
//     vocab.LeasePolicyStatus so that one replica writes (Kubernetes cannot limit
//     create to a name, so it may create Leases, and it reads and
//     updates only that one);
//   - proxy-injector reads Namespaces (for their annotations).
func Rules(component string) []rbacv1.PolicyRule {
	watch := []string{"list", "watch"}
	switch component {
	case "identity":
		return []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}
	case "destination":
		return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "services"}, Verbs: watch},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: watch},
			{APIGroups: []string{"linkerd.io"}, Resources: []string{"serviceprofiles"}, Verbs: watch},
		}
	case "policy":
		return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "serviceaccounts", "services"}, Verbs: watch},
			{APIGroups: []string{"policy.linkerd.io"}, Resources: []string{
				"authorizationpolicies", "egressnetworks", "httplocalratelimitpolicies", "httproutes", "meshtlsauthentications", "networkauthentications", "serverauthorizations", "servers",
			}, Verbs: watch},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"grpcroutes", "httproutes", "tcproutes", "tlsroutes"}, Verbs: watch},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				ResourceNames: []string{"grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io", "tcproutes.gateway.networking.k8s.io", "tlsroutes.gateway.networking.k8s.io"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"policy.linkerd.io"}, Resources: []string{"egressnetworks/status", "httproutes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"grpcroutes/status", "httproutes/status", "tcproutes/status", "tlsroutes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{vocab.LeasePolicyStatus}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		}
	case "proxy-injector":
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}}
	case TapComponent:
		// The tapper finds the meshed pods and their tap addresses.
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}
	}
	return nil
}

func (r *renderer) service(c Component) Object {
	s := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: r.meta(c.Service, c.Name),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{LabelComponent: c.Name},
		},
	}
	if c.Name == "proxy-injector" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.Ports = []corev1.ServicePort{{Name: "webhook", Port: InjectorServicePort, TargetPort: intstr.FromString("webhook"), Protocol: corev1.ProtocolTCP}}
		return s
	}
	// Proxies balance gRPC streams over the pods themselves, as Linkerd's
	// headless control-plane Services let them.
	s.Spec.ClusterIP = corev1.ClusterIPNone
	s.Spec.Ports = []corev1.ServicePort{{Name: "grpc", Port: c.Port, TargetPort: intstr.FromString("grpc"), Protocol: corev1.ProtocolTCP, AppProtocol: ptr("grpc")}}
	return s
}

func (r *renderer) replicas() int32 {
	if r.cfg.ha {
		return haReplicas
	}
	return replicas
}

// rollingUpdate is how a component's pods are replaced, as Linkerd's
// charts do it. One replica: a new pod is started and must be ready
// before the old one stops (25% of 1 rounds down to no pod unavailable and
// up to one surged). A component never has no ready pod during a rollout:
// the injector's webhooks fail open, so a gap would admit pods without a
// proxy. High availability: one of the three replicas at a time, since the
// required anti-affinity leaves no node for a surged fourth pod.
func (r *renderer) rollingUpdate() *appsv1.RollingUpdateDeployment {
	if r.cfg.ha {
		return &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromString("25%"))}
	}
	return &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromString("25%")), MaxSurge: ptr(intstr.FromString("25%"))}
}

func (r *renderer) deployment(c Component, checksum string) Object {
	selector := map[string]string{LabelComponent: c.Name}
	pod := corev1.PodSpec{
		ServiceAccountName:           c.ServiceAccount,
		AutomountServiceAccountToken: ptr(true),
		NodeSelector:                 map[string]string{corev1.LabelOSStable: "linux"},
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			RunAsUser:      ptr(int64(ControllerUID)),
			RunAsGroup:     ptr(int64(ControllerUID)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	annotations := map[string]string{vocab.AnnotationInject: vocab.InjectDisabled}
	switch c.Name {
	case "identity":
		pod.Containers = []corev1.Container{r.container("identity", []string{
			"--addr=:" + strconv.Itoa(vocab.IdentityPort),
			"--metrics-addr=:" + strconv.Itoa(IdentityMetricsPort),
			"--trust-anchors=" + trustRootsDir + "/" + TrustRootsKey,
			"--issuer-dir=" + issuerDir,
			"--token-backend=kubernetes",
			"--issuance-lifetime=" + r.cfg.lifetime.String(),
			"--clock-skew-allowance=" + r.cfg.skew.String(),
			"--trust-domain=" + r.values.IdentityTrustDomain,
			"--control-plane-namespace=" + r.ns(),
		}, vocab.IdentityPort, IdentityMetricsPort)}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "trust-roots", MountPath: trustRootsDir, ReadOnly: true},
			{Name: "identity-issuer", MountPath: issuerDir, ReadOnly: true},
		}
		pod.Volumes = []corev1.Volume{
			{Name: "trust-roots", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapTrustRoots}}}},
			{Name: "identity-issuer", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretIssuer}}},
		}
	case "destination":
		pod.Containers = []corev1.Container{r.container("destination", []string{
			"--addr=:" + strconv.Itoa(vocab.DestinationPort),
			"--metrics-addr=:" + strconv.Itoa(DestinationMetricsPort),
			"--source=kubernetes",
			"--cluster-domain=" + r.values.ClusterDomain,
			"--trust-domain=" + r.values.IdentityTrustDomain,
			"--control-plane-namespace=" + r.ns(),
			"--default-opaque-ports=" + r.values.Proxy.OpaquePorts,
		}, vocab.DestinationPort, DestinationMetricsPort)}
	case "policy":
		pod.Containers = []corev1.Container{r.container("policy", []string{
			"--addr=:" + strconv.Itoa(vocab.PolicyPort),
			"--source=kubernetes",
			"--gateway-api=auto",
			"--default-policy=" + r.values.Proxy.DefaultInboundPolicy,
			"--default-opaque-ports=" + r.values.Proxy.OpaquePorts,
			"--cluster-networks=" + r.values.ClusterNetworks,
			"--cluster-domain=" + r.values.ClusterDomain,
			"--trust-domain=" + r.values.IdentityTrustDomain,
			"--control-plane-namespace=" + r.ns(),
			"--global-egress-network-namespace=" + r.values.Egress.GlobalEgressNetworkNamespace,
		}, vocab.PolicyPort, 0)}
	case "proxy-injector":
		pod.Containers = []corev1.Container{r.container("injector", []string{
			"--addr=:" + strconv.Itoa(InjectorPort),
			"--tls-cert=" + webhookTLSDir + "/" + corev1.TLSCertKey,
			"--tls-key=" + webhookTLSDir + "/" + corev1.TLSPrivateKeyKey,
			"--values=" + configDir + "/" + ValuesKey,
			"--trust-anchors=" + trustRootsDir + "/" + TrustRootsKey,
		}, InjectorPort, 0)}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "config", MountPath: configDir, ReadOnly: true},
			{Name: "trust-roots", MountPath: trustRootsDir, ReadOnly: true},
			{Name: "tls", MountPath: webhookTLSDir, ReadOnly: true},
		}
		pod.Volumes = []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapValues}}}},
			{Name: "trust-roots", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapTrustRoots}}}},
			{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretInjectorTLS}}},
		}
		// The injector reads its Values and anchors once, at start-up.
		annotations[AnnotationConfigChecksum] = checksum
	}
	if r.cfg.ha {
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
				TopologyKey:   corev1.LabelHostname,
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
					TopologyKey:   corev1.LabelTopologyZone,
				},
			}},
		}}
	}
	d := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: r.meta(c.Deployment, c.Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(r.replicas()),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: r.rollingUpdate(),
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: r.labels(c.Name), Annotations: annotations},
				Spec:       pod,
			},
		},
	}
	return d
}

// container builds a weft-controller container running component with
// args, serving on port ("grpc", or "webhook" for the injector) and, when
// metricsPort is not zero, /metrics, /live and /ready on "admin-http".
func (r *renderer) container(component string, args []string, port, metricsPort int32) corev1.Container {
	c := corev1.Container{
		Name:            component,
		Image:           r.cfg.controllerImage,
		ImagePullPolicy: r.cfg.controllerPull,
		Args:            append([]string{component}, args...),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("250Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			RunAsNonRoot:             ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	switch {
	case component == "injector":
		c.Ports = []corev1.ContainerPort{{Name: "webhook", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: httpsGet("/ready", "webhook"), PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: httpsGet("/live", "webhook"), InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
	case metricsPort != 0:
		c.Ports = []corev1.ContainerPort{
			{Name: "grpc", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			{Name: "admin-http", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
		}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: httpGet("/ready", "admin-http"), PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: httpGet("/live", "admin-http"), InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
	default:
		// The policy controller has no HTTP endpoint; it serves the
		// standard gRPC health service, which kubelet probes natively.
		c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port}}, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port}}, InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1}
	}
	return c
}

func httpGet(path, port string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port), Scheme: corev1.URISchemeHTTP}}
}

func httpsGet(path, port string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port), Scheme: corev1.URISchemeHTTPS}}
}

func (r *renderer) pdb(c Component) Object {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   typeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: r.meta(c.Deployment, c.Name),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{LabelComponent: c.Name}},
		},
	}
}

// namespaceSelector skips the system namespaces and every namespace
// labelled config.linkerd.io/admission-webhooks=disabled (the control
// plane's own among them).
func namespaceSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: vocab.LabelAdmissionWebhooks, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}},
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-node-lease", "kube-public", "kube-system"}},
	}}
}

func (r *renderer) failurePolicy() *admissionregv1.FailurePolicyType {
	if r.cfg.ha {
		return ptr(admissionregv1.Fail)
	}
	return ptr(admissionregv1.Ignore)
}

func (r *renderer) clientConfig(path string) admissionregv1.WebhookClientConfig {
	return admissionregv1.WebhookClientConfig{
		Service: &admissionregv1.ServiceReference{
			Namespace: r.ns(), Name: ServiceInjector, Path: ptr(path), Port: ptr(int32(InjectorServicePort)),
		},
		CABundle: r.certs.Webhook.CAPEM,
	}
}

func (r *renderer) mutatingWebhook() Object {
	return &admissionregv1.MutatingWebhookConfiguration{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
		ObjectMeta: r.clusterMeta(MutatingWebhookConfiguration, "proxy-injector"),
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:         InjectorWebhookName,
			ClientConfig: r.clientConfig(InjectPath),
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr(admissionregv1.NamespacedScope)},
			}},
			FailurePolicy:     r.failurePolicy(),
			MatchPolicy:       ptr(admissionregv1.Equivalent),
			NamespaceSelector: namespaceSelector(),
			// Control-plane pods are never injected, wherever they run.
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: LabelComponent, Operator: metav1.LabelSelectorOpDoesNotExist},
			}},
			SideEffects:             ptr(admissionregv1.SideEffectClassNone),
			TimeoutSeconds:          ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr(admissionregv1.IfNeededReinvocationPolicy),
		}},
	}
}

func (r *renderer) validatingWebhook(name, webhook string, rules []admissionregv1.RuleWithOperations) Object {
	return &admissionregv1.ValidatingWebhookConfiguration{
		TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
		ObjectMeta: r.clusterMeta(name, "proxy-injector"),
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    webhook,
			ClientConfig:            r.clientConfig(ValidatePath),
			Rules:                   rules,
			FailurePolicy:           r.failurePolicy(),
			MatchPolicy:             ptr(admissionregv1.Equivalent),
			NamespaceSelector:       namespaceSelector(),
			SideEffects:             ptr(admissionregv1.SideEffectClassNone),
			TimeoutSeconds:          ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

var createUpdate = []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update}

func (r *renderer) serviceProfileValidator() Object {
	return r.validatingWebhook(ServiceProfileValidatorConfiguration, ServiceProfileWebhookName, []admissionregv1.RuleWithOperations{{
		Operations: createUpdate,
		Rule:       admissionregv1.Rule{APIGroups: []string{"linkerd.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{"serviceprofiles"}, Scope: ptr(admissionregv1.NamespacedScope)},
	}})
}

func (r *renderer) policyValidator() Object {
	return r.validatingWebhook(PolicyValidatorConfiguration, PolicyValidatorWebhookName, []admissionregv1.RuleWithOperations{
		{
			Operations: createUpdate,
			Rule: admissionregv1.Rule{APIGroups: []string{"policy.linkerd.io"}, APIVersions: []string{"*"}, Resources: []string{
				"authorizationpolicies", "egressnetworks", "httplocalratelimitpolicies", "httproutes", "meshtlsauthentications", "networkauthentications", "serverauthorizations", "servers",
			}, Scope: ptr(admissionregv1.NamespacedScope)},
		},
		{
			Operations: createUpdate,
			Rule:       admissionregv1.Rule{APIGroups: []string{"gateway.networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"grpcroutes", "httproutes"}, Scope: ptr(admissionregv1.NamespacedScope)},
		},
		{
			Operations: createUpdate,
			Rule:       admissionregv1.Rule{APIGroups: []string{"gateway.networking.k8s.io"}, APIVersions: []string{"v1", "v1alpha2"}, Resources: []string{"tcproutes", "tlsroutes"}, Scope: ptr(admissionregv1.NamespacedScope)},
		},
	})
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func ptr[T any](v T) *T { return &v }
