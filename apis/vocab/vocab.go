// Package vocab is Linkerd's vocabulary as Weft speaks it: the annotation
// and label keys, container and volume names, proxy environment variables,
// default ports, default policies, default cluster networks and
// control-plane names that a pod, a namespace or a proxy carries. Manifests written for Linkerd mean the same
// thing here because every Weft package reads these keys from this one
// place.
//
// The package imports nothing but the standard library (net/netip), so
// anything may import it: the proxy reads
// the environment variables the injector writes, and discovery and policy
// read the annotations without linking the injector.
package vocab

// Annotation and label keys. Weft accepts Linkerd's keys unchanged so that
// manifests written for Linkerd mean the same thing here.
const (
	// AnnotationInject turns injection on or off for a pod or, when set on a
	// namespace, for every pod in it. Values: [InjectEnabled],
	// [InjectDisabled], [InjectIngress].
	AnnotationInject = "linkerd.io/inject"

	// AnnotationCreatedBy records which tool injected the proxy.
	AnnotationCreatedBy = "linkerd.io/created-by"
	// AnnotationProxyVersion records the version of the injected proxy.
	AnnotationProxyVersion = "linkerd.io/proxy-version"
	// AnnotationIdentityMode records how the proxy takes part in identity
	// ("default" for every pod Weft injects).
	AnnotationIdentityMode = "linkerd.io/identity-mode"
	// AnnotationTrustRootSHA256 records the SHA-256 (hex) of the trust
	// anchors PEM handed to the proxy, so a rotation shows which pods still
	// carry the old roots.
	AnnotationTrustRootSHA256 = "linkerd.io/trust-root-sha256"

	// LabelControlPlaneNamespace is set on every injected pod to the
	// control-plane namespace. Discovery reads it to know a pod is meshed.
	LabelControlPlaneNamespace = "linkerd.io/control-plane-ns"
	// LabelWorkloadNamespace is set on injected pods to the pod's namespace.
	LabelWorkloadNamespace = "linkerd.io/workload-ns"
	// LabelControlPlaneComponent marks the control plane's own pods; the
	// injector webhook's object selector leaves them out.
	LabelControlPlaneComponent = "linkerd.io/control-plane-component"

	// LabelAdmissionWebhooks, set to "disabled" on a namespace, opts the
	// whole namespace out of Weft's admission webhooks (the install renders
	// the webhook configurations with a namespaceSelector on it; the
	// injector also honours it).
	LabelAdmissionWebhooks = "config.linkerd.io/admission-webhooks"

	// ConfigPrefix, ConfigPrefixBeta and ConfigPrefixAlpha are the prefixes
	// of the proxy configuration annotations.
	ConfigPrefix      = "config.linkerd.io/"
	ConfigPrefixBeta  = "config.beta.linkerd.io/"
	ConfigPrefixAlpha = "config.alpha.linkerd.io/"

	// Proxy configuration annotations, named as Linkerd names them. Each
	// overrides a Values field; docs/inject.md lists values and effects.
	AnnotationProxyImage               = ConfigPrefix + "proxy-image"
	AnnotationProxyVersionOverride     = ConfigPrefix + "proxy-version"
	AnnotationImagePullPolicy          = ConfigPrefix + "image-pull-policy"
	AnnotationInitImage                = ConfigPrefix + "init-image"
	AnnotationInitImageVersion         = ConfigPrefix + "init-image-version"
	AnnotationInboundPort              = ConfigPrefix + "inbound-port"
	AnnotationOutboundPort             = ConfigPrefix + "outbound-port"
	AnnotationAdminPort                = ConfigPrefix + "admin-port"
	AnnotationControlPort              = ConfigPrefix + "control-port"
	AnnotationProxyCPURequest          = ConfigPrefix + "proxy-cpu-request"
	AnnotationProxyCPULimit            = ConfigPrefix + "proxy-cpu-limit"
	AnnotationProxyMemoryRequest       = ConfigPrefix + "proxy-memory-request"
	AnnotationProxyMemoryLimit         = ConfigPrefix + "proxy-memory-limit"
	AnnotationProxyEphemeralRequest    = ConfigPrefix + "proxy-ephemeral-storage-request"
	AnnotationProxyEphemeralLimit      = ConfigPrefix + "proxy-ephemeral-storage-limit"
	AnnotationProxyUID                 = ConfigPrefix + "proxy-uid"
	AnnotationProxyGID                 = ConfigPrefix + "proxy-gid"
	AnnotationProxyLogLevel            = ConfigPrefix + "proxy-log-level"
	AnnotationProxyLogFormat           = ConfigPrefix + "proxy-log-format"
	AnnotationSkipInboundPorts         = ConfigPrefix + "skip-inbound-ports"
	AnnotationSkipOutboundPorts        = ConfigPrefix + "skip-outbound-ports"
	AnnotationSkipSubnets              = ConfigPrefix + "skip-subnets"
	AnnotationOpaquePorts              = ConfigPrefix + "opaque-ports"
	AnnotationProxyAwait               = ConfigPrefix + "proxy-await"
	AnnotationDefaultInboundPolicy     = ConfigPrefix + "default-inbound-policy"
	AnnotationShutdownGracePeriod      = ConfigPrefix + "shutdown-grace-period"
	AnnotationNativeSidecar            = ConfigPrefix + "proxy-enable-native-sidecar"
	AnnotationNativeSidecarBeta        = ConfigPrefixBeta + "proxy-enable-native-sidecar"
	AnnotationNativeSidecarAlpha       = ConfigPrefixAlpha + "proxy-enable-native-sidecar"
	AnnotationWaitBeforeExitSeconds    = ConfigPrefixAlpha + "proxy-wait-before-exit-seconds"
	AnnotationProxyInboundConnectTime  = ConfigPrefix + "proxy-inbound-connect-timeout"
	AnnotationProxyOutboundConnectTime = ConfigPrefix + "proxy-outbound-connect-timeout"
	AnnotationAccessLog                = ConfigPrefix + "access-log"
	AnnotationCloseWaitTimeout         = ConfigPrefix + "close-wait-timeout"
	AnnotationProxyAdminShutdown       = ConfigPrefix + "proxy-admin-shutdown"
	// AnnotationDisableTap, "true", turns tap off for the pod (Linkerd's
	// key).
	AnnotationDisableTap = ConfigPrefix + "disable-tap"
	// AnnotationTapIdentities lists, comma-separated, the identities the
	// pod's proxy accepts as tappers, replacing the install's list (a Weft
	// key: Linkerd wires its tap service's identity itself).
	AnnotationTapIdentities = "weftmesh.io/tap-identities"

	// Further proxy configuration keys Linkerd defines. docs/compatibility.md
	// says for each whether Weft applies it or why it has no meaning here.
	AnnotationPodInboundPorts                = ConfigPrefix + "pod-inbound-ports"
	AnnotationProxyCPURatioLimit             = ConfigPrefix + "proxy-cpu-ratio-limit"
	AnnotationProxyLogHTTPHeaders            = ConfigPrefix + "proxy-log-http-headers"
	AnnotationEnableExternalProfiles         = ConfigPrefix + "enable-external-profiles"
	AnnotationMetricsHostnameLabels          = ConfigPrefix + "proxy-metrics-hostname-labels"
	AnnotationOutboundDiscoveryUnusedTimeout = ConfigPrefix + "proxy-outbound-discovery-cache-unused-timeout"
	AnnotationInboundDiscoveryUnusedTimeout  = ConfigPrefix + "proxy-inbound-discovery-cache-unused-timeout"
	AnnotationDisableOutboundDetectTimeout   = ConfigPrefix + "proxy-disable-outbound-protocol-detect-timeout"
	AnnotationDisableInboundDetectTimeout    = ConfigPrefix + "proxy-disable-inbound-protocol-detect-timeout"
	AnnotationEnableGateway                  = ConfigPrefix + "enable-gateway"
	AnnotationEnableDebugSidecar             = ConfigPrefix + "enable-debug-sidecar"
	AnnotationDebugImage                     = ConfigPrefix + "debug-image"
	AnnotationDebugImageVersion              = ConfigPrefix + "debug-image-version"
	AnnotationDebugImagePullPolicy           = ConfigPrefix + "debug-image-pull-policy"
	AnnotationProxyAdditionalEnv             = ConfigPrefix + "proxy-additional-env"
	AnnotationDisableIdentity                = ConfigPrefix + "disable-identity"

	// AnnotationTraceCollector names the OTLP collector (HOST:PORT) the
	// proxy sends its spans to; AnnotationTraceCollectorServiceAccount is
	// the collector's service account, from which its mesh identity is
	// derived (Linkerd's tracing annotations, read by its linkerd-jaeger
	// extension's injector until that extension was removed in
	// edge-25.10.1; version-2.20 configures tracing by Helm values).
	AnnotationTraceCollector               = ConfigPrefix + "trace-collector"
	AnnotationTraceCollectorServiceAccount = ConfigPrefixAlpha + "trace-collector-service-account"
)

