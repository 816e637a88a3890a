#!/usr/bin/env bash
# bench/run.sh: whole-process benchmark of the Weft proxy pair against
# direct connections and against HAProxy, NGINX and a plain Go
# httputil.ReverseProxy pair, all on loopback, in one run.
#
#   bench/run.sh                full run (10 s per point), table to stdout and
#                               bench/results/<date>.md
#   bench/run.sh --quick        short smoke run (2 s per point, fewer idle
#                               connections)
#   bench/run.sh --l4-only      only the layer-4 part (issue 7)
#   bench/run.sh --http-only    only the HTTP/gRPC part (issue 8)
#   bench/run.sh --help         all options
#
# It installs nothing: it checks that haproxy, nginx, wrk, vegeta and ghz
# exist and says what is missing (the parts needing a missing tool are
# skipped). Every process it starts is stopped on exit; every load is
# bounded in time; all traffic is on 127.0.0.1.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONF="$ROOT/bench/conf"

QUICK=0
DO_L4=1
DO_HTTP=1
DUR=""
IDLE_CONNS=""
OUT=""
KEEP=0
ROUNDS=""
BASE_PORT=17000
H2HOP=0
COMMAND_LINE="bench/run.sh $*"

usage() {
	cat <<'EOF'
Usage: bench/run.sh [--quick] [--l4-only | --http-only] [--duration SECONDS]
                    [--rounds N] [--idle-conns N] [--out FILE] [--base-port PORT] [--keep]
                    [--h2hop]

  --quick           2 s per load point, 1 round, 200 idle connections (smoke run)
  --l4-only         only TCP: direct, Weft pair (mTLS), HAProxy pair (TLS)
  --http-only       only HTTP/1.1 and gRPC: direct, Weft, HAProxy, NGINX, Go ReverseProxy
  --duration S      seconds per load point (default 10, --quick 2)
  --rounds N        run every load point N times, interleaved; tables show the
                    median of the rounds (default 3, --quick 1)
  --idle-conns N    idle connections for the memory-per-connection figure (default 1000)
  --out FILE        where to write the markdown (default bench/results/<date>.md)
  --base-port P     first of the loopback ports used (default 17000; P..P+500)
  --keep            keep the work directory (logs, configs, raw load output)
  --h2hop           HTTP section: add a second Weft client proxy, in front of the
                    same server proxy, that carries HTTP/1.1 to it over the
                    HTTP/2 hop (WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2=true), measured
                    in the same rounds as the default HTTP/1.1 hop

Environment: WEFT_PROXY_BIN uses a prebuilt weft-proxy instead of building
./cmd/weft-proxy (built as the image is: CGO_ENABLED=0 -trimpath -tags grpcnotrace);
GO (default go) is the Go command.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--l4-only) DO_HTTP=0 ;;
	--http-only) DO_L4=0 ;;
	--duration) DUR=${2:?--duration needs a value}; shift ;;
	--idle-conns) IDLE_CONNS=${2:?--idle-conns needs a value}; shift ;;
	--rounds) ROUNDS=${2:?--rounds needs a value}; shift ;;
	--out) OUT=${2:?--out needs a value}; shift ;;
	--base-port) BASE_PORT=${2:?--base-port needs a value}; shift ;;
	--keep) KEEP=1 ;;
	--h2hop) H2HOP=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$DO_L4" = 0 ] && [ "$DO_HTTP" = 0 ]; then
	echo "run.sh: --l4-only and --http-only exclude each other" >&2
	exit 2
fi
if [ -z "$DUR" ]; then
	if [ "$QUICK" = 1 ]; then DUR=2; else DUR=10; fi
fi
if [ -z "$IDLE_CONNS" ]; then
	if [ "$QUICK" = 1 ]; then IDLE_CONNS=200; else IDLE_CONNS=1000; fi
fi
if [ -z "$ROUNDS" ]; then
	if [ "$QUICK" = 1 ]; then ROUNDS=1; else ROUNDS=3; fi
fi
for v in DUR IDLE_CONNS BASE_PORT ROUNDS; do
	if ! [[ ${!v} =~ ^[0-9]+$ ]]; then
		echo "run.sh: ${v} must be a whole number, got ${!v}" >&2
		exit 2
	fi
done
if [ "$DUR" -lt 1 ] || [ "$DUR" -gt 120 ]; then
	echo "run.sh: --duration must be 1..120 seconds" >&2
	exit 2
fi
if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 9 ]; then
	echo "run.sh: --rounds must be 1..9" >&2
	exit 2
fi
if [ "$IDLE_CONNS" -lt 10 ] || [ "$IDLE_CONNS" -gt 3000 ]; then
	# HAProxy runs with maxconn 4000; keep below it.
	echo "run.sh: --idle-conns must be 10..3000" >&2
	exit 2
fi
if [ "$BASE_PORT" -lt 1024 ] || [ "$BASE_PORT" -gt 64000 ]; then
	echo "run.sh: --base-port must be 1024..64000" >&2
	exit 2
fi
STAMP=$(date +%Y-%m-%dT%H%M%S)
if [ -z "$OUT" ]; then
	suffix=""
	[ "$QUICK" = 1 ] && suffix="-quick"
	OUT="$ROOT/bench/results/${STAMP}${suffix}.md"
fi

# ---------------------------------------------------------------- plumbing

