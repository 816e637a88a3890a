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
// all invalid values are reported at once. Annotations Weft does not act on
// produce warnings instead of silence.
//
// [Render] takes a pod, its namespace (may be nil) and Values and returns a
// [Patch] and a [Report]. Pods are left alone, with the reason in the report
// ([Reason]), when they are already injected (or carry a container named
// weft-proxy), use the host network, live in kube-system, kube-public or
// kube-node-lease, sit in a namespace labelled
// config.linkerd.io/admission-webhooks=disabled, or are disabled or never
// enabled through linkerd.io/inject. Otherwise the patch adds:
//
//   - the weft-init container (NET_ADMIN, NET_RAW; its arguments carry the
//     proxy ports, skip ports and proxy UID), unless
//     Values.CNIEnabled;
//   - the weft-proxy container, either as a native sidecar (an init
//     container with restartPolicy Always and a startup probe on /ready,
//     placed before the application's init containers) or as the first
//     regular container with a postStart hook that waits for readiness;
//     its environment carries every setting (see the Env constants);
//   - a projected service-account token volume with audience
//     identity.l5d.io, mounted into the proxy;
//   - the label linkerd.io/control-plane-ns (discovery reads it to know a
//     pod is meshed) and annotations recording the proxy version, the
//     trust-root digest, the inherited namespace settings and the opaque
//     ports.
//
// Rendering an injected pod again yields an empty patch. Every patch applies
// to the pod as serialized by the API server and the result decodes
// strictly as a Pod; the tests check this with an independent JSON Patch
// library, and fuzz targets check it for arbitrary annotations.
//
// [Transformer] implements `weft inject`: it reads multi-document YAML or
// JSON (Pods, Deployments, DaemonSets, StatefulSets, ReplicaSets, Jobs,
// CronJobs, ReplicationControllers and v1 Lists of them), and either adds
// linkerd.io/inject: enabled to pod templates (the default) or, with
// [WithManual], applies the full patch under the template's path. Other
// documents pass through unchanged (byte for byte in YAML output).
// Namespaces in the input are used for inheritance. A one-line report per
// workload, followed by the settings set by annotations (all of them with
// [WithVerboseReport]) goes to the report writer, or JSON lines with
// [WithJSONReport].
//
// [NamespaceLookup] is the seam through which the webhook reads namespaces;
// [StaticNamespaces] is the in-memory implementation and package
// mesh/inject/kubernetes the informer-backed one.
//
// The package does no I/O except in [ReadInputs], holds no global state
// and never panics on input.
package inject
