package install_test

import (
	"bytes"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/vocab"
	idkube "github.com/weftmesh/weft/mesh/identity/kubernetes"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

func TestRenderGivesIdenticalBytesForTheSameInputs(t *testing.T) {
	f := newFixture(t, "weft")
	for _, opts := range [][]install.Option{nil, {install.WithHA()}, {install.WithIssuerScheme(vocab.IssuerSchemeLinkerd)}} {
		a, err := render(t, inject.DefaultValues(), f.certs, opts...).YAML()
		require.NoError(t, err)
		b, err := render(t, inject.DefaultValues(), f.certs, opts...).YAML()
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "two renderings differ")
		assert.False(t, regexp.MustCompile(`(?m)^\s*creationTimestamp: null`).Match(a), "a null creationTimestamp is rendered")
		assert.False(t, regexp.MustCompile(`(?m)^status:`).Match(a), "a status is rendered")
	}
}

func TestRenderedObjectsComeSortedByKindThenName(t *testing.T) {
	m := render(t, inject.DefaultValues(), newFixture(t, "weft").certs, install.WithHA())
	order := []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "RoleBinding", "ConfigMap", "Secret",
		"Service", "Deployment", "PodDisruptionBudget", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"}
	var seen []string
	for _, k := range kinds(m.Objects) {
		if len(seen) == 0 || seen[len(seen)-1] != k {
			seen = append(seen, k)
		}
	}
	assert.Equal(t, order, seen, "each kind once, in apply order")
	for i := 1; i < len(m.Objects); i++ {
		if gvk(m.Objects[i]) == gvk(m.Objects[i-1]) {
			assert.Less(t, m.Objects[i-1].GetName(), m.Objects[i].GetName(), "%s objects sorted by name", gvk(m.Objects[i]).Kind)
		}
	}
}

func TestEveryRenderedObjectDecodesStrictlyBackToWhatWasRendered(t *testing.T) {
	for name, opts := range map[string][]install.Option{"default": nil, "ha": {install.WithHA()}} {
		t.Run(name, func(t *testing.T) {
			m := render(t, inject.DefaultValues(), newFixture(t, "weft").certs, opts...)
			data, err := m.YAML()
			require.NoError(t, err)
			got, err := install.Decode(data)
			require.NoError(t, err)
			require.Len(t, got, len(m.Objects))
			for i, o := range got {
				assert.Equal(t, gvk(m.Objects[i]), gvk(o))
				assert.True(t, equality.Semantic.DeepEqual(m.Objects[i], o), "%s %s changed through YAML", gvk(o).Kind, o.GetName())
			}
		})
	}
}

func TestDecodeRejectsUnknownFieldsDuplicatesAndKinds(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndatta: {}\n",
		"duplicate field": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
		"unknown kind":    "apiVersion: v1\nkind: Gizmo\nmetadata:\n  name: a\n",
		"wrong type":      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  replicas: three\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := install.Decode([]byte("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\n" + doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "document 2")
		})
	}
	objs, err := install.Decode([]byte("# just a comment\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n"))
	require.NoError(t, err)
	assert.Len(t, objs, 1)
}

func TestCRDsAreExactlyTheEmbeddedOnesAndComeFirst(t *testing.T) {
	want, err := crds.All()
	require.NoError(t, err)
	only, err := install.CRDs()
	require.NoError(t, err)
	m := render(t, inject.DefaultValues(), newFixture(t, "weft").certs)
	require.Len(t, only.Objects, len(want))
	for i, crd := range want {
		assert.Equal(t, crd.Name, only.Objects[i].GetName())
		assert.Equal(t, crd.Name, m.Objects[i].GetName())
		got := only.Objects[i].(*apiextensionsv1.CustomResourceDefinition)
		assert.Equal(t, crd.Spec, got.Spec)
	}
	data, err := only.YAML()
	require.NoError(t, err)
	assert.Equal(t, len(want), strings.Count(string(data), "kind: CustomResourceDefinition\n"))
}

