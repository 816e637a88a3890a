package install_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// A values file shaped like the linkerd-control-plane chart's, written for
// this test.
const linkerdValues = `
clusterDomain: corp.example
clusterNetworks: "10.0.0.0/8"
identityTrustDomain: corp.example
imagePullPolicy: Always
linkerdVersion: edge-99.1.1
controllerReplicas: 3
cniEnabled: false
proxy:
  image:
    name: cr.l5d.io/linkerd/proxy
    version: ""
  logLevel: warn,linkerd=debug
  logFormat: json
  ports: {admin: 4191, control: 4190, inbound: 4143, outbound: 4140}
  resources:
    cpu: {request: 100m, limit: ""}
    memory: {request: 20Mi, limit: 250Mi}
  uid: 2103
  gid: -1
  await: true
  nativeSidecar: false
  opaquePorts: "25,3306"
  defaultInboundPolicy: cluster-authenticated
  shutdownGracePeriod: 45s
  waitBeforeExitSeconds: 5
  accessLog: apache
  inboundConnectTimeout: 100ms
  outboundConnectTimeout: 1000ms
  outboundDiscoveryCacheUnusedTimeout: 5s
  inboundDiscoveryCacheUnusedTimeout: 90s
  disableInboundProtocolDetectTimeout: true
  requireIdentityOnInboundPorts: "8443"
  enableExternalProfiles: false
  runtime: {workers: {minimum: 1, maximumCPURatio: 0.5}}
  metrics: {hostnameLabels: false}
  additionalEnv:
  - {name: EXTRA, value: "1"}
  tracing: {enabled: false}
  livenessProbe: {initialDelaySeconds: 10}
proxyInit:
  iptablesMode: nft
  ignoreInboundPorts: "4567,4568,9000"
  ignoreOutboundPorts: 5432
  skipSubnets: "172.17.0.0/16"
  closeWaitTimeoutSecs: 60
  runAsRoot: false
debugContainer:
  image: {name: example.com/debug, version: "1.2"}
networkValidator:
  connectAddr: "[fd00::1]:20001"
  timeout: 20s
identity:
  externalCA: false
  serviceAccountTokenProjection: true
  issuer:
    scheme: kubernetes.io/tls
    clockSkewAllowance: 30s
    issuanceLifetime: 48h0m0s
policyController:
  logLevel: debug
egress:
  globalEgressNetworkNamespace: corp-egress
`

