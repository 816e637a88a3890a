// Package install renders the Kubernetes objects of a Weft control plane:
// what `weft install` prints and `kubectl apply` creates. It is a pure
// renderer over typed objects (k8s.io/api, apiextensions), never text
// templates, and the same inputs always give the same bytes.
//
// # Inputs
//
// [Render] takes three things:
//
//   - an [inject.Values]: the one settings type the injector also reads
//     (the install writes it, with the trust anchors, into the weft-config
//     ConfigMap under values.yaml);
//   - [Certificates]: the identity trust anchors and issuer, and the
//     webhook CA with the injector's serving certificate;
//   - options: [WithHA], [WithControllerImage],
//     [WithControllerImagePullPolicy], [WithIssuanceLifetime],
//     [WithClockSkewAllowance], [WithIssuerScheme], [WithClock].
//
// [FromLinkerdValues] maps a values file of Linkerd's linkerd-control-plane
// Helm chart onto Values and the identity settings above, and lists every
// key it did not map with the reason (`weft install --linkerd-values`).
//
// Certificates come from files ([LoadIdentity], [LoadWebhook]) or are made
// fresh ([GenerateIdentity], [GenerateWebhook]). Generated certificates are
// random, so two runs that generate them differ in those bytes; with the
// same certificates given, the output is byte-for-byte identical:
//
//	id, err := install.LoadIdentity("ca.crt", "issuer/")
//	hook, err := install.LoadWebhook("webhook/")
//	m, err := install.Render(values, install.Certificates{Identity: id, Webhook: hook})
//	for _, w := range m.Warnings { log.Print(w) } // certificates close to expiry
//	yaml, err := m.YAML()
//
// Render checks everything before it renders anything and reports every
// problem at once, each naming its input: a Values field, a trust anchor
// that is not a CA, an issuer that does not chain to the anchors or has
// expired, a key that does not match its certificate, a webhook certificate
// not valid for <injector service>.<namespace>.svc.
//
// # What is rendered
//
// In apply order (kind, then name):
//
//	CustomResourceDefinition   the policy.linkerd.io and linkerd.io CRDs (apis/crds); CRDs() alone is `weft install --crds`
//	Namespace                  the control-plane namespace, labelled config.linkerd.io/admission-webhooks=disabled
//	ServiceAccount             weft-identity, weft-destination, weft-policy, weft-proxy-injector
//	ClusterRole(Binding)       weft-<ns>-<component>, exactly the verbs each component uses (see Rules)
//	ConfigMap                  weft-config (values.yaml), weft-identity-trust-roots (ca-bundle.crt)
//	Secret                     weft-identity-issuer (kubernetes.io/tls or linkerd.io/tls layout), weft-proxy-injector-tls
//	Service                    weft-identity-headless :8080, weft-dst-headless :8086, weft-policy :8090 (headless, what proxies dial), weft-proxy-injector :443
//	Deployment                 weft-identity, weft-destination, weft-policy, weft-proxy-injector (all weft-controller)
//	PodDisruptionBudget        one per Deployment, with WithHA
//	MutatingWebhookConfiguration    weft-proxy-injector-webhook-config (pods, CREATE)
//	ValidatingWebhookConfiguration  weft-sp-validator-webhook-config, weft-policy-validator-webhook-config
//
// The policy controller runs as its own Deployment rather than as a second
// container beside destination (Linkerd's layout): each component then has
// its own service account holding only what that component reads. The
// control-plane pods are not meshed; they run as a non-root user with a
// read-only root file system and satisfy the "restricted" Pod Security
// level, which the namespace enforces.
//
// The webhooks skip kube-system, kube-public, kube-node-lease and every
// namespace labelled config.linkerd.io/admission-webhooks=disabled, and the
// injector never touches pods that carry the control-plane component label.
// Their failurePolicy is Ignore (pods start without a proxy while the
// injector is down); WithHA makes it Fail and runs three replicas of each
// component spread over nodes, with PodDisruptionBudgets.
//
// # Serialization
//
// [Manifest.YAML] writes each object through its Go type and JSON, so the
// field names and types are the API's own, with keys sorted and the fields
// the API server owns (status, a null creationTimestamp) left out.
// [Decode] reads such a stream back strictly against the Kubernetes scheme
// ([Scheme]): an unknown kind, an unknown or duplicated field or a value of
// the wrong type is an error.
//
// Package install/check holds `weft check`, which verifies a cluster
// against what this package renders.
package install
