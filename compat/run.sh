#!/usr/bin/env bash
# The compatibility matrix (`just compat`): installs every host from its registry (npm, PyPI,
# crates.io; the real OPA, two versions, from the Go module proxy; the Java SDK from Maven
# Central), builds dist/, and runs meshlife-compat, which prints the matrix and exits non-zero
# on any difference; then runs Gatekeeper's own code against a live `meshlife serve`
# (compat/gatekeeper) and Kyverno's CLI (compat/kyverno), Go modules from the Go module proxy.
# Needs the Rust toolchain, Node.js + npm, Python 3.11 (+ a 3.10, see below), Go 1.26 with a C
# compiler (OPA 1.18 links wasmtime-go through cgo) and JDK 17 with Maven; everything else lands
# in compat/node/node_modules, compat/opa/bin, target/compat/, Go's module cache and ~/.m2.
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/compat
mkdir -p "$work"

echo "== npm: @open-policy-agent/opa-wasm (compat/node/package-lock.json)"
(cd compat/node && npm ci --no-audit --no-fund --loglevel=error)

# A venv per Python, rebuilt when its requirements change.
make_venv() {
    local python="$1" venv="$2" requirements="$3"
    if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$venv/requirements.txt"; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
        cp "$requirements" "$venv/requirements.txt"
    fi
}

python_3_11=""
for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null &&
        "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        python_3_11="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$python_3_11" ]; then
    echo "compat: no Python 3.11 or newer on PATH (opa-py-wasm and opa-wasmtime need it)" >&2
    exit 2
fi
echo "== PyPI: opa-py-wasm, opa-wasmtime on $("$python_3_11" --version)"
make_venv "$python_3_11" "$work/venv-3.11" compat/python/requirements-3.11.txt

# opa-wasm's engine, wasmer-python 1.1, has wheels for Python <= 3.10 only. Use a python3.10 on
# PATH, else one that pyenv installed; without either the matrix fails rather than skip it.
python_3_10="$(command -v python3.10 2>/dev/null || true)"
if [ -n "$python_3_10" ] && ! "$python_3_10" --version >/dev/null 2>&1; then
    python_3_10="" # a pyenv shim for a version that is not selected
fi
if [ -z "$python_3_10" ] && command -v pyenv >/dev/null; then
    python_3_10="$(ls -d "$(pyenv root)"/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [ -z "$python_3_10" ]; then
    echo "compat: no Python 3.10 (python3.10 on PATH or pyenv) for PyPI opa-wasm (wasmer)" >&2
    exit 2
fi
echo "== PyPI: opa-wasm (wasmer) on $("$python_3_10" --version)"
make_venv "$python_3_10" "$work/venv-3.10" compat/python/requirements-3.10.txt

echo "== Go module proxy: the real OPA, v1.22.3 (wazero) and v1.18.2 (wasmtime-go), -tags opa_wasm"
bash compat/opa/install.sh

echo "== Maven Central: the Java SDK (compat/java/pom.xml)"
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "compat: the Java SDK runner needs java (17+) and mvn on PATH" >&2
    exit 2
fi
java_out="$work/java"
mvn -B -q -Dstyle.color=never -f compat/java/pom.xml compile dependency:copy-dependencies \
    -DoutputDirectory="$PWD/$java_out/lib" -DincludeScope=runtime

echo "== dist/: the module, the Kubewarden module and the OPA bundle"
cargo run --release --quiet -- build

echo "== the matrix"
cargo run --release --quiet -p meshlife-compat -- \
    --python-3-11 "$work/venv-3.11/bin/python" \
    --python-3-10 "$work/venv-3.10/bin/python" \
    --opa compat/opa/bin/v1.22.3 --opa compat/opa/bin/v1.18.2 \
    --java-classpath "$java_out/classes:$java_out/lib/*" \
    "$@"

echo "== Gatekeeper: its constraint client and gator verify against a live meshlife serve"
bash compat/gatekeeper/run.sh "${CARGO_TARGET_DIR:-target}/release/meshlife"

echo "== Kyverno: kyverno apply with meshlife's policies against a live meshlife serve"
bash compat/kyverno/run.sh "${CARGO_TARGET_DIR:-target}/release/meshlife"
