#!/usr/bin/env bash
# proxy-footprint.sh REV...: for each git revision, build cmd/weft-proxy as
# it was at that revision and report the binary's size, how many Go
# packages and modules it links, and its resident memory once it idles
# (VmRSS and RssAnon from /proc/PID/status) with a static configuration:
# one workload certificate, one inbound port with a policy, admin on
# loopback, no traffic. Everything listens on 127.0.0.1 only; the
# temporary directory and every process are removed on exit.
#
#   hack/proxy-footprint.sh 0c18f88 HEAD
#
# The certificates come from bench/cmd/weftbench of the working tree.
set -euo pipefail

if [ $# -eq 0 ]; then
	echo "usage: hack/proxy-footprint.sh REV..." >&2
	exit 2
fi
ROOT=$(git rev-parse --show-toplevel)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	for d in "$WORK"/src-*; do [ -d "$d" ] && git -C "$ROOT" worktree remove --force "$d" >/dev/null 2>&1 || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ID=web.shop.serviceaccount.identity.linkerd.cluster.local
(cd "$ROOT" && go run ./bench/cmd/weftbench pki -out "$WORK/pki" -name "web=$ID") >/dev/null
APP=$(free_port)
cat >"$WORK/static.yaml" <<EOF
identity: {name: $ID, certificate: $WORK/pki/web.crt, key: $WORK/pki/web.key, trustAnchors: $WORK/pki/roots.pem}
policies:
  "$APP":
    protocol: {detect: {timeout: 10s}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: $ID}]}}}
EOF

printf '| revision | binary (bytes) | packages linked | modules linked | VmRSS idle (kB) | RssAnon idle (kB) |\n|---|---|---|---|---|---|\n'
for rev in "$@"; do
	sha=$(git -C "$ROOT" rev-parse --short "$rev")
	src="$WORK/src-$sha"
	git -C "$ROOT" worktree add --detach "$src" "$sha" >/dev/null 2>&1
	(cd "$src" && go build -trimpath -o "$WORK/weft-proxy-$sha" ./cmd/weft-proxy)
	size=$(stat -c %s "$WORK/weft-proxy-$sha")
	npkg=$(go version -m "$WORK/weft-proxy-$sha" >/dev/null && cd "$src" && go list -deps ./cmd/weft-proxy | wc -l)
	nmod=$(go version -m "$WORK/weft-proxy-$sha" | awk '$1 == "dep"' | wc -l)
	in=$(free_port)
	admin=$(free_port)
	WEFT_PROXY_LOG_LEVEL=warn "$WORK/weft-proxy-$sha" run --static "$WORK/static.yaml" \
		--inbound-addr "127.0.0.1:$in" --outbound-addr off --admin-addr "127.0.0.1:$admin" \
		--inbound-ports "$APP" >"$WORK/log-$sha" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	ready=""
	for _ in $(seq 150); do
		if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin/ready"; then ready=1; break; fi
		sleep 0.1
	done
	if [ -z "$ready" ]; then
		echo "weft-proxy at $sha did not become ready:" >&2
		cat "$WORK/log-$sha" >&2
		exit 1
	fi
	sleep 3 # let start-up garbage settle; this is a measurement, not a test
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
	anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	printf '| %s | %s | %s | %s | %s | %s |\n' "$sha" "$size" "$npkg" "$nmod" "$rss" "$anon"
done