// Owner labels: the injector records the workload a pod belongs to, as
// Linkerd does, so that metrics and tools can group pods by workload.
const (
	LabelProxyDeployment            = "linkerd.io/proxy-deployment"
	LabelProxyReplicaSet            = "linkerd.io/proxy-replicaset"
	LabelProxyReplicationController = "linkerd.io/proxy-replicationcontroller"
	LabelProxyStatefulSet           = "linkerd.io/proxy-statefulset"
	LabelProxyDaemonSet             = "linkerd.io/proxy-daemonset"
	LabelProxyJob                   = "linkerd.io/proxy-job"
	LabelProxyCronJob               = "linkerd.io/proxy-cronjob"
)

// Names Linkerd's injector gives what it adds to a pod. `weft inject`
// replaces them (migration) and `weft uninject` removes them.
const (
	LinkerdProxyContainerName     = "linkerd-proxy"
	LinkerdInitContainerName      = "linkerd-init"
	LinkerdDebugContainerName     = "linkerd-debug"
	LinkerdValidatorContainerName = "linkerd-network-validator"
	LinkerdEndEntityVolumeName    = "linkerd-identity-end-entity"
	LinkerdXtablesLockVolumeName  = "linkerd-proxy-init-xtables-lock"
	LinkerdTokenVolumeName        = "linkerd-identity-token"
	// LinkerdPrefix starts the linkerd.io/* annotations and labels the
	// injector writes (config.linkerd.io/* keys are not under it).
	LinkerdPrefix = "linkerd.io/"
)