func TestNamespaceOptsOutOfTheWebhooksAndIsMarkedAsControlPlane(t *testing.T) {
	v := inject.DefaultValues()
	v.ControlPlaneNamespace = "mesh-system"
	x := indexOf(render(t, v, newFixture(t, "mesh-system").certs).Objects)
	ns := get[*corev1.Namespace](t, x, "Namespace", "mesh-system")
	assert.Equal(t, "disabled", ns.Labels[vocab.LabelAdmissionWebhooks])
	assert.Equal(t, "true", ns.Labels[install.LabelIsControlPlane])
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, vocab.InjectDisabled, ns.Annotations[vocab.AnnotationInject])
	for _, o := range x {
		if o.GetNamespace() != "" && o.GetName() != install.ClusterRoleName("mesh-system", "tap-auth-reader") {
			assert.Equal(t, "mesh-system", o.GetNamespace(), "%s %s", gvk(o).Kind, o.GetName())
		}
	}
	// The one exception: the tap API may read how the API server
	// authenticates itself, a ConfigMap of kube-system.
	assert.Equal(t, "kube-system", get[*rbacv1.RoleBinding](t, x, "RoleBinding", "weft-mesh-system-tap-auth-reader").Namespace)
}

func TestValuesConfigMapParsesBackToTheValuesWithTheTrustAnchors(t *testing.T) {
	f := newFixture(t, "weft")
	v := inject.DefaultValues()
	v.Proxy.LogLevel = "debug"
	v.ClusterDomain = "corp.example"
	x := indexOf(render(t, v, f.certs).Objects)
	cm := get[*corev1.ConfigMap](t, x, "ConfigMap", install.ConfigMapValues)
	require.Len(t, cm.Data, 1)
	got, err := inject.ParseValues([]byte(cm.Data[install.ValuesKey]))
	require.NoError(t, err)
	v.IdentityTrustAnchorsPEM = string(f.anchor.CertPEM)
	v.Proxy.TapIdentities = install.TapperIdentity(v) // filled in when empty
	assert.Equal(t, v, got)

	roots := get[*corev1.ConfigMap](t, x, "ConfigMap", install.ConfigMapTrustRoots)
	assert.Equal(t, map[string]string{install.TrustRootsKey: string(f.anchor.CertPEM)}, roots.Data)
}

func TestIssuerSecretUsesTheChosenLayout(t *testing.T) {
	f := newFixture(t, "weft")
	x := indexOf(render(t, inject.DefaultValues(), f.certs).Objects)
	kube := get[*corev1.Secret](t, x, "Secret", install.SecretIssuer)
	assert.Equal(t, corev1.SecretTypeTLS, kube.Type)
	assert.Equal(t, map[string][]byte{"tls.crt": f.issuer.CertPEM, "tls.key": f.issuer.KeyPEM, "ca.crt": f.anchor.CertPEM}, kube.Data)

	x = indexOf(render(t, inject.DefaultValues(), f.certs, install.WithIssuerScheme(vocab.IssuerSchemeLinkerd)).Objects)
	linkerd := get[*corev1.Secret](t, x, "Secret", install.SecretIssuer)
	assert.Equal(t, corev1.SecretTypeOpaque, linkerd.Type)
	assert.Equal(t, map[string][]byte{"crt.pem": f.issuer.CertPEM, "key.pem": f.issuer.KeyPEM}, linkerd.Data)

	// The identity service reads the Secret with the Secret issuer,
	// which must recognise both layouts.
	for _, s := range []*corev1.Secret{kube, linkerd} {
		certPEM, keyPEM, err := idkube.SecretKeyPair(s)
		require.NoError(t, err, s.Type)
		assert.Equal(t, f.issuer.CertPEM, certPEM)
		assert.Equal(t, f.issuer.KeyPEM, keyPEM)
	}

	tlsSecret := get[*corev1.Secret](t, x, "Secret", install.SecretInjectorTLS)
	assert.Equal(t, corev1.SecretTypeTLS, tlsSecret.Type)
	assert.Equal(t, f.certs.Webhook.CertPEM, tlsSecret.Data["tls.crt"])
	assert.Equal(t, f.certs.Webhook.KeyPEM, tlsSecret.Data["tls.key"])
	assert.Equal(t, f.certs.Webhook.CAPEM, tlsSecret.Data["ca.crt"])
}

