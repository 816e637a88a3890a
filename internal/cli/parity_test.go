package cli_test

// The parity suite runs `weft inject` as a Linkerd user would, over inputs
// shaped like the cases of linkerd inject's own test data (written for
// Weft, in testdata/parity), and checks the behaviour point by point:
// migration of Linkerd-injected workloads, refusal of other meshes, every
// workload kind and API version, Lists with null items, namespaces,
// unknown kinds, UDP ports, every config.linkerd.io key, the per-setting
// flags, Values and Linkerd values files, CNI mode and uninjection.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

func parityFile(name string) string { return filepath.Join("testdata", "parity", name) }

// weftInject runs `weft inject args...` and requires success.
func weftInject(t *testing.T, args ...string) (docs []string, report string) {
	t.Helper()
	code, out, errs := runCommand(t, cli.InjectCommand(), "", args...)
	require.Equal(t, cli.ExitOK, code, errs)
	return yamlDocs(out), errs
}

func yamlDocs(out string) []string {
	var docs []string
	for _, d := range regexp.MustCompile(`(?m)^---\n`).Split(out, -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func strict(t *testing.T, doc string, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), into), doc)
}

// anchorsFile writes a run-time trust anchor and returns its path.
func anchorsFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.crt")
	testutil.WriteFile(t, path, testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"}).CertPEM)
	return path
}

func podOf(tmpl corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
}

func containerNamed(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func envOf(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// proxies counts the proxy containers of a pod: Weft's and Linkerd's.
func proxies(pod *corev1.Pod) []string {
	var out []string
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == vocab.ProxyContainerName || c.Name == vocab.LinkerdProxyContainerName || strings.Contains(c.Image, "proxy") {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

func reportLines(report string) []string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		if l != "" && !strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "weft inject:") {
			out = append(out, l)
		}
	}
	return out
}

func TestParityPlainDeploymentGetsWeftsProxy(t *testing.T) {
	docs, report := weftInject(t, "--manual", "--trust-anchors", anchorsFile(t), parityFile("deployment.yaml"))
	require.Len(t, docs, 1)
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	pod := podOf(d.Spec.Template)
	assert.Equal(t, []string{vocab.ProxyContainerName}, proxies(pod))
	assert.Equal(t, vocab.InitContainerName, pod.Spec.InitContainers[0].Name, "weft-init runs first")
	assert.Equal(t, vocab.ProxyContainerName, pod.Spec.InitContainers[1].Name, "then the native sidecar")
	assert.Equal(t, map[string]string{
		"app": "web", vocab.LabelControlPlaneNamespace: "weft", vocab.LabelProxyDeployment: "web", vocab.LabelWorkloadNamespace: "shop",
	}, pod.Labels, "owner label as Linkerd writes it")
	for _, k := range []string{vocab.AnnotationCreatedBy, vocab.AnnotationProxyVersion, vocab.AnnotationTrustRootSHA256, vocab.AnnotationOpaquePorts} {
		assert.Contains(t, pod.Annotations, k)
	}
	init := containerNamed(pod, vocab.InitContainerName)
	assert.Equal(t, []string{"--incoming-proxy-port", "4143", "--outgoing-proxy-port", "4140", "--proxy-uid", "2102",
		"--inbound-ports-to-ignore", "4190,4191,4567,4568", "--outbound-ports-to-ignore", "4567,4568"}, init.Args,
		"4567 and 4568 skip the proxy both ways by default, as in Linkerd")
	e := envOf(containerNamed(pod, vocab.ProxyContainerName))
	assert.Equal(t, "8080,9102", e[vocab.EnvInboundPorts])
	assert.Equal(t, "4567,4568", e[vocab.EnvInboundSkipPorts])
	assert.Equal(t, []string{`deployment "web" injected`}, reportLines(report))
}

func TestParityAnnotationModeAddsOnlyTheInjectAnnotation(t *testing.T) {
	docs, report := weftInject(t, parityFile("deployment.yaml"))
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	assert.Equal(t, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled}, d.Spec.Template.Annotations)
	assert.Empty(t, proxies(podOf(d.Spec.Template)))
	assert.Equal(t, []string{`deployment "web" injected`}, reportLines(report))
}