// Values of [AnnotationInject].
const (
	InjectEnabled  = "enabled"
	InjectDisabled = "disabled"
	InjectIngress  = "ingress"
)

// Names of what the injector adds to a pod.
const (
	// ProxyContainerName is the name of the injected proxy container.
	ProxyContainerName = "weft-proxy"
	// InitContainerName is the name of the injected iptables init container.
	InitContainerName = "weft-init"
	// ProxyPortName and AdminPortName name the proxy's container ports.
	ProxyPortName = "weft-proxy"
	AdminPortName = "weft-admin"
	// TokenVolumeName is the projected service-account token volume.
	TokenVolumeName = "weft-identity-token"
	// XtablesLockVolumeName is the scratch volume weft-init mounts at /run
	// so iptables can take its lock on a read-only root filesystem.
	XtablesLockVolumeName = "weft-init-xtables-lock"
	// DebugContainerName is the debug sidecar added with
	// config.linkerd.io/enable-debug-sidecar.
	DebugContainerName = "weft-debug"
	// ValidatorContainerName is the init container that, in CNI mode,
	// fails the pod when traffic is not redirected to the proxy.
	ValidatorContainerName = "weft-network-validator"
)

// DefaultSkipPorts are skipped inbound and outbound by default, as Linkerd
// does (4567 and 4568 are used by the Galera replication protocol, which
// must not go through the proxy).
const DefaultSkipPorts = "4567,4568"

// Default ports of the proxy. All are configurable through the injector's Values and
// annotations.
const (
	DefaultInboundPort  = 4143
	DefaultOutboundPort = 4140
	DefaultAdminPort    = 4191
	DefaultControlPort  = 4190
)

// Identity token projection.
const (
	// IdentityTokenAudience is the audience of the projected token the proxy
	// presents to the identity service.
	IdentityTokenAudience = "identity.l5d.io"
	// IdentityTokenDir is where the token volume is mounted in the proxy.
	IdentityTokenDir = "/var/run/secrets/tokens"
	// IdentityTokenFile is the token's path inside the proxy container.
	IdentityTokenFile = IdentityTokenDir + "/" + TokenVolumeName
	// IdentityTokenExpirationSeconds is the requested token lifetime.
	IdentityTokenExpirationSeconds = 86400
)

// Identity issuer key pairs. Linkerd accepts two layouts, named by the
// Secret type that carries them; the same names are the files of an issuer
// directory. The certificate file holds the issuer certificate first, then
// the intermediates above it.
const (
	IssuerSchemeLinkerd    = "linkerd.io/tls"
	IssuerSchemeKubernetes = "kubernetes.io/tls"
	// IssuerCertLinkerd and IssuerKeyLinkerd are the keys (files) of the
	// linkerd.io/tls layout.
	IssuerCertLinkerd = "crt.pem"
	IssuerKeyLinkerd  = "key.pem"
	// IssuerCertKubernetes and IssuerKeyKubernetes are the keys (files) of
	// the kubernetes.io/tls layout (what cert-manager writes).
	IssuerCertKubernetes = "tls.crt"
	IssuerKeyKubernetes  = "tls.key"
)

