#!/bin/bash
# usage: h1perf.sh BIN TAG  (uses the kept bench work dir's configs)
W=/tmp/weft-bench.0xlDF1; P=17000
BIN=$1; TAG=$2
cd $W
$W/bin/weftbench backend -http 127.0.0.1:$((P+80)) -grpc 127.0.0.1:$((P+90)) >/dev/null 2>&1 & B=$!
env WEFT_PROXY_LOG_LEVEL=warn $BIN run --static $W/conf/weft-server.yaml --inbound-addr 127.0.0.1:$((P+143)) --outbound-addr off --admin-addr 127.0.0.1:$((P+192)) --inbound-ports $((P+80)),$((P+90)) --inbound-opaque-ports "" --shutdown-grace-period 1s >/tmp/alt/s.log 2>&1 & S=$!
env WEFT_PROXY_LOG_LEVEL=warn $BIN run --static $W/conf/weft-client.yaml --inbound-addr off --outbound-addr off --admin-addr 127.0.0.1:$((P+191)) --outbound-mappings 127.0.0.1:$((P+111))=web.bench.svc.cluster.local:$((P+80)) --shutdown-grace-period 1s >/tmp/alt/c.log 2>&1 & C=$!
for i in $(seq 50); do curl -sf 127.0.0.1:$((P+191))/ready >/dev/null && curl -sf 127.0.0.1:$((P+192))/ready >/dev/null && break; sleep 0.2; done
wrk -t2 -c64 -d3s http://127.0.0.1:$((P+111))/ >/dev/null 2>&1
c0=$(awk '{print $14+$15}' /proc/$C/stat); s0=$(awk '{print $14+$15}' /proc/$S/stat)
if [ -n "$PERF" ]; then perf record -o /tmp/alt/perf-$TAG.data -F 499 -g -p $C,$S -- sleep 10 >/dev/null 2>&1 & PP=$!; fi
out=$(wrk -t2 -c64 -d10s http://127.0.0.1:$((P+111))/ 2>&1 | grep -E 'Requests/sec|Non-2xx')
c1=$(awk '{print $14+$15}' /proc/$C/stat); s1=$(awk '{print $14+$15}' /proc/$S/stat)
[ -n "$PERF" ] && wait $PP
echo "$TAG $out cpu_c=$((c1-c0)) cpu_s=$((s1-s0)) (ticks/10s)"
kill $C $S $B; wait 2>/dev/null
