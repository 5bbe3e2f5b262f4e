#!/usr/bin/env bash
# Kyverno's own CLI against a live `meshlife serve` (see compat/README-kyverno.md).
# Usage: compat/kyverno/run.sh [MESHLIFE_BINARY]   (default: the release build)
# Needs Go 1.26 on PATH; Kyverno v1.19.0 and its modules come from the Go module proxy, pinned
# by go.sum. The CLI is built once into target/compat/ and rebuilt when go.sum changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
binary="${1:-$target/release/meshlife}"
if [ ! -x "$binary" ]; then
    echo "kyverno-compat: no meshlife binary at $binary (cargo build --release first)" >&2
    exit 2
fi
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH" # where the Go tarball installs it, not always on PATH
fi
if ! command -v go >/dev/null; then
    echo "kyverno-compat: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
# readonly: a build that would need another module version fails instead of editing go.mod.
# local toolchain: go.mod's `go` line must never make the go command fetch a toolchain.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
export GOTOOLCHAIN=local
out="$target/compat/kyverno"
mkdir -p "$out"
stamp="$out/kyverno.go.sum"
start=$(date +%s)
# Kyverno's CLI is a large build (about 6 minutes on 2 cores); kept while go.sum is the same.
if [ ! -x "$out/kyverno" ] || ! cmp -s "$here/go.sum" "$stamp"; then
    (cd "$here" && go build -trimpath -ldflags='-s -w' -o "$out/kyverno" \
        github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno)
    cp "$here/go.sum" "$stamp"
fi
(cd "$here" && go build -trimpath -o "$out/kyverno-compat" .)
echo "kyverno-compat: $("$out/kyverno" version | head -1), built in $(( $(date +%s) - start ))s"
case "$binary" in /*) ;; *) binary="$PWD/$binary" ;; esac
exec "$out/kyverno-compat" -meshlife "$binary" -kyverno "$out/kyverno" -repo "$repo"