func TestParityLinkerdInjectedWorkloadsComeOutWithExactlyOneProxyWefts(t *testing.T) {
	docs, report := weftInject(t, "--manual", "--trust-anchors", anchorsFile(t), parityFile("linkerd-injected.yaml"))
	require.Len(t, docs, 4)
	assert.Equal(t, []string{
		`deployment "api1" injected (replaced linkerd-proxy)`,
		`deployment "api2" injected (replaced linkerd-proxy)`,
		`deployment "api3" injected (replaced linkerd-init)`,
		`deployment "api4" injected (replaced linkerd-proxy)`,
	}, reportLines(report))
	for i, doc := range docs {
		var d appsv1.Deployment
		strict(t, doc, &d)
		pod := podOf(d.Spec.Template)
		assert.Equal(t, []string{vocab.ProxyContainerName}, proxies(pod), "deployment %d: one proxy, Weft's", i+1)
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			assert.NotContains(t, c.Name, "linkerd-", "deployment %d", i+1)
		}
		for _, v := range pod.Spec.Volumes {
			assert.NotContains(t, v.Name, "linkerd-", "deployment %d", i+1)
		}
		assert.Equal(t, "weft", pod.Labels[vocab.LabelControlPlaneNamespace])
		assert.Equal(t, d.Name, pod.Labels[vocab.LabelProxyDeployment])
		assert.True(t, strings.HasPrefix(pod.Annotations[vocab.AnnotationCreatedBy], "weft/"), "Weft's metadata replaces Linkerd's")
	}

	var api4 appsv1.Deployment
	strict(t, docs[3], &api4)
	pod := podOf(api4.Spec.Template)
	assert.Equal(t, "150m", pod.Annotations[vocab.AnnotationProxyCPURequest], "config.linkerd.io annotations stay")
	assert.Equal(t, "true", pod.Annotations["prometheus.io/scrape"])
	assert.NotEqual(t, "5f1e0d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100", pod.Annotations[vocab.AnnotationTrustRootSHA256], "Linkerd's trust root digest is replaced")
	proxy := containerNamed(pod, vocab.ProxyContainerName)
	assert.Equal(t, "150m", proxy.Resources.Requests.Cpu().String(), "and configure Weft's proxy")
	assert.Contains(t, containerNamed(pod, vocab.InitContainerName).Args, "3306", "skip-outbound-ports applies")
	assert.NotNil(t, containerNamed(pod, "migrate-schema"), "the application's init container stays")
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{vocab.InitContainerName, vocab.ProxyContainerName, "migrate-schema"}, names)
	var vols []string
	for _, v := range pod.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	assert.Equal(t, []string{"data", vocab.TokenVolumeName, vocab.XtablesLockVolumeName}, vols)

	// Annotation mode strips Linkerd's sidecar and lets the webhook add
	// Weft's.
	docs, report = weftInject(t, parityFile("linkerd-injected.yaml"))
	for _, doc := range docs {
		var d appsv1.Deployment
		strict(t, doc, &d)
		assert.Empty(t, proxies(podOf(d.Spec.Template)), d.Name)
		assert.Equal(t, vocab.InjectEnabled, d.Spec.Template.Annotations[vocab.AnnotationInject], d.Name)
	}
	assert.Contains(t, report, `deployment "api4" injected (replaced linkerd-proxy)`)
}

func TestParityPodsWithAnotherMeshsSidecarAreRefused(t *testing.T) {
	for _, args := range [][]string{{parityFile("istio.yaml")}, {"--manual", parityFile("istio.yaml")}} {
		code, out, errs := runCommand(t, cli.InjectCommand(), "", args...)
		assert.Equal(t, cli.ExitUsage, code, "%v", args)
		assert.Empty(t, out, "nothing is written")
		assert.Contains(t, errs, "books/reviews")
		assert.Contains(t, errs, "Istio")
		assert.Contains(t, errs, "istio-")
	}
}

