package check_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
)

func TestAHealthyInstallPassesEveryCheck(t *testing.T) {
	c := healthyCluster(t, "weft")
	_, err := c.kube.CoreV1().Pods("shop").Create(bg, c.meshedPod("shop", "web-1", true), metav1.CreateOptions{})
	require.NoError(t, err)
	r := c.run(t, check.Scope{Proxy: true})
	for _, res := range r.Results {
		assert.Equal(t, check.StatusOK, res.Status, "%s / %s: %s (hint: %s)", res.Category, res.Name, res.Message, res.Hint)
	}
	assert.True(t, r.Success)
	// 2 API + 9 CRDs + namespace + values + 4 components + anchors + issuer
	// + serving cert + 3 webhook configurations + 3 data plane.
	assert.Len(t, r.Results, 2+9+2+4+2+1+3+3)
	assert.Contains(t, result(t, r, check.CategoryControlPlane, "identity is ready").Message, "1 of 1 pods ready")
	assert.Contains(t, result(t, r, check.CategoryWebhooks, "MutatingWebhookConfiguration weft-proxy-injector-webhook-config points at a live service").Message,
		"Service weft/weft-proxy-injector:443 has 1 ready endpoints, caBundle trusts weft-proxy-injector.weft.svc, failurePolicy Ignore")
	assert.Contains(t, result(t, r, check.CategoryCRDs, "CRD servers.policy.linkerd.io is installed").Message, "served v1beta1,v1beta2,v1beta3, storage v1beta3")
	assert.Equal(t, "1 meshed pods, all proxies ready", result(t, r, check.CategoryDataPlane, "meshed pods' proxies are ready").Message)
}

func TestDeploymentsWithoutPodsAreReportedWithTheReason(t *testing.T) {
	c := healthyCluster(t, "weft")
	pods := must(c.kube.CoreV1().Pods("weft").List(bg, metav1.ListOptions{}))
	for _, p := range pods.Items {
		require.NoError(t, c.kube.CoreV1().Pods("weft").Delete(bg, p.Name, metav1.DeleteOptions{}))
	}
	// Nothing ever processed the identity Deployment.
	d := must(c.kube.AppsV1().Deployments("weft").Get(bg, "weft-identity", metav1.GetOptions{}))
	d.Status = appsv1.DeploymentStatus{}
	_, err := c.kube.AppsV1().Deployments("weft").Update(bg, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The destination's ReplicaSet was refused by a quota.
	d = must(c.kube.AppsV1().Deployments("weft").Get(bg, "weft-destination", metav1.GetOptions{}))
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "exceeded quota: pods"}}
	_, err = c.kube.AppsV1().Deployments("weft").Update(bg, d, metav1.UpdateOptions{})
	require.NoError(t, err)

	r := c.run(t, check.Scope{})
	assert.False(t, r.Success)
	id := result(t, r, check.CategoryControlPlane, "identity is ready")
	assert.Equal(t, check.StatusFail, id.Status)
	assert.Equal(t, "Deployment weft/weft-identity: 0 of 1 pods ready; no pods exist: the Deployment controller has not processed this Deployment (is kube-controller-manager running?)", id.Message)
	assert.Contains(t, id.Hint, "kubectl -n weft describe deployment weft-identity")
	dst := result(t, r, check.CategoryControlPlane, "destination is ready")
	assert.Contains(t, dst.Message, "creating pods failed (FailedCreate: exceeded quota: pods)")
	assert.True(t, id.NotReady, "pods may still come")
	assert.False(t, dst.NotReady, "the cluster refused the pods: waiting does not help")
	// The other checks still ran.
	assert.Equal(t, check.StatusOK, result(t, r, check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors").Status)
}

func TestPodsThatAreNotReadySayWhy(t *testing.T) {
	c := healthyCluster(t, "weft")
	pods := must(c.kube.CoreV1().Pods("weft").List(bg, metav1.ListOptions{LabelSelector: install.LabelComponent + "=policy"}))
	require.Len(t, pods.Items, 1)
	p := pods.Items[0]
	p.Spec.NodeName = ""
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"},
	}}
	_, err := c.kube.CoreV1().Pods("weft").Update(bg, &p, metav1.UpdateOptions{})
	require.NoError(t, err)
	pods = must(c.kube.CoreV1().Pods("weft").List(bg, metav1.ListOptions{LabelSelector: install.LabelComponent + "=proxy-injector"}))
	p = pods.Items[0]
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "injector", RestartCount: 4, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}}}}
	_, err = c.kube.CoreV1().Pods("weft").Update(bg, &p, metav1.UpdateOptions{})
	require.NoError(t, err)

	r := c.run(t, check.Scope{})
	pol := result(t, r, check.CategoryControlPlane, "policy is ready")
	assert.Equal(t, check.StatusFail, pol.Status)
	assert.Equal(t, "Deployment weft/weft-policy: 0 of 1 pods ready; pod weft-policy-7c9f-a not ready: phase Pending, not scheduled (Unschedulable: 0/3 nodes are available)", pol.Message)
	inj := result(t, r, check.CategoryControlPlane, "proxy-injector is ready")
	assert.Contains(t, inj.Message, "container injector waiting (CrashLoopBackOff: back-off 40s), container injector restarted 4 times")
}

