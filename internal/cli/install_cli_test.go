package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
	"github.com/weftmesh/weft/mesh/policy"
)

// installRun runs cmd with args and returns its status, stdout and stderr.
func installRun(t *testing.T, cmd cli.Command, args ...string) (int, []byte, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st := cmd.Run(testutil.Context(t, 0), args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return st, out.Bytes(), errb.String()
}

func installObjects(t *testing.T, data []byte) map[string]install.Object {
	t.Helper()
	objs, err := install.Decode(data)
	require.NoError(t, err)
	x := map[string]install.Object{}
	for _, o := range objs {
		x[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = o
	}
	return x
}

func TestInstallWithoutCertificatesGeneratesThemLoudlyAndPrintsStrictManifests(t *testing.T) {
	st, out, errs := installRun(t, cli.InstallCommand())
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Contains(t, errs, "WARNING: weft install GENERATED a new trust anchor and identity issuer")
	assert.Contains(t, errs, "The anchor's private key is NOT kept")
	assert.Contains(t, errs, "generated a new webhook CA")
	x := installObjects(t, out)
	assert.Contains(t, x, "Namespace/weft")
	assert.Contains(t, x, "Deployment/weft-identity")
	assert.Contains(t, x, "CustomResourceDefinition/servers.policy.linkerd.io")

	// A second run generates other certificates.
	st, out2, _ := installRun(t, cli.InstallCommand())
	require.Equal(t, cli.ExitOK, st)
	assert.False(t, bytes.Equal(out, out2))
}

func TestInstallWithGivenCertificatesIsByteForByteReproducible(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	st, first, errs := installRun(t, cli.InstallCommand(), "--certs-out", dir)
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Contains(t, errs, "written to "+dir)
	for _, f := range []string{"ca.crt", "ca.key", "issuer/crt.pem", "issuer/key.pem", "webhook/ca.crt", "webhook/tls.crt", "webhook/tls.key", "tap/ca.crt", "tap/tls.crt", "tap/tls.key"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	info, err := os.Stat(filepath.Join(dir, "ca.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	args := []string{"--identity-trust-anchors-file", filepath.Join(dir, "ca.crt"), "--identity-issuer-dir", filepath.Join(dir, "issuer"), "--webhook-cert-dir", filepath.Join(dir, "webhook"), "--tap-cert-dir", filepath.Join(dir, "tap")}
	st, second, errs := installRun(t, cli.InstallCommand(), args...)
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Empty(t, errs, "nothing generated, nothing to warn about")
	st, third, _ := installRun(t, cli.InstallCommand(), args...)
	require.Equal(t, cli.ExitOK, st)
	assert.True(t, bytes.Equal(second, third), "two runs with the same certificates differ")
	assert.True(t, bytes.Equal(first, second), "the saved certificates do not reproduce the first run")

	// --certs-out with nothing generated is a mistake.
	st, out, errs := installRun(t, cli.InstallCommand(), append([]string{"--certs-out", t.TempDir()}, args...)...)
	assert.Equal(t, cli.ExitUsage, st)
	assert.Empty(t, out)
	assert.Contains(t, errs, "--certs-out: this run generated no certificates")

	// --certs-out never overwrites.
	st, out, errs = installRun(t, cli.InstallCommand(), "--certs-out", dir)
	assert.Equal(t, cli.ExitFailure, st)
	assert.Empty(t, out)
	assert.Contains(t, errs, "already exists")

	// The HA rendering from the same inputs is reproducible too.
	ha := append([]string{"--ha"}, args...)
	_, a, _ := installRun(t, cli.InstallCommand(), ha...)
	_, b, _ := installRun(t, cli.InstallCommand(), ha...)
	assert.True(t, bytes.Equal(a, b))
	x := installObjects(t, a)
	assert.EqualValues(t, 3, *x["Deployment/weft-destination"].(*appsv1.Deployment).Spec.Replicas)
	assert.Contains(t, x, "PodDisruptionBudget/weft-destination")
	assert.Equal(t, admissionregv1.Fail, *x["MutatingWebhookConfiguration/"+install.MutatingWebhookConfiguration].(*admissionregv1.MutatingWebhookConfiguration).Webhooks[0].FailurePolicy)
}

func TestInstallTakesIssuersMadeByWeftCertsAndValuesFiles(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	testutil.WriteFile(t, valuesFile, []byte("controlPlaneNamespace: mesh\nidentityTrustDomain: example.org\nproxy:\n  logLevel: debug\n"))
	st, out, errs := installRun(t, cli.InstallCommand(), "--values", valuesFile,
		"--identity-trust-anchors-file", filepath.Join(anchorDir, "ca.crt"), "--identity-issuer-dir", issuerDir,
		"--identity-issuer-scheme", "linkerd.io/tls", "--controller-image", "registry.example/weft-controller:v9")
	require.Equal(t, cli.ExitOK, st, errs)
	x := installObjects(t, out)
	assert.Contains(t, x, "Namespace/mesh")
	issuer := x["Secret/"+install.SecretIssuer].(*corev1.Secret)
	assert.Equal(t, "mesh", issuer.Namespace)
	crt, err := os.ReadFile(filepath.Join(issuerDir, "crt.pem"))
	require.NoError(t, err)
	assert.Equal(t, crt, issuer.Data["crt.pem"])
	cm := x["ConfigMap/"+install.ConfigMapValues].(*corev1.ConfigMap)
	v, err := inject.ParseValues([]byte(cm.Data[install.ValuesKey]))
	require.NoError(t, err)
	assert.Equal(t, "debug", v.Proxy.LogLevel)
	assert.Equal(t, "example.org", v.IdentityTrustDomain)
	d := x["Deployment/weft-identity"].(*appsv1.Deployment)
	assert.Equal(t, "registry.example/weft-controller:v9", d.Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--trust-domain=example.org")
}

func TestInstallWiresTapAndOnRequestAPodMonitor(t *testing.T) {
	st, out, errs := installRun(t, cli.InstallCommand())
	require.Equal(t, cli.ExitOK, st, errs)
	x := installObjects(t, out)
	assert.Contains(t, x, "ServiceAccount/"+install.ServiceAccountTap)
	assert.Contains(t, x, "ClusterRoleBinding/weft-weft-tap")
	assert.NotContains(t, x, "PodMonitor/"+install.PodMonitorName)
	assert.Contains(t, string(out), "tapIdentities: weft-tap.weft.serviceaccount.identity.weft.cluster.local")

	st, out, errs = installRun(t, cli.InstallCommand(), "--prometheus-operator")
	require.Equal(t, cli.ExitOK, st, errs)
	x = installObjects(t, out)
	require.Contains(t, x, "PodMonitor/"+install.PodMonitorName)
	assert.Equal(t, "weft", x["PodMonitor/"+install.PodMonitorName].GetNamespace())
}

func TestInstallCRDsPrintsOnlyTheCRDs(t *testing.T) {
	st, out, errs := installRun(t, cli.InstallCommand(), "--crds")
	require.Equal(t, cli.ExitOK, st, errs)
	x := installObjects(t, out)
	assert.Len(t, x, 9)
	for k := range x {
		assert.True(t, strings.HasPrefix(k, "CustomResourceDefinition/"), k)
	}
	assert.Empty(t, errs)
}

func TestInstallCRDsWithGatewayAPIAppendsTheUpstreamRouteCRDs(t *testing.T) {
	st, out, errs := installRun(t, cli.InstallCommand(), "--crds", "--gateway-api")
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Empty(t, errs)
	x := installObjects(t, out)
	assert.Len(t, x, 13, "Weft's 9 CRDs and the 4 Gateway API route CRDs")
	require.Contains(t, x, "CustomResourceDefinition/servers.policy.linkerd.io")
	for _, name := range []string{"httproutes.gateway.networking.k8s.io", "grpcroutes.gateway.networking.k8s.io", "tcproutes.gateway.networking.k8s.io", "tlsroutes.gateway.networking.k8s.io"} {
		require.Contains(t, x, "CustomResourceDefinition/"+name)
		crd, ok := x["CustomResourceDefinition/"+name].(*apiextensionsv1.CustomResourceDefinition)
		require.True(t, ok, "%T", x["CustomResourceDefinition/"+name])
		assert.Equal(t, crds.GatewayAPIVersion(), crd.Annotations["gateway.networking.k8s.io/bundle-version"])
		assert.NotEmpty(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "the schema came through")
	}

	// -o json: one List with the same thirteen.
	st, out, errs = installRun(t, cli.InstallCommand(), "--crds", "--gateway-api", "-o", "json")
	require.Equal(t, cli.ExitOK, st, errs)
	var list struct {
		Kind  string
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	require.NoError(t, json.Unmarshal(out, &list))
	assert.Equal(t, "List", list.Kind)
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	assert.Len(t, names, 13)
	assert.Contains(t, names, "grpcroutes.gateway.networking.k8s.io")
	assert.Contains(t, names, "tlsroutes.gateway.networking.k8s.io")

	// Without it, --crds prints Weft's only.
	_, out, _ = installRun(t, cli.InstallCommand(), "--crds")
	assert.NotContains(t, installObjects(t, out), "CustomResourceDefinition/httproutes.gateway.networking.k8s.io")
}

func TestInstallRefusesBadFlagsAndInputsWithAClearMessage(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	_, otherIssuer := identityMakePKI(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	testutil.WriteFile(t, bad, []byte("proxy:\n  uid: 0\n  logLevl: debug\n"))
	withAnchors := filepath.Join(t.TempDir(), "anchors.yaml")
	anchorPEM, err := os.ReadFile(filepath.Join(anchorDir, "ca.crt"))
	require.NoError(t, err)
	js, err := json.Marshal(map[string]string{"identityTrustAnchorsPEM": string(anchorPEM)})
	require.NoError(t, err)
	testutil.WriteFile(t, withAnchors, js)
	anchors := filepath.Join(anchorDir, "ca.crt")

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--crds", "--ha"}, "--crds prints only the CRDs and takes no other flag (got [--ha])"},
		{[]string{"--crds", "--gateway-api", "--ha"}, "--crds prints only the CRDs and takes no other flag (got [--ha])"},
		{[]string{"--gateway-api"}, "--gateway-api goes with --crds"},
		{[]string{"--values", "/nonexistent/values.yaml"}, "--values: open /nonexistent/values.yaml"},
		{[]string{"--values", bad}, `unknown field "logLevl"`},
		{[]string{"--identity-issuer-dir", issuerDir}, "--identity-issuer-dir needs --identity-trust-anchors-file"},
		{[]string{"--identity-trust-anchors-file", anchors}, "--identity-trust-anchors-file needs --identity-issuer-dir"},
		{[]string{"--values", withAnchors}, "the values carry identityTrustAnchorsPEM but no --identity-issuer-dir"},
		{[]string{"--identity-trust-anchors-file", anchors, "--identity-issuer-dir", otherIssuer}, "does not chain to the trust anchors"},
		{[]string{"--identity-trust-anchors-file", anchors, "--identity-issuer-dir", t.TempDir()}, "holds neither crt.pem and key.pem nor tls.crt and tls.key"},
		{[]string{"--webhook-cert-dir", t.TempDir()}, "webhook certificates: open"},
		{[]string{"--identity-issuer-scheme", "pem"}, `issuer scheme "pem"`},
		{[]string{"--identity-issuance-lifetime", "1s"}, "issuance lifetime 1s is shorter than a minute"},
		{[]string{"--controller-image", "a b"}, `controller image "a b"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			st, out, errs := installRun(t, cli.InstallCommand(), tc.args...)
			assert.Equal(t, cli.ExitUsage, st)
			assert.Empty(t, out, "nothing printed on error")
			assert.Contains(t, errs, tc.want)
			assert.True(t, strings.HasPrefix(errs, "weft install: "), errs)
		})
	}
	// With the values' anchors, the issuer directory alone is enough.
	st, out, errs := installRun(t, cli.InstallCommand(), "--values", withAnchors, "--identity-issuer-dir", issuerDir)
	require.Equal(t, cli.ExitOK, st, errs)
	assert.NotEmpty(t, out)
}

// TestInstalledDeploymentsUseOnlyFlagsTheControllersDefine runs each
// rendered controller's arguments through the real command's flag parser
// (with -h last, so nothing starts): an unknown flag fails the parse.
func TestInstalledDeploymentsUseOnlyFlagsTheControllersDefine(t *testing.T) {
	st, out, errs := installRun(t, cli.InstallCommand(), "--ha")
	require.Equal(t, cli.ExitOK, st, errs)
	controllers := map[string]cli.Command{}
	for _, c := range []cli.Command{cli.IdentityControllerCommand(), cli.DestinationControllerCommand(), cli.PolicyControllerCommand(), cli.InjectorControllerCommand(), cli.TapControllerCommand()} {
		controllers[c.Name] = c
	}
	seen := 0
	for _, o := range installObjects(t, out) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			require.NotEmpty(t, c.Args, d.Name)
			cmd, ok := controllers[c.Args[0]]
			require.True(t, ok, "%s runs unknown component %q", d.Name, c.Args[0])
			st, _, errs := installRun(t, cmd, append(append([]string{}, c.Args[1:]...), "-h")...)
			assert.Equal(t, cli.ExitOK, st, "%s: weft-controller %s rejects %v: %s", d.Name, c.Args[0], c.Args[1:], errs)
			seen++
		}
	}
	assert.Equal(t, 5, seen, "the four controllers and the tap API")

	// The values the flags carry are accepted by the packages behind them,
	// for every default policy the Values allow.
	for _, pol := range []string{vocab.PolicyAllUnauthenticated, vocab.PolicyAllAuthenticated, vocab.PolicyClusterAuthenticated,
		vocab.PolicyClusterUnauthenticated, vocab.PolicyDeny, vocab.PolicyAudit} {
		values := filepath.Join(t.TempDir(), "values.yaml")
		testutil.WriteFile(t, values, []byte("proxy:\n  defaultInboundPolicy: "+pol+"\n  opaquePorts: 25,3306,4000-4100\n"))
		st, out, errs := installRun(t, cli.InstallCommand(), "--values", values)
		require.Equal(t, cli.ExitOK, st, errs)
		x := installObjects(t, out)
		flags := func(deploy string) map[string]string {
			m := map[string]string{}
			for _, a := range x["Deployment/"+deploy].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args[1:] {
				k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				m[k] = v
			}
			return m
		}
		pf := flags("weft-policy")
		assert.Equal(t, pol, pf["default-policy"])
		_, err := policy.NewConfig(policy.WithDefaultPolicy(pf["default-policy"]), policy.WithClusterNetworks(strings.Split(pf["cluster-networks"], ",")...),
			policy.WithTrustDomain(pf["trust-domain"]), policy.WithControlPlaneNamespace(pf["control-plane-namespace"]), policy.WithClusterDomain(pf["cluster-domain"]))
		assert.NoError(t, err, pol)
		ports, err := discovery.ParsePortSet(flags("weft-destination")["default-opaque-ports"], nil)
		require.NoError(t, err)
		assert.Equal(t, "25,3306,4000-4100", ports.String())
		assert.Equal(t, flags("weft-destination")["default-opaque-ports"], pf["default-opaque-ports"],
			"the destination and policy controllers read the same default opaque ports")
	}

	// And an unknown flag is indeed caught this way.
	st, _, _ = installRun(t, cli.IdentityControllerCommand(), "--no-such-flag=1", "-h")
	assert.Equal(t, cli.ExitUsage, st)
}

func TestCheckRefusesBadFlagsAndReportsAnUnreachableCluster(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml"}, `-o "xml": want text, json, yaml`},
		{[]string{"--pre", "--proxy"}, "--pre and --proxy do not go together"},
		{[]string{"now"}, `unexpected argument "now"`},
		{[]string{"--wait", "-1s"}, "--wait -1s: want 0 (no waiting) or a positive duration"},
		{[]string{"--kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig:"},
		{[]string{"--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1"), "--namespace", "Bad_NS"}, `namespace "Bad_NS" is not a namespace name`},
	} {
		st, out, errs := installRun(t, cli.CheckCommand(), tc.args...)
		assert.Equal(t, cli.ExitUsage, st, tc.args)
		assert.Empty(t, out)
		assert.Contains(t, errs, tc.want)
	}

	// Port 1 on loopback refuses connections: the first check fails with
	// its hint and the run stops there, without waiting (--wait is 5m by
	// default, but waiting does not bring an API server up).
	kc := writeKubeconfig(t, "https://127.0.0.1:1")
	st, out, errs := installRun(t, cli.CheckCommand(), "--kubeconfig", kc, "--timeout", "10s")
	assert.Equal(t, cli.ExitFailure, st)
	assert.NotContains(t, errs, "waiting")
	assert.Contains(t, string(out), "[FAIL] can query the Kubernetes API: server version:")
	assert.Contains(t, string(out), "hint: check --kubeconfig")
	assert.Contains(t, string(out), "[skip] Kubernetes version is supported")

	st, out, _ = installRun(t, cli.CheckCommand(), "--kubeconfig", kc, "--timeout", "10s", "-o", "json", "--pre")
	assert.Equal(t, cli.ExitFailure, st)
	var rep check.Report
	require.NoError(t, json.Unmarshal(out, &rep))
	assert.False(t, rep.Success)
	require.Len(t, rep.Results, 2)
	assert.Equal(t, check.StatusFail, rep.Results[0].Status)
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	testutil.WriteFile(t, path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: t
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server)))
	return path
}

func TestInstallTakesALinkerdValuesFileWithItsIssuer(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	read := func(p string) string {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return string(b)
	}
	indent := func(s string, n int) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
	}
	values := "identityTrustDomain: corp.example\n" +
		"identityTrustAnchorsPEM: |\n" + indent(read(filepath.Join(anchorDir, "ca.crt")), 2) + "\n" +
		"identity:\n  issuer:\n    scheme: linkerd.io/tls\n    issuanceLifetime: 48h0m0s\n    clockSkewAllowance: 45s\n    tls:\n" +
		"      crtPEM: |\n" + indent(read(filepath.Join(issuerDir, "crt.pem")), 8) + "\n" +
		"      keyPEM: |\n" + indent(read(filepath.Join(issuerDir, "key.pem")), 8) + "\n" +
		"proxy:\n  logLevel: warn,linkerd=debug\n  image: {name: cr.l5d.io/linkerd/proxy, version: stable-2.14.10}\n" +
		"policyController:\n  logLevel: debug\n"
	path := filepath.Join(t.TempDir(), "linkerd.yaml")
	testutil.WriteFile(t, path, []byte(values))

	st, out, errs := installRun(t, cli.InstallCommand(), "--linkerd-values", path)
	require.Equal(t, cli.ExitOK, st, errs)
	assert.NotContains(t, errs, "GENERATED a new trust anchor", "the issuer came with the values")
	assert.Contains(t, errs, "not mapped (names a Linkerd image")
	assert.Contains(t, errs, "policyController.logLevel")
	x := installObjects(t, out)
	issuer := x["Secret/"+install.SecretIssuer].(*corev1.Secret)
	assert.Equal(t, read(filepath.Join(issuerDir, "crt.pem")), string(issuer.Data["crt.pem"]), "identity.issuer.scheme linkerd.io/tls")
	d := x["Deployment/weft-identity"].(*appsv1.Deployment)
	args := d.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--issuance-lifetime=48h0m0s")
	assert.Contains(t, args, "--clock-skew-allowance=45s")
	assert.Contains(t, args, "--trust-domain=corp.example")
	cm := x["ConfigMap/"+install.ConfigMapValues].(*corev1.ConfigMap)
	v, err := inject.ParseValues([]byte(cm.Data[install.ValuesKey]))
	require.NoError(t, err)
	assert.Equal(t, "warn,linkerd=debug", v.Proxy.LogLevel)
	assert.Equal(t, inject.DefaultValues().Proxy.Image.Name, v.Proxy.Image.Name)

	// Flags win over the values file.
	st, out, errs = installRun(t, cli.InstallCommand(), "--linkerd-values", path, "--identity-issuance-lifetime", "12h")
	require.Equal(t, cli.ExitOK, st, errs)
	d = installObjects(t, out)["Deployment/weft-identity"].(*appsv1.Deployment)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--issuance-lifetime=12h0m0s")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	testutil.WriteFile(t, bad, []byte("proxy: {uid: root}\n"))
	st, out, errs = installRun(t, cli.InstallCommand(), "--linkerd-values", bad)
	assert.Equal(t, cli.ExitUsage, st)
	assert.Empty(t, out)
	assert.Contains(t, errs, "proxy.uid")
}
