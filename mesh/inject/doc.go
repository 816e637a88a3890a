// Package inject adds Weft's proxy to Kubernetes pods.
//
// It follows Linkerd's key design decision, that install-time manifests and
// run-time injection share one [Values] type and one rendering path, without
// Linkerd's text templates: the sidecar is built from typed corev1 objects
// and turned into an RFC 6902 JSON Patch. The same [Render] function serves
// the mutating admission webhook (package webhook) and `weft inject`
// ([Transformer]), so the two cannot disagree.
//
// # A walk through
//
// [Values] holds every install-time setting: images and version, ports
// (inbound 4143, outbound 4140, admin 4191, control 4190), resources, log
// level and format, proxy UID, identity, destination and policy addresses,
// trust domain and anchors, default opaque ports, native sidecar (on by
// default), CNI mode, await, shutdown grace period. [DefaultValues] returns
// the shipped defaults; [ParseValues] reads YAML or JSON strictly on top of
// them. `weft install` writes the same type into a ConfigMap.
//
// [Resolve] computes the configuration of one pod: each setting comes from
// the pod's annotations, else from its namespace's, else from Values, and
// the resulting [Config] records in Settings where each value came from
// ([Setting], [Source]). The annotation keys are Linkerd's
// (linkerd.io/inject, config.linkerd.io/*, config.beta.linkerd.io/*,
// config.alpha.linkerd.io/*; see the Annotation constants). An invalid value
// is an [*AnnotationError] naming the object, the annotation and the value;
// all invalid values are reported at once. Every proxy key Linkerd defines
// is either applied or, when it has no meaning for Weft's proxy, produces a
// warning that says why; other config keys warn as unknown.
//
// [Render] takes a pod, its namespace (may be nil) and Values and returns a
// [Patch] and a [Report]. Pods are left alone, with the reason in the report
// ([Reason]), when they are already injected (or carry a container named
// weft-proxy), use the host network, live in kube-system, kube-public or
// kube-node-lease, sit in a namespace labelled
// config.linkerd.io/admission-webhooks=disabled, are disabled or never
// enabled through linkerd.io/inject, or carry another mesh's sidecar
// (ReasonOtherMesh). A pod Linkerd injected is migrated: the patch first
// removes Linkerd's proxy, init container, validator and debug sidecar,
// their volumes and Linkerd's linkerd.io/* metadata (Report.Replaced names
// them). Otherwise the patch adds:
//
//   - the weft-init container (NET_ADMIN, NET_RAW; its arguments carry the
//     proxy ports, skip ports and subnets, the proxy UID and the optional
//     close-wait sysctl), or, with Values.CNIEnabled, the
//     weft-network-validator container that fails the pod when the CNI
//     plugin did not redirect its traffic;
//   - the weft-proxy container, either as a native sidecar (an init
//     container with restartPolicy Always and a startup probe on /ready,
//     placed before the application's init containers) or as the first
//     regular container with a postStart hook that waits for readiness;
//     its environment carries every setting (see the Env constants);
//   - a projected service-account token volume with audience
//     identity.l5d.io, mounted into the proxy;
//   - the weft-debug container when config.linkerd.io/enable-debug-sidecar
//     asks for it;
//   - the label linkerd.io/control-plane-ns (discovery reads it to know a
//     pod is meshed), the owner label linkerd.io/proxy-<kind>, and
//     annotations recording the proxy version, the trust-root digest, the
//     inherited namespace settings and the opaque ports.
//
// Rendering an injected pod again yields an empty patch. Every patch applies
// to the pod as serialized by the API server and the result decodes
// strictly as a Pod; the tests check this with an independent JSON Patch
// library, and fuzz targets check it for arbitrary annotations.
//
// [Uninject] removes Weft's and Linkerd's sidecars from a pod.
//
// [Transformer] implements `weft inject` and `weft uninject`: it reads
// multi-document YAML or JSON (Pods, Deployments, DaemonSets, StatefulSets,
// ReplicaSets, Jobs, CronJobs of batch/v1 and batch/v1beta1,
// ReplicationControllers and v1 Lists of them, whose null items are kept),
// and either adds linkerd.io/inject: enabled to pod templates (the default)
// or, with [WithManual], applies the full patch under the template's path;
// [WithAnnotations] sets config annotations on every injected template and
// namespace (`linkerd inject`'s per-setting flags), and
// [ValuesAnnotations] turns Values into such annotations. Namespaces are
// annotated linkerd.io/inject: enabled and used for inheritance; other
// documents pass through unchanged (byte for byte in YAML output). A
// one-line report per document, followed by the settings set by
// annotations (all of them with [WithVerboseReport]) and warnings, goes to
// the report writer, or JSON lines with [WithJSONReport].
//
// [NamespaceLookup] is the seam through which the webhook reads namespaces;
// [StaticNamespaces] is the in-memory implementation and package
// mesh/inject/kubernetes the informer-backed one.
//
// The package does no I/O except in [ReadInputs], holds no global state
// and never panics on input.
package inject