func TestCRDProblemsAreReportedPerCRD(t *testing.T) {
	c := healthyCluster(t, "weft")
	crds := c.ext.ApiextensionsV1().CustomResourceDefinitions()
	require.NoError(t, crds.Delete(bg, "serviceprofiles.linkerd.io", metav1.DeleteOptions{}))
	srv := must(crds.Get(bg, "servers.policy.linkerd.io", metav1.GetOptions{}))
	for i := range srv.Spec.Versions {
		srv.Spec.Versions[i].Storage = srv.Spec.Versions[i].Name == "v1beta1"
		if srv.Spec.Versions[i].Name == "v1beta2" {
			srv.Spec.Versions[i].Served = false
		}
	}
	_, err := crds.Update(bg, srv, metav1.UpdateOptions{})
	require.NoError(t, err)
	mtls := must(crds.Get(bg, "meshtlsauthentications.policy.linkerd.io", metav1.GetOptions{}))
	mtls.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Message: "not all names are accepted"}}
	_, err = crds.UpdateStatus(bg, mtls, metav1.UpdateOptions{})
	require.NoError(t, err)

	r := c.run(t, check.Scope{})
	assert.False(t, r.Success)
	sp := result(t, r, check.CategoryCRDs, "CRD serviceprofiles.linkerd.io is installed")
	assert.Equal(t, check.StatusFail, sp.Status)
	assert.Equal(t, "not found", sp.Message)
	assert.Contains(t, sp.Hint, "weft install --crds")
	assert.Equal(t, `version v1beta2 is not served; storage version is "v1beta1", want "v1beta3"`, result(t, r, check.CategoryCRDs, "CRD servers.policy.linkerd.io is installed").Message)
	assert.Equal(t, "not Established (not all names are accepted)", result(t, r, check.CategoryCRDs, "CRD meshtlsauthentications.policy.linkerd.io is installed").Message)
	assert.Equal(t, check.StatusOK, result(t, r, check.CategoryCRDs, "CRD httproutes.policy.linkerd.io is installed").Status)
}

