#!/bin/bash
# issue 27: made-you-reset-outbound with growing windows against fixed 1 MiB, alternated, one binary.
cd /work/wt/lead38
touch /tmp/QUIET
for i in $(seq 1 30); do
  l=$(cut -d' ' -f1 /proc/loadavg)
  if awk -v l="$l" 'BEGIN{exit !(l<1.2)}'; then break; fi
  sleep 10
done
echo "start $(date -u +%H:%M:%S) load $(cat /proc/loadavg)" >> /tmp/atk38/log
for mode in grow fixed fixed grow grow fixed; do
  env=""
  [ "$mode" = fixed ] && env="WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW=1048576"
  echo "$mode $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/atk38/log
  env $env WEFT_PROXY_BIN=/tmp/bins38/weft-proxy-grow bash bench/attack.sh --pin --attack jam-only-outbound,made-you-reset-outbound --rounds 3 --out /tmp/atk38/$mode-$(date -u +%H%M%S).md > /tmp/atk38/$mode-$(date -u +%H%M%S).out 2>&1
done
echo "bench $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/atk38/log
cd mesh/dataplane && /tmp/lead38-dp.test -test.run XXX -test.bench 'DownloadByStreamWindow' -test.benchtime 1s -test.count 3 > /tmp/atk38/download.txt 2>&1
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/atk38/log
rm -f /tmp/QUIET
touch /tmp/atk38/done
