#!/usr/bin/env bash
# `just image`: builds the meshlife image on this machine from what the project builds, without
# any registry: the release binary (`cargo build --release --locked -p meshlife`, the host's
# glibc target, the same target/release/meshlife `cargo run --release` builds, so that CI builds
# Rust release once and this is a no-op when it is up to date) and exactly the shared libraries
# `ldd` lists for it (the dynamic loader, libc, libm, libgcc_s), copied from this machine's Debian
# at the same paths: the layout of Google's distroless/cc. image/Dockerfile packs them FROM
# scratch, tagged with the crate's version (the reference `meshlife install` prints). Beside it
# in target/image/: the image's SBOM (CycloneDX: the binary's crates from Cargo.lock by
# cargo-cyclonedx, plus the Debian package, with its version, of every library the image holds).
#
#   MESHLIFE_IMAGE   the reference to tag (default ghcr.io/meshlife/meshlife:<crate version>)
#   MESHLIFE_ACTION_IMAGE  the GitHub Action's image (default
#                    ghcr.io/meshlife/meshlife-action:<crate version>)
#   MESHLIFE_TOOLS   cache of installed tools (default ~/.cache/meshlife-tools)
# Prints the reference, the image's size and the SBOM's component count.
set -euo pipefail
cd "$(dirname "$0")/.."
source image/machine.sh
CARGO_CYCLONEDX_VERSION=0.5.9
# The host's target, the one `cargo build --release` builds without --target.
TARGET=$(rustc -vV | sed -n 's/^host: //p')
out=target/image
start=$SECONDS

echo "== cargo build --release --locked -p meshlife"
cargo build --release --locked -p meshlife
binary="${CARGO_TARGET_DIR:-target}/release/meshlife"
version=$("$binary" --version | awk '{print $2}')
reference=${MESHLIFE_IMAGE:-ghcr.io/meshlife/meshlife:$version}

# The libraries the binary loads, as ldd prints them: "name => /path (address)", "/path
# (address)" for the loader, "name => not found", and linux-vdso (the kernel's, no file).
if ! listed=$(ldd "$binary" 2>&1); then
    echo "image: ldd $binary failed: $listed" >&2
    exit 1