func TestCertificatesCloseToExpiryWarnAndBadOnesFail(t *testing.T) {
	t.Run("issuer expiring in 10 days", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		short := c.anchor.Issuer(t, testutil.CertOptions{Name: "short issuer", Lifetime: 10 * 24 * time.Hour})
		c.setIssuer(t, short.CertPEM, short.KeyPEM)
		r := c.run(t, check.Scope{})
		res := result(t, r, check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors")
		assert.Equal(t, check.StatusWarn, res.Status)
		assert.Contains(t, res.Message, "CN=short issuer valid until")
		assert.Contains(t, res.Message, "(less than 30 days)")
		assert.Contains(t, res.Hint, "weft certs create-issuer")
		assert.True(t, r.Success, "a warning does not fail the run")
	})
	t.Run("issuer from another anchor", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		other := testutil.NewAnchor(t, testutil.CertOptions{Name: "other root"}).Issuer(t, testutil.CertOptions{Name: "stray issuer", Lifetime: 90 * 24 * time.Hour})
		c.setIssuer(t, other.CertPEM, other.KeyPEM)
		r := c.run(t, check.Scope{})
		res := result(t, r, check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors")
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Contains(t, res.Message, "does not chain to the trust anchors")
		assert.False(t, r.Success)
	})
	t.Run("issuer key that does not match", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		other := c.anchor.Issuer(t, testutil.CertOptions{Name: "other issuer", Lifetime: 90 * 24 * time.Hour})
		c.setIssuer(t, c.issuer.CertPEM, other.KeyPEM)
		res := result(t, c.run(t, check.Scope{}), check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors")
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Contains(t, res.Message, "the private key does not belong to the certificate")
	})
	t.Run("everything seen from a year later", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		r := c.run(t, check.Scope{}, check.WithClock(func() time.Time { return time.Now().Add(366 * 24 * time.Hour) }))
		assert.Equal(t, check.StatusFail, result(t, r, check.CategoryIdentity, "trust anchors are valid").Status)
		assert.Contains(t, result(t, r, check.CategoryIdentity, "trust anchors are valid").Message, "expired at")
		assert.Contains(t, result(t, r, check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors").Message, "expired at")
		assert.Contains(t, result(t, r, check.CategoryWebhooks, "webhook serving certificate is valid").Message, "expired at")
	})
	t.Run("anchors expiring in 20 days", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		r := c.run(t, check.Scope{}, check.WithClock(func() time.Time { return time.Now().Add(345 * 24 * time.Hour) }))
		res := result(t, r, check.CategoryIdentity, "trust anchors are valid")
		assert.Equal(t, check.StatusWarn, res.Status)
		assert.Contains(t, res.Message, "CN=root.weft.test expires in")
	})
	t.Run("trust roots that are not certificates", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		cm := must(c.kube.CoreV1().ConfigMaps("weft").Get(bg, install.ConfigMapTrustRoots, metav1.GetOptions{}))
		cm.Data[install.TrustRootsKey] = "not pem"
		_, err := c.kube.CoreV1().ConfigMaps("weft").Update(bg, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := c.run(t, check.Scope{})
		assert.Equal(t, "weft/weft-identity-trust-roots ca-bundle.crt: certpem: no PEM certificate found", result(t, r, check.CategoryIdentity, "trust anchors are valid").Message)
		assert.Contains(t, result(t, r, check.CategoryIdentity, "issuer certificate is valid and chains to the trust anchors").Message, "cannot be checked against the trust anchors")
	})
}

