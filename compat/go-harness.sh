# Sourced by the Go harnesses' run.sh (compat/gatekeeper, compat/kyverno): finds the meshlife
# binary and Go, and pins how Go builds. Sets `repo`, `target` and `binary`.
# Usage: go_harness NAME HERE [MESHLIFE_BINARY]
go_harness() {
    local name="$1" here="$2"
    repo="$(cd "$here/../.." && pwd)"
    target="${CARGO_TARGET_DIR:-$repo/target}"
    case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
    binary="${3:-$target/release/meshlife}"
    if [ ! -x "$binary" ]; then
        echo "$name: no meshlife binary at $binary (cargo build --release first)" >&2
        exit 2
    fi
    case "$binary" in /*) ;; *) binary="$PWD/$binary" ;; esac
    if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
        PATH="/usr/local/go/bin:$PATH" # where the Go tarball installs it, not always on PATH
    fi
    if ! command -v go >/dev/null; then
        echo "$name: no go on PATH (Go 1.26 is needed)" >&2
        exit 2
    fi
    # readonly: a build that would need another module version fails instead of editing go.mod.
    # local toolchain: go.mod's `go` line must never make the go command fetch a toolchain.
    export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
    export GOTOOLCHAIN=local
}