// TestServicesAreExactlyWhatInjectedProxiesDial injects a pod with the
// rendered Values and follows each control-plane address in the proxy's
// environment to a rendered Service, port and container.
func TestServicesAreExactlyWhatInjectedProxiesDial(t *testing.T) {
	for _, ns := range []string{"weft", "mesh-system"} {
		t.Run(ns, func(t *testing.T) {
			v := inject.DefaultValues()
			v.ControlPlaneNamespace = ns
			v.ClusterDomain = "corp.example"
			x := indexOf(render(t, v, newFixture(t, ns).certs).Objects)
			cm := get[*corev1.ConfigMap](t, x, "ConfigMap", install.ConfigMapValues)
			values, err := inject.ParseValues([]byte(cm.Data[install.ValuesKey]))
			require.NoError(t, err)

			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: map[string]string{vocab.AnnotationInject: vocab.InjectEnabled}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
			}
			patch, report, err := inject.Render(pod, nil, values)
			require.NoError(t, err)
			require.True(t, report.Injected, report.Message)
			raw, err := json.Marshal(pod)
			require.NoError(t, err)
			out, err := patch.Apply(raw)
			require.NoError(t, err)
			var injected corev1.Pod
			require.NoError(t, json.Unmarshal(out, &injected))
			env := map[string]string{}
			for _, c := range append(injected.Spec.InitContainers, injected.Spec.Containers...) {
				if c.Name == vocab.ProxyContainerName {
					for _, e := range c.Env {
						env[e.Name] = e.Value
					}
				}
			}
			dialed := map[string]bool{}
			for _, key := range []string{vocab.EnvIdentityAddr, vocab.EnvDestinationAddr, vocab.EnvPolicyAddr} {
				host, portStr, err := net.SplitHostPort(env[key])
				require.NoError(t, err, "%s=%q", key, env[key])
				port, err := strconv.Atoi(portStr)
				require.NoError(t, err)
				require.True(t, strings.HasSuffix(host, ".svc.corp.example."), "%s host %q", key, host)
				parts := strings.Split(strings.TrimSuffix(host, ".svc.corp.example."), ".")
				require.Len(t, parts, 2, "%s host %q", key, host)
				assert.Equal(t, ns, parts[1])
				svc := get[*corev1.Service](t, x, "Service", parts[0])
				dialed[svc.Name] = true
				assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "%s is headless", svc.Name)
				require.Len(t, svc.Spec.Ports, 1)
				sp := svc.Spec.Ports[0]
				assert.EqualValues(t, port, sp.Port, "%s port", svc.Name)
				assertServiceReachesContainer(t, x, svc, sp)
			}
			assert.Len(t, dialed, 3)
			// The fourth Service is the injector's, for the API server.
			svc := get[*corev1.Service](t, x, "Service", install.ServiceInjector)
			require.Len(t, svc.Spec.Ports, 1)
			assert.EqualValues(t, 443, svc.Spec.Ports[0].Port)
			assertServiceReachesContainer(t, x, svc, svc.Spec.Ports[0])
			n := 0
			for _, o := range x {
				if gvk(o).Kind == "Service" {
					n++
				}
			}
			assert.Equal(t, 5, n, "no other Services (the fifth is the tap API's, viz_test.go)")
		})
	}
}