WORK=$(mktemp -d "${TMPDIR:-/tmp}/weft-bench.XXXXXX")
chmod 755 "$WORK"
mkdir -p "$WORK/bin" "$WORK/log" "$WORK/raw" "$WORK/pki" "$WORK/conf"
PIDS=()

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# stop_pid PID...: SIGTERM, up to 5 s to exit, then SIGKILL; reaps them.
stop_pid() {
	local pid i
	for pid in "$@"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "$@"; do
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local alive=() pid
	for pid in "${PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null && alive+=("$pid")
	done
	[ ${#alive[@]} -gt 0 ] && stop_pid "${alive[@]}"
	if [ "$KEEP" = 1 ]; then
		log "work directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# logf NAME: the log file of a process started by spawn in this section.
SECTION=setup
logf() { echo "$WORK/log/$SECTION-$1.log"; }

# spawn NAME CMD...: start CMD in the background, output in logf NAME;
# sets SPAWNED to its PID and remembers it for cleanup.
spawn() {
	local name=$1
	shift
	"$@" >"$(logf "$name")" 2>&1 &
	SPAWNED=$!
	PIDS+=("$SPAWNED")
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT PID NAME: until something listens on PORT (10 s).
wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do
		port_open "$1" && return 0
		if ! kill -0 "$2" 2>/dev/null; then
			log "$3 exited early:"
			tail -n 20 "$(logf "$3")" >&2
			return 1
		fi
		sleep 0.1
	done
	log "$3 is not listening on $1 after 10 s"
	tail -n 20 "$(logf "$3")" >&2
	return 1
}

# wait_ready URL NAME: until URL answers 200 (15 s).
wait_ready() {
	local i
	for ((i = 0; i < 150; i++)); do
		curl -sf -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.1
	done
	log "$2 not ready at $1 after 15 s"
	tail -n 20 "$(logf "$2")" >&2
	return 1
}

# render TEMPLATE OUT: replace every @NAME@ with the value of $NAME.
render() {
	local text name
	text=$(<"$1")
	for name in $(grep -o '@[A-Z0-9_]*@' "$1" | sort -u | tr -d @); do
		if [ -z "${!name+x}" ]; then
			log "render $1: variable $name is not set"
			return 1
		fi
		text=${text//@${name}@/${!name}}
	done
	printf '%s\n' "$text" >"$2"
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# Proxies are known by name (weft-c, weft-s, hap-c, ...). PGROUP holds the
# PIDs whose memory and CPU count for it: the process itself, plus NGINX's
# workers.
declare -A PGROUP PMAIN
declare -A R # results, keyed section.measure.contender

register_proxy() { # NAME PID
	local kids
	PMAIN[$1]=$2
	kids=$(pgrep -P "$2" 2>/dev/null | tr '\n' ' ')
	PGROUP[$1]="$2 $kids"
}

rss_kb() { # NAME [FIELD] -> summed VmRSS (or FIELD, e.g. RssAnon) in kB
	local sum=0 p k v _ field=${2:-VmRSS}
	for p in ${PGROUP[$1]}; do
		while read -r k v _; do
			if [ "$k" = "$field:" ]; then
				sum=$((sum + v))
				break
			fi
		done <"/proc/$p/status" 2>/dev/null
	done
	echo "$sum"
}

mem_kb() { # NAME -> "VmRSS RssAnon", each summed, in kB
	local vm=0 anon=0 p k v _
	for p in ${PGROUP[$1]}; do
		while read -r k v _; do
			case $k in
			VmRSS:) vm=$((vm + v)) ;;
			RssAnon:) anon=$((anon + v)); break ;;
			esac
		done <"/proc/$p/status" 2>/dev/null
	done
	echo "$vm $anon"
}

cpu_ticks() { # NAME -> summed utime+stime in clock ticks
	local sum=0 p line rest
	for p in ${PGROUP[$1]}; do
		line=$(<"/proc/$p/stat") 2>/dev/null || continue
		rest=${line##*) }
		# shellcheck disable=SC2086
		set -- $rest
		sum=$((sum + ${12} + ${13}))
	done
	echo "$sum"
}
CLK_TCK=$(getconf CLK_TCK)

# The RSS sampler: while a load runs, the peak VmRSS and RssAnon of every
# proxy of the section are recorded every 200 ms.
SAMPLER_PID=""
start_sampler() { # NAMES...
	local f="$WORK/raw/rss-sample"
	rm -f "$f"
	(
		declare -A peak apeak
		while :; do
			for n in "$@"; do
				read -r v a <<<"$(mem_kb "$n")"
				[ "$v" -gt "${peak[$n]:-0}" ] && peak[$n]=$v
				[ "$a" -gt "${apeak[$n]:-0}" ] && apeak[$n]=$a
			done
			for n in "$@"; do echo "$n ${peak[$n]:-0} ${apeak[$n]:-0}"; done >"$f.tmp"
			mv "$f.tmp" "$f"
			sleep 0.2
		done
	) &
	SAMPLER_PID=$!
	PIDS+=("$SAMPLER_PID")
}
# stop_sampler SECTION: fold the peaks into R[SECTION.rss_load.NAME] and
# R[SECTION.anon_load.NAME].
stop_sampler() {
	local n v a
	[ -n "$SAMPLER_PID" ] || return 0
	kill "$SAMPLER_PID" 2>/dev/null
	wait "$SAMPLER_PID" 2>/dev/null
	SAMPLER_PID=""
	[ -f "$WORK/raw/rss-sample" ] || return 0
	while read -r n v a; do
		if [ "$v" -gt "${R[$1.rss_load.$n]:-0}" ]; then R[$1.rss_load.$n]=$v; fi
		if [ "$a" -gt "${R[$1.anon_load.$n]:-0}" ]; then R[$1.anon_load.$n]=$a; fi
	done <"$WORK/raw/rss-sample"
}

# go_inuse NAME: a Weft proxy's Go heap and stacks in use, in bytes, from
# its admin server's /metrics (the memory live objects hold, without the
# garbage collector's headroom and the binary's mapped pages).
declare -A ADMIN
go_inuse() {
	curl -sf --max-time 2 "http://${ADMIN[$1]}/metrics" |
		awk '/^go_memstats_(heap_inuse|stack_inuse)_bytes /{ s += $2 } END { printf "%.0f", s }'
}

# kv LINE KEY: the value of KEY in a "k=v k=v" line.
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1" | head -n1; }

# median_line LINES...: one "k=v" line whose every numeric value is the
# median of that key over the lines (the mean of the middle two for an even
# count). Non-numeric fields are dropped.
median_line() {
	printf '%s\n' "$@" | awk '
	{
		for (i = 1; i <= NF; i++) {
			if ($i !~ /^[A-Za-z0-9_-]+=-?[0-9.]+$/) continue
			eq = index($i, "="); k = substr($i, 1, eq - 1); v = substr($i, eq + 1) + 0
			if (!(k in cnt)) order[++n] = k
			vals[k, ++cnt[k]] = v
		}
	}
	END {
		for (j = 1; j <= n; j++) {
			k = order[j]; m = cnt[k]
			for (a = 1; a <= m; a++) arr[a] = vals[k, a]
			for (a = 2; a <= m; a++) { x = arr[a]; b = a - 1; while (b >= 1 && arr[b] > x) { arr[b + 1] = arr[b]; b-- }; arr[b + 1] = x }
			med = (m % 2) ? arr[(m + 1) / 2] : (arr[m / 2] + arr[m / 2 + 1]) / 2
			if (med == int(med)) {
				out = sprintf("%d", med)
			} else {
				out = sprintf("%.3f", med); sub(/0+$/, "", out); sub(/\.$/, "", out)
			}
			printf "%s%s=%s", (j > 1 ? " " : ""), k, out
		}
		printf "\n"
	}'
}

# fold_rounds PREFIX: R[PREFIX] = median of R[PREFIX.r1..rN] that exist.
fold_rounds() {
	local r lines=()
	for ((r = 1; r <= ROUNDS; r++)); do
		[ -n "${R[$1.r$r]:-}" ] && lines+=("${R[$1.r$r]}")
	done
	[ ${#lines[@]} -gt 0 ] && R[$1]=$(median_line "${lines[@]}")
	return 0
}

LOADAVG=()
note_load() { LOADAVG+=("$1: $(cut -d' ' -f1-3 /proc/loadavg)"); }

# ---------------------------------------------------------------- tools

export PATH="$PATH:$(${GO:-go} env GOPATH 2>/dev/null)/bin"
GO=${GO:-go}
MISSING=()
have() { command -v "$1" >/dev/null 2>&1; }
for t in curl awk sed; do
	if ! have "$t"; then
		echo "run.sh: $t is required" >&2
		exit 1
	fi
done
if [ -z "${WEFT_PROXY_BIN:-}" ] && ! have "$GO"; then
	echo "run.sh: go is required to build weft-proxy and the load tools (or set WEFT_PROXY_BIN and build weftbench yourself)" >&2
	exit 1
fi
HAVE_HAPROXY=0; have haproxy && HAVE_HAPROXY=1 || MISSING+=("haproxy (Debian package haproxy): HAProxy columns skipped")
HAVE_NGINX=0; have nginx && HAVE_NGINX=1 || MISSING+=("nginx (Debian package nginx): NGINX rows skipped")
HAVE_WRK=0; have wrk && HAVE_WRK=1 || MISSING+=("wrk (Debian package wrk): maximum-throughput rows skipped")
HAVE_VEGETA=0; have vegeta && HAVE_VEGETA=1 || MISSING+=("vegeta (go install github.com/tsenart/vegeta/v12@latest): fixed-rate rows skipped")
HAVE_GHZ=0; have ghz && HAVE_GHZ=1 || MISSING+=("ghz (go install github.com/bojand/ghz/cmd/ghz@latest): gRPC rows skipped")
for m in "${MISSING[@]}"; do log "missing: $m"; done

log "building weftbench and weft-proxy into $WORK/bin"
(cd "$ROOT" && "$GO" build -o "$WORK/bin/weftbench" ./bench/cmd/weftbench) || { log "building bench/cmd/weftbench failed"; exit 1; }
if [ -n "${WEFT_PROXY_BIN:-}" ]; then
	cp "$WEFT_PROXY_BIN" "$WORK/bin/weft-proxy" || exit 1
else
	# Built as build/Dockerfile builds the shipped image (static, no cgo,
	# grpc-go without golang.org/x/net/trace): a cgo build maps libc and
	# ld.so too, about 3 MB of resident memory no injected proxy carries.
	(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$WORK/bin/weft-proxy" ./cmd/weft-proxy) || { log "building cmd/weft-proxy failed"; exit 1; }
fi
WB="$WORK/bin/weftbench"
WEFT="$WORK/bin/weft-proxy"

# ---------------------------------------------------------------- ports, PKI

P=$BASE_PORT
ECHO=$((P + 0))
BACKEND_HTTP=$((P + 80))
BACKEND_GRPC=$((P + 90))
WEFT_C_L4=$((P + 101))
WEFT_C_H1=$((P + 111))
WEFT_C_GRPC=$((P + 112))
WEFT_S_INBOUND=$((P + 143))
WEFT_C_ADMIN=$((P + 191))
WEFT_S_ADMIN=$((P + 192))
WEFT_C2_H1=$((P + 113))
WEFT_C2_GRPC=$((P + 114))
WEFT_C2_ADMIN=$((P + 193))
HAP_C_L4=$((P + 201))
HAP_S_L4=$((P + 202))
HAP_C_L4NR=$((P + 203))
HAP_C_H1=$((P + 211))
HAP_C_GRPC=$((P + 212))
HAP_S_H1=$((P + 221))
HAP_S_GRPC=$((P + 222))
NGX_C_H1=$((P + 311))
NGX_C_GRPC=$((P + 312))
NGX_S_H1=$((P + 321))
NGX_S_GRPC=$((P + 322))
GRP_C=$((P + 411))
GRP_S=$((P + 421))
for port in $ECHO $BACKEND_HTTP $BACKEND_GRPC $WEFT_C_L4 $WEFT_C_H1 $WEFT_C_GRPC $WEFT_S_INBOUND \
	$WEFT_C_ADMIN $WEFT_S_ADMIN $WEFT_C2_H1 $WEFT_C2_GRPC $WEFT_C2_ADMIN $HAP_C_L4 $HAP_S_L4 $HAP_C_L4NR $HAP_C_H1 $HAP_C_GRPC $HAP_S_H1 $HAP_S_GRPC \
	$NGX_C_H1 $NGX_C_GRPC $NGX_S_H1 $NGX_S_GRPC $GRP_C $GRP_S; do
	if port_open "$port"; then
		echo "run.sh: port 127.0.0.1:$port is in use; pick another --base-port" >&2
		exit 1
	fi
done

PKI="$WORK/pki"
RUN="$WORK"
CLIENT_ID=client.bench.serviceaccount.identity.linkerd.cluster.local
SERVER_ID=server.bench.serviceaccount.identity.linkerd.cluster.local
NGINX_USER=""
[ "$(id -u)" = 0 ] && NGINX_USER="user root root;"
"$WB" pki -out "$PKI" -name "client=$CLIENT_ID" -name "server=$SERVER_ID" >/dev/null || exit 1
for t in weft-client.yaml weft-server.yaml haproxy-l4-client.cfg haproxy-l4-server.cfg \
	haproxy-http-client.cfg haproxy-http-server.cfg nginx-client.conf nginx-server.conf; do
	render "$CONF/$t" "$WORK/conf/$t" || exit 1
done
mkdir -p "$WORK/nginx-client-tmp" "$WORK/nginx-server-tmp"

# ---------------------------------------------------------------- contenders

# Each start_* sets the address a client uses (A_L4, A_H1, A_GRPC) and the
# proxy names (PROXIES) of one contender, or returns 1.
declare -A A_L4 A_H1 A_GRPC PROXIES LABEL
LABEL[direct]="direct"
LABEL[weft]="Weft pair (mTLS)"
LABEL[haproxy]="HAProxy pair (TLS)"
LABEL[nginx]="NGINX pair (TLS)"
LABEL[goproxy]="Go ReverseProxy pair (TLS)"
LABEL[weft-h2hop]="Weft pair, HTTP/2 hop (mTLS)"

SECTION_PIDS=()

start_weft() { # MAPPINGS INBOUND_PORTS OPAQUE_PORTS
	spawn weft-s env WEFT_PROXY_LOG_LEVEL=warn "$WEFT" run --static "$WORK/conf/weft-server.yaml" \
		--inbound-addr "127.0.0.1:$WEFT_S_INBOUND" --outbound-addr off --admin-addr "127.0.0.1:$WEFT_S_ADMIN" \
		--inbound-ports "$2" --inbound-opaque-ports "$3" --shutdown-grace-period 1s
	local s=$SPAWNED
	spawn weft-c env WEFT_PROXY_LOG_LEVEL=warn "$WEFT" run --static "$WORK/conf/weft-client.yaml" \
		--inbound-addr off --outbound-addr off --admin-addr "127.0.0.1:$WEFT_C_ADMIN" \
		--outbound-mappings "$1" --shutdown-grace-period 1s
	local c=$SPAWNED
	SECTION_PIDS+=("$s" "$c")
	wait_ready "http://127.0.0.1:$WEFT_S_ADMIN/ready" weft-s || return 1
	wait_ready "http://127.0.0.1:$WEFT_C_ADMIN/ready" weft-c || return 1
	register_proxy weft-c "$c"
	register_proxy weft-s "$s"
	ADMIN[weft-c]=127.0.0.1:$WEFT_C_ADMIN
	ADMIN[weft-s]=127.0.0.1:$WEFT_S_ADMIN
	PROXIES[weft]="weft-c weft-s"
}

# start_weft_h2hop MAPPINGS: a second client proxy in front of the running
# weft-s, carrying HTTP/1.1 over the HTTP/2 hop (--h2hop).
start_weft_h2hop() {
	spawn weft-c2 env WEFT_PROXY_LOG_LEVEL=warn WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2=true "$WEFT" run --static "$WORK/conf/weft-client.yaml" \
		--inbound-addr off --outbound-addr off --admin-addr "127.0.0.1:$WEFT_C2_ADMIN" \
		--outbound-mappings "$1" --shutdown-grace-period 1s
	local c=$SPAWNED
	SECTION_PIDS+=("$c")
	wait_ready "http://127.0.0.1:$WEFT_C2_ADMIN/ready" weft-c2 || return 1
	register_proxy weft-c2 "$c"
	ADMIN[weft-c2]=127.0.0.1:$WEFT_C2_ADMIN
	PROXIES[weft-h2hop]="weft-c2 weft-s"
}

start_haproxy() { # l4|http
	spawn hap-s haproxy -db -f "$WORK/conf/haproxy-$1-server.cfg"
	local s=$SPAWNED
	spawn hap-c haproxy -db -f "$WORK/conf/haproxy-$1-client.cfg"
	local c=$SPAWNED
	SECTION_PIDS+=("$s" "$c")
	if [ "$1" = l4 ]; then
		wait_port "$HAP_S_L4" "$s" hap-s && wait_port "$HAP_C_L4" "$c" hap-c || return 1
	else
		wait_port "$HAP_S_H1" "$s" hap-s && wait_port "$HAP_C_H1" "$c" hap-c &&
			wait_port "$HAP_C_GRPC" "$c" hap-c || return 1
	fi
	register_proxy hap-c "$c"
	register_proxy hap-s "$s"
	PROXIES[haproxy]="hap-c hap-s"
}

start_nginx() {
	spawn ngx-s nginx -p "$WORK" -c "$WORK/conf/nginx-server.conf"
	local s=$SPAWNED
	spawn ngx-c nginx -p "$WORK" -c "$WORK/conf/nginx-client.conf"
	local c=$SPAWNED
	SECTION_PIDS+=("$s" "$c")
	wait_port "$NGX_S_H1" "$s" ngx-s && wait_port "$NGX_C_H1" "$c" ngx-c &&
		wait_port "$NGX_C_GRPC" "$c" ngx-c || return 1
	sleep 0.5 # workers up
	register_proxy ngx-c "$c"
	register_proxy ngx-s "$s"
	PROXIES[nginx]="ngx-c ngx-s"
}

start_goproxy() {
	spawn grp-s "$WB" goproxy -tls -listen "127.0.0.1:$GRP_S" -to "http://127.0.0.1:$BACKEND_HTTP" \
		-grpc-to "127.0.0.1:$BACKEND_GRPC" -cert "$PKI/server.crt" -key "$PKI/server.key" -ca "$PKI/roots.pem"
	local s=$SPAWNED
	spawn grp-c "$WB" goproxy -listen "127.0.0.1:$GRP_C" -to "https://127.0.0.1:$GRP_S" \
		-cert "$PKI/client.crt" -key "$PKI/client.key" -ca "$PKI/roots.pem" -server-name "$SERVER_ID"
	local c=$SPAWNED
	SECTION_PIDS+=("$s" "$c")
	wait_port "$GRP_S" "$s" grp-s && wait_port "$GRP_C" "$c" grp-c || return 1
	register_proxy grp-c "$c"
	register_proxy grp-s "$s"
	PROXIES[goproxy]="grp-c grp-s"
}

stop_section() {
	[ ${#SECTION_PIDS[@]} -gt 0 ] && stop_pid "${SECTION_PIDS[@]}"
	SECTION_PIDS=()
}

# all_proxies CONTENDERS...: the proxy names of those contenders.
all_proxies() {
	local c
	for c in "$@"; do echo ${PROXIES[$c]:-}; done | tr '\n' ' '
}

FAILURES=()
fail() { # what, log file
	FAILURES+=("$1")
	log "FAILED: $1"
}

# ---------------------------------------------------------------- layer 4

l4_section() {
	SECTION=l4
	log "layer 4: starting echo server and proxies"
	note_load "layer 4 start"
	spawn echo "$WB" echo -listen "127.0.0.1:$ECHO"
	SECTION_PIDS+=("$SPAWNED")
	wait_port "$ECHO" "$SPAWNED" echo || return 1
	local L4_CONTENDERS=(direct)
	A_L4[direct]=127.0.0.1:$ECHO
	if start_weft "127.0.0.1:$WEFT_C_L4=echo.bench.svc.cluster.local:$ECHO" "$ECHO" "$ECHO"; then
		L4_CONTENDERS+=(weft)
		A_L4[weft]=127.0.0.1:$WEFT_C_L4
	else
		fail "layer 4: Weft pair did not start"
	fi
	if [ "$HAVE_HAPROXY" = 1 ]; then
		if start_haproxy l4; then
			L4_CONTENDERS+=(haproxy)
			A_L4[haproxy]=127.0.0.1:$HAP_C_L4
		else
			fail "layer 4: HAProxy pair did not start"
		fi
	fi
	L4_RUN=("${L4_CONTENDERS[@]}")
	local names c n line out
	names=$(all_proxies "${L4_CONTENDERS[@]}")
	sleep 1
	for n in $names; do
		R[l4.rss_idle.$n]=$(rss_kb "$n")
		R[l4.anon_idle.$n]=$(rss_kb "$n" RssAnon)
	done

	# Memory per idle proxied connection, on fresh processes: RSS before,
	# IDLE_CONNS connections opened and echoed once, 3 s to settle, RSS
	# after.
	for c in "${L4_CONTENDERS[@]}"; do
		[ "$c" = direct ] && continue
		log "layer 4: $c, $IDLE_CONNS idle connections"
		declare -A before=() gobefore=()
		for n in ${PROXIES[$c]}; do
			before[$n]=$(rss_kb "$n")
			[ -n "${ADMIN[$n]:-}" ] && gobefore[$n]=$(go_inuse "$n")
		done
		spawn "idle-$c" "$WB" idle -addr "${A_L4[$c]}" -conns "$IDLE_CONNS" -hold 120s
		local idle=$SPAWNED i ok=0
		for ((i = 0; i < 600; i++)); do
			if grep -q '^ready' "$(logf "idle-$c")"; then ok=1; break; fi
			kill -0 "$idle" 2>/dev/null || break
			sleep 0.1
		done
		if [ "$ok" = 1 ]; then
			# Past the proxies' busy-linger (a TLS copy loop keeps its
			# buffer for 1 s after the last byte).
			sleep 3
			for n in ${PROXIES[$c]}; do
				R[l4.idle_conn_kib.$n]=$(calc '%.1f' "($(rss_kb "$n") - ${before[$n]}) / $IDLE_CONNS")
				if [ -n "${gobefore[$n]:-}" ]; then
					R[l4.idle_conn_go.$n]=$(calc '%.1f' "($(go_inuse "$n") - ${gobefore[$n]}) / 1024 / $IDLE_CONNS")
				fi
			done
		else
			fail "layer 4: $c idle connections: $(tail -n1 "$(logf "idle-$c")")"
		fi
		stop_pid "$idle"
		sleep 1
	done

	# Loads, one contender after the other for each measure, ROUNDS times.
	local measure round
	for ((round = 1; round <= ROUNDS; round++)); do
	note_load "layer 4 round $round"
	for measure in tput1 tput16 latency connrate connrate_nr; do
		for c in "${L4_CONTENDERS[@]}"; do
			# Only HAProxy resumes TLS sessions; connrate_nr measures it
			# without.
			[ "$measure" = connrate_nr ] && [ "$c" != haproxy ] && continue
			log "layer 4: round $round/$ROUNDS, $measure, $c"
			names=$(all_proxies "$c")
			[ -n "$names" ] && start_sampler $names
			case $measure in
			tput1) out=$(timeout -k 5 $((DUR + 30)) "$WB" tput -addr "${A_L4[$c]}" -conns 1 -duration "${DUR}s" 2>&1) ;;
			tput16) out=$(timeout -k 5 $((DUR + 30)) "$WB" tput -addr "${A_L4[$c]}" -conns 16 -duration "${DUR}s" 2>&1) ;;
			latency) out=$(timeout -k 5 $((DUR + 30)) "$WB" latency -addr "${A_L4[$c]}" -duration "${DUR}s" 2>&1) ;;
			connrate) out=$(timeout -k 5 $((DUR + 30)) "$WB" connrate -addr "${A_L4[$c]}" -workers 8 -duration "${DUR}s" 2>&1) ;;
			connrate_nr) out=$(timeout -k 5 $((DUR + 30)) "$WB" connrate -addr "127.0.0.1:$HAP_C_L4NR" -workers 8 -duration "${DUR}s" 2>&1) ;;
			esac
			local rc=$?
			stop_sampler l4
			echo "$out" >"$WORK/raw/l4-$measure-$c-r$round.txt"
			if [ $rc -ne 0 ]; then
				fail "layer 4 round $round $measure $c: $out"
				continue
			fi
			R[l4.$measure.$c.r$round]=$out
			sleep 1
		done
	done
	done
	for measure in tput1 tput16 latency connrate connrate_nr; do
		for c in "${L4_CONTENDERS[@]}"; do fold_rounds "l4.$measure.$c"; done
	done
	note_load "layer 4 end"
	stop_section
}

# ---------------------------------------------------------------- HTTP

# http_point POINT CONTENDER ROUND: one load point; stores the weftbench
# summary line plus cpu10k_<proxy>= (CPU seconds per 10,000 successful
# requests) in R[http.POINT.CONTENDER.rROUND], and the peak RSS.
http_point() {
	local point=$1 c=$2 round=$3 names n out rc raw="$WORK/raw/http-$1-$2-r$3"
	names=$(all_proxies "$c")
	# Warm-up with the same load shape, not measured: connection pools
	# (HAProxy and NGINX drop idle upstream connections after a few
	# seconds) are filled again before the point starts.
	local warm=$((DUR / 5 > 1 ? DUR / 5 : 1))
	case $point in
	rate1000 | rate5000)
		echo "GET http://${A_H1[$c]}/" | timeout -k 5 $((warm + 30)) vegeta attack -rate "${point#rate}/s" -duration "${warm}s" \
			-timeout 5s -max-workers 128 >/dev/null 2>&1 ;;
	max)
		timeout -k 5 $((warm + 30)) wrk -t2 -c64 -d"${warm}s" --timeout 5s "http://${A_H1[$c]}/" >/dev/null 2>&1 ;;
	grpc1000 | grpc5000 | grpcmax)
		local wrps=()
		[ "$point" != grpcmax ] && wrps=(--rps "${point#grpc}")
		timeout -k 5 $((warm + 60)) ghz --insecure --call grpc.health.v1.Health.Check -d '{}' -c 50 --connections 1 \
			"${wrps[@]}" -z "${warm}s" "${A_GRPC[$c]}" >/dev/null 2>&1 ;;
	esac
	declare -A t0=()
	for n in $names; do t0[$n]=$(cpu_ticks "$n"); done
	[ -n "$names" ] && start_sampler $names
	case $point in
	rate1000 | rate5000)
		local rate=${point#rate}
		echo "GET http://${A_H1[$c]}/" | timeout -k 5 $((DUR + 30)) vegeta attack -rate "$rate/s" -duration "${DUR}s" \
			-timeout 5s -max-workers 128 >"$raw.bin" 2>"$raw.err"
		rc=$?
		[ $rc -eq 0 ] && vegeta encode --to csv <"$raw.bin" >"$raw.csv" && out=$("$WB" vegeta-stats "$raw.csv" 2>&1)
		rc=$?
		rm -f "$raw.bin"
		;;
	max)
		out=$(timeout -k 5 $((DUR + 30)) wrk -t2 -c64 -d"${DUR}s" --timeout 5s -s "$CONF/wrk-report.lua" "http://${A_H1[$c]}/" 2>&1 | tee "$raw.txt" | grep '^requests=')
		rc=$?
		;;
	grpc1000 | grpc5000 | grpcmax)
		local rps=()
		[ "$point" != grpcmax ] && rps=(--rps "${point#grpc}")
		timeout -k 5 $((DUR + 60)) ghz --insecure --call grpc.health.v1.Health.Check -d '{}' -c 50 --connections 1 \
			"${rps[@]}" -z "${DUR}s" -O json "${A_GRPC[$c]}" >"$raw.json" 2>"$raw.err"
		rc=$?
		[ $rc -eq 0 ] && out=$("$WB" ghz-stats "$raw.json" 2>&1)
		rc=$?
		;;
	esac
	stop_sampler "http.$point"
	if [ $rc -ne 0 ] || [ -z "$(kv "$out" requests)" ]; then
		fail "HTTP round $round $point $c: $(tail -c 300 "$raw.err" 2>/dev/null) $out"
		return 1
	fi
	local ok ticks pair=0
	ok=$(kv "$out" ok)
	[ -z "$ok" ] && ok=$(($(kv "$out" requests) - $(kv "$out" errors)))
	for n in $names; do
		ticks=$(($(cpu_ticks "$n") - ${t0[$n]}))
		pair=$((pair + ticks))
		[ "$ok" -gt 0 ] && out+=" cpu10k_$n=$(calc '%.4f' "$ticks / $CLK_TCK / $ok * 10000")"
	done
	[ -n "$names" ] && [ "$ok" -gt 0 ] && out+=" cpu10k_pair=$(calc '%.4f' "$pair / $CLK_TCK / $ok * 10000")"
	R[http.$point.$c.r$round]=$out
}

