#!/usr/bin/env bash
# Runs every Go fuzz target in the module briefly (FUZZTIME, default 5s).
# go test accepts one fuzz target per run, so each gets its own invocation.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
count=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    count=$((count + 1))
    echo "fuzz: $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -timeout 5m "$pkg"; then
      echo "fuzz: FAILED $pkg $target"
      status=1
    fi
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
echo "fuzz: $count targets run"
exit $status