func (c *cluster) setIssuer(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	s := must(c.kube.CoreV1().Secrets(c.ns).Get(bg, install.SecretIssuer, metav1.GetOptions{}))
	s.Data["tls.crt"], s.Data["tls.key"] = certPEM, keyPEM
	_, err := c.kube.CoreV1().Secrets(c.ns).Update(bg, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestWebhooksWithoutALiveServiceOrTrustedCAFail(t *testing.T) {
	mwc := "MutatingWebhookConfiguration weft-proxy-injector-webhook-config points at a live service"
	spv := "ValidatingWebhookConfiguration weft-sp-validator-webhook-config points at a live service"
	t.Run("no ready endpoints", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		eps := c.kube.DiscoveryV1().EndpointSlices("weft")
		s := must(eps.Get(bg, install.ServiceInjector+"-abcde", metav1.GetOptions{}))
		s.Endpoints[0].Conditions.Ready = ptr(false)
		_, err := eps.Update(bg, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := c.run(t, check.Scope{})
		res := result(t, r, check.CategoryWebhooks, mwc)
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Equal(t, "Service weft/weft-proxy-injector has no ready endpoints for port 443 (1 EndpointSlices): the API server cannot reach the webhook", res.Message)
		assert.Equal(t, check.StatusFail, result(t, r, check.CategoryWebhooks, spv).Status)
	})
	t.Run("caBundle from another CA", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		cfg := must(c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(bg, install.MutatingWebhookConfiguration, metav1.GetOptions{}))
		cfg.Webhooks[0].ClientConfig.CABundle = testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).CertPEM
		_, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(bg, cfg, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := c.run(t, check.Scope{})
		assert.Contains(t, result(t, r, check.CategoryWebhooks, mwc).Message, "the caBundle does not trust the serving certificate for weft-proxy-injector.weft.svc")
		assert.Equal(t, check.StatusOK, result(t, r, check.CategoryWebhooks, spv).Status)
	})
	t.Run("Service and configuration missing", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		require.NoError(t, c.kube.CoreV1().Services("weft").Delete(bg, install.ServiceInjector, metav1.DeleteOptions{}))
		require.NoError(t, c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(bg, install.PolicyValidatorConfiguration, metav1.DeleteOptions{}))
		r := c.run(t, check.Scope{})
		assert.Equal(t, "Service weft/weft-proxy-injector not found", result(t, r, check.CategoryWebhooks, mwc).Message)
		assert.Equal(t, "not found", result(t, r, check.CategoryWebhooks, "ValidatingWebhookConfiguration weft-policy-validator-webhook-config points at a live service").Message)
	})
	t.Run("serving certificate for another namespace", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		leaf := c.hookCA.Leaf(t, testutil.CertOptions{Name: install.InjectorServerName("elsewhere")})
		s := must(c.kube.CoreV1().Secrets("weft").Get(bg, install.SecretInjectorTLS, metav1.GetOptions{}))
		s.Data["tls.crt"], s.Data["tls.key"] = leaf.CertPEM, leaf.KeyPEM
		_, err := c.kube.CoreV1().Secrets("weft").Update(bg, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := c.run(t, check.Scope{})
		assert.Contains(t, result(t, r, check.CategoryWebhooks, "webhook serving certificate is valid").Message, "not weft-proxy-injector.weft.svc")
		assert.Contains(t, result(t, r, check.CategoryWebhooks, mwc).Message, "the caBundle does not trust the serving certificate for weft-proxy-injector.weft.svc")
	})
}