http_section() {
	SECTION=http
	log "HTTP: starting backend and proxies"
	note_load "HTTP start"
	spawn backend "$WB" backend -http "127.0.0.1:$BACKEND_HTTP" -grpc "127.0.0.1:$BACKEND_GRPC"
	SECTION_PIDS+=("$SPAWNED")
	wait_port "$BACKEND_HTTP" "$SPAWNED" backend && wait_port "$BACKEND_GRPC" "$SPAWNED" backend || return 1
	local HC=(direct)
	A_H1[direct]=127.0.0.1:$BACKEND_HTTP
	A_GRPC[direct]=127.0.0.1:$BACKEND_GRPC
	if start_weft "127.0.0.1:$WEFT_C_H1=web.bench.svc.cluster.local:$BACKEND_HTTP,127.0.0.1:$WEFT_C_GRPC=grpc.bench.svc.cluster.local:$BACKEND_GRPC" \
		"$BACKEND_HTTP,$BACKEND_GRPC" ""; then
		HC+=(weft)
		A_H1[weft]=127.0.0.1:$WEFT_C_H1
		A_GRPC[weft]=127.0.0.1:$WEFT_C_GRPC
		if [ "$H2HOP" = 1 ]; then
			if start_weft_h2hop "127.0.0.1:$WEFT_C2_H1=web.bench.svc.cluster.local:$BACKEND_HTTP,127.0.0.1:$WEFT_C2_GRPC=grpc.bench.svc.cluster.local:$BACKEND_GRPC"; then
				HC+=(weft-h2hop)
				A_H1[weft-h2hop]=127.0.0.1:$WEFT_C2_H1
				A_GRPC[weft-h2hop]=127.0.0.1:$WEFT_C2_GRPC
			else
				fail "HTTP: the second Weft client proxy (--h2hop) did not start"
			fi
		fi
	else
		fail "HTTP: Weft pair did not start"
	fi
	if [ "$HAVE_HAPROXY" = 1 ]; then
		if start_haproxy http; then
			HC+=(haproxy)
			A_H1[haproxy]=127.0.0.1:$HAP_C_H1
			A_GRPC[haproxy]=127.0.0.1:$HAP_C_GRPC
		else
			fail "HTTP: HAProxy pair did not start"
		fi
	fi
	if [ "$HAVE_NGINX" = 1 ]; then
		if start_nginx; then
			HC+=(nginx)
			A_H1[nginx]=127.0.0.1:$NGX_C_H1
			A_GRPC[nginx]=127.0.0.1:$NGX_C_GRPC
		else
			fail "HTTP: NGINX pair did not start"
		fi
	fi
	if start_goproxy; then
		HC+=(goproxy)
		A_H1[goproxy]=127.0.0.1:$GRP_C
		A_GRPC[goproxy]=127.0.0.1:$GRP_C
	else
		fail "HTTP: Go ReverseProxy pair did not start"
	fi
	HTTP_RUN=("${HC[@]}")
	local c n names
	sleep 1
	for n in $(all_proxies "${HC[@]}"); do
		R[http.rss_idle.$n]=$(rss_kb "$n")
		R[http.anon_idle.$n]=$(rss_kb "$n" RssAnon)
	done

	# Each contender answers once over HTTP/1.1 and gRPC before any load.
	for c in "${HC[@]}"; do
		if ! curl -sf -o /dev/null --max-time 5 "http://${A_H1[$c]}/"; then
			fail "HTTP: $c does not answer GET / on ${A_H1[$c]}"
		fi
	done

	local points=()
	[ "$HAVE_VEGETA" = 1 ] && points+=(rate1000 rate5000)
	[ "$HAVE_WRK" = 1 ] && points+=(max)
	[ "$HAVE_GHZ" = 1 ] && points+=(grpc1000 grpc5000 grpcmax)
	HTTP_POINTS=("${points[@]}")
	local point round
	for ((round = 1; round <= ROUNDS; round++)); do
		note_load "HTTP round $round"
		for point in "${points[@]}"; do
			for c in "${HC[@]}"; do
				log "HTTP: round $round/$ROUNDS, $point, $c"
				http_point "$point" "$c" "$round"
				sleep 1
			done
		done
	done
	for point in "${points[@]}"; do
		for c in "${HC[@]}"; do fold_rounds "http.$point.$c"; done
	done
	note_load "HTTP end"
	stop_section
}

