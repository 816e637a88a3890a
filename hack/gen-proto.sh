#!/usr/bin/env bash
# gen-proto.sh regenerates the Go code of the proxy API (apis/proxy/<pkg>/)
# from the schema in apis/proto/.
#
# The protoc plugins are built from the versions pinned by go.mod's tool
# directives, so the output depends only on go.mod and on the protoc binary.
# Running it twice changes nothing.
#
# Environment:
#   PROTOC          protoc binary (default: protoc on PATH)
#   PROTOC_INCLUDE  directory holding google/protobuf/*.proto (default: the
#                   include/ directory next to protoc's bin/ directory)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

module="github.com/weftmesh/weft"
protoc="${PROTOC:-protoc}"

if ! command -v "$protoc" >/dev/null 2>&1; then
  echo "gen-proto: protoc not found (install protobuf-compiler or set PROTOC)" >&2
  exit 1
fi

include="${PROTOC_INCLUDE:-$(cd "$(dirname "$(command -v "$protoc")")/../include" 2>/dev/null && pwd || true)}"
if [[ -z "$include" || ! -f "$include/google/protobuf/timestamp.proto" ]]; then
  echo "gen-proto: cannot find google/protobuf/timestamp.proto; set PROTOC_INCLUDE" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$tmp/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc

# Sorted file list, so that the order never depends on the locale.
mapfile -t protos < <(cd apis/proto && LC_ALL=C ls -1 -- *.proto)

# Generate into a scratch tree first, then replace the old files, so a failed
# run leaves the checked-in code untouched.
out="$tmp/out"
mkdir -p "$out"
(
  cd apis/proto
  "$protoc" \
    -I . -I "$include" \
    --plugin=protoc-gen-go="$tmp/protoc-gen-go" \
    --plugin=protoc-gen-go-grpc="$tmp/protoc-gen-go-grpc" \
    --go_out="$out" --go_opt=module="$module" \
    --go-grpc_out="$out" --go-grpc_opt=module="$module" \
    "${protos[@]}"
)

find apis/proxy -mindepth 2 -name '*.pb.go' -delete
cp -R "$out/apis/proxy/." apis/proxy/
echo "gen-proto: generated $(find "$out" -name '*.pb.go' | wc -l) files from ${#protos[@]} protos"