// assertServiceReachesContainer checks that exactly one Deployment's pods
// match the Service's selector and that its named target port is a
// container port that the container's --addr flag listens on.
func assertServiceReachesContainer(t *testing.T, x index, svc *corev1.Service, sp corev1.ServicePort) {
	t.Helper()
	var matched []*appsv1.Deployment
	for _, o := range x {
		if d, ok := o.(*appsv1.Deployment); ok && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			matched = append(matched, d)
		}
	}
	require.Len(t, matched, 1, "Service %s selects one Deployment", svc.Name)
	found := false
	for _, c := range matched[0].Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == sp.TargetPort.String() {
				found = true
				assert.Contains(t, c.Args, "--addr=:"+strconv.Itoa(int(p.ContainerPort)), "Service %s: container %s listens on its port", svc.Name, c.Name)
			}
		}
	}
	assert.True(t, found, "Service %s: target port %s is a container port of %s", svc.Name, sp.TargetPort.String(), matched[0].Name)
}

func TestRBACGrantsEachComponentExactlyWhatItReads(t *testing.T) {
	v := inject.DefaultValues()
	x := indexOf(render(t, v, newFixture(t, "weft").certs).Objects)
	watch := []string{"list", "watch"}
	want := map[string][]rbacv1.PolicyRule{
		"identity": {{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}},
		"destination": {
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "services"}, Verbs: watch},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: watch},
			{APIGroups: []string{"linkerd.io"}, Resources: []string{"serviceprofiles"}, Verbs: watch},
		},
		"policy": {
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "serviceaccounts", "services"}, Verbs: watch},
			{APIGroups: []string{"policy.linkerd.io"}, Resources: []string{"authorizationpolicies", "egressnetworks", "httplocalratelimitpolicies", "httproutes", "meshtlsauthentications", "networkauthentications", "serverauthorizations", "servers"}, Verbs: watch},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"grpcroutes", "httproutes", "tcproutes", "tlsroutes"}, Verbs: watch},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				ResourceNames: []string{"grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io", "tcproutes.gateway.networking.k8s.io", "tlsroutes.gateway.networking.k8s.io"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"policy.linkerd.io"}, Resources: []string{"egressnetworks/status", "httproutes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"grpcroutes/status", "httproutes/status", "tcproutes/status", "tlsroutes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"weft-policy-status-write"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		},
		"proxy-injector": {{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}},
	}
	// The tapper (the tap API's Deployment, viz_test.go) reads pods,
	// nothing else of its own role.
	tapRole := get[*rbacv1.ClusterRole](t, x, "ClusterRole", install.ClusterRoleName("weft", install.TapComponent))
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}, tapRole.Rules)
	tapBinding := get[*rbacv1.ClusterRoleBinding](t, x, "ClusterRoleBinding", install.ClusterRoleName("weft", install.TapComponent))
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: install.ServiceAccountTap, Namespace: "weft"}}, tapBinding.Subjects)
	assert.Equal(t, install.ClusterRoleName("weft", install.TapComponent), tapBinding.RoleRef.Name)
	get[*corev1.ServiceAccount](t, x, "ServiceAccount", install.ServiceAccountTap)
	roles := 0
	for _, c := range install.Components() {
		name := install.ClusterRoleName("weft", c.Name)
		role := get[*rbacv1.ClusterRole](t, x, "ClusterRole", name)
		assert.Equal(t, want[c.Name], role.Rules, "%s rules", c.Name)
		for _, r := range role.Rules {
			assert.NotContains(t, r.Resources, "secrets", "%s reads no Secrets", c.Name)
			assert.NotContains(t, r.Verbs, "*", c.Name)
		}
		b := get[*rbacv1.ClusterRoleBinding](t, x, "ClusterRoleBinding", name)
		assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, b.RoleRef)
		assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: c.ServiceAccount, Namespace: "weft"}}, b.Subjects)
		get[*corev1.ServiceAccount](t, x, "ServiceAccount", c.ServiceAccount)
		d := get[*appsv1.Deployment](t, x, "Deployment", c.Deployment)
		assert.Equal(t, c.ServiceAccount, d.Spec.Template.Spec.ServiceAccountName)
		roles++
	}
	assert.Equal(t, 4, roles)
	for _, o := range x {
		switch gvk(o).Kind {
		case "Role", "RoleBinding":
			// Only the tap API's right to read how the API server
			// authenticates itself (viz_test.go).
			if o.GetName() != install.ClusterRoleName("weft", "tap-auth-reader") {
				t.Errorf("unexpected %s %s", gvk(o).Kind, o.GetName())
			}
		}
	}
}

