#!/usr/bin/env bash
# Runs every Go fuzz target in the module briefly (FUZZTIME, default 5s).
# go test accepts one fuzz target per run, so each gets its own invocation.
#
# Go 1.26's fuzz coordinator can fail a target at the -fuzztime boundary
# with a bare "context deadline exceeded": its shutdown check races the
# expiry of its own timer (golang/go#75804, fixed in Go 1.27). That failure
# names no input and writes no reproducer; it was seen twice in 125 target
# runs on 2-core machines (2026-12-02). A target whose only failure is exactly that
# is run again, up to three runs in all; anything else (a reproducer
# written, a panic, any other message, or that failure three times) fails
# the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
# Minimizing each new interesting input takes up to 60 s by default, which
# in a 5 s run leaves a target like internal/h2server's FuzzServeConn
# minimizing instead of fuzzing (seen: 0 execs/s for whole runs); a failing
# input is still written, less minimized.
minimizetime=${FUZZMINIMIZETIME:-1s}

# coordinator_deadline_only LOG: true when LOG's failure is the coordinator's
# bare deadline and nothing else.
coordinator_deadline_only() {
  local log=$1
  grep -q 'Failing input written to' "$log" && return 1
  grep -qE '^(panic:|fatal error:)' "$log" && return 1
  grep -q -- '--- FAIL: ' "$log" || return 1
  # Every line between "--- FAIL: Fuzz..." and the closing "FAIL" must be
  # the one deadline message.
  awk '
    /^--- FAIL: / { inside = 1; next }
    inside && /^FAIL$/ { inside = 0; next }
    inside && $0 !~ /^[[:space:]]*context deadline exceeded$/ { other = 1 }
    END { exit other }
  ' "$log"
}

self_test() {
  local dir
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"; trap - RETURN' RETURN
  printf 'fuzz: elapsed: 5s\n--- FAIL: FuzzA (5.10s)\n    context deadline exceeded\nFAIL\nexit status 1\n' >"$dir/flake"
  printf -- '--- FAIL: FuzzA (0.20s)\n    --- FAIL: FuzzA (0.00s)\n        x_test.go:9: boom\n\n    Failing input written to testdata/fuzz/FuzzA/abc\nFAIL\n' >"$dir/reproducer"
  printf -- '--- FAIL: FuzzA (5.10s)\n    context deadline exceeded\n    x_test.go:12: leaked goroutine\nFAIL\n' >"$dir/other"
  printf 'panic: runtime error: index out of range\n--- FAIL: FuzzA (5.10s)\n    context deadline exceeded\nFAIL\n' >"$dir/panic"
  printf 'ok  \tx\t5.1s\n' >"$dir/nofail"
  coordinator_deadline_only "$dir/flake" || { echo "fuzz self-test: the bare deadline was not recognised"; return 1; }
  local f
  for f in reproducer other panic nofail; do
    if coordinator_deadline_only "$dir/$f"; then
      echo "fuzz self-test: the $f log was taken for the coordinator's deadline"
      return 1
    fi
  done
}

self_test
status=0
count=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    count=$((count + 1))
    for attempt in 1 2 3; do
      echo "fuzz: $pkg $target ($fuzztime)"
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" -timeout 5m "$pkg" 2>&1 | tee "$log"; then
        break
      fi
      if [ "$attempt" -lt 3 ] && coordinator_deadline_only "$log"; then
        echo "fuzz: $target failed only with the coordinator's deadline (golang/go#75804); running it again"
        continue
      fi
      echo "fuzz: FAILED $pkg $target"
      status=1
      break
    done
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
echo "fuzz: $count targets run"
exit $status
