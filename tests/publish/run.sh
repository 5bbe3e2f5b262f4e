#!/usr/bin/env bash
# The two crates as crates.io gets them, and `cargo install` of the CLI as a Rust user runs it.
#
#   tests/publish/run.sh dry-run   cargo publish --dry-run of meshlife-policy and meshlife: each
#                                  packaged, and the packaged meshlife built with no workspace
#                                  around it (its wasm module from the packaged meshlife-policy's
#                                  files); cargo verifies in the dev profile, so CI runs this
#                                  while target/debug is still there
#   tests/publish/run.sh install   cargo install --path host-test, and cargo install of the
#                                  packaged crate (target/package, from the dry run), each run
#                                  on an example it must refuse; release, so after the release
#                                  build, whose dependencies they reuse
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
mode=${1:?usage: tests/publish/run.sh dry-run|install}
target=${CARGO_TARGET_DIR:-$repo/target}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

case "$mode" in
dry-run)
    allow_dirty=()
    if [ -n "$(git status --porcelain)" ]; then
        echo "note: the working tree has changes not committed; packaging them (--allow-dirty)"
        allow_dirty=(--allow-dirty)
    fi
    cargo publish --dry-run --locked -p meshlife-policy -p meshlife "${allow_dirty[@]}"
    for crate in meshlife-policy meshlife; do
        file="$target/package/$crate-$version.crate"
        if [ ! -s "$file" ]; then
            echo "publish: $file was not written" >&2
            exit 1
        fi
        echo "$crate-$version.crate: $(du -h "$file" | cut -f1), $(tar tzf "$file" | wc -l) files"
    done
    ;;
install)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    export CARGO_TARGET_DIR=$target
    # The workspace's release profile (Cargo.toml: thin LTO), which a package outside the
    # workspace does not inherit: with it the installs reuse the release build's dependencies
    # instead of compiling them again, and no dependency is built twice into one folder under one
    # version (rustc then takes one build for the other: "multiple different versions of crate").
    export CARGO_PROFILE_RELEASE_LTO=thin
    packaged="$target/package/meshlife-$version"
    if [ ! -f "$packaged/Cargo.toml" ]; then
        echo "publish: $packaged is missing: run tests/publish/run.sh dry-run first" >&2
        exit 1
    fi
    echo "== cargo install --path host-test"
    cargo install --locked --path host-test --root "$work/from-path"
    # crates.io would give the packaged meshlife-policy from the registry; until it is there,
    # the one cargo packaged stands in for it.
    echo "== cargo install --path $packaged (the packaged crate)"
    cargo install --locked --path "$packaged" --root "$work/from-package" \
        --config "patch.crates-io.meshlife-policy.path=\"$target/package/meshlife-policy-$version\""
    failures=0
    for installed in from-path from-package; do
        binary="$work/$installed/bin/meshlife"
        status=0
        output=$("$binary" check examples/istio/deployment-drain-exceeds-grace.yaml 2>&1) || status=$?
        if [ "$status" = 1 ] && grep -q "ML401" <<<"$output"; then
            echo "PASS  $installed: $("$binary" --version) refuses the drain past grace (ML401, exit 1)"
        else
            echo "FAIL  $installed: meshlife check exited $status; expected 1 with ML401:"
            sed 's/^/      /' <<<"$output"
            failures=$((failures + 1))
        fi
    done
    [ "$failures" = 0 ] || exit 1
    ;;
*)
    echo "usage: tests/publish/run.sh dry-run|install" >&2
    exit 2
    ;;
esac
