// Package kubeenv runs a real Kubernetes control plane, etcd and
// kube-apiserver, on loopback for Weft's integration tests, the way
// controller-runtime's envtest does for operators.
//
// # What Start gives you
//
// Start launches etcd (plain HTTP on 127.0.0.1, data in a temporary
// directory, fsync off) and kube-apiserver on a free loopback port, and
// returns once the API server answers /readyz. The API server is set up so
// that everything Weft touches works as on a real cluster:
//
//   - HTTPS with a serving certificate made at run time by internal/testutil
//     for 127.0.0.1 and localhost; Env.CAPEM returns its CA for clients and
//     for webhook configurations that point back at the test;
//   - an admin identity in system:masters (a bearer token from a static token
//     file) and RBAC authorization, so the admin may do everything and other
//     identities only what RBAC grants them;
//   - a service-account signing key and issuer, so TokenRequest and
//     TokenReview work (tokens are checked against existing service accounts);
//   - --endpoint-reconciler-type=none, because there is no node network: the
//     API server does not try to publish its own address;
//   - the default admission plugins, including ServiceAccount (pods need
//     their service account to exist: create "default" in namespaces that run
//     pods, as the controller manager would) and the admission webhooks.
//
// No controller manager, scheduler or kubelet runs: objects are stored and
// watched, but Deployments make no Pods, Pods get no IPs unless a test sets
// their status, and namespaces get no default service account.
//
// Env.Config returns an admin *rest.Config; Env.KubeconfigPath a kubeconfig
// file for kubectl-like tools. Stop terminates both processes (SIGTERM, then
// SIGKILL after a grace period) and removes the temporary directory.
//
// # One control plane per test package
//
// Starting takes several seconds, so a package starts one Env in TestMain and
// shares it; tests keep out of each other's way by working in their own
// namespaces:
//
//	var env *kubeenv.Env
//
//	func TestMain(m *testing.M) {
//		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
//		e, err := kubeenv.Start(ctx)
//		cancel()
//		...
//		code := m.Run()
//		_ = e.Stop()
//		os.Exit(code)
//	}
//
// New is the one-test form: it fails the test when the control plane cannot
// start and stops it when the test ends.
//
// # Where the binaries come from
//
// FindBinaries looks, in order, at WithBinaries, at the environment variables
// WEFT_KUBE_APISERVER and WEFT_ETCD, and finally runs the repository's
// hack/kube-testenv.sh, which builds both from the Go module proxy once
// (many minutes on two cores) and caches them in ~/.cache/weft/kube. A
// variable that names a missing or non-executable file is an error, never a
// silent fallback.
//
// Run `bash hack/kube-testenv.sh env` once to build the binaries and print
// the variables to export.
//
// # Failure reports
//
// When a process exits or does not become ready in time, the error carries
// the last lines of its log. With WithProcessOutput the full logs of both
// processes are copied to a writer as well.
package kubeenv