func TestDeploymentsRunTheControllersWithTheirFlagsAndMounts(t *testing.T) {
	v := inject.DefaultValues()
	v.IdentityTrustDomain = "example.org"
	v.ClusterDomain = "corp.example"
	v.Proxy.DefaultInboundPolicy = vocab.PolicyClusterAuthenticated
	x := indexOf(render(t, v, newFixture(t, "weft").certs, install.WithControllerImage("registry.example/weft-controller:v1.2.3"), install.WithIssuanceLifetime(48*time.Hour), install.WithClockSkewAllowance(time.Minute)).Objects)
	args := func(name string) []string {
		d := get[*appsv1.Deployment](t, x, "Deployment", name)
		require.Len(t, d.Spec.Template.Spec.Containers, 1)
		c := d.Spec.Template.Spec.Containers[0]
		assert.Equal(t, "registry.example/weft-controller:v1.2.3", c.Image)
		return c.Args
	}
	assert.Equal(t, []string{"identity", "--addr=:8080", "--metrics-addr=:9990",
		"--trust-anchors=/var/run/weft/identity/trust-roots/ca-bundle.crt", "--issuer-dir=/var/run/weft/identity/issuer",
		"--token-backend=kubernetes", "--issuance-lifetime=48h0m0s", "--clock-skew-allowance=1m0s", "--trust-domain=example.org", "--control-plane-namespace=weft"}, args("weft-identity"))
	assert.Equal(t, []string{"destination", "--addr=:8086", "--metrics-addr=:9996", "--source=kubernetes", "--cluster-domain=corp.example",
		"--trust-domain=example.org", "--control-plane-namespace=weft", "--default-opaque-ports=" + vocab.DefaultOpaquePorts}, args("weft-destination"))
	assert.Equal(t, []string{"policy", "--addr=:8090", "--source=kubernetes", "--gateway-api=auto", "--default-policy=cluster-authenticated",
		"--default-opaque-ports=" + vocab.DefaultOpaquePorts,
		"--cluster-networks=10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8", "--cluster-domain=corp.example", "--trust-domain=example.org", "--control-plane-namespace=weft",
		"--global-egress-network-namespace=linkerd-egress"}, args("weft-policy"))
	assert.Equal(t, []string{"injector", "--addr=:8443", "--tls-cert=/var/run/weft/tls/tls.crt", "--tls-key=/var/run/weft/tls/tls.key",
		"--values=/var/run/weft/config/values.yaml", "--trust-anchors=/var/run/weft/identity/trust-roots/ca-bundle.crt"}, args("weft-proxy-injector"))

	for _, c := range install.Components() {
		d := get[*appsv1.Deployment](t, x, "Deployment", c.Deployment)
		spec := d.Spec.Template.Spec
		assert.EqualValues(t, 1, *d.Spec.Replicas, c.Name)
		assert.Nil(t, spec.Affinity, c.Name)
		assert.Equal(t, map[string]string{install.LabelComponent: c.Name}, d.Spec.Selector.MatchLabels)
		assert.True(t, labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)))
		assert.NotContains(t, d.Spec.Template.Labels, vocab.LabelControlPlaneNamespace, "control-plane pods are not meshed")
		assert.Equal(t, vocab.InjectDisabled, d.Spec.Template.Annotations[vocab.AnnotationInject])
		// Pod Security "restricted".
		require.NotNil(t, spec.SecurityContext)
		assert.True(t, *spec.SecurityContext.RunAsNonRoot)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, spec.SecurityContext.SeccompProfile.Type)
		ctr := spec.Containers[0]
		assert.False(t, *ctr.SecurityContext.AllowPrivilegeEscalation)
		assert.True(t, *ctr.SecurityContext.ReadOnlyRootFilesystem)
		assert.Equal(t, []corev1.Capability{"ALL"}, ctr.SecurityContext.Capabilities.Drop)
		assert.NotNil(t, ctr.ReadinessProbe, c.Name)
		assert.NotNil(t, ctr.LivenessProbe, c.Name)
		assert.False(t, ctr.Resources.Requests.Cpu().IsZero(), c.Name)
		// Every volume names a rendered ConfigMap or Secret, every mount a volume.
		vols := map[string]bool{}
		for _, vol := range spec.Volumes {
			vols[vol.Name] = true
			switch {
			case vol.ConfigMap != nil:
				get[*corev1.ConfigMap](t, x, "ConfigMap", vol.ConfigMap.Name)
			case vol.Secret != nil:
				get[*corev1.Secret](t, x, "Secret", vol.Secret.SecretName)
			default:
				t.Errorf("%s: volume %s is neither ConfigMap nor Secret", c.Name, vol.Name)
			}
		}
		for _, vm := range ctr.VolumeMounts {
			assert.True(t, vols[vm.Name], "%s mounts %s", c.Name, vm.Name)
			assert.True(t, vm.ReadOnly)
		}
		// A flag naming a file must point into a mounted directory.
		for _, a := range ctr.Args {
			if _, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(val, "/") {
				mounted := slices.ContainsFunc(ctr.VolumeMounts, func(vm corev1.VolumeMount) bool {
					return strings.HasPrefix(val, vm.MountPath+"/") || val == vm.MountPath
				})
				assert.True(t, mounted, "%s: %s is not under a mount", c.Name, a)
			}
		}
	}
	inj := get[*appsv1.Deployment](t, x, "Deployment", "weft-proxy-injector")
	assert.Len(t, inj.Spec.Template.Annotations[install.AnnotationConfigChecksum], 64)
}

