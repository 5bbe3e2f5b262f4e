"""The PyPI side of the compatibility matrix.

python run_hosts.py --hosts opa-py-wasm,opa-wasmtime --module dist/meshlife.wasm \
    --context-module target/compat/meshlife.abi-1.1.wasm --fixtures target/compat/fixtures.json

Prints {"columns": [...], "checks": [...]} (see compat/src/external.rs) on stdout. Hosts:
- opa-py-wasm (intuit, wasmtime-py): fast path only, without and with data;
- opa-wasmtime (nickdeis, wasmtime-py): fast path only;
- opa-wasm (a2d24, wasmer-python 1.1; wheels for Python <= 3.10 only): fast and slow path.
"""

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path

ENTRYPOINT = "meshlife/violation"
INVENTORY = {"inventory": {"cluster": {}, "namespace": {}}}
ABSENT = "the SDK serialises a Python value: an absent input cannot be expressed"


def load_fixtures(index_path):
    directory = Path(index_path).parent
    fixtures = []
    for entry in json.loads(Path(index_path).read_text()):
        if entry.get("file") is None:
            fixtures.append((entry["id"], None, False))
        else:
            fixtures.append((entry["id"], json.loads((directory / entry["file"]).read_text()), True))
    return fixtures


def read_result_set(result_set):
    if not isinstance(result_set, list) or len(result_set) != 1 or not isinstance(
        result_set[0].get("result"), list
    ):
        return {"error": "not a one-binding result set: " + json.dumps(result_set)[:200]}
    msgs = []
    for violation in result_set[0]["result"]:
        if not isinstance(violation, dict) or not isinstance(violation.get("msg"), str):
            return {"error": "a violation without a string msg: " + json.dumps(violation)[:200]}
        msgs.append(violation["msg"])
    return {"msgs": msgs}


def evaluate_all(evaluate, fixtures):
    results = {}
    for fixture_id, value, present in fixtures:
        if not present:
            results[fixture_id] = {"not_applicable": ABSENT}
            continue
        try:
            results[fixture_id] = read_result_set(evaluate(value))
        except Exception as error:  # every host failure is a cell, not a crash
            results[fixture_id] = {"error": f"{type(error).__name__}: {error}"[:500]}
    return results


def column(host, package, how, results, memory_capped=False):
    return {
        "host": host,
        "version": metadata.version(package),
        "how": how,
        "memory_capped": memory_capped,
        "results": results,
    }


def opa_py_wasm(arguments, fixtures):
    from opapywasm import OpaWasmPolicy, PolicyConfig

    # A str input is read as JSON text by this SDK, so strings go in as their JSON text.
    def as_input(value):
        return json.dumps(value) if isinstance(value, str) else value

    policy = OpaWasmPolicy.from_wasm_file(arguments.module)
    plain = evaluate_all(lambda value: policy.evaluate_raw(as_input(value), ENTRYPOINT), fixtures)
    # Raised above the 2 MB fixture; the default guard (1,000,000 bytes) refuses it by design.
    roomy = PolicyConfig(max_input_bytes=8 << 20)
    with_data = OpaWasmPolicy.from_wasm_file(arguments.module, roomy)
    with_data.set_data(INVENTORY)
    data = evaluate_all(lambda value: with_data.evaluate_raw(as_input(value), ENTRYPOINT), fixtures)
    host = "PyPI opa-py-wasm"
    return [
        column(
            host,
            "opa-py-wasm",
            "opa_eval, no data (data address 0), default 1 MB input guard",
            plain,
            memory_capped=True,
        ),
        column(host, "opa-py-wasm", "opa_eval, set_data(inventory), max_input_bytes 8 MiB", data),
    ]


def opa_wasmtime(arguments, fixtures):
    import opa_wasmtime as host_module

    policy = host_module.OPAPolicy(arguments.module)
    results = evaluate_all(policy.evaluate, fixtures)
    return [column("PyPI opa-wasmtime", "opa-wasmtime", "opa_eval, 2024..5120 pages", results)]


def opa_wasm_wasmer(arguments, fixtures):
    from opa_wasm import OPAPolicy

    fast = OPAPolicy(arguments.module)
    if not fast.supports_fastpath:
        raise RuntimeError("opa-wasm did not select the opa_eval fast path for ABI 1.3")
    fast_results = evaluate_all(lambda value: fast.evaluate(value, ENTRYPOINT), fixtures)
    # The slow path is what the SDK uses below ABI 1.2: the context-path copy selects it.
    slow = OPAPolicy(arguments.context_module)
    if slow.supports_fastpath:
        raise RuntimeError("opa-wasm chose the fast path for the ABI 1.1 copy")
    slow_results = evaluate_all(lambda value: slow.evaluate(value, ENTRYPOINT), fixtures)
    host = "PyPI opa-wasm (wasmer)"
    return [
        column(host, "opa-wasm", "fast path (opa_eval), 5 pages, no growth before writing", fast_results),
        column(host, "opa-wasm", "slow path (eval context, ABI 1.1 copy)", slow_results),
    ]


HOSTS = {"opa-py-wasm": opa_py_wasm, "opa-wasmtime": opa_wasmtime, "opa-wasm": opa_wasm_wasmer}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", required=True, help=",".join(HOSTS))
    parser.add_argument("--module", required=True)
    parser.add_argument("--context-module", required=True)
    parser.add_argument("--fixtures", required=True)
    arguments = parser.parse_args()
    fixtures = load_fixtures(arguments.fixtures)
    columns = []
    for name in arguments.hosts.split(","):
        if name not in HOSTS:
            parser.error(f"unknown host {name}; known: {', '.join(HOSTS)}")
        columns.extend(HOSTS[name](arguments, fixtures))
    json.dump({"columns": columns, "checks": []}, sys.stdout)


if __name__ == "__main__":
    main()