func TestProxyChecksFindUnreadyStaleAndOldRootPods(t *testing.T) {
	c := healthyCluster(t, "weft")
	pods := c.kube.CoreV1()
	create := func(p *corev1.Pod) {
		_, err := pods.Pods(p.Namespace).Create(bg, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create(c.meshedPod("shop", "ok", true))
	create(c.meshedPod("shop", "starting", false))
	old := c.meshedPod("shop", "old", true)
	old.Spec.InitContainers[0].Image = "ghcr.io/weftmesh/weft-proxy:v0.0.1"
	old.Annotations[vocab.AnnotationProxyVersion] = "v0.0.1"
	old.Annotations[vocab.AnnotationTrustRootSHA256] = strings.Repeat("0", 64)
	create(old)
	broken := c.meshedPod("blog", "broken", false)
	broken.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
	create(broken)
	noProxy := c.meshedPod("blog", "plain", true)
	noProxy.Spec.InitContainers = nil
	create(noProxy)
	other := c.meshedPod("blog", "other-mesh", false)
	other.Labels[vocab.LabelControlPlaneNamespace] = "another-weft"
	create(other)

	r := c.run(t, check.Scope{Proxy: true})
	assert.False(t, r.Success)
	ready := result(t, r, check.CategoryDataPlane, "meshed pods' proxies are ready")
	assert.Equal(t, check.StatusFail, ready.Status)
	assert.False(t, ready.NotReady, "a pod without a proxy does not get one by waiting")
	assert.Equal(t, "3 of 5 meshed pods: blog/plain (labelled as meshed but has no weft-proxy container); blog/broken (proxy waiting (ImagePullBackOff)); shop/starting (proxy running but not ready, 0 restarts)", ready.Message)
	ver := result(t, r, check.CategoryDataPlane, "meshed pods run the control plane's proxy")
	assert.Equal(t, check.StatusWarn, ver.Status)
	assert.Equal(t, `1 of 5 pods do not run ghcr.io/weftmesh/weft-proxy:dev: shop/old runs ghcr.io/weftmesh/weft-proxy:v0.0.1 (version "v0.0.1")`, ver.Message)
	roots := result(t, r, check.CategoryDataPlane, "meshed pods carry the current trust roots")
	assert.Equal(t, check.StatusWarn, roots.Status)
	assert.Equal(t, "1 of 5 pods were injected with other trust roots: shop/old", roots.Message)

	// Without --proxy none of this runs.
	_, ok := c.run(t, check.Scope{}).Find(check.CategoryDataPlane, "meshed pods' proxies are ready")
	assert.False(t, ok)
}

func TestMissingNamespaceStopsTheControlPlaneChecks(t *testing.T) {
	c := healthyCluster(t, "weft")
	r := c.run(t, check.Scope{Proxy: true}, check.WithNamespace("mesh"))
	res := result(t, r, check.CategoryControlPlane, "control-plane namespace exists")
	assert.Equal(t, check.StatusFail, res.Status)
	assert.Equal(t, `namespace "mesh" not found`, res.Message)
	for _, res := range r.Results {
		assert.NotContains(t, []string{check.CategoryIdentity, check.CategoryWebhooks, check.CategoryDataPlane}, res.Category)
	}
}

func TestUnreachableAPIServerFailsFirstAndStops(t *testing.T) {
	c := healthyCluster(t, "weft")
	c.kube.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	})
	r := c.run(t, check.Scope{})
	require.Len(t, r.Results, 2)
	assert.Equal(t, check.StatusFail, r.Results[0].Status)
	assert.Contains(t, r.Results[0].Message, "connection refused")
	assert.Contains(t, r.Results[0].Hint, "--kubeconfig")
	assert.Equal(t, check.StatusSkip, r.Results[1].Status)
	assert.False(t, r.Success)
}

func TestOldKubernetesWarns(t *testing.T) {
	c := healthyCluster(t, "weft")
	c.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "27+", GitVersion: "v1.27.9-eks-1"}
	res := result(t, c.run(t, check.Scope{}), check.CategoryAPI, "Kubernetes version is supported")
	assert.Equal(t, check.StatusWarn, res.Status)
	assert.Equal(t, "1.27 is older than 1.29, which native sidecars need", res.Message)
	assert.Contains(t, res.Hint, "proxy.nativeSidecar: false")
}