func TestLinkerdValuesMapEveryUnderstoodKeyAndNameTheOthers(t *testing.T) {
	lv, err := install.FromLinkerdValues(inject.DefaultValues(), []byte(linkerdValues))
	require.NoError(t, err)
	v := lv.Values
	assert.Equal(t, "corp.example", v.ClusterDomain)
	assert.Equal(t, "10.0.0.0/8", v.ClusterNetworks)
	assert.Equal(t, corev1.PullAlways, v.Proxy.Image.PullPolicy)
	assert.Equal(t, corev1.PullAlways, v.ProxyInit.Image.PullPolicy)
	assert.Equal(t, inject.DefaultValues().Proxy.Image.Name, v.Proxy.Image.Name, "Linkerd's proxy image is not Weft's")
	assert.Equal(t, "warn,linkerd=debug", v.Proxy.LogLevel)
	assert.Equal(t, "json", v.Proxy.LogFormat)
	assert.Equal(t, "100m", v.Proxy.Resources.CPU.Request)
	assert.Empty(t, v.Proxy.Resources.CPU.Limit)
	assert.Equal(t, "250Mi", v.Proxy.Resources.Memory.Limit)
	assert.Equal(t, int64(2103), v.Proxy.UID)
	assert.Equal(t, int64(0), v.Proxy.GID, "Linkerd's -1 means no group")
	assert.False(t, v.Proxy.NativeSidecar)
	assert.Equal(t, "25,3306", v.Proxy.OpaquePorts)
	assert.Equal(t, "cluster-authenticated", v.Proxy.DefaultInboundPolicy)
	assert.Equal(t, 45*time.Second, v.Proxy.ShutdownGracePeriod.Duration)
	assert.Equal(t, int64(5), v.Proxy.WaitBeforeExitSeconds)
	assert.Equal(t, "apache", v.Proxy.AccessLog)
	assert.Equal(t, 100*time.Millisecond, v.Proxy.InboundConnectTimeout.Duration)
	assert.Equal(t, time.Second, v.Proxy.OutboundConnectTimeout.Duration)
	assert.Equal(t, 5*time.Second, v.Proxy.OutboundDiscoveryCacheUnusedTimeout.Duration)
	assert.True(t, v.Proxy.DisableInboundProtocolDetectTimeout)
	assert.Equal(t, "8443", v.Proxy.RequireIdentityOnInboundPorts)
	assert.Equal(t, 0.5, v.Proxy.CPURatioLimit)
	assert.Equal(t, []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}, v.Proxy.AdditionalEnv)
	assert.Equal(t, "4567,4568,9000", v.ProxyInit.IgnoreInboundPorts)
	assert.Equal(t, "5432", v.ProxyInit.IgnoreOutboundPorts, "a number in YAML is a port list too")
	assert.Equal(t, "172.17.0.0/16", v.ProxyInit.SkipSubnets)
	assert.Equal(t, time.Minute, v.ProxyInit.CloseWaitTimeout.Duration)
	assert.Equal(t, "example.com/debug", v.DebugContainer.Image.Name)
	assert.Equal(t, "[fd00::1]:20001", v.NetworkValidator.ConnectAddr)
	assert.Equal(t, 20*time.Second, v.NetworkValidator.Timeout.Duration)
	assert.Equal(t, 48*time.Hour, lv.IssuanceLifetime)
	assert.Equal(t, 30*time.Second, lv.ClockSkewAllowance)
	assert.Equal(t, "kubernetes.io/tls", lv.IssuerScheme)
	assert.Equal(t, "corp-egress", v.Egress.GlobalEgressNetworkNamespace)

	reasons := map[string]string{}
	for _, n := range lv.NotMapped {
		reasons[n.Key] = n.Reason
	}
	for key, want := range map[string]string{
		"proxy.image.name":                         "Linkerd image",
		"linkerdVersion":                           "Linkerd image",
		"controllerReplicas":                       "not a proxy, proxyInit, identity or policy setting",
		"proxy.inboundDiscoveryCacheUnusedTimeout": "one policy watch per port",
		"proxy.enableExternalProfiles":             "every destination",
		"proxy.metrics.hostnameLabels":             "destination authority",
		"proxy.runtime.workers.minimum":            "CPU limit",
		"proxy.tracing.enabled":                    "traces",
		"proxy.livenessProbe.initialDelaySeconds":  "no setting",
		"proxyInit.iptablesMode":                   "iptables binary",
		"proxyInit.runAsRoot":                      "no setting",
		"policyController.logLevel":                "policy controller",
		"identity.externalCA":                      "trust anchors",
		"proxy.resources.cpu.limit":                "empty",
	} {
		assert.Contains(t, reasons[key], want, key)
	}
	// Every key of the file is accounted for, once.
	all := map[string]bool{}
	for _, k := range lv.Mapped {
		all[k] = true
	}
	for _, n := range lv.NotMapped {
		assert.False(t, all[n.Key], "%s both mapped and not", n.Key)
		all[n.Key] = true
	}
	assert.Len(t, all, 58)
}

func TestLinkerdValuesRefuseWrongTypesNamingTheKey(t *testing.T) {
	for doc, key := range map[string]string{
		"proxy: {uid: root}":                                  "proxy.uid",
		"proxy: {ports: {admin: 70000}}":                      "proxy.ports.admin",
		"proxy: {await: maybe}":                               "proxy.await",
		"proxy: {inboundConnectTimeout: soon}":                "proxy.inboundConnectTimeout",
		"proxy: {runtime: {workers: {maximumCPURatio: 2}}}":   "proxy.runtime.workers.maximumCPURatio",
		"proxy: {additionalEnv: {a: b}}":                      "proxy.additionalEnv",
		"proxy: {logFormat: xml}":                             "proxy.logFormat",
		"proxyInit: {skipSubnets: 10.0.0.1/8}":                "proxyInit.skipSubnets",
		"egress: {globalEgressNetworkNamespace: Corp.Egress}": "egress.globalEgressNetworkNamespace",
		"egress: {globalEgressNetworkNamespace: [a]}":         "egress.globalEgressNetworkNamespace",
	} {
		_, err := install.FromLinkerdValues(inject.DefaultValues(), []byte(doc))
		require.Error(t, err, doc)
		assert.True(t, strings.Contains(err.Error(), key) || strings.Contains(err.Error(), strings.Split(key, ".")[len(strings.Split(key, "."))-1]), "%s: %v", doc, err)
	}
	_, err := install.FromLinkerdValues(inject.DefaultValues(), []byte(strings.Repeat("#", 5<<20)))
	assert.ErrorContains(t, err, "larger than")
}
