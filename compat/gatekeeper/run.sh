#!/usr/bin/env bash
# Gatekeeper's own code against a live `meshlife serve` (see compat/README-gatekeeper.md).
# Usage: compat/gatekeeper/run.sh [MESHLIFE_BINARY]   (default: the release build)
# Needs Go 1.26 on PATH; the modules come from the Go module proxy, pinned by go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
binary="${1:-$target/release/meshlife}"
if [ ! -x "$binary" ]; then
    echo "gatekeeper-compat: no meshlife binary at $binary (cargo build --release first)" >&2
    exit 2
fi
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH" # where the Go tarball installs it, not always on PATH
fi
if ! command -v go >/dev/null; then
    echo "gatekeeper-compat: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
# readonly: a build that would need another module version fails instead of editing go.mod.
# local toolchain: go.mod's `go 1.26.0` must never make the go command fetch a toolchain.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
export GOTOOLCHAIN=local
out="$target/compat/gatekeeper-compat"
mkdir -p "$(dirname "$out")"
start=$(date +%s)
(cd "$here" && go build -trimpath -ldflags='-s -w' -o "$out" .)
echo "gatekeeper-compat: built in $(( $(date +%s) - start ))s"
case "$binary" in /*) ;; *) binary="$PWD/$binary" ;; esac
exec "$out" -meshlife "$binary" -repo "$repo"