func TestPreInstallChecks(t *testing.T) {
	t.Run("a fresh cluster passes", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		r := c.run(t, check.Scope{Pre: true}, check.WithNamespace("fresh"))
		for _, res := range r.Results {
			assert.Equal(t, check.StatusOK, res.Status, "%s: %s", res.Name, res.Message)
		}
		assert.True(t, r.Success)
		assert.Equal(t, "0 present and compatible, 9 to be installed", result(t, must(emptyCluster(t)).Check(testutil.Context(t, 0), check.Scope{Pre: true}), check.CategoryPreInstall, "existing CRDs are compatible").Message)
		assert.Equal(t, "9 present and compatible, 0 to be installed", result(t, r, check.CategoryPreInstall, "existing CRDs are compatible").Message)
		_, ok := r.Find(check.CategoryControlPlane, "control-plane namespace exists")
		assert.False(t, ok, "--pre does not check an installed control plane")
	})
	t.Run("an existing namespace and missing permissions fail", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		allow(c.kube, func(a *authorizationv1.ResourceAttributes) bool {
			return a.Resource != "clusterroles" && a.Resource != "mutatingwebhookconfigurations"
		})
		r := c.run(t, check.Scope{Pre: true})
		assert.False(t, r.Success)
		assert.Equal(t, `namespace "weft" already exists`, result(t, r, check.CategoryPreInstall, "control-plane namespace does not exist yet").Message)
		assert.Equal(t, "may not create clusterroles.rbac.authorization.k8s.io (RBAC: no rule allows it); mutatingwebhookconfigurations.admissionregistration.k8s.io (RBAC: no rule allows it)",
			result(t, r, check.CategoryPreInstall, "you may create the control plane's resources").Message)
	})
	t.Run("an incompatible CRD fails", func(t *testing.T) {
		c := healthyCluster(t, "weft")
		crds := c.ext.ApiextensionsV1().CustomResourceDefinitions()
		sp := must(crds.Get(bg, "serviceprofiles.linkerd.io", metav1.GetOptions{}))
		sp.Spec.Versions[0].Name = "v1alpha1"
		_, err := crds.Update(bg, sp, metav1.UpdateOptions{})
		require.NoError(t, err)
		res := result(t, c.run(t, check.Scope{Pre: true}, check.WithNamespace("fresh")), check.CategoryPreInstall, "existing CRDs are compatible")
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Equal(t, `serviceprofiles.linkerd.io: version v1alpha2 is missing; serviceprofiles.linkerd.io: storage version is "v1alpha1", want "v1alpha2"`, res.Message)
	})
}

func emptyCluster(t *testing.T) (*check.Checker, error) {
	c := healthyCluster(t, "weft")
	for _, crd := range must(c.ext.ApiextensionsV1().CustomResourceDefinitions().List(bg, metav1.ListOptions{})).Items {
		require.NoError(t, c.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(bg, crd.Name, metav1.DeleteOptions{}))
	}
	return check.New(c.kube, c.ext, check.WithNamespace("fresh"))
}

func TestNewRejectsNilClientsAndBadNamespaces(t *testing.T) {
	c := healthyCluster(t, "weft")
	_, err := check.New(nil, c.ext)
	assert.EqualError(t, err, "check: nil client")
	_, err = check.New(c.kube, c.ext, check.WithNamespace("Not_A_Namespace"))
	assert.EqualError(t, err, `check: namespace "Not_A_Namespace" is not a namespace name`)
}

func TestReportsPrintAsTextAndJSON(t *testing.T) {
	c := healthyCluster(t, "weft")
	eps := c.kube.DiscoveryV1().EndpointSlices("weft")
	require.NoError(t, eps.Delete(bg, install.ServiceInjector+"-abcde", metav1.DeleteOptions{}))
	r := c.run(t, check.Scope{})

	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	out := text.String()
	assert.Contains(t, out, "kubernetes-api\n--------------\n[ok]   can query the Kubernetes API: server v1.37.2\n")
	assert.Contains(t, out, "[FAIL] MutatingWebhookConfiguration weft-proxy-injector-webhook-config points at a live service: Service weft/weft-proxy-injector has no ready endpoints for port 443 (0 EndpointSlices)")
	assert.Contains(t, out, "\n       hint: kubectl -n weft get endpointslices,pods -l linkerd.io/control-plane-component=proxy-injector")
	assert.Contains(t, out, "checks FAILED: ")
	assert.Contains(t, out, ", 3 failed, 0 skipped\n")

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	var back check.Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.Equal(t, r, back)
	assert.Contains(t, js.String(), `"status": "fail"`)
	assert.Contains(t, js.String(), `"success": false`)
}
