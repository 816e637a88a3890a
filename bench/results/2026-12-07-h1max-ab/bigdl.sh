#!/bin/bash
# usage: bigdl.sh BIN WINDOW
W=/tmp/weft-bench.0xlDF1; P=17000
BIN=$1; export WEFT_PROXY_HTTP2_STREAM_WINDOW=$2
cd $W
/tmp/bins/dlsrv 127.0.0.1:$((P+80)) >/dev/null 2>&1 & B=$!
env WEFT_PROXY_LOG_LEVEL=warn $BIN run --static $W/conf/weft-server.yaml --inbound-addr 127.0.0.1:$((P+143)) --outbound-addr off --admin-addr 127.0.0.1:$((P+192)) --inbound-ports $((P+80)),$((P+90)) --inbound-opaque-ports "" --shutdown-grace-period 1s >/tmp/alt/s.log 2>&1 & S=$!
env WEFT_PROXY_LOG_LEVEL=warn $BIN run --static $W/conf/weft-client.yaml --inbound-addr off --outbound-addr off --admin-addr 127.0.0.1:$((P+191)) --outbound-mappings 127.0.0.1:$((P+111))=web.bench.svc.cluster.local:$((P+80)) --shutdown-grace-period 1s >/tmp/alt/c.log 2>&1 & C=$!
for i in $(seq 50); do curl -sf 127.0.0.1:$((P+191))/ready >/dev/null && curl -sf 127.0.0.1:$((P+192))/ready >/dev/null && break; sleep 0.2; done
for i in 1 2 3; do curl -s --http2-prior-knowledge -o /dev/null -w "win=$2 h2 %{size_download} bytes %{speed_download} B/s\n" "http://127.0.0.1:$((P+111))/big?bytes=268435456"; done
kill $C $S $B; wait 2>/dev/null