# ---------------------------------------------------------------- report

MB() { [ -n "${1:-}" ] && calc '%.1f' "$1 / 1024" || echo "–"; }
pair() { # FMT VALUE_CLIENT VALUE_SERVER
	echo "${2:-–} / ${3:-–}"
}
ratio() { # A B -> A/B with 2 decimals, or –
	if [ -n "${1:-}" ] && [ -n "${2:-}" ] && awk "BEGIN { exit !($2 > 0) }"; then
		calc '%.2f' "$1 / $2"
	else
		echo "–"
	fi
}

report_l4() {
	local c cols=() head="| measure |" sep="|---|"
	for c in "${L4_RUN[@]}"; do
		head+=" ${LABEL[$c]} |"
		sep+="---|"
	done
	echo "### Layer 4 (issue 7)"
	echo
	echo "Echo server behind each path; a client writes, the echo comes back (each"
	echo "byte crosses every proxy twice). ${DUR} s per point, median of ${ROUNDS} round(s);"
	echo "'client / server' are the two proxies of a pair. Memory: idle after start;"
	echo "peak sampled every 200 ms during the loads; per idle connection from the RSS"
	echo "growth with $IDLE_CONNS connections open (each echoed once, 3 s to settle) on"
	echo "fresh processes."
	echo
	echo "$head"
	echo "$sep"
	local row
	row_l4() { # TITLE MEASURE KEY
		row="| $1 |"
		for c in "${L4_RUN[@]}"; do row+=" $(kv "${R[l4.$2.$c]:-}" "$3" | sed 's/^$/–/') |"; done
		echo "$row"
	}
	row_l4 "throughput, 1 connection (MB/s)" tput1 mbps
	row_l4 "throughput, 16 connections (MB/s)" tput16 mbps
	row_l4 "new connections per second (8 clients)" connrate cps
	row_l4 "new connections per second, TLS session resumption off" connrate_nr cps
	row="| echo latency p50 / p99 (µs), 64 B |"
	for c in "${L4_RUN[@]}"; do row+=" $(pair x "$(kv "${R[l4.latency.$c]:-}" p50_us)" "$(kv "${R[l4.latency.$c]:-}" p99_us)") |"; done
	echo "$row"
	local d50 d99
	d50=$(kv "${R[l4.latency.direct]:-}" p50_us)
	d99=$(kv "${R[l4.latency.direct]:-}" p99_us)
	row="| added latency p50 / p99 (µs) |"
	for c in "${L4_RUN[@]}"; do
		if [ "$c" = direct ] || [ -z "$d50" ] || [ -z "${R[l4.latency.$c]:-}" ]; then row+=" |"; continue; fi
		row+=" $(calc '%.1f' "$(kv "${R[l4.latency.$c]}" p50_us) - $d50") / $(calc '%.1f' "$(kv "${R[l4.latency.$c]}" p99_us) - $d99") |"
	done
	echo "$row"
	row_mem() { # TITLE KEYPREFIX FORMATTER
		row="| $1 |"
		for c in "${L4_RUN[@]}"; do
			if [ "$c" = direct ]; then row+=" |"; continue; fi
			set -- ${PROXIES[$c]}
			local a=${R[$KEYP.$1]:-} b=${R[$KEYP.$2]:-}
			if [ "$FMT" = MB ]; then a=$(MB "$a"); b=$(MB "$b"); fi
			row+=" $(pair x "$a" "$b") |"
		done
		echo "$row"
	}
	KEYP=l4.rss_idle FMT=MB row_mem "RSS idle, client / server (MB)"
	KEYP=l4.anon_idle FMT=MB row_mem "of which anonymous memory (RssAnon), client / server (MB)"
	KEYP=l4.rss_load FMT=MB row_mem "RSS peak under load, client / server (MB)"
	KEYP=l4.anon_load FMT=MB row_mem "of which anonymous memory (RssAnon peak), client / server (MB)"
	KEYP=l4.idle_conn_kib FMT=raw row_mem "memory per idle proxied connection, client / server (KiB of VmRSS)"
	KEYP=l4.idle_conn_go FMT=raw row_mem "Go heap + stacks in use per idle connection, client / server (KiB)"
	echo
}

