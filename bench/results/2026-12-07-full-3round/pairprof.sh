#!/bin/bash
# usage: W=WORKDIR [PERF=1] [PROXYENV="GOMAXPROCS=1"] pairprof.sh BIN TAG MODE   (MODE: h1max | h1rate5000 | grpcmax | grpc1000)
# Runs the Weft pair as bench/run.sh runs it (its kept configs), loads it 3 s then 10 s, prints each proxy's CPU ticks; with PERF=1, perf records both proxies.
W=${W:?set W to a bench/run.sh --keep work directory}; P=17000
BIN=$1; TAG=$2; MODE=$3
export PATH=$PATH:/root/go/bin
cd $W
$W/bin/weftbench backend -http 127.0.0.1:$((P+80)) -grpc 127.0.0.1:$((P+90)) >/dev/null 2>&1 & B=$!
env WEFT_PROXY_LOG_LEVEL=warn $PROXYENV $BIN run --static $W/conf/weft-server.yaml --inbound-addr 127.0.0.1:$((P+143)) --outbound-addr off --admin-addr 127.0.0.1:$((P+192)) --inbound-ports $((P+80)),$((P+90)) --inbound-opaque-ports "" --shutdown-grace-period 1s >${OUT:-/tmp}/s.log 2>&1 & S=$!
env WEFT_PROXY_LOG_LEVEL=warn $PROXYENV $BIN run --static $W/conf/weft-client.yaml --inbound-addr off --outbound-addr off --admin-addr 127.0.0.1:$((P+191)) --outbound-mappings 127.0.0.1:$((P+111))=web.bench.svc.cluster.local:$((P+80)),127.0.0.1:$((P+112))=grpc.bench.svc.cluster.local:$((P+90)) --shutdown-grace-period 1s >${OUT:-/tmp}/c.log 2>&1 & C=$!
for i in $(seq 50); do curl -sf 127.0.0.1:$((P+191))/ready >/dev/null && curl -sf 127.0.0.1:$((P+192))/ready >/dev/null && break; sleep 0.2; done
load() { # $1 seconds
  case $MODE in
  h1max) wrk -t2 -c64 -d${1}s http://127.0.0.1:$((P+111))/ 2>&1 | grep -E 'Requests/sec|Non-2xx' ;;
  grpcmax) ghz --insecure --call grpc.health.v1.Health.Check -d '{}' -c 50 --connections 1 -z ${1}s 127.0.0.1:$((P+112)) 2>&1 | grep -E 'Requests/sec|99 %|\[OK\]|Error' ;;
  h1rate*) echo "GET http://127.0.0.1:$((P+111))/" | vegeta attack -rate ${MODE#h1rate}/s -duration ${1}s -timeout 5s -max-workers 128 | vegeta report | grep -E "Latencies|Success" | tr -s ' ' ;;
  grpc1000) ghz --insecure --call grpc.health.v1.Health.Check -d '{}' -c 50 --connections 1 --rps 1000 -z ${1}s 127.0.0.1:$((P+112)) 2>&1 | grep -E 'Requests/sec|99 %|\[OK\]|Error' ;;
  esac
}
load 3 >/dev/null
c0=$(awk '{print $14+$15}' /proc/$C/stat); s0=$(awk '{print $14+$15}' /proc/$S/stat)
if [ -n "$PERF" ]; then perf record -o ${OUT:-/tmp}/perf-$TAG-$MODE.data -F 499 -g -p $C,$S -- sleep 10 >/dev/null 2>&1 & PP=$!; fi
out=$(load 10)
c1=$(awk '{print $14+$15}' /proc/$C/stat); s1=$(awk '{print $14+$15}' /proc/$S/stat)
[ -n "$PERF" ] && wait $PP
echo "$TAG $MODE $(echo $out) cpu_c=$((c1-c0)) cpu_s=$((s1-s0)) (ticks/10s)"
kill $C $S $B; wait 2>/dev/null