// Control-plane defaults.
const (
	DefaultControlPlaneNamespace = "weft"
	DefaultClusterDomain         = "cluster.local"
	DefaultTrustDomain           = "cluster.local"
	DefaultProxyImage            = "ghcr.io/weftmesh/weft-proxy"
	DefaultInitImage             = "ghcr.io/weftmesh/weft-init"
	DefaultDebugImage            = "ghcr.io/weftmesh/weft-debug"
	// DefaultVersion is the image tag used when Values.Version is empty.
	// Binaries built from a release set Values.Version themselves.
	DefaultVersion = "dev"
	// DefaultOpaquePorts are ports whose protocols speak first or are not
	// HTTP, so the proxy skips protocol detection on them.
	DefaultOpaquePorts = "25,587,3306,4444,5432,6379,9300,11211"
	DefaultProxyUID    = 2102
	// DefaultGlobalEgressNamespace is the namespace whose EgressNetworks
	// apply to clients of every namespace: Linkerd's linkerd-egress, kept
	// so that the EgressNetworks Linkerd users have there mean the same.
	DefaultGlobalEgressNamespace = "linkerd-egress"
)

// Environment variables of the proxy container. The proxy (mesh/dataplane)
// reads exactly these names.
const (
	EnvInboundAddr       = "WEFT_PROXY_INBOUND_ADDR"
	EnvOutboundAddr      = "WEFT_PROXY_OUTBOUND_ADDR"
	EnvAdminAddr         = "WEFT_PROXY_ADMIN_ADDR"
	EnvIdentityAddr      = "WEFT_PROXY_IDENTITY_ADDR"
	EnvDestinationAddr   = "WEFT_PROXY_DESTINATION_ADDR"
	EnvPolicyAddr        = "WEFT_PROXY_POLICY_ADDR"
	EnvTrustAnchors      = "WEFT_PROXY_TRUST_ANCHORS"
	EnvIdentityTokenFile = "WEFT_PROXY_IDENTITY_TOKEN_FILE"
	EnvIdentityName      = "WEFT_PROXY_IDENTITY_NAME"
	EnvNamespace         = "WEFT_PROXY_NAMESPACE"
	EnvPod               = "WEFT_PROXY_POD"
	EnvServiceAccount    = "WEFT_PROXY_SERVICE_ACCOUNT"
	// EnvInboundPorts lists the application's container ports, whose
	// inbound policy the proxy fetches before it reports ready.
	EnvInboundPorts         = "WEFT_PROXY_INBOUND_PORTS"
	EnvInboundOpaquePorts   = "WEFT_PROXY_INBOUND_OPAQUE_PORTS"
	EnvInboundSkipPorts     = "WEFT_PROXY_INBOUND_SKIP_PORTS"
	EnvOutboundSkipPorts    = "WEFT_PROXY_OUTBOUND_SKIP_PORTS"
	EnvLogLevel             = "WEFT_PROXY_LOG_LEVEL"
	EnvLogFormat            = "WEFT_PROXY_LOG_FORMAT"
	EnvShutdownGracePeriod  = "WEFT_PROXY_SHUTDOWN_GRACE_PERIOD"
	EnvDefaultInboundPolicy = "WEFT_PROXY_DEFAULT_INBOUND_POLICY"
	EnvDestinationContext   = "WEFT_PROXY_DESTINATION_CONTEXT"
	// EnvClusterNetworks are the networks the cluster-* default policies
	// trust.
	EnvClusterNetworks = "WEFT_PROXY_CLUSTER_NETWORKS"
	// EnvAdminShutdown enables POST /shutdown on the admin port
	// (loopback only); off unless config.linkerd.io/proxy-admin-shutdown
	// is enabled.
	EnvAdminShutdown = "WEFT_PROXY_ADMIN_SHUTDOWN"
	// EnvIngressMode is "true" when the pod is injected with
	// linkerd.io/inject: ingress.
	EnvIngressMode = "WEFT_PROXY_INGRESS_MODE"
	// EnvAccessLog is "apache" or "json": the inbound proxy writes one
	// access-log line per HTTP request, in Linkerd's formats.
	EnvAccessLog = "WEFT_PROXY_ACCESS_LOG"
	// EnvInboundConnectTimeout and EnvOutboundConnectTimeout bound dialling
	// the application and remote endpoints.
	EnvInboundConnectTimeout  = "WEFT_PROXY_INBOUND_CONNECT_TIMEOUT"
	EnvOutboundConnectTimeout = "WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT"
	// EnvInboundDetectTimeout and EnvOutboundDetectTimeout bound protocol
	// detection per direction.
	EnvInboundDetectTimeout  = "WEFT_PROXY_INBOUND_DETECT_TIMEOUT"
	EnvOutboundDetectTimeout = "WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT"
	// EnvOutboundDiscoveryIdleTimeout is how long an outbound destination
	// nobody uses keeps its discovery watch.
	EnvOutboundDiscoveryIdleTimeout = "WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT"
	// EnvInboundRequireIdentityPorts lists inbound ports that refuse
	// clients without a mesh identity, whatever the policy says.
	EnvInboundRequireIdentityPorts = "WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS"
	// EnvCPURatioLimit caps the proxy's worker threads (GOMAXPROCS) at this
	// fraction of the node's CPUs.
	EnvCPURatioLimit = "WEFT_PROXY_CPU_RATIO_LIMIT"
	// EnvTapAddr is the tap server's listen address (io.linkerd.proxy.tap
	// over mutual TLS); it is opened only when EnvTapIdentities is set.
	EnvTapAddr = "WEFT_PROXY_TAP_ADDR"
	// EnvTapIdentities lists, comma-separated, the identities the proxy
	// accepts as tappers (Linkerd gives its proxies the tap service's
	// identity); empty turns tap off.
	EnvTapIdentities = "WEFT_PROXY_TAP_IDENTITIES"
	// EnvTapMaxTaps bounds the taps open at once on one proxy.
	EnvTapMaxTaps = "WEFT_PROXY_TAP_MAX_TAPS"
	// EnvTapMaxEventsPerSecond bounds the events one tap receives per
	// second; beyond it requests are not reported and are counted.
	EnvTapMaxEventsPerSecond = "WEFT_PROXY_TAP_MAX_EVENTS_PER_SECOND"
	// EnvTraceCollectorAddr is the OTLP/gRPC collector (HOST:PORT) the
	// proxy exports spans to; empty turns tracing off (Linkerd's
	// LINKERD2_PROXY_TRACE_COLLECTOR_SVC_ADDR).
	EnvTraceCollectorAddr = "WEFT_PROXY_TRACE_COLLECTOR_ADDR"
	// EnvTraceCollectorIdentity is the collector's mesh identity
	// (LINKERD2_PROXY_TRACE_COLLECTOR_SVC_NAME).
	EnvTraceCollectorIdentity = "WEFT_PROXY_TRACE_COLLECTOR_IDENTITY"
	// EnvTraceServiceName is the service.name of the proxy's spans
	// (LINKERD2_PROXY_TRACE_SERVICE_NAME).
	EnvTraceServiceName = "WEFT_PROXY_TRACE_SERVICE_NAME"
	// EnvTraceAttributes are extra resource attributes, KEY=VALUE lines
	// (LINKERD2_PROXY_TRACE_EXTRA_ATTRIBUTES).
	EnvTraceAttributes = "WEFT_PROXY_TRACE_ATTRIBUTES"
	// EnvTraceProtocol is the export protocol; only "opentelemetry"
	// (LINKERD2_PROXY_TRACE_PROTOCOL).
	EnvTraceProtocol = "WEFT_PROXY_TRACE_PROTOCOL"
)

// Default inbound policies the proxy understands.
const (
	PolicyAllUnauthenticated     = "all-unauthenticated"
	PolicyAllAuthenticated       = "all-authenticated"
	PolicyClusterAuthenticated   = "cluster-authenticated"
	PolicyClusterUnauthenticated = "cluster-unauthenticated"
	PolicyDeny                   = "deny"
	PolicyAudit                  = "audit"
)

// Log formats of the proxy.
const (
	LogFormatPlain = "plain"
	LogFormatJSON  = "json"
)

// Control-plane Services the proxy talks to, in the control-plane namespace.
// The install rendering creates them with these names and ports.
const (
	ServiceIdentity    = "weft-identity-headless"
	ServiceDestination = "weft-dst-headless"
	ServicePolicy      = "weft-policy"
	IdentityPort       = 8080
	DestinationPort    = 8086
	PolicyPort         = 8090
)

// LeasePolicyStatus is the Lease, in the control-plane namespace, whose
// holder among the policy controller's replicas writes route status.
const LeasePolicyStatus = "weft-policy-status-write"