# http_table POINT TITLE
http_table() {
	local point=$1 c line d99 d
	d99=$(kv "${R[http.$point.direct]:-}" p99_ms)
	echo "#### $2"
	echo
	echo "| path | req/s | p50 ms | p99 ms | p99.9 ms | added p99 ms | errors | CPU s per 10k req, client + server = pair | RSS peak MB, client / server (RssAnon) |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for c in "${HTTP_RUN[@]}"; do
		line=${R[http.$point.$c]:-}
		if [ -z "$line" ]; then
			echo "| ${LABEL[$c]} | failed | | | | | | | |"
			continue
		fi
		local added cpu rss
		added=""
		# Added latency only at fixed rates: at maximum throughput the direct
		# path is saturated too and the difference means nothing.
		case $point in
		max | grpcmax) ;;
		*) [ "$c" != direct ] && [ -n "$d99" ] && added=$(calc '%.3f' "$(kv "$line" p99_ms) - $d99") ;;
		esac
		cpu=""
		rss=""
		if [ "$c" != direct ]; then
			set -- ${PROXIES[$c]}
			local tc ts tp
			tc=$(kv "$line" "cpu10k_$1")
			ts=$(kv "$line" "cpu10k_$2")
			tp=$(kv "$line" cpu10k_pair)
			if [ -n "$tp" ]; then
				cpu="$(calc '%.2f' "$tc") + $(calc '%.2f' "$ts") = $(calc '%.2f' "$tp")"
				R[http.cpu10k.$point.$c]=$tp
			fi
			rss="$(MB "${R[http.$point.rss_load.$1]:-}") / $(MB "${R[http.$point.rss_load.$2]:-}") (anon $(MB "${R[http.$point.anon_load.$1]:-}") / $(MB "${R[http.$point.anon_load.$2]:-}"))"
		fi
		R[http.added99.$point.$c]=$added
		echo "| ${LABEL[$c]} | $(calc '%.0f' "$(kv "$line" rate)") | $(kv "$line" p50_ms) | $(kv "$line" p99_ms) | $(kv "$line" p999_ms) | $added | $(kv "$line" errors) | $cpu | $rss |"
	done
	echo
}

