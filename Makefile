# Weft's everyday commands. `make test` is the test command CI runs.
GO ?= go
GOTEST_TIMEOUT ?= 40m
FUZZTIME ?= 5s

# The version stamped into the binaries (weft version): the nearest v* tag,
# "dev" without one. `make binaries VERSION=v0.1.0` for a release.
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/weftmesh/weft/internal/cli/core.Version=$(VERSION)

.PHONY: all build binaries docs-cli check-docs-cli test unit fuzz-smoke test-stress test-kube kube-binaries vet lint fmt-check generate check-generated demo \
	cluster-binaries cluster-up cluster-images cluster-down test-cluster
.PHONY: docs-graph docs-graph-check bench-attack

all: build

build:
	$(GO) build ./...

# The five binaries, version-stamped, into bin/.
binaries:
	$(GO) build -tags grpcnotrace -ldflags "$(LDFLAGS)" -o bin/ ./cmd/weft ./cmd/weft-controller ./cmd/weft-proxy ./cmd/weft-init ./cmd/weft-policy

# Regenerate the CLI reference (docs/cli/) from the command trees.
docs-cli:
	$(GO) run ./hack/gen-cli-docs docs/cli

# Fails when docs/cli/ is stale (the same check runs as a test in ./hack/gen-cli-docs).
check-docs-cli: docs-cli
	@if [ -n "$$(git status --porcelain -- docs/cli)" ]; then echo "docs/cli is stale; run 'make docs-cli' and commit:"; git status --porcelain -- docs/cli; exit 1; fi

# The test command: every package under the race detector, each fuzz target
# for a few seconds, then the integration suite against a real kube-apiserver
# and etcd (built once from the Go module proxy and cached; see
# docs/testing-kube.md).
test: kube-binaries unit fuzz-smoke test-kube

unit:
	$(GO) test -race -timeout $(GOTEST_TIMEOUT) ./...

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) bash hack/fuzz-smoke.sh

# The packages that start goroutines, -race -count=3, while stress-ng keeps
# every core busy (hack/test-stress.sh; STRESS_PKGS, STRESS_CPUS,
# STRESS_COUNT). Needs stress-ng; installs nothing.
test-stress:
	GO=$(GO) GOTEST_TIMEOUT=$(GOTEST_TIMEOUT) bash hack/test-stress.sh

# Builds (first time only, many minutes) the kube-apiserver and etcd binaries.
kube-binaries:
	bash hack/kube-testenv.sh build

test-kube: kube-binaries
	$(GO) test -count=1 -tags kubeintegration -race -timeout 30m ./test/integration/... ./internal/testutil/kubeenv/...

# The local single-node cluster (docs/cluster.md): real kubelet, control
# plane, CoreDNS, containerd; needs root. The first build of the Kubernetes
# binaries takes many minutes; they are cached in ~/.cache/weft/kube.
cluster-binaries:
	bash hack/cluster.sh build

cluster-up:
	bash hack/cluster.sh up

# Builds this tree's images (hack/imagebuild) and loads them into the node.
cluster-images:
	bash hack/cluster.sh images

cluster-down:
	bash hack/cluster.sh down

# Weft end to end on the local cluster (after cluster-up and cluster-images).
test-cluster:
	$(GO) test -count=1 -tags clusterintegration -race -timeout 45m -v ./test/cluster/...

# The tagged suites (kube-apiserver, real node) are vetted too, so a
# renamed API cannot break them unseen until their own run.
vet:
	$(GO) vet ./...
	$(GO) vet -tags kubeintegration,clusterintegration ./...

# staticcheck (staticcheck.conf says which checks are on and why) over the
# plain build and the tagged suites, as `make vet` does, so a suite cannot
# rot unseen. CI installs the version .ci/run names (go install).
STATICCHECK ?= staticcheck
lint:
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags kubeintegration,clusterintegration ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Regenerate everything generated (proxy API Go code, deepcopy, CRD manifests).
generate:
	bash hack/gen-proto.sh
	bash hack/gen-crds.sh

# Fails when `make generate` changes any checked-in file.
check-generated: generate
	@if [ -n "$$(git status --porcelain -- apis)" ]; then echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- apis; git --no-pager diff --stat -- apis; exit 1; fi

demo:
	$(GO) run ./cmd/weft demo

# The package graph in docs/architecture.md, generated from `go list`.
docs-graph:
	$(GO) run ./hack/docs-graph

docs-graph-check:
	$(GO) run ./hack/docs-graph -check

# The proxy under hostile clients (issue 27): victims' latency and the
# proxies' memory under each attack (bench/attack.sh; ATTACK_ARGS, e.g.
# ATTACK_ARGS='--attack pool-trickle --duration 5s --rounds 1').
bench-attack:
	GO=$(GO) bash bench/attack.sh $(ATTACK_ARGS)
