#!/usr/bin/env bash
# The local single-node Kubernetes cluster (docs/cluster.md): every
# component real, built once from the Go module proxy and cached like the
# API server of hack/kube-testenv.sh; containerd, runc and the CNI plugins
# from Debian.
#
#   hack/cluster.sh build    build what is missing (first time: many minutes)
#   hack/cluster.sh up       build if needed, start the cluster (or find it running)
#   hack/cluster.sh images   build this tree's images and load them into the node
#   hack/cluster.sh down     remove everything up made
#   hack/cluster.sh env      print export KUBECONFIG=... and export PATH=... (for eval)
#   hack/cluster.sh status
#
# WEFT_CLUSTER_NAME (default weft) names the cluster and WEFT_CLUSTER_DIR
# (default ~/.cache/weft/cluster/<name>) holds its state; WEFT_KUBE_CACHE
# (default ~/.cache/weft/kube) holds the binaries. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
export KUBE_VERSION ETCD_VERSION
cache=${WEFT_KUBE_CACHE:-$HOME/.cache/weft/kube}
nodedir="$cache/node-$KUBE_VERSION"
coredns="$cache/coredns-$COREDNS_VERSION"
tools="$cache/cluster-tools"
staging_version="v0.${KUBE_VERSION#v1.}"

log() { echo "cluster: $*" >&2; }

# The node's Kubernetes commands, in ONE go build so that the packages they
# share compile once.
node_commands="kubelet kube-controller-manager kube-scheduler kube-proxy kubectl"

build_node() {
  local c missing=0
  for c in $node_commands; do [ -x "$nodedir/$c" ] || missing=1; done
  [ "$missing" = 0 ] && return 0
  if [ "${WEFT_KUBE_NO_BUILD:-}" = 1 ]; then
    log "$nodedir is not built and WEFT_KUBE_NO_BUILD=1; run: bash hack/cluster.sh build"
    exit 1
  fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  log "building $node_commands $KUBE_VERSION (first time: many minutes)"
  (
    cd "$work"
    go mod init weft.local/kube-node-build >/dev/null 2>&1
    go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
    local modfile
    modfile=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
    # Every staging module kubernetes replaces with ./staging/... is mapped
    # to its published release (as hack/kube-testenv.sh does).
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace "$m=$m@$staging_version"
    done
    local pkgs=""
    { printf 'package main\n\nimport (\n'
      for c in $node_commands; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; pkgs="$pkgs k8s.io/kubernetes/cmd/$c"; done
      printf ')\n\nfunc main() {}\n'; } > pin.go
    go mod tidy >/dev/null 2>&1 || go mod tidy
    rm pin.go
    local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    local vpkg=k8s.io/component-base/version
    rm -rf "$nodedir.tmp"; mkdir -p "$nodedir.tmp"
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X $vpkg.gitVersion=$KUBE_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" \
      -o "$nodedir.tmp/" $pkgs
    rm -rf "$nodedir"; mv "$nodedir.tmp" "$nodedir"
  )
}

# CoreDNS with the plugins a cluster's DNS needs (a main of our own over
# coremain, as CoreDNS documents for custom builds): the cluster domain
# from the API server, cache, health and readiness.
build_coredns() {
  [ -x "$coredns" ] && return 0
  if [ "${WEFT_KUBE_NO_BUILD:-}" = 1 ]; then
    log "$coredns is not built and WEFT_KUBE_NO_BUILD=1; run: bash hack/cluster.sh build"
    exit 1
  fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  log "building coredns $COREDNS_VERSION"
  (
    cd "$work"
    go mod init weft.local/coredns-build >/dev/null 2>&1
    go mod edit -require "github.com/coredns/coredns@$COREDNS_VERSION"
    cat > main.go <<'EOF'
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
EOF
    go mod tidy >/dev/null 2>&1 || go mod tidy
    mkdir -p "$cache"
    CGO_ENABLED=0 go build -trimpath -o "$coredns.tmp" .
    mv "$coredns.tmp" "$coredns"
  )
}

# The cluster command and the sandbox's pause program, from this tree.
build_tools() {
  mkdir -p "$tools"
  CGO_ENABLED=0 go build -trimpath -o "$tools/" ./hack/cluster ./hack/cluster/pause
}

build_all() {
  bash hack/kube-testenv.sh build
  build_node
  build_coredns
}

state_dir() {
  local name=${WEFT_CLUSTER_NAME:-weft}
  echo "${WEFT_CLUSTER_DIR:-$HOME/.cache/weft/cluster/$name}"
}

case "${1:-}" in
  build)
    build_all
    ;;
  up)
    build_all
    build_tools
    exec "$tools/cluster" up \
      --etcd "$cache/etcd-$ETCD_VERSION" --apiserver "$cache/kube-apiserver-$KUBE_VERSION" \
      --node-dir "$nodedir" --coredns "$coredns" --pause "$tools/pause"
    ;;
  images)
    build_tools
    "$tools/cluster" status >/dev/null
    out="$(state_dir)/images"
    go run ./hack/imagebuild --out "$out" --tag "${WEFT_IMAGE_TAG:-dev}"
    exec "$tools/cluster" load "$out/images.tar"
    ;;
  down|env|status)
    build_tools
    exec "$tools/cluster" "$1"
    ;;
  *)
    echo "usage: $0 build|up|images|down|env|status" >&2
    exit 2
    ;;
esac
