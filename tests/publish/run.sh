#!/usr/bin/env bash
# The two crates as crates.io gets them, and `cargo install` of the CLI as a Rust user runs it.
#
#   tests/publish/run.sh packaged  cargo publish --dry-run and cargo package of meshlife-policy
#                                  and meshlife (each packaged; the packaged meshlife built with no
#                                  workspace around it, its wasm module from the packaged
#                                  meshlife-policy's files), then cargo install of the packaged
#                                  crate, run on an example it must refuse. Both in the dev
#                                  profile (cargo verifies in it; the install takes --debug to
#                                  share what the verification built), before the release build
#   tests/publish/run.sh path      cargo install --path host-test (release: after the release
#                                  build, whose artefacts it reuses), run the same way
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
mode=${1:?usage: tests/publish/run.sh packaged|path}
target=${CARGO_TARGET_DIR:-$repo/target}
export CARGO_TARGET_DIR=$target
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The packaged crate is built outside the workspace, so the workspace's profiles (Cargo.toml)
# do not apply to it. The release build is given the workspace's one (thin LTO): the release
# install of `path` and any later one then share the release build's dependencies. The dev build
# (cargo package's verification, and the --debug install that reuses it) cannot share the tests'
# build anyway (their dev-dependencies unify other features), so it is made quick: no debug
# information, dependencies unoptimised.
workspace_profiles=(
    --config 'profile.dev.debug=false'
    --config 'profile.release.lto="thin"'
)

refuses_the_example() {
    local name=$1 binary=$2 status=0 output
    output=$("$binary" check examples/istio/deployment-drain-exceeds-grace.yaml 2>&1) || status=$?
    if [ "$status" = 1 ] && grep -q "ML401" <<<"$output"; then
        echo "PASS  $name: $("$binary" --version) refuses the drain past grace (ML401, exit 1)"
    else
        echo "FAIL  $name: meshlife check exited $status; expected 1 with ML401:"
        sed 's/^/      /' <<<"$output"
        exit 1
    fi
}

case "$mode" in
packaged)
    allow_dirty=()
    if [ -n "$(git status --porcelain)" ]; then
        echo "note: the working tree has changes not committed; packaging them (--allow-dirty)"
        allow_dirty=(--allow-dirty)
    fi
    # cargo publish --dry-run does everything but the upload; cargo package then leaves the
    # .crate files and the unpacked crates in target/package/, verifying (building) the packaged
    # meshlife against the packaged policy, with no workspace around it.
    echo "== cargo publish --dry-run -p meshlife-policy -p meshlife (cargo package verifies)"
    cargo publish --dry-run --no-verify --locked -p meshlife-policy -p meshlife \
        "${allow_dirty[@]}"
    echo "== cargo package -p meshlife-policy -p meshlife"
    cargo package --locked -p meshlife-policy -p meshlife "${allow_dirty[@]}" \
        "${workspace_profiles[@]}"
    for crate in meshlife-policy meshlife; do
        file="$target/package/$crate-$version.crate"
        if [ ! -s "$file" ]; then
            echo "publish: $file was not written" >&2
            exit 1
        fi
        echo "$crate-$version.crate: $(du -h "$file" | cut -f1), $(tar tzf "$file" | wc -l) files"
    done
    # crates.io would give the packaged meshlife-policy from the registry; until it is there,
    # the one cargo packaged stands in for it.
    packaged="$target/package/meshlife-$version"
    echo "== cargo install --debug --locked --path $packaged (the packaged crate)"
    cargo install --debug --locked --path "$packaged" --root "$work/from-package" \
        "${workspace_profiles[@]}" \
        --config "patch.crates-io.meshlife-policy.path=\"$target/package/meshlife-policy-$version\""
    refuses_the_example "the packaged crate" "$work/from-package/bin/meshlife"
    ;;
path)
    echo "== cargo install --locked --path host-test"
    cargo install --locked --path host-test --root "$work/from-path"
    refuses_the_example "cargo install --path host-test" "$work/from-path/bin/meshlife"
    ;;
*)
    echo "usage: tests/publish/run.sh packaged|path" >&2
    exit 2
    ;;
esac
