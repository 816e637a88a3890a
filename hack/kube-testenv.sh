#!/usr/bin/env bash
# Builds (once) and prints the paths of a real kube-apiserver and etcd for
# Weft's integration tests. The binaries are built from the Go module proxy
# in scratch modules and cached in $WEFT_KUBE_CACHE (default
# ~/.cache/weft/kube); later runs reuse them and take seconds.
#
#   hack/kube-testenv.sh build     build what is missing, print nothing else on success
#   hack/kube-testenv.sh env       build if needed, then print WEFT_KUBE_APISERVER=... and WEFT_ETCD=...
#
# With WEFT_KUBE_NO_BUILD=1 a missing binary is an error instead of a build
# (for callers that must not spend many minutes building).
#
# The first build of kube-apiserver takes about 15-25 minutes on 2 cores.
# internal/testutil/kubeenv runs `env` when WEFT_KUBE_APISERVER and WEFT_ETCD
# are not set; `make test-kube` runs the suite that uses it
# (docs/testing-kube.md).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
cache=${WEFT_KUBE_CACHE:-$HOME/.cache/weft/kube}
apiserver="$cache/kube-apiserver-$KUBE_VERSION"
etcd="$cache/etcd-$ETCD_VERSION"

# Staging modules ship with the same minor as kubernetes: v1.37.2 -> v0.37.2.
staging_version="v0.${KUBE_VERSION#v1.}"

log() { echo "kube-testenv: $*" >&2; }

missing() {
  if [ "${WEFT_KUBE_NO_BUILD:-}" = 1 ]; then
    log "$1 is not built ($2) and WEFT_KUBE_NO_BUILD=1; run: bash hack/kube-testenv.sh build"
    exit 1
  fi
}

build_apiserver() {
  [ -x "$apiserver" ] && return 0
  missing kube-apiserver "$apiserver"
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  log "building kube-apiserver $KUBE_VERSION (first time: many minutes)"
  (
    cd "$work"
    go mod init weft.local/kube-apiserver-build >/dev/null 2>&1
    go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
    local modfile
    modfile=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
    # Every staging module kubernetes replaces with ./staging/... is mapped
    # to its published release.
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace "$m=$m@$staging_version"
    done
    printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\nfunc main() {}\n' > pin.go
    go mod tidy >/dev/null 2>&1 || go mod tidy
    rm pin.go
    mkdir -p "$cache"
    # Stamp the release version, as Kubernetes' own build does, so that
    # /version and clients that check the server version see v1.37.x
    # instead of v0.0.0-master.
    local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    local vpkg=k8s.io/component-base/version
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X $vpkg.gitVersion=$KUBE_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
      -o "$apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
    mv "$apiserver.tmp" "$apiserver"
  )
}

build_etcd() {
  [ -x "$etcd" ] && return 0
  missing etcd "$etcd"
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  log "building etcd $ETCD_VERSION"
  (
    cd "$work"
    go mod init weft.local/etcd-build >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    printf 'package main\n\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\n\nfunc main() {}\n' > pin.go
    go mod tidy >/dev/null 2>&1 || go mod tidy
    rm pin.go
    mkdir -p "$cache"
    CGO_ENABLED=0 go build -trimpath -o "$etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$etcd.tmp" "$etcd"
  )
}

case "${1:-env}" in
  build)
    build_etcd
    build_apiserver
    ;;
  env)
    build_etcd
    build_apiserver
    echo "WEFT_KUBE_APISERVER=$apiserver"
    echo "WEFT_ETCD=$etcd"
    ;;
  *)
    echo "usage: $0 build|env" >&2
    exit 2
    ;;
esac