// TestTheGlobalEgressNamespaceValueBecomesThePolicyControllerFlag: the
// Values key named as in Linkerd's chart reaches the policy controller,
// and a value that is no namespace name is refused before anything is
// rendered.
func TestTheGlobalEgressNamespaceValueBecomesThePolicyControllerFlag(t *testing.T) {
	f := newFixture(t, "weft")
	v, err := inject.ParseValues([]byte("egress:\n  globalEgressNetworkNamespace: corp-egress\n"))
	require.NoError(t, err)
	x := indexOf(render(t, v, f.certs).Objects)
	args := get[*appsv1.Deployment](t, x, "Deployment", "weft-policy").Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--global-egress-network-namespace=corp-egress")
	assert.Equal(t, "linkerd-egress", inject.DefaultValues().Egress.GlobalEgressNetworkNamespace, "Linkerd's default")

	for _, bad := range []string{"", "Corp", "a.b", "--source=static", strings.Repeat("a", 64)} {
		v := inject.DefaultValues()
		v.Egress.GlobalEgressNetworkNamespace = bad
		_, err := install.Render(v, f.certs)
		assert.ErrorContains(t, err, "egress.globalEgressNetworkNamespace", "%q", bad)
	}
}

func TestInjectorChecksumChangesWithTheValues(t *testing.T) {
	f := newFixture(t, "weft")
	sum := func(v inject.Values) string {
		x := indexOf(render(t, v, f.certs).Objects)
		return get[*appsv1.Deployment](t, x, "Deployment", "weft-proxy-injector").Spec.Template.Annotations[install.AnnotationConfigChecksum]
	}
	v := inject.DefaultValues()
	a := sum(v)
	v.Proxy.LogLevel = "debug"
	assert.NotEqual(t, a, sum(v))
}

