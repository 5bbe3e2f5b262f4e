#!/usr/bin/env bash
# Builds the real Helm CLI (helm.sh/helm/v4, pinned by this folder's go.mod and go.sum) from the
# Go module proxy into compat/helm/bin/helm; rebuilt only when go.sum changes. Prints its path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null; then
    echo "compat/helm/install.sh: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
export GOFLAGS="-mod=readonly -buildvcs=false ${GOFLAGS:-}"
export GOTOOLCHAIN=local
if [ ! -x "$here/bin/helm" ] || ! cmp -s "$here/go.sum" "$here/bin/go.sum"; then
    echo "building Helm $(grep -m1 'helm.sh/helm/v4 ' "$here/go.mod" | awk '{print $NF}') from the Go module proxy" >&2
    mkdir -p "$here/bin"
    (cd "$here" && CGO_ENABLED=0 go build -trimpath -o bin/helm helm.sh/helm/v4/cmd/helm)
    cp "$here/go.sum" "$here/bin/go.sum"
fi
echo "$here/bin/helm"
