#!/usr/bin/env bash
# Checks the policy in manifests/ against the expectations in cases.yaml,
# once with the AuthorizationPolicy and once with the legacy
# ServerAuthorization: both must admit api-gateway and nobody else.
#
# Usage: ci.sh            (uses `weft` from PATH)
#        WEFT=/path/to/weft ci.sh
#
# Exit status: 0 when every case passes, 1 when a case fails, 2 when the
# manifests or the cases are invalid (the message names the file, the
# document and the field).
set -euo pipefail
cd "$(dirname "$0")"
weft=${WEFT:-weft}

status=0
for variant in authorizationpolicy serverauthorization; do
  echo "== policy with manifests/$variant"
  "$weft" policy test \
    --manifests manifests/base \
    --manifests "manifests/$variant" \
    --cases cases.yaml || status=$?
  if [ "$status" -ne 0 ]; then
    echo "== $variant: weft policy test exited with $status" >&2
    exit "$status"
  fi
done

echo "== machine-readable report (for CI annotations)"
"$weft" policy test --manifests manifests/base --manifests manifests/authorizationpolicy \
  --cases cases.yaml -o json > "${REPORT:-/dev/null}"
echo "all policy expectations hold"
