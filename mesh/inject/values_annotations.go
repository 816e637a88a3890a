package inject

import (
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
)

// ValuesAnnotations returns the config annotations that make the webhook
// render what v asks for where v differs from base (usually
// [DefaultValues]), so that `weft inject --values FILE` in annotation mode
// does not lose the file: the webhook renders with the cluster's Values,
// and annotations on the pod template are how a workload overrides them.
// The second result names the fields that differ from base but that no
// annotation can carry (the webhook uses the cluster's value for those).
func ValuesAnnotations(v, base Values) (map[string]string, []string) {
	out := map[string]string{}
	var lost []string
	set := func(key, val, baseVal string) {
		switch {
		case val == baseVal:
		case val == "" && key != vocab.AnnotationSkipInboundPorts && key != vocab.AnnotationSkipOutboundPorts &&
			key != vocab.AnnotationSkipSubnets && key != vocab.AnnotationRequireIdentityInboundPorts && key != vocab.AnnotationPodInboundPorts:
			// An empty value is not a valid annotation for this key.
			lost = append(lost, key+" (unset)")
		default:
			out[key] = val
		}
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	p, bp := v.Proxy, base.Proxy
	set(vocab.AnnotationProxyImage, p.Image.Name, bp.Image.Name)
	set(vocab.AnnotationProxyVersionOverride, v.version(p.Image.Version), base.version(bp.Image.Version))
	set(vocab.AnnotationImagePullPolicy, string(orDefault(p.Image.PullPolicy, "IfNotPresent")), string(orDefault(bp.Image.PullPolicy, "IfNotPresent")))
	set(vocab.AnnotationInitImage, v.ProxyInit.Image.Name, base.ProxyInit.Image.Name)
	set(vocab.AnnotationInitImageVersion, v.version(v.ProxyInit.Image.Version), base.version(base.ProxyInit.Image.Version))
	set(vocab.AnnotationInboundPort, itoa(int64(p.Ports.Inbound)), itoa(int64(bp.Ports.Inbound)))
	set(vocab.AnnotationOutboundPort, itoa(int64(p.Ports.Outbound)), itoa(int64(bp.Ports.Outbound)))
	set(vocab.AnnotationAdminPort, itoa(int64(p.Ports.Admin)), itoa(int64(bp.Ports.Admin)))
	set(vocab.AnnotationControlPort, itoa(int64(p.Ports.Control)), itoa(int64(bp.Ports.Control)))
	set(vocab.AnnotationProxyCPURequest, p.Resources.CPU.Request, bp.Resources.CPU.Request)
	set(vocab.AnnotationProxyCPULimit, p.Resources.CPU.Limit, bp.Resources.CPU.Limit)
	set(vocab.AnnotationProxyMemoryRequest, p.Resources.Memory.Request, bp.Resources.Memory.Request)
	set(vocab.AnnotationProxyMemoryLimit, p.Resources.Memory.Limit, bp.Resources.Memory.Limit)
	set(vocab.AnnotationProxyEphemeralRequest, p.Resources.EphemeralStorage.Request, bp.Resources.EphemeralStorage.Request)
	set(vocab.AnnotationProxyEphemeralLimit, p.Resources.EphemeralStorage.Limit, bp.Resources.EphemeralStorage.Limit)
	set(vocab.AnnotationProxyUID, itoa(p.UID), itoa(bp.UID))
	if p.GID != bp.GID && p.GID != 0 {
		out[vocab.AnnotationProxyGID] = itoa(p.GID)
	}
	set(vocab.AnnotationProxyLogLevel, p.LogLevel, bp.LogLevel)
	set(vocab.AnnotationProxyLogFormat, p.LogFormat, bp.LogFormat)
	set(vocab.AnnotationOpaquePorts, p.OpaquePorts, bp.OpaquePorts)
	set(vocab.AnnotationProxyAwait, enabledString(p.Await), enabledString(bp.Await))
	set(vocab.AnnotationNativeSidecar, strconv.FormatBool(p.NativeSidecar), strconv.FormatBool(bp.NativeSidecar))
	set(vocab.AnnotationDefaultInboundPolicy, p.DefaultInboundPolicy, bp.DefaultInboundPolicy)
	set(vocab.AnnotationShutdownGracePeriod, p.ShutdownGracePeriod.Duration.String(), bp.ShutdownGracePeriod.Duration.String())
	set(vocab.AnnotationWaitBeforeExitSeconds, itoa(p.WaitBeforeExitSeconds), itoa(bp.WaitBeforeExitSeconds))
	set(vocab.AnnotationProxyAdminShutdown, enabledString(p.AdminShutdown), enabledString(bp.AdminShutdown))
	set(vocab.AnnotationAccessLog, p.AccessLog, bp.AccessLog)
	set(vocab.AnnotationProxyInboundConnectTime, dur(p.InboundConnectTimeout.Duration), dur(bp.InboundConnectTimeout.Duration))
	set(vocab.AnnotationProxyOutboundConnectTime, dur(p.OutboundConnectTimeout.Duration), dur(bp.OutboundConnectTimeout.Duration))
	set(vocab.AnnotationOutboundDiscoveryUnusedTimeout, dur(p.OutboundDiscoveryCacheUnusedTimeout.Duration), dur(bp.OutboundDiscoveryCacheUnusedTimeout.Duration))
	set(vocab.AnnotationDisableInboundDetectTimeout, strconv.FormatBool(p.DisableInboundProtocolDetectTimeout), strconv.FormatBool(bp.DisableInboundProtocolDetectTimeout))
	set(vocab.AnnotationDisableOutboundDetectTimeout, strconv.FormatBool(p.DisableOutboundProtocolDetectTimeout), strconv.FormatBool(bp.DisableOutboundProtocolDetectTimeout))
	set(vocab.AnnotationRequireIdentityInboundPorts, p.RequireIdentityOnInboundPorts, bp.RequireIdentityOnInboundPorts)
	set(vocab.AnnotationPodInboundPorts, p.PodInboundPorts, bp.PodInboundPorts)
	if p.CPURatioLimit != bp.CPURatioLimit && p.CPURatioLimit != 0 {
		out[vocab.AnnotationProxyCPURatioLimit] = strconv.FormatFloat(p.CPURatioLimit, 'g', -1, 64)
	}
	if !reflect.DeepEqual(p.AdditionalEnv, bp.AdditionalEnv) && len(p.AdditionalEnv) > 0 {
		b, _ := json.Marshal(p.AdditionalEnv)
		out[vocab.AnnotationProxyAdditionalEnv] = string(b)
	}
	set(vocab.AnnotationSkipInboundPorts, v.ProxyInit.IgnoreInboundPorts, base.ProxyInit.IgnoreInboundPorts)
	set(vocab.AnnotationSkipOutboundPorts, v.ProxyInit.IgnoreOutboundPorts, base.ProxyInit.IgnoreOutboundPorts)
	set(vocab.AnnotationSkipSubnets, v.ProxyInit.SkipSubnets, base.ProxyInit.SkipSubnets)
	if cw := v.ProxyInit.CloseWaitTimeout.Duration; cw != base.ProxyInit.CloseWaitTimeout.Duration && cw > 0 {
		out[vocab.AnnotationCloseWaitTimeout] = cw.String()
	}
	set(vocab.AnnotationDebugImage, v.DebugContainer.Image.Name, base.DebugContainer.Image.Name)
	set(vocab.AnnotationDebugImageVersion, v.version(v.DebugContainer.Image.Version), base.version(base.DebugContainer.Image.Version))
	set(vocab.AnnotationDebugImagePullPolicy, string(orDefault(v.DebugContainer.Image.PullPolicy, "IfNotPresent")), string(orDefault(base.DebugContainer.Image.PullPolicy, "IfNotPresent")))

	// What no annotation carries.
	differs := func(field string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			lost = append(lost, field)
		}
	}
	differs("controlPlaneNamespace", v.ControlPlaneNamespace, base.ControlPlaneNamespace)
	differs("clusterDomain", v.ClusterDomain, base.ClusterDomain)
	differs("identityTrustDomain", v.IdentityTrustDomain, base.IdentityTrustDomain)
	differs("identityTrustAnchorsPEM", v.IdentityTrustAnchorsPEM, base.IdentityTrustAnchorsPEM)
	differs("identityAddr", v.IdentityAddr, base.IdentityAddr)
	differs("destinationAddr", v.DestinationAddr, base.DestinationAddr)
	differs("policyAddr", v.PolicyAddr, base.PolicyAddr)
	differs("cniEnabled", v.CNIEnabled, base.CNIEnabled)
	differs("clusterNetworks", v.ClusterNetworks, base.ClusterNetworks)
	differs("proxy.awaitCommand", v.Proxy.AwaitCommand, base.Proxy.AwaitCommand)
	differs("proxyInit.resources", v.ProxyInit.Resources, base.ProxyInit.Resources)
	differs("networkValidator", v.NetworkValidator, base.NetworkValidator)
	if orDefault(v.ProxyInit.Image.PullPolicy, "IfNotPresent") != orDefault(v.Proxy.Image.PullPolicy, "IfNotPresent") {
		lost = append(lost, "proxyInit.image.pullPolicy (image-pull-policy sets both images)")
	}
	return out, lost
}