report_http() {
	echo "### HTTP and gRPC (issue 8)"
	echo
	echo "Backend: Go net/http (HTTP/1.1 and h2c) answering a 63-byte JSON body,"
	echo "and grpc-go's health service. ${DUR} s per point after a short unmeasured"
	echo "warm-up of the same shape, median of ${ROUNDS} round(s). CPU is utime+stime of"
	echo "each proxy process (NGINX: master and workers) from /proc/PID/stat over the"
	echo "point; RSS is the peak VmRSS sampled every 200 ms during the point (NGINX:"
	echo "summed over its processes)."
	echo
	local c n row row2
	row="| RSS idle, client / server (MB) |"
	row2="| of which anonymous (RssAnon), client / server (MB) |"
	local head="| |" sep="|---|"
	for c in "${HTTP_RUN[@]}"; do
		[ "$c" = direct ] && continue
		head+=" ${LABEL[$c]} |"
		sep+="---|"
		set -- ${PROXIES[$c]}
		row+=" $(MB "${R[http.rss_idle.$1]:-}") / $(MB "${R[http.rss_idle.$2]:-}") |"
		row2+=" $(MB "${R[http.anon_idle.$1]:-}") / $(MB "${R[http.anon_idle.$2]:-}") |"
	done
	echo "$head"
	echo "$sep"
	echo "$row"
	echo "$row2"
	echo
	local point
	for point in "${HTTP_POINTS[@]}"; do
		case $point in
		rate1000) http_table rate1000 "HTTP/1.1, 1,000 req/s open loop (vegeta)" ;;
		rate5000) http_table rate5000 "HTTP/1.1, 5,000 req/s open loop (vegeta)" ;;
		max) http_table max "HTTP/1.1, maximum throughput (wrk, 2 threads, 64 connections)" ;;
		grpc1000) http_table grpc1000 "gRPC unary (grpc.health.v1.Health/Check), 1,000 req/s (ghz, 50 workers, 1 connection)" ;;
		grpc5000) http_table grpc5000 "gRPC unary, 5,000 req/s (ghz, 50 workers, 1 connection)" ;;
		grpcmax) http_table grpcmax "gRPC unary, maximum throughput (ghz, 50 workers, 1 connection)" ;;
		esac
	done
}

