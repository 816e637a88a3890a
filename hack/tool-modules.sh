#!/usr/bin/env bash
# tool-modules.sh PKG...: how many modules `go get -tool PKG` adds to the
# go.mod of a fresh user module, for each command package PKG of this
# repository (the working tree, through a replace directive). This is what
# a user who runs a Weft command with `go tool` carries in their go.mod.
#
#   hack/tool-modules.sh github.com/weftmesh/weft/cmd/weft-policy github.com/weftmesh/weft/cmd/weft
#
# Offline, from the module cache: GOPROXY=off GOSUMDB=off hack/tool-modules.sh ...
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel)
for pkg in "$@"; do
	d=$(mktemp -d)
	trap 'rm -rf "$d"' EXIT
	cat >"$d/go.mod" <<MOD
module example.com/app

go 1.26.0

require github.com/weftmesh/weft v0.0.0-00010101000000-000000000000

replace github.com/weftmesh/weft => $ROOT
MOD
	(cd "$d" && GOFLAGS=-mod=mod go get -tool "$pkg" >/dev/null)
	n=$(cd "$d" && go mod edit -json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("Require") or []))')
	echo "$pkg: $n modules in the user's go.mod (Weft included)"
	rm -rf "$d"
	trap - EXIT
done