func TestHAAddsReplicasAntiAffinityDisruptionBudgetsAndFailingWebhooks(t *testing.T) {
	x := indexOf(render(t, inject.DefaultValues(), newFixture(t, "weft").certs, install.WithHA()).Objects)
	for _, c := range install.Components() {
		d := get[*appsv1.Deployment](t, x, "Deployment", c.Deployment)
		assert.EqualValues(t, 3, *d.Spec.Replicas, c.Name)
		aff := d.Spec.Template.Spec.Affinity
		require.NotNil(t, aff, c.Name)
		require.Len(t, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 1)
		term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
		assert.Equal(t, corev1.LabelHostname, term.TopologyKey)
		assert.Equal(t, map[string]string{install.LabelComponent: c.Name}, term.LabelSelector.MatchLabels)

		pdb := get[*policyv1.PodDisruptionBudget](t, x, "PodDisruptionBudget", c.Deployment)
		assert.Equal(t, int32(1), pdb.Spec.MaxUnavailable.IntVal)
		assert.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
	}
	mwc := get[*admissionregv1.MutatingWebhookConfiguration](t, x, "MutatingWebhookConfiguration", install.MutatingWebhookConfiguration)
	assert.Equal(t, admissionregv1.Fail, *mwc.Webhooks[0].FailurePolicy)
	for _, name := range []string{install.ServiceProfileValidatorConfiguration, install.PolicyValidatorConfiguration} {
		vwc := get[*admissionregv1.ValidatingWebhookConfiguration](t, x, "ValidatingWebhookConfiguration", name)
		assert.Equal(t, admissionregv1.Fail, *vwc.Webhooks[0].FailurePolicy)
	}

	plain := indexOf(render(t, inject.DefaultValues(), newFixture(t, "weft").certs).Objects)
	for k := range plain {
		assert.False(t, strings.HasPrefix(k, "PodDisruptionBudget/"), "no %s without HA", k)
	}
}

// TestARollingUpdateNeverLeavesAComponentWithoutAReadyPod reads the
// rollout strategies as the Deployment controller does (unavailable
// rounded down, surge up): with one replica the new pod is surged and the
// old one kept until it is ready, since a rollout that stops the only
// injector first lets pods through without a proxy (failurePolicy
// Ignore); with --ha one of three goes at a time, and the surge waits for
// it (the anti-affinity leaves no node for a fourth).
func TestARollingUpdateNeverLeavesAComponentWithoutAReadyPod(t *testing.T) {
	for _, tc := range []struct {
		name               string
		opts               []install.Option
		unavailable, surge int
	}{
		{name: "one replica", unavailable: 0, surge: 1},
		{name: "ha", opts: []install.Option{install.WithHA()}, unavailable: 1, surge: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := indexOf(render(t, inject.DefaultValues(), newFixture(t, "weft").certs, tc.opts...).Objects)
			for _, c := range install.Components() {
				d := get[*appsv1.Deployment](t, x, "Deployment", c.Deployment)
				ru := d.Spec.Strategy.RollingUpdate
				require.NotNil(t, ru, c.Name)
				n := int(*d.Spec.Replicas)
				unavailable, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, n, false)
				require.NoError(t, err)
				surge, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, n, true)
				require.NoError(t, err)
				assert.Equal(t, tc.unavailable, unavailable, "%s: pods unavailable during a rollout", c.Name)
				assert.Equal(t, tc.surge, surge, "%s: pods surged during a rollout", c.Name)
				assert.Less(t, unavailable, n, "%s: a rollout may stop every pod", c.Name)
			}
		})
	}
}

