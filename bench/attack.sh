#!/usr/bin/env bash
# bench/attack.sh: the proxy under hostile clients (issue 27). Builds
# weft-proxy (as the image is built) and weftbench, then runs
# `weftbench attack`: for each attack, fresh weft-proxy processes on
# 127.0.0.1, a victim's latency without and with the attack (alternated,
# --rounds times) and the proxies' memory sampled every 50 ms, as a
# markdown table on stdout and in bench/results/<date>-attack.md.
#
#   bench/attack.sh                              every attack, 10 s per phase, 3 rounds
#   bench/attack.sh --attack pool-trickle --duration 5s --rounds 1
#   bench/attack.sh --pin ...                    the attacker process on the last CPU, everything else on the others
#   bench/attack.sh --help                       weftbench attack's flags
#
# Every attacker is bounded in frames, connections and time and stops by
# itself at the end of its window; all traffic is on 127.0.0.1.
# Environment: WEFT_PROXY_BIN uses a prebuilt weft-proxy; GO (default go).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/weft-attack-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT

(cd "$ROOT" && "$GO" build -o "$BIN/weftbench" ./bench/cmd/weftbench)
if [ -n "${WEFT_PROXY_BIN:-}" ]; then
	cp "$WEFT_PROXY_BIN" "$BIN/weft-proxy"
else
	(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$BIN/weft-proxy" ./cmd/weft-proxy)
fi

args=()
pin=0
have_out=0
for a in "$@"; do
	case $a in
	--pin) pin=1; continue ;;
	-h | --help | -help)
		"$BIN/weftbench" attack -help 2>&1 | sed '/-proxy-bin/,+1d'
		echo "Make target: make bench-attack ATTACK_ARGS='--attack pool-trickle --rounds 1'"
		exit 0 ;;
	-out | --out | -out=* | --out=*) have_out=1 ;;
	esac
	args+=("$a")
done
if [ "$have_out" = 0 ]; then
	args+=(-out "$ROOT/bench/results/$(date +%Y-%m-%dT%H%M%S)-attack.md")
fi
if [ "$pin" = 1 ]; then
	# The attacker (a child process of its own) on the last CPU, the
	# proxies, victims and application on the others: an attacker on
	# another machine, as far as one machine allows.
	last=$(($(nproc) - 1))
	if [ "$last" -lt 1 ]; then
		echo "attack.sh: --pin needs at least 2 CPUs" >&2
		exit 2
	fi
	taskset -c "0-$((last - 1))" "$BIN/weftbench" attack -proxy-bin "$BIN/weft-proxy" -attacker-cpus "$last" "${args[@]}"
else
	"$BIN/weftbench" attack -proxy-bin "$BIN/weft-proxy" "${args[@]}"
fi