func TestParityCronJobsOfBothAPIVersionsAreInjected(t *testing.T) {
	docs, report := weftInject(t, parityFile("cronjobs.yaml"))
	require.Len(t, docs, 2)
	assert.Equal(t, []string{`cronjob "nightly" injected`, `cronjob "hourly" injected`}, reportLines(report))
	for _, doc := range docs {
		var cj batchv1.CronJob
		strict(t, doc, &cj)
		assert.Equal(t, vocab.InjectEnabled, cj.Spec.JobTemplate.Spec.Template.Annotations[vocab.AnnotationInject], cj.Name)
	}
	assert.Contains(t, docs[0], "apiVersion: batch/v1beta1", "the version is kept")

	docs, _ = weftInject(t, "--manual", parityFile("cronjobs.yaml"))
	for _, doc := range docs {
		var cj batchv1.CronJob
		strict(t, doc, &cj)
		pod := podOf(cj.Spec.JobTemplate.Spec.Template)
		assert.Equal(t, []string{vocab.ProxyContainerName}, proxies(pod))
		assert.Equal(t, cj.Name, pod.Labels[vocab.LabelProxyCronJob])
	}
}

func TestParityListsSkipNullItemsAndReportThem(t *testing.T) {
	docs, report := weftInject(t, "--manual", parityFile("list.yaml"))
	require.Len(t, docs, 1)
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	strict(t, docs[0], &list)
	require.Len(t, list.Items, 5)
	assert.Equal(t, "null", string(list.Items[3]), "null items stay as they were")
	assert.Equal(t, "null", string(list.Items[4]))
	var sts appsv1.StatefulSet
	require.NoError(t, json.Unmarshal(list.Items[1], &sts))
	assert.Equal(t, "db", podOf(sts.Spec.Template).Labels[vocab.LabelProxyStatefulSet])
	assert.Equal(t, []string{
		`deployment "front" injected`,
		`statefulset "db" injected`,
		`service "front" skipped: a Service has no pod template; passed through unchanged`,
		`document skipped: testdata/parity/list.yaml: document 1, items[3] is null; kept as it is`,
		`document skipped: testdata/parity/list.yaml: document 1, items[4] is null; kept as it is`,
	}, reportLines(report))
}

func TestParityUDPPortsAreWarnedAbout(t *testing.T) {
	_, report := weftInject(t, parityFile("udp.yaml"))
	assert.Contains(t, report, `daemonset "dnscache" injected`)
	assert.Contains(t, report, `warning: daemonset "infra/dnscache": container "dnscache" declares UDP port 53: UDP is not proxied`)
}

func TestParityNamespacesAreAnnotated(t *testing.T) {
	docs, report := weftInject(t, parityFile("namespace.yaml"))
	var ns corev1.Namespace
	strict(t, docs[0], &ns)
	assert.Equal(t, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled}, ns.Annotations)
	assert.Equal(t, map[string]string{"team": "storefront"}, ns.Labels)
	assert.Equal(t, []string{`namespace "shop" annotated`}, reportLines(report))

	docs, _ = weftInject(t, "--proxy-memory-limit", "300Mi", parityFile("namespace.yaml"))
	strict(t, docs[0], &ns)
	assert.Equal(t, "300Mi", ns.Annotations[vocab.AnnotationProxyMemoryLimit], "flags go on namespaces too")
}

