#!/usr/bin/env bash
# Builds the real OPA, two versions, from the Go module proxy, pinned by compat/opa/host's
# go.sum files: into compat/opa/bin/vX.Y.Z/ the `opa` CLI and `opa-host` (compat/opa/host, the
# matrix's runner linking the same OPA as a library). compat/opa/bin/opa is the newest CLI, for
# `meshlife bench serve`. A version is rebuilt only when its go.sum changes.
#
#   v1.22.3  wazero (pure Go): go.mod / go.sum, CGO_ENABLED=0
#   v1.18.2  wasmtime-go v44 (cgo, its static libwasmtime.a ships in the Go module): go.1.18.mod
#
# `-tags opa_wasm`: a plain build links no wasm engine ("WebAssembly: unavailable";
# ../shared/docs/real-hosts.md §1.2).
# Usage: compat/opa/install.sh [v1.22.3|v1.18.2]...   (default: both)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null; then
    echo "compat/opa/install.sh: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
export GOFLAGS="-mod=readonly -buildvcs=false ${GOFLAGS:-}"
export GOTOOLCHAIN=local

build() {
    local version="$1" modfile="$2" cgo="$3"
    local out="$here/bin/$version" sum="$here/host/${modfile%.mod}.sum"
    if [ "$cgo" = 1 ] && ! command -v "${CC:-cc}" >/dev/null; then
        echo "compat/opa/install.sh: OPA $version links wasmtime-go through cgo; no C compiler" >&2
        exit 2
    fi
    local start=$SECONDS
    mkdir -p "$out"
    # The CLI is the long build: kept while go.sum is the same.
    if [ ! -x "$out/opa" ] || ! cmp -s "$sum" "$out/go.sum"; then
        echo "building OPA $version with -tags opa_wasm (CGO_ENABLED=$cgo; a few minutes on 2 cores)" >&2
        (cd "$here/host" && CGO_ENABLED=$cgo go build -modfile="$modfile" -tags opa_wasm -trimpath \
            -o "$out/opa" github.com/open-policy-agent/opa)
        cp "$sum" "$out/go.sum"
    fi
    # The runner follows its source; Go's build cache makes an unchanged one a no-op.
    (cd "$here/host" && CGO_ENABLED=$cgo go build -modfile="$modfile" -tags opa_wasm -trimpath \
        -o "$out/opa-host" .)
    echo "  $("$out/opa" version | grep -E '^(Version|WebAssembly):' | tr '\n' ' ')ready in $((SECONDS - start)) s" >&2
}

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(v1.22.3 v1.18.2)
for version in "${versions[@]}"; do
    case "$version" in
        v1.22.3) build v1.22.3 go.mod 0 ;;
        v1.18.2) build v1.18.2 go.1.18.mod 1 ;;
        *) echo "compat/opa/install.sh: no pinned build for OPA $version (v1.22.3, v1.18.2)" >&2; exit 2 ;;
    esac
done
if [ -x "$here/bin/v1.22.3/opa" ]; then
    ln -sfn v1.22.3/opa "$here/bin/opa"
fi
