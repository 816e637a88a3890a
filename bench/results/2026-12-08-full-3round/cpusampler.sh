# Run beside bench/run.sh; stop it by creating /tmp/fullbench.end.
while [ ! -e /tmp/fullbench.end ]; do
  printf 'T %(%s)T\n' -1
  for d in /proc/[0-9]*; do
    read -r c < $d/comm 2>/dev/null || continue
    case $c in haproxy|nginx|weft-proxy|weftbench|ghz|wrk|vegeta) read -r st < $d/stat; s=($st); echo "${d#/proc/} $c $((s[13]+s[14]))";; esac
  done
  sleep 5
done