# round_cell LINE MEASURE: the headline figure of one round.
round_cell() {
	[ -n "$1" ] || { echo "failed"; return; }
	case $2 in
	tput*) echo "$(kv "$1" mbps) MB/s" ;;
	connrate*) echo "$(kv "$1" cps)/s" ;;
	latency) echo "$(kv "$1" p50_us) / $(kv "$1" p99_us) µs" ;;
	*) echo "$(kv "$1" rate) req/s, p99 $(kv "$1" p99_ms) ms" ;;
	esac
}

report_rounds() {
	[ "$ROUNDS" -gt 1 ] || return 0
	local r head="| point | path |" sep="|---|---|" m c row
	for ((r = 1; r <= ROUNDS; r++)); do
		head+=" round $r |"
		sep+="---|"
	done
	echo "### Per-round figures"
	echo
	echo "The tables above give the median of $ROUNDS rounds (every point run once per"
	echo "round, contenders one after the other). The rounds themselves:"
	echo
	echo "$head"
	echo "$sep"
	if [ "$DO_L4" = 1 ]; then
		for m in tput1 tput16 connrate connrate_nr latency; do
			for c in "${L4_RUN[@]}"; do
				[ "$m" = connrate_nr ] && [ "$c" != haproxy ] && continue
				row="| L4 $m | ${LABEL[$c]} |"
				for ((r = 1; r <= ROUNDS; r++)); do row+=" $(round_cell "${R[l4.$m.$c.r$r]:-}" "$m") |"; done
				echo "$row"
			done
		done
	fi
	if [ "$DO_HTTP" = 1 ]; then
		for m in "${HTTP_POINTS[@]}"; do
			for c in "${HTTP_RUN[@]}"; do
				row="| $m | ${LABEL[$c]} |"
				for ((r = 1; r <= ROUNDS; r++)); do row+=" $(round_cell "${R[http.$m.$c.r$r]:-}" "$m") |"; done
				echo "$row"
			done
		done
	fi
	echo
}

