// Package check verifies a cluster against what package install renders:
// it is `weft check`. Each check yields a [Result] (ok, warning, fail or
// skipped) with a message and, when something is wrong, a hint saying what
// to do; a [Report] fails when any check failed.
//
//	kube, _ := kubernetes.NewForConfig(cfg)     // k8s.io/client-go
//	ext, _ := apiextclient.NewForConfig(cfg)    // apiextensions clientset, for the CRDs
//	c, err := check.New(kube, ext, check.WithNamespace("weft"))
//	report := c.Check(ctx, check.Scope{Proxy: true})
//	report.WriteText(os.Stdout)
//	if !report.Success { ... }
//
// # What is checked
//
// Always (category kubernetes-api): the API server answers, and runs
// Kubernetes 1.29 or later (a warning otherwise: native sidecars need it).
// If the API server does not answer, nothing else runs.
//
// With Scope.Pre (category pre-install), before an install: the
// control-plane namespace does not exist yet; SelfSubjectAccessReviews
// show that the caller may create every kind the install holds; CRDs
// already present (from Linkerd, say) have the versions Weft serves and the
// same storage version.
//
// Otherwise, against an installed control plane:
//
//   - crds: each CRD Weft ships is installed, Established, serves every
//     version Weft serves and stores the same version;
//   - control-plane: the namespace exists (if not, the checks below are
//     not run), the weft-config Values parse, and each component's
//     Deployment has as many ready pods as replicas. When it has none, the
//     message says why from the Deployment's status (never processed by a
//     controller, a ReplicaFailure); a pod that is not ready is described
//     from its status (phase, scheduling, waiting or crashing containers);
//   - identity: the trust anchors parse, are CAs and are valid; the issuer
//     Secret (either layout) holds a CA whose key matches and which chains
//     to the anchors. Less than 30 days of validity is a warning, an
//     expired certificate a failure;
//   - webhooks: the injector's serving certificate is valid for
//     <service>.<namespace>.svc; each webhook configuration points at a
//     Service that exists, exposes the port and has ready endpoints
//     (EndpointSlices), and its caBundle trusts the serving certificate;
//   - data-plane, with Scope.Proxy: every pod labelled
//     linkerd.io/control-plane-ns=<namespace>, in any namespace, has a ready
//     weft-proxy container (native sidecar or classic), runs the proxy image
//     the Values name (a warning otherwise) and was injected with the
//     current trust roots (linkerd.io/trust-root-sha256; a warning
//     otherwise). The proxies' own certificate expiry is not read.
//
// # Waiting
//
// Right after an install the pods are still starting. A failure caused
// only by something not ready yet is marked [Result].NotReady: a
// component's pods not ready (or not created yet), a webhook Service
// without ready endpoints, meshed pods whose proxy is not ready. [Wait]
// runs the checks again every 5s (DefaultPollInterval) while every failure
// is NotReady, up to a deadline (`weft check --wait`, 5m by default as in
// `linkerd check`); any other failure (a missing CRD or object, a refused
// request, a bad certificate) ends the wait at once.
//
//	rep := check.Wait(ctx, c, check.Scope{}, check.DefaultWait,
//		check.OnWait(func(r check.Report, left time.Duration) { ... }))
//
// The checker only reads (plus the access reviews). Reading the issuer and
// webhook Secrets needs get on Secrets in the control-plane namespace; the
// data-plane checks list pods cluster-wide.
package check
