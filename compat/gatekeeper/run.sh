#!/usr/bin/env bash
# Gatekeeper's own code against a live `meshlife serve` (see compat/README-gatekeeper.md).
# Usage: compat/gatekeeper/run.sh [MESHLIFE_BINARY]   (default: the release build)
# Needs Go 1.26 on PATH; the modules come from the Go module proxy, pinned by go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../go-harness.sh"
go_harness gatekeeper-compat "$here" "${1:-}"
out="$target/compat/gatekeeper-compat"
mkdir -p "$(dirname "$out")"
start=$(date +%s)
(cd "$here" && go build -trimpath -ldflags='-s -w' -o "$out" .)
echo "gatekeeper-compat: built in $(( $(date +%s) - start ))s"
exec "$out" -meshlife "$binary" -repo "$repo"
