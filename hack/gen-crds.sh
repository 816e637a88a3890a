#!/usr/bin/env bash
# Regenerates the deep-copy functions of the CRD Go types and the CRD
# manifests in apis/crds from the kubebuilder markers, with the
# controller-gen pinned in go.mod. Run from anywhere; the output depends only
# on the sources and the pinned tool, so running it twice changes nothing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Packages holding CRD types.
paths=(
	./apis/policy/v1alpha1
	./apis/policy/v1beta1
	./apis/policy/v1beta2
	./apis/policy/v1beta3
	./apis/serviceprofile/v1alpha2
)
path_args=()
for p in "${paths[@]}"; do
	path_args+=("paths=$p")
done

# Deep-copy functions (zz_generated.deepcopy.go in each package).
go tool controller-gen object "${path_args[@]}"

# CRD manifests: one file per CRD, all versions of a kind in one file.
# allowDangerousTypes admits ServiceProfile's float retryRatio, as Linkerd's
# schema does.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
go tool controller-gen crd:crdVersions=v1,allowDangerousTypes=true \
	"${path_args[@]}" output:crd:dir="$out"

# Replace the manifests only after generation succeeded, and drop manifests of
# CRDs that no longer exist.
find apis/crds -maxdepth 1 -name '*.yaml' -delete
cp "$out"/*.yaml apis/crds/

gofmt -w apis/policy apis/serviceprofile