func TestWebhooksCallTheInjectorServiceWithItsCAAndSkipSystemAndOptedOutNamespaces(t *testing.T) {
	f := newFixture(t, "weft")
	x := indexOf(render(t, inject.DefaultValues(), f.certs).Objects)
	svc := get[*corev1.Service](t, x, "Service", install.ServiceInjector)
	checkClient := func(cc admissionregv1.WebhookClientConfig, path string) {
		t.Helper()
		assert.Nil(t, cc.URL)
		require.NotNil(t, cc.Service)
		assert.Equal(t, "weft", cc.Service.Namespace)
		assert.Equal(t, svc.Name, cc.Service.Name)
		assert.Equal(t, path, *cc.Service.Path)
		assert.Equal(t, svc.Spec.Ports[0].Port, *cc.Service.Port)
		assert.Equal(t, f.certs.Webhook.CAPEM, cc.CABundle)
	}
	sel := func(s *metav1.LabelSelector) labels.Selector {
		ls, err := metav1.LabelSelectorAsSelector(s)
		require.NoError(t, err)
		return ls
	}
	nsLabels := func(name string, extra map[string]string) labels.Set {
		l := labels.Set{corev1.LabelMetadataName: name}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	checkNamespaces := func(s *metav1.LabelSelector) {
		t.Helper()
		ls := sel(s)
		for _, ns := range []string{"kube-system", "kube-public"} {
			assert.False(t, ls.Matches(nsLabels(ns, nil)), ns)
		}
		assert.False(t, ls.Matches(nsLabels("shop", map[string]string{vocab.LabelAdmissionWebhooks: "disabled"})))
		assert.True(t, ls.Matches(nsLabels("shop", nil)))
		assert.True(t, ls.Matches(nsLabels("shop", map[string]string{vocab.LabelAdmissionWebhooks: "enabled"})))
		// The control plane's own namespace opts out through its label.
		ns := get[*corev1.Namespace](t, x, "Namespace", "weft")
		assert.False(t, ls.Matches(labels.Set(mergeLabels(ns.Labels, map[string]string{corev1.LabelMetadataName: "weft"}))))
	}

	mwc := get[*admissionregv1.MutatingWebhookConfiguration](t, x, "MutatingWebhookConfiguration", install.MutatingWebhookConfiguration)
	require.Len(t, mwc.Webhooks, 1)
	w := mwc.Webhooks[0]
	checkClient(w.ClientConfig, install.InjectPath)
	checkNamespaces(w.NamespaceSelector)
	assert.Equal(t, admissionregv1.Ignore, *w.FailurePolicy)
	assert.Equal(t, admissionregv1.SideEffectClassNone, *w.SideEffects)
	assert.Equal(t, []string{"v1"}, w.AdmissionReviewVersions)
	assert.Equal(t, admissionregv1.IfNeededReinvocationPolicy, *w.ReinvocationPolicy)
	require.Len(t, w.Rules, 1)
	assert.Equal(t, []admissionregv1.OperationType{admissionregv1.Create}, w.Rules[0].Operations)
	assert.Equal(t, []string{"pods"}, w.Rules[0].Resources)
	assert.Equal(t, []string{""}, w.Rules[0].APIGroups)
	// Control-plane pods are never injected.
	os := sel(w.ObjectSelector)
	assert.False(t, os.Matches(labels.Set{install.LabelComponent: "identity"}))
	assert.True(t, os.Matches(labels.Set{"app": "web"}))

	// Every CRD Weft ships is validated by one of the validating webhooks,
	// and so are the Gateway API routes the policy controller reads.
	covered := map[string]bool{}
	for _, name := range []string{install.ServiceProfileValidatorConfiguration, install.PolicyValidatorConfiguration} {
		vwc := get[*admissionregv1.ValidatingWebhookConfiguration](t, x, "ValidatingWebhookConfiguration", name)
		require.Len(t, vwc.Webhooks, 1)
		w := vwc.Webhooks[0]
		checkClient(w.ClientConfig, install.ValidatePath)
		checkNamespaces(w.NamespaceSelector)
		assert.Equal(t, admissionregv1.Ignore, *w.FailurePolicy)
		for _, r := range w.Rules {
			assert.ElementsMatch(t, []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update}, r.Operations)
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					covered[res+"."+g] = true
				}
			}
		}
	}
	all, err := crds.All()
	require.NoError(t, err)
	for _, crd := range all {
		assert.True(t, covered[crd.Name], "%s is validated", crd.Name)
	}
	assert.True(t, covered["httproutes.gateway.networking.k8s.io"])
	assert.True(t, covered["grpcroutes.gateway.networking.k8s.io"])
	assert.True(t, covered["tcproutes.gateway.networking.k8s.io"])
	assert.True(t, covered["tlsroutes.gateway.networking.k8s.io"])
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
