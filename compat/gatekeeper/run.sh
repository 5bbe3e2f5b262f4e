#!/usr/bin/env bash
# Gatekeeper's own code against a live `meshlife serve` (see compat/README-gatekeeper.md).
# Usage: compat/gatekeeper/run.sh [MESHLIFE_BINARY]   (default: the release build)
# Needs Go 1.26 on PATH; the modules come from the Go module proxy, pinned by go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${1:-${CARGO_TARGET_DIR:-$repo/target}/release/meshlife}"
if [ ! -x "$binary" ]; then
    echo "gatekeeper-compat: no meshlife binary at $binary (cargo build --release first)" >&2
    exit 2
fi
if ! command -v go >/dev/null; then
    echo "gatekeeper-compat: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
# readonly: a build that would need another module version fails instead of editing go.mod.
# local toolchain: go.mod's `go 1.26.0` must never make the go command fetch a toolchain.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
export GOTOOLCHAIN=local
out="${CARGO_TARGET_DIR:-$repo/target}/compat/gatekeeper-compat"
mkdir -p "$(dirname "$out")"
start=$(date +%s)
(cd "$here" && go build -trimpath -ldflags='-s -w' -o "$out" .)
echo "gatekeeper-compat: built in $(( $(date +%s) - start ))s"
exec "$out" -meshlife "$binary" -repo "$repo"