verdict() { # OK-expression
	if awk "BEGIN { exit !($1) }"; then echo "met"; else echo "**not met**"; fi
}

report_targets() {
	echo "### Against the targets"
	echo
	echo "| target | Weft | reference | ratio | verdict |"
	echo "|---|---|---|---|---|"
	local w h r
	if [ "$DO_L4" = 1 ]; then
		for m in tput1 tput16; do
			w=$(kv "${R[l4.$m.weft]:-}" mbps)
			h=$(kv "${R[l4.$m.haproxy]:-}" mbps)
			r=$(ratio "$w" "$h")
			[ "$r" != "–" ] && echo "| L4 throughput ${m#tput} conn. ≥ 0.8× HAProxy | $w MB/s | $h MB/s | $r | $(verdict "$r >= 0.8") |"
		done
		w=$(kv "${R[l4.connrate.weft]:-}" cps)
		h=$(kv "${R[l4.connrate.haproxy]:-}" cps)
		r=$(ratio "$w" "$h")
		[ "$r" != "–" ] && echo "| L4 new connections/s (no target; for reading) | $w | $h | $r | |"
		for n in weft-c weft-s; do
			w=${R[l4.rss_idle.$n]:-}
			[ -n "$w" ] && echo "| idle RSS < 20 MB ($n) | $(MB "$w") MB | 20 MB | | $(verdict "$w < 20480") |"
		done
		for n in weft-c weft-s; do
			w=${R[l4.idle_conn_kib.$n]:-}
			h=""
			[ $n = weft-c ] && h=${R[l4.idle_conn_kib.hap-c]:-}
			[ $n = weft-s ] && h=${R[l4.idle_conn_kib.hap-s]:-}
			[ -n "$w" ] && echo "| < 8 KiB per idle proxied connection ($n) | $w KiB | HAProxy ${h:-–} KiB | | $(verdict "$w < 8") |"
		done
	fi
	if [ "$DO_HTTP" = 1 ]; then
		w=${R[http.added99.rate1000.weft]:-}
		h=${R[http.added99.rate1000.haproxy]:-}
		r=$(ratio "$w" "$h")
		if [ -n "$w" ] && [ -n "$h" ]; then
			echo "| HTTP added p99 at 1,000 req/s ≤ 1.5× HAProxy's | $w ms | $h ms | $r | $(verdict "$w <= 1.5 * $h") |"
		fi
		for point in rate1000 rate5000 max; do
			w=${R[http.cpu10k.$point.weft]:-}
			h=${R[http.cpu10k.$point.haproxy]:-}
			r=$(ratio "$w" "$h")
			[ "$r" != "–" ] && echo "| HTTP CPU per request ≤ 1.5× HAProxy's ($point, pair) | $(calc '%.2f' "$w") s/10k | $(calc '%.2f' "$h") s/10k | $r | $(verdict "$r <= 1.5") |"
		done
		w=$(kv "${R[http.max.weft]:-}" rate)
		h=$(kv "${R[http.max.haproxy]:-}" rate)
		r=$(ratio "$w" "$h")
		[ "$r" != "–" ] && echo "| HTTP max throughput ≥ 0.8× HAProxy's | $w req/s | $h req/s | $r | $(verdict "$r >= 0.8") |"
		w=$(kv "${R[http.grpcmax.weft]:-}" rate)
		h=$(kv "${R[http.grpcmax.haproxy]:-}" rate)
		r=$(ratio "$w" "$h")
		[ "$r" != "–" ] && echo "| gRPC max throughput (no target; for reading) | $w req/s | $h req/s | $r | |"
		# Issue 28's rows beyond issue 8's: both protocols' added p99 at
		# 5,000 req/s and gRPC's CPU per call, each against HAProxy.
		for point in rate5000 grpc1000 grpc5000; do
			w=${R[http.added99.$point.weft]:-}
			h=${R[http.added99.$point.haproxy]:-}
			r=$(ratio "$w" "$h")
			[ "$r" != "–" ] && echo "| added p99 ≤ 1.5× HAProxy's ($point, issue 28) | $w ms | $h ms | $r | $(verdict "$r <= 1.5") |"
		done
		for point in grpc1000 grpc5000 grpcmax; do
			w=${R[http.cpu10k.$point.weft]:-}
			h=${R[http.cpu10k.$point.haproxy]:-}
			r=$(ratio "$w" "$h")
			[ "$r" != "–" ] && echo "| gRPC CPU per call ≤ 1.5× HAProxy's ($point, pair, issue 28) | $(calc '%.2f' "$w") s/10k | $(calc '%.2f' "$h") s/10k | $r | $(verdict "$r <= 1.5") |"
		done
		local peak=0 apeak=0 k
		for k in "${!R[@]}"; do
			case $k in
			http.*.rss_load.weft-*) [ "${R[$k]}" -gt "$peak" ] && peak=${R[$k]} ;;
			http.*.anon_load.weft-*) [ "${R[$k]}" -gt "$apeak" ] && apeak=${R[$k]} ;;
			esac
		done
		[ "$peak" -gt 0 ] && echo "| RSS per proxy < 30 MB under load (HTTP, peak of both; RssAnon $(MB "$apeak") MB) | $(MB "$peak") MB | 30 MB | | $(verdict "$peak < 30720") |"
	fi
	echo
}

report() {
	echo "## Whole-process benchmark (bench/run.sh), $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo '```sh'
	echo "$COMMAND_LINE"
	echo '```'
	echo
	echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))," \
		"Linux $(uname -r), $(${GO} version 2>/dev/null | cut -d' ' -f3), $(haproxy -v 2>/dev/null | head -n1 | cut -d' ' -f1-3)," \
		"$(nginx -v 2>&1 | cut -d' ' -f3). Shared with other work; load average (1, 5, 15 min):"
	local l
	for l in "${LOADAVG[@]}"; do echo "- $l"; done
	echo
	if [ ${#MISSING[@]} -gt 0 ]; then
		echo "Missing tools (parts skipped):"
		for l in "${MISSING[@]}"; do echo "- $l"; done
		echo
	fi
	[ "$DO_L4" = 1 ] && [ ${#L4_RUN[@]} -gt 0 ] && report_l4
	[ "$DO_HTTP" = 1 ] && [ ${#HTTP_RUN[@]} -gt 0 ] && report_http
	report_targets
	report_rounds
	if [ ${#FAILURES[@]} -gt 0 ]; then
		echo "### Failures"
		echo
		for l in "${FAILURES[@]}"; do echo "- ${l//$'\n'/ }"; done
		echo
	fi
}

# ---------------------------------------------------------------- main

L4_RUN=()
HTTP_RUN=()
HTTP_POINTS=()
note_load "start"
if [ "$DO_L4" = 1 ]; then
	l4_section || fail "layer 4 section could not start"
	stop_section
fi
if [ "$DO_HTTP" = 1 ]; then
	http_section || fail "HTTP section could not start"
	stop_section
fi
note_load "end"

mkdir -p "$(dirname "$OUT")"
report | tee "$OUT"
log "written to $OUT"
[ ${#FAILURES[@]} -eq 0 ]
