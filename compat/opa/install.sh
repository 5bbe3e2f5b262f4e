#!/usr/bin/env bash
# Installs OPA's own server for `meshlife bench serve` (and the real-OPA checks) into
# compat/opa/bin/opa, from the Go module proxy, pinned.
#
# `-tags opa_wasm`: a plain `go install` links no wasm engine ("WebAssembly: unavailable";
# ../shared/docs/real-hosts.md §1.2). From v1.19 the engine is wazero, pure Go, so no cgo.
set -euo pipefail
cd "$(dirname "$0")"
version=v1.22.3
if [ -x bin/opa ] && bin/opa version 2>/dev/null | grep -q "^Version: ${version#v}$"; then
    exit 0
fi
echo "building OPA $version with -tags opa_wasm (a few minutes on 2 cores)" >&2
GOBIN="$PWD/bin" CGO_ENABLED=0 go install -tags opa_wasm "github.com/open-policy-agent/opa@$version"
bin/opa version | grep -E '^(Version|WebAssembly):' >&2
