#!/usr/bin/env bash
# Runs the packages whose code starts goroutines under the race detector,
# STRESS_COUNT times (default 3), while stress-ng keeps every core busy:
# tests must order events by events and take their bounds from the
# mechanism, so they hold on a loaded machine. Installs nothing.
#
#   STRESS_PKGS   packages to run (default: every package of the module whose
#                 non-test code has a go statement)
#   STRESS_CPUS   stress-ng CPU workers (default: the number of cores)
#   STRESS_COUNT  go test -count (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v stress-ng >/dev/null 2>&1; then
  echo "test-stress: stress-ng is not installed, so nothing was run (Debian: apt-get install stress-ng)" >&2
  exit 2
fi
go=${GO:-go}
cpus=${STRESS_CPUS:-$(nproc)}
count=${STRESS_COUNT:-3}
timeout=${GOTEST_TIMEOUT:-60m}

if [ -n "${STRESS_PKGS:-}" ]; then
  read -r -a pkgs <<<"$STRESS_PKGS"
else
  pkgs=()
  while read -r path dir files; do
    for f in $files; do
      if grep -qE '(^|[^[:alnum:]_])go (func|[[:alnum:]_.]+\()' "$dir/$f"; then
        pkgs+=("$path")
        break
      fi
    done
  done < <("$go" list -f '{{.ImportPath}} {{.Dir}} {{join .GoFiles " "}}' ./...)
fi
echo "test-stress: ${#pkgs[@]} packages, -race -count=$count, beside stress-ng --cpu $cpus"

stress-ng --cpu "$cpus" --timeout 4h --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true' EXIT
"$go" test -race -count="$count" -timeout "$timeout" "${pkgs[@]}"