func TestParityEveryWorkloadKindIsInjectedWithItsOwnerLabel(t *testing.T) {
	docs, report := weftInject(t, "--manual", parityFile("workloads.yaml"), parityFile("udp.yaml"))
	require.Len(t, docs, 7)
	want := map[string]string{"ReplicaSet": vocab.LabelProxyReplicaSet, "ReplicationController": vocab.LabelProxyReplicationController,
		"Job": vocab.LabelProxyJob, "DaemonSet": vocab.LabelProxyDaemonSet}
	for _, doc := range docs {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		kind := obj["kind"].(string)
		var pod *corev1.Pod
		switch kind {
		case "Pod":
			var p corev1.Pod
			strict(t, doc, &p)
			pod = &p
			assert.NotContains(t, strings.Join(mapKeys(pod.Labels), ","), "linkerd.io/proxy-", "a bare pod has no owner")
		case "ReplicaSet":
			var o appsv1.ReplicaSet
			strict(t, doc, &o)
			pod = podOf(o.Spec.Template)
		case "ReplicationController":
			var o corev1.ReplicationController
			strict(t, doc, &o)
			pod = podOf(*o.Spec.Template)
		case "Job":
			var o batchv1.Job
			strict(t, doc, &o)
			pod = podOf(o.Spec.Template)
		case "DaemonSet":
			var o appsv1.DaemonSet
			strict(t, doc, &o)
			pod = podOf(o.Spec.Template)
		default:
			continue
		}
		assert.Equal(t, []string{vocab.ProxyContainerName}, proxies(pod), kind)
		if label, ok := want[kind]; ok {
			assert.NotEmpty(t, pod.Labels[label], kind)
		}
	}
	assert.Contains(t, report, `configmap "settings" skipped: v1 ConfigMap is not a workload; passed through unchanged`)
	assert.Contains(t, report, `server "toolbox-http" skipped: policy.linkerd.io/v1beta3 Server is not a workload; passed through unchanged`)
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestParityPodsLeftAloneKeepWhatTheyHave(t *testing.T) {
	docs, report := weftInject(t, "--manual", parityFile("special.yaml"))
	require.Len(t, docs, 4)
	assert.Equal(t, []string{
		`deployment "node-agent" skipped: pod uses the host network (hostNetwork: true)`,
		`deployment "legacy-batch" skipped: pod has linkerd.io/inject: disabled`,
		`deployment "netmon" injected`,
		`deployment "gateway" injected`,
	}, reportLines(report))
	in, err := os.ReadFile(parityFile("special.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(in), docs[0], "a skipped workload is printed as it was read")

	var netmon, gateway appsv1.Deployment
	strict(t, docs[2], &netmon)
	app := containerNamed(podOf(netmon.Spec.Template), "netmon")
	assert.Equal(t, []corev1.Capability{"NET_ADMIN"}, app.SecurityContext.Capabilities.Add, "the application's capabilities are its own")
	strict(t, docs[3], &gateway)
	gw := podOf(gateway.Spec.Template)
	assert.NotNil(t, containerNamed(gw, "envoy"), "an application's own Envoy is not another mesh")
	assert.Equal(t, "true", gw.Annotations["prometheus.io/scrape"])
}

// TestParityEveryLinkerdAnnotationIsAppliedOrWarnedWithItsReason covers the
// table in docs/compatibility.md: each config.linkerd.io key either shows
// in the report as a setting, or gives a warning that says why it has no
// effect; none is called unknown.
func TestParityEveryLinkerdAnnotationIsAppliedOrWarnedWithItsReason(t *testing.T) {
	docs, report := weftInject(t, "--manual", "--trust-anchors", anchorsFile(t), "--verbose", parityFile("annotated.yaml"))
	assert.NotContains(t, report, "unknown annotation")
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	pod := podOf(d.Spec.Template)
	notApplicable := map[string]string{
		vocab.AnnotationEnableExternalProfiles:        "already looks up ServiceProfiles for every destination",
		vocab.AnnotationEnableGateway:                 "no multicluster gateway mode",
		vocab.AnnotationProxyLogHTTPHeaders:           "never writes HTTP header values",
		vocab.AnnotationMetricsHostnameLabels:         "destination authority",
		vocab.AnnotationInboundDiscoveryUnusedTimeout: "one policy watch per application port",
	}
	for k := range d.Spec.Template.Annotations {
		if !strings.Contains(k, "linkerd.io/") || strings.HasPrefix(k, "linkerd.io/") {
			continue
		}
		if reason, ok := notApplicable[k]; ok {
			assert.Contains(t, report, "annotation "+k+" has no effect: ", k)
			assert.Contains(t, report, reason, k)
			continue
		}
		assert.Contains(t, report, "(pod annotation "+k+")", "%s is applied and reported as such", k)
	}

	proxy := containerNamed(pod, vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	e := envOf(proxy)
	assert.Equal(t, "json", e[vocab.EnvAccessLog])
	assert.Equal(t, "250ms", e[vocab.EnvInboundConnectTimeout])
	assert.Equal(t, "2s", e[vocab.EnvOutboundConnectTimeout])
	assert.Equal(t, "8760h0m0s", e[vocab.EnvInboundDetectTimeout], "disabled means a year, as Linkerd's 365d")
	assert.NotContains(t, e, vocab.EnvOutboundDetectTimeout)
	assert.Equal(t, "30s", e[vocab.EnvOutboundDiscoveryIdleTimeout])
	assert.Equal(t, "8080", e[vocab.EnvInboundRequireIdentityPorts])
	assert.Equal(t, "0.25", e[vocab.EnvCPURatioLimit])
	assert.Equal(t, "on", e["EXTRA_FLAG"])
	assert.Equal(t, "3306,7000-7002,8080", e[vocab.EnvInboundPorts], "pod-inbound-ports adds ports the spec does not declare")
	assert.Equal(t, "3306,5432", e[vocab.EnvInboundOpaquePorts], "a container port name resolves")
	assert.Equal(t, "json", e[vocab.EnvLogFormat])
	assert.Equal(t, "true", e[vocab.EnvAdminShutdown])
	assert.Equal(t, "all-authenticated", e[vocab.EnvDefaultInboundPolicy])
	assert.Equal(t, "30s", e[vocab.EnvShutdownGracePeriod])
	assert.Equal(t, "collector.tracing:4317", e[vocab.EnvTraceCollectorAddr])
	assert.Equal(t, "otel-collector.tracing.serviceaccount.identity.weft.cluster.local", e[vocab.EnvTraceCollectorIdentity])
	assert.Contains(t, report, "LINKERD2_PROXY_LOG, which Weft's proxy does not read")
	assert.Equal(t, "example.com/mirror/weft-proxy:v1.2.3", proxy.Image)
	assert.Equal(t, corev1.PullAlways, proxy.ImagePullPolicy)
	assert.Equal(t, int64(2103), *proxy.SecurityContext.RunAsGroup)
	assert.Equal(t, "1Gi", proxy.Resources.Limits.StorageEphemeral().String())
	assert.Equal(t, int64(5), proxy.Lifecycle.PreStop.Sleep.Seconds)

	debug := containerNamed(pod, vocab.DebugContainerName)
	require.NotNil(t, debug, "enable-debug-sidecar adds the debug container")
	assert.Equal(t, "example.com/tools/netshoot:v0.13", debug.Image)
	assert.Equal(t, corev1.PullAlways, debug.ImagePullPolicy)

	init := containerNamed(pod, vocab.InitContainerName)
	assert.Contains(t, strings.Join(init.Args, " "), "--subnets-to-ignore 172.17.0.0/16,fd12::/64")
	assert.Contains(t, strings.Join(init.Args, " "), "--close-wait-timeout 3600s")
	assert.True(t, *init.SecurityContext.Privileged, "the close-wait sysctl needs a privileged init container")
	assert.Contains(t, report, "makes weft-init run privileged")
	assert.Contains(t, strings.Join(init.Args, " "), "--inbound-ports-to-ignore 4190,4191,9100", "skip-inbound-ports replaces the default 4567,4568")
}

func TestParityFlagsBecomeAnnotationsOnEveryInjectedTemplate(t *testing.T) {
	flags := []string{
		"--proxy-cpu-request", "120m", "--proxy-memory-limit", "200Mi",
		"--skip-inbound-ports", "22", "--skip-inbound-ports", "8100-8102", "--skip-outbound-ports", "5432",
		"--opaque-ports", "3000,5000-6000", "--ingress", "--enable-debug-sidecar", "--close-wait-timeout", "1h",
		"--native-sidecar=false", "--proxy-version", "v9.9.9", "--registry", "reg.example/mesh",
		"--default-inbound-policy", "deny", "--wait-before-exit-seconds", "3",
		"--require-identity-on-inbound-ports", "8080", "--proxy-uid", "3000", "--proxy-log-level", "debug",
		"--admin-port", "5191", "--ignore-cluster",
	}
	docs, _ := weftInject(t, append(flags, parityFile("deployment.yaml"), parityFile("list.yaml"))...)
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	assert.Equal(t, map[string]string{
		vocab.AnnotationInject:                      vocab.InjectIngress,
		vocab.AnnotationProxyCPURequest:             "120m",
		vocab.AnnotationProxyMemoryLimit:            "200Mi",
		vocab.AnnotationSkipInboundPorts:            "22,8100-8102",
		vocab.AnnotationSkipOutboundPorts:           "5432",
		vocab.AnnotationOpaquePorts:                 "3000,5000-6000",
		vocab.AnnotationEnableDebugSidecar:          "true",
		vocab.AnnotationCloseWaitTimeout:            "1h",
		vocab.AnnotationNativeSidecar:               "false",
		vocab.AnnotationProxyVersionOverride:        "v9.9.9",
		vocab.AnnotationProxyImage:                  "reg.example/mesh/weft-proxy",
		vocab.AnnotationInitImage:                   "reg.example/mesh/weft-init",
		vocab.AnnotationDebugImage:                  "reg.example/mesh/weft-debug",
		vocab.AnnotationDefaultInboundPolicy:        "deny",
		vocab.AnnotationWaitBeforeExitSeconds:       "3",
		vocab.AnnotationRequireIdentityInboundPorts: "8080",
		vocab.AnnotationProxyUID:                    "3000",
		vocab.AnnotationProxyLogLevel:               "debug",
		vocab.AnnotationAdminPort:                   "5191",
	}, d.Spec.Template.Annotations)
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	strict(t, docs[1], &list)
	var svc corev1.Service
	require.NoError(t, json.Unmarshal(list.Items[2], &svc))
	assert.Equal(t, map[string]string{vocab.AnnotationOpaquePorts: "3000,5000-6000"}, svc.Annotations, "--opaque-ports annotates Services, as in Linkerd")

	// --manual applies them to the proxy it renders.
	docs, _ = weftInject(t, append([]string{"--manual", "--trust-anchors", anchorsFile(t)}, append(flags, parityFile("deployment.yaml"))...)...)
	strict(t, docs[0], &d)
	pod := podOf(d.Spec.Template)
	proxy := containerNamed(pod, vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	assert.Equal(t, "weft-proxy", pod.Spec.Containers[0].Name, "--native-sidecar=false: a classic sidecar, first")
	assert.Equal(t, "reg.example/mesh/weft-proxy:v9.9.9", proxy.Image)
	assert.Equal(t, "120m", proxy.Resources.Requests.Cpu().String())
	assert.Equal(t, "200Mi", proxy.Resources.Limits.Memory().String())
	assert.Equal(t, int64(3000), *proxy.SecurityContext.RunAsUser)
	e := envOf(proxy)
	assert.Equal(t, "true", e[vocab.EnvIngressMode])
	assert.Equal(t, "deny", e[vocab.EnvDefaultInboundPolicy])
	assert.Equal(t, "0.0.0.0:5191", e[vocab.EnvAdminAddr])
	init := containerNamed(pod, vocab.InitContainerName)
	assert.Equal(t, "reg.example/mesh/weft-init:dev", init.Image)
	assert.Contains(t, strings.Join(init.Args, " "), "--inbound-ports-to-ignore 22,4190,5191,8100-8102")
	assert.Contains(t, strings.Join(init.Args, " "), "--outbound-ports-to-ignore 5432")
	assert.Equal(t, "reg.example/mesh/weft-debug:dev", containerNamed(pod, vocab.DebugContainerName).Image)
}

func TestParityBadFlagsAreRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy-cpu-request", "100x"}, `--proxy-cpu-request "100x"`},
		{[]string{"--skip-inbound-ports", "9000-8000"}, "--skip-inbound-ports"},
		{[]string{"--skip-inbound-ports", "a b"}, "--skip-inbound-ports"},
		{[]string{"--proxy-uid", "0"}, "--proxy-uid"},
		{[]string{"--inbound-port", "many"}, "--inbound-port"},
		{[]string{"--default-inbound-policy", "open"}, "--default-inbound-policy"},
		{[]string{"--close-wait-timeout", "500ms"}, "--close-wait-timeout"},
		{[]string{"--disable-identity"}, "--disable-identity is not supported"},
		{[]string{"--registry", "bad registry"}, "--registry"},
	} {
		code, out, errs := runCommand(t, cli.InjectCommand(), "", append(tc.args, parityFile("deployment.yaml"))...)
		assert.Equal(t, cli.ExitUsage, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
	_, _, errs := runCommand(t, cli.InjectCommand(), "", "--proxy-cpu", "1", parityFile("deployment.yaml"))
	assert.Contains(t, errs, "--proxy-cpu is deprecated, use --proxy-cpu-request")
}

func TestParityValuesAreCarriedAsAnnotationsInAnnotationMode(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	testutil.WriteFile(t, values, []byte("cniEnabled: true\nproxy:\n  logLevel: debug\n  accessLog: apache\nproxyInit:\n  ignoreOutboundPorts: \"25\"\n"))
	docs, report := weftInject(t, "--values", values, parityFile("deployment.yaml"))
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	assert.Equal(t, map[string]string{
		vocab.AnnotationInject:            vocab.InjectEnabled,
		vocab.AnnotationProxyLogLevel:     "debug",
		vocab.AnnotationAccessLog:         "apache",
		vocab.AnnotationSkipOutboundPorts: "25",
	}, d.Spec.Template.Annotations)
	assert.Contains(t, report, "no annotation carries cniEnabled", "what cannot travel is named, never silently lost")

	linkerd := filepath.Join(dir, "linkerd.yaml")
	testutil.WriteFile(t, linkerd, []byte("proxy:\n  image: {name: cr.l5d.io/linkerd/proxy}\n  logLevel: warn,linkerd=debug\n  waitBeforeExitSeconds: 10\ncontrollerReplicas: 3\n"))
	docs, report = weftInject(t, "--linkerd-values", linkerd, parityFile("deployment.yaml"))
	strict(t, docs[0], &d)
	assert.Equal(t, "warn,linkerd=debug", d.Spec.Template.Annotations[vocab.AnnotationProxyLogLevel])
	assert.Equal(t, "10", d.Spec.Template.Annotations[vocab.AnnotationWaitBeforeExitSeconds])
	assert.Contains(t, report, "2 keys mapped, 2 not")
	assert.Contains(t, report, "proxy.image.name")
	assert.Contains(t, report, "controllerReplicas")
}

func TestParityCNIModeAddsTheNetworkValidator(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	testutil.WriteFile(t, values, []byte("cniEnabled: true\n"))
	docs, _ := weftInject(t, "--manual", "--values", values, parityFile("deployment.yaml"))
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	pod := podOf(d.Spec.Template)
	assert.Nil(t, containerNamed(pod, vocab.InitContainerName), "no weft-init with a CNI plugin")
	require.Equal(t, vocab.ValidatorContainerName, pod.Spec.InitContainers[0].Name, "the validator runs before the proxy")
	v := pod.Spec.InitContainers[0]
	assert.Equal(t, []string{"validate", "--listen-addr", "0.0.0.0:4140", "--connect-addr", "1.1.1.1:20001", "--timeout", "10s"}, v.Args)
	assert.Equal(t, int64(65534), *v.SecurityContext.RunAsUser, "not the proxy's user, so its traffic is redirected")
	assert.Equal(t, []corev1.Capability{"ALL"}, v.SecurityContext.Capabilities.Drop)
}

func TestParityUninjectRemovesWeftsAndLinkerdsSidecars(t *testing.T) {
	code, injected, errs := runCommand(t, cli.InjectCommand(), "", "--manual", "--values", writeCNIOff(t), parityFile("deployment.yaml"), parityFile("namespace.yaml"))
	require.Equal(t, cli.ExitOK, code, errs)
	linkerd, err := os.ReadFile(parityFile("linkerd-injected.yaml"))
	require.NoError(t, err)
	input := injected + "---\n" + string(linkerd)
	code, out, report := runCommand(t, cli.UninjectCommand(), input, "-")
	require.Equal(t, cli.ExitOK, code, report)
	assert.Equal(t, []string{
		`deployment "web" uninjected`, `namespace "shop" uninjected`,
		`deployment "api1" uninjected`, `deployment "api2" uninjected`, `deployment "api3" uninjected`, `deployment "api4" uninjected`,
	}, reportLines(report))
	for _, doc := range yamlDocs(out) {
		assert.NotContains(t, doc, "weft-")
		assert.NotContains(t, doc, "linkerd-")
		assert.NotContains(t, doc, "linkerd.io/inject: enabled")
		assert.NotContains(t, doc, "linkerd.io/proxy-deployment")
	}
	assert.Contains(t, out, "config.linkerd.io/proxy-cpu-request: 150m", "configuration stays for the next injection")

	_, _, report = runCommand(t, cli.UninjectCommand(), "", parityFile("special.yaml"))
	assert.Contains(t, report, `deployment "legacy-batch" skipped: no Weft or Linkerd sidecar to remove`)
}

func writeCNIOff(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "values.yaml")
	testutil.WriteFile(t, path, []byte("cniEnabled: false\n"))
	return path
}

func TestParityInjectionIsIdempotent(t *testing.T) {
	for _, mode := range [][]string{{"--manual"}, nil} {
		for _, f := range []string{"deployment.yaml", "linkerd-injected.yaml", "cronjobs.yaml", "list.yaml", "udp.yaml", "workloads.yaml", "special.yaml", "annotated.yaml", "namespace.yaml"} {
			code, first, errs := runCommand(t, cli.InjectCommand(), "", append(mode, parityFile(f))...)
			require.Equal(t, cli.ExitOK, code, errs)
			code, second, errs := runCommand(t, cli.InjectCommand(), first, append(mode, "-")...)
			require.Equal(t, cli.ExitOK, code, errs)
			assert.Equal(t, first, second, "%v %s", mode, f)
		}
	}
}

func TestParityJSONOutputIsOneObjectPerLine(t *testing.T) {
	code, out, errs := runCommand(t, cli.InjectCommand(), "", "--output", "json", parityFile("workloads.yaml"))
	require.Equal(t, cli.ExitOK, code, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	assert.Len(t, lines, 6)
	for _, l := range lines {
		assert.True(t, json.Valid([]byte(l)), l)
	}
}

func TestParityControlPlaneComponentsNeedManualInjection(t *testing.T) {
	code, out, errs := runCommand(t, cli.InjectCommand(), "", parityFile("control-plane.yaml"))
	assert.Equal(t, cli.ExitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "control-plane component")
	assert.Contains(t, errs, "use --manual")

	docs, _ := weftInject(t, "--manual", "--enable-debug-sidecar", parityFile("control-plane.yaml"))
	var d appsv1.Deployment
	strict(t, docs[0], &d)
	pod := podOf(d.Spec.Template)
	assert.Equal(t, []string{vocab.ProxyContainerName}, proxies(pod))
	assert.NotNil(t, containerNamed(pod, vocab.DebugContainerName), "a debug sidecar for the control plane, as linkerd inject --manual --enable-debug-sidecar")
}
