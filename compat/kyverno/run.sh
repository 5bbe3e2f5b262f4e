#!/usr/bin/env bash
# Kyverno's own CLI against a live `meshlife serve` (see compat/README-kyverno.md).
# Usage: compat/kyverno/run.sh [MESHLIFE_BINARY]   (default: the release build)
# Needs Go 1.26 on PATH; Kyverno v1.19.0 and its modules come from the Go module proxy, pinned
# by go.sum. The CLI is built once into target/compat/ and rebuilt when go.sum changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../go-harness.sh"
go_harness kyverno-compat "$here" "${1:-}"
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
exec "$out/kyverno-compat" -meshlife "$binary" -kyverno "$out/kyverno" -repo "$repo"