fi
libraries=()
missing=()
while read -r first second third _; do
    if [ "$second" = "=>" ]; then
        if [ "$third" = "not" ]; then
            missing+=("$first")
        elif [[ "$third" == /* ]]; then
            libraries+=("$third")
        fi
    elif [[ "$first" == /* ]]; then
        libraries+=("$first")
    fi
done <<<"$listed"
if [ ${#missing[@]} -gt 0 ]; then
    echo "image: ldd lists libraries of $binary that this machine does not have: ${missing[*]}" >&2
    echo "$listed" >&2
    exit 1
fi
if [ ${#libraries[@]} -eq 0 ]; then
    echo "image: ldd lists no library for $binary (is it static?): $listed" >&2
    exit 1
fi

# Each library's Debian package and version, for the SBOM: dpkg knows a file by the path its
# package ships it at, which under merged /usr is either the path ldd prints or its real one.
packages=$out/debian-packages.tsv
mkdir -p "$out"
: > "$packages"
for library in "${libraries[@]}"; do
    owner=""
    for path in "$library" "$(readlink -f "$library")"; do
        owner=$(dpkg -S "$path" 2>/dev/null | grep -v '^diversion ' | head -n 1 | sed 's/: .*//') || true
        [ -n "$owner" ] && break
    done
    if [ -z "$owner" ]; then
        echo "image: $library (ldd lists it) belongs to no Debian package dpkg -S knows" >&2
        exit 1
    fi
    # "libc6:amd64" (Multi-Arch: same) or "libfoo" alone.
    name=${owner%%:*}
    package_version=$(dpkg-query -W -f='${Version}' "$owner")
    architecture=$(dpkg-query -W -f='${Architecture}' "$owner")
    printf '%s\t%s\t%s\t%s\n' "$name" "$package_version" "$architecture" "$library" >> "$packages"
done

rm -rf "$out/context"
mkdir -p "$out/context/libraries"
cp image/Dockerfile "$binary" "$out/context/"
for library in "${libraries[@]}"; do
    mkdir -p "$out/context/libraries$(dirname "$library")"
    cp -L "$library" "$out/context/libraries$library"
done
# Each package's copyright and licence file goes with its libraries (glibc is LGPL, libgcc GPL
# with the runtime exception), where Debian and distroless keep it.
for name in $(cut -f1 "$packages" | sort -u); do
    copyright=/usr/share/doc/$name/copyright
    if [ ! -f "$copyright" ]; then
        echo "image: $copyright is missing: the image would carry $name without its licence" >&2
        exit 1
    fi
    mkdir -p "$out/context/libraries/usr/share/doc/$name"
    cp "$copyright" "$out/context/libraries/usr/share/doc/$name/copyright"
done
ensure_docker
echo "== docker build -t $reference ($(basename "$binary") and ${#libraries[@]} libraries: ${libraries[*]})"
docker build --quiet -t "$reference" \
    --build-arg VERSION="$version" \
    --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --build-arg SOURCE="https://github.com/meshlife/meshlife" \
    --build-arg LICENSES="Apache-2.0" \
    "$out/context" > /dev/null
# The GitHub Action's image (the Dockerfile's stage `action`): the same layers, root, and
# `meshlife action` as its entrypoint; action.yml names it.
action_reference=${MESHLIFE_ACTION_IMAGE:-ghcr.io/meshlife/meshlife-action:$version}
echo "== docker build --target action -t $action_reference"
docker build --quiet --target action -t "$action_reference" \
    --build-arg VERSION="$version" \
    --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --build-arg SOURCE="https://github.com/meshlife/meshlife" \
    --build-arg LICENSES="Apache-2.0" \
    "$out/context" > /dev/null
echo "$action_reference" > "$out/action-reference"
# The binary runs in the image with only what was copied (no ld.so.cache, no /usr/lib).
expected=$("$binary" --version)
if ! said=$(docker run --rm "$reference" --version 2>&1) || [ "$said" != "$expected" ]; then
    echo "image: docker run --rm $reference --version printed '$said', expected '$expected'" >&2
    exit 1
fi

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
sbom=$out/meshlife-$version.cdx.json
mv host-test/meshlife.cdx.json "$sbom"
# cargo-cyclonedx writes one beside every member of the workspace; only the binary's is kept.
rm -f policy/meshlife.cdx.json compat/meshlife.cdx.json
# What the image carries from Debian: a component per package, the files copied as properties,
# and the binary depending on each.
/usr/bin/python3 - "$sbom" "$packages" <<'PYTHON'
import json, sys, urllib.parse

sbom_path, packages_path = sys.argv[1:]
sbom = json.load(open(sbom_path))
packages = {}
for line in open(packages_path):
    name, version, architecture, path = line.rstrip("\n").split("\t")
    packages.setdefault((name, version, architecture), []).append(path)
refs = []
for (name, version, architecture), paths in sorted(packages.items()):
    purl = f"pkg:deb/debian/{name}@{urllib.parse.quote(version, safe=':')}?arch={architecture}"
    refs.append(purl)
    sbom["components"].append({
        "type": "library",
        "bom-ref": purl,
        "name": name,
        "version": version,
        "description": "Debian package of a shared library copied into the image",
        "purl": purl,
        "properties": [{"name": "meshlife:image:file", "value": path} for path in sorted(paths)],
    })
root = sbom["metadata"]["component"]["bom-ref"]
for dependency in sbom.setdefault("dependencies", []):
    if dependency["ref"] == root:
        dependency.setdefault("dependsOn", []).extend(refs)
        break
else:
    sbom["dependencies"].append({"ref": root, "dependsOn": refs})
sbom["dependencies"] += [{"ref": ref} for ref in refs]
with open(sbom_path, "w") as file:
    json.dump(sbom, file, indent=2)
    file.write("\n")
PYTHON

size=$(docker image inspect --format '{{.Size}}' "$reference")
components=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["components"]))' "$sbom")
debian=$(cut -f1,2 "$packages" | sort -u | tr '\t' ' ' | paste -sd, - | sed 's/,/, /g')
echo "$reference: $((size / 1024 / 1024)) MiB ($size bytes), built in $((SECONDS - start)) s"
echo "SBOM: $sbom (CycloneDX 1.5, $components components; from Debian: $debian)"
echo "$reference" > "$out/reference"
