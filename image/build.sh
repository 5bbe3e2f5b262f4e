#!/usr/bin/env bash
# `just image`: builds the meshlife image on this machine from what the project builds, without
# any registry: the static musl binary (cargo, --locked), packed by image/Dockerfile FROM
# scratch and tagged with the crate's version (the reference `meshlife install` prints), plus the
# binary's SBOM (CycloneDX, from Cargo.lock, by cargo-cyclonedx) beside it in target/image/.
#
#   MESHLIFE_IMAGE   the reference to tag (default ghcr.io/meshlife/meshlife:<crate version>)
#   MESHLIFE_TOOLS   cache of installed tools (default ~/.cache/meshlife-tools)
# Prints the reference, the image's size and the SBOM's component count.
set -euo pipefail
cd "$(dirname "$0")/.."
source image/machine.sh
CARGO_CYCLONEDX_VERSION=0.5.9
TARGET=x86_64-unknown-linux-musl
out=target/image
start=$SECONDS

# musl-gcc compiles the C in the tree (ring, zstd) for the static target; file checks the result.
install_debian_packages musl-tools file
rustup target add "$TARGET" 2>&1 | grep -v "is up to date" || true
echo "== cargo build --release --locked --target $TARGET -p meshlife"
cargo build --release --locked --target "$TARGET" -p meshlife
binary="${CARGO_TARGET_DIR:-target}/$TARGET/release/meshlife"
if ! file -L "$binary" | grep -q "statically linked\|static-pie linked"; then
    echo "image: $binary is not static: $(file -L "$binary")" >&2
    exit 1
fi
version=$("$binary" --version | awk '{print $2}')
reference=${MESHLIFE_IMAGE:-ghcr.io/meshlife/meshlife:$version}

rm -rf "$out/context"
mkdir -p "$out/context"
cp image/Dockerfile "$binary" "$out/context/"
ensure_docker
echo "== docker build -t $reference"
docker build --quiet -t "$reference" \
    --build-arg VERSION="$version" \
    --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --build-arg SOURCE="https://github.com/meshlife/meshlife" \
    --build-arg LICENSES="Apache-2.0" \
    "$out/context" > /dev/null

tools=${MESHLIFE_TOOLS:-$HOME/.cache/meshlife-tools}
cyclonedx_root=$tools/cargo-cyclonedx-$CARGO_CYCLONEDX_VERSION
if [ ! -x "$cyclonedx_root/bin/cargo-cyclonedx" ]; then
    echo "== cargo install cargo-cyclonedx $CARGO_CYCLONEDX_VERSION (once, into $cyclonedx_root)"
    cargo install --locked --quiet cargo-cyclonedx --version "$CARGO_CYCLONEDX_VERSION" \
        --root "$cyclonedx_root"
fi
# The binary's dependencies as Cargo.lock resolves them for its target, dev and build ones aside.
"$cyclonedx_root/bin/cargo-cyclonedx" cyclonedx --manifest-path host-test/Cargo.toml \
    --format json --target "$TARGET" --no-build-deps --spec-version 1.5 \
    --override-filename meshlife.cdx > /dev/null
mv host-test/meshlife.cdx.json "$out/meshlife-$version.cdx.json"
# cargo-cyclonedx writes one beside every member of the workspace; only the binary's is kept.
rm -f policy/meshlife.cdx.json compat/meshlife.cdx.json

size=$(docker image inspect --format '{{.Size}}' "$reference")
components=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["components"]))' \
    "$out/meshlife-$version.cdx.json")
echo "$reference: $((size / 1024 / 1024)) MiB ($size bytes), built in $((SECONDS - start)) s"
echo "SBOM: $out/meshlife-$version.cdx.json (CycloneDX 1.5, $components components)"
echo "$reference" > "$out/reference"
