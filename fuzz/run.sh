#!/usr/bin/env bash
# Runs a fuzz target (or `all` of them, one after the other) for SECONDS each:
#   bash fuzz/run.sh TARGET|all [SECONDS]        (just fuzz TARGET [SECONDS])
# Installs cargo-fuzz (pinned) into a cache folder, writes the seed corpus from the repository's
# examples and rule cases, builds, and runs libFuzzer. A crash fails the script and leaves the
# input in $WORK/artifacts/TARGET/. Environment:
#   MESHLIFE_TOOLS            cache of installed tools (default ~/.cache/meshlife-tools)
#   MESHLIFE_FUZZ_TARGET_DIR  the instrumented build (default $MESHLIFE_TOOLS/fuzz-target)
#   MESHLIFE_FUZZ_WORK        corpora, artifacts and logs (default fuzz/ in the clone)
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(one_pass_vs_exact yaml_subset proxy_config manifest_reading)
target=${1:?usage: fuzz/run.sh TARGET|all [SECONDS]}
seconds=${2:-60}
if [ "$target" = all ]; then
    selected=("${TARGETS[@]}")
else
    [[ " ${TARGETS[*]} " == *" $target "* ]] || { echo "unknown target $target (${TARGETS[*]})" >&2; exit 2; }
    selected=("$target")
fi

CARGO_FUZZ_VERSION=0.13.2
TOOLS=${MESHLIFE_TOOLS:-$HOME/.cache/meshlife-tools}
FUZZ_ROOT=$TOOLS/cargo-fuzz-$CARGO_FUZZ_VERSION
TARGET_DIR=${MESHLIFE_FUZZ_TARGET_DIR:-$TOOLS/fuzz-target}
WORK=${MESHLIFE_FUZZ_WORK:-$PWD/fuzz}
if [ ! -x "$FUZZ_ROOT/bin/cargo-fuzz" ]; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION into $FUZZ_ROOT"
    cargo install --locked --quiet cargo-fuzz --version "$CARGO_FUZZ_VERSION" --root "$FUZZ_ROOT"
fi
export PATH=$FUZZ_ROOT/bin:$PATH

# The stable toolchain is enough: with `--sanitizer none` cargo-fuzz 0.13 passes no -Z flag
# (only -Cpasses=sancov-module and -Cllvm-args for the coverage counters, which stable
# accepts), so neither nightly nor RUSTC_BOOTSTRAP is needed. AddressSanitizer would need
# nightly's -Zsanitizer; the targets are safe Rust, where a memory error cannot come from the
# code under test, so coverage guidance and the targets' own assertions are what matter.
build_flags=(--sanitizer none --target-dir "$TARGET_DIR" --fuzz-dir fuzz)

echo "== seed corpora from examples/ and policy/tests/cases/"
(cd fuzz && CARGO_TARGET_DIR=$TARGET_DIR/seed cargo run --quiet --release -p meshlife-fuzz-seed -- .. "$WORK/corpus")

for name in "${selected[@]}"; do
    features=()
    # The CLI's tree (wasmtime, tokio, ...) is built only for the target that reads with it.
    [ "$name" = manifest_reading ] && features=(--features cli)
    case "$name" in
        one_pass_vs_exact) options=(-dict=fuzz/dict/json.dict -max_len=65536) ;;
        manifest_reading) options=(-dict=fuzz/dict/yaml.dict -max_len=16384) ;;
        *) options=(-dict=fuzz/dict/yaml.dict -max_len=4096) ;;
    esac
    mkdir -p "$WORK/artifacts/$name"
    # What earlier runs found is replayed first: libFuzzer reads the whole corpus before mutating.
    if [ -d "fuzz/regressions/$name" ]; then
        cp fuzz/regressions/"$name"/* "$WORK/corpus/$name/" 2>/dev/null || true
    fi
    echo "== fuzz $name for ${seconds}s"
    # -timeout: an input that takes 10 s is a hang (the readers must be linear); -rss_limit_mb
    # keeps a memory blow-up a finding rather than the kernel's business.
    cargo fuzz run "${build_flags[@]}" "${features[@]}" "$name" "$WORK/corpus/$name" -- \
        "${options[@]}" -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds" \
        -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$name/"
done
