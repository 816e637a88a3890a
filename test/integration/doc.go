// Package integration runs Weft's Kubernetes-facing code against a real
// kube-apiserver and etcd started on loopback by internal/testutil/kubeenv.
//
// The tests are behind the build tag kubeintegration, so `go test ./...`
// does not start a control plane. Run them with
//
//	make test-kube
//
// which is
//
//	go test -tags kubeintegration -race -timeout 30m ./test/integration/...
//
// One API server serves the whole package (TestMain starts it); each test
// works in namespaces of its own. What the suite covers, how long it takes and
// how to get the binaries are in docs/testing-kube.md.
//
// Outside CI, the tests skip when the binaries cannot be found or built
// (the skip message says why); with CI=true they fail instead. A control
// plane that is found but does not start always fails.
package integration
