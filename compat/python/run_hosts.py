"""The PyPI side of the compatibility matrix.

python run_hosts.py --hosts opa-py-wasm,opa-wasmtime --module dist/meshlife.wasm \
    --context-module target/compat/meshlife.abi-1.1.wasm --fixtures target/compat/fixtures.json \
    --exhausting target/compat/exhausting.json

Prints {"columns": [...], "checks": [...]} (see compat/src/external.rs) on stdout. Hosts:
- opa-py-wasm (intuit, wasmtime-py): fast path only, without and with data;
- opa-wasmtime (nickdeis, wasmtime-py): fast path only;
- opa-wasm (a2d24, wasmer-python 1.1; wheels for Python <= 3.10 only): fast and slow path.
Each host also runs a "refusals then valid inputs" column: memory capped at CAPPED_PAGES, the
exhausting input (which must be refused) evaluated on the same instance before every fixture.
"""

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path

ENTRYPOINT = "meshlife/violation"
INVENTORY = {"inventory": {"cluster": {}, "namespace": {}}}
ABSENT = "the SDK serialises a Python value: an absent input cannot be expressed"
# compat/src/matrix.rs CAPPED_PAGES and REFUSALS_HOW.
CAPPED_PAGES = 16
REFUSALS_HOW = f"memory capped at {CAPPED_PAGES} pages, an out-of-memory refusal before every fixture"


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


def evaluate_one(evaluate, value):
    try:
        return read_result_set(evaluate(value))
    except Exception as error:  # every host failure is a cell, not a crash
        return {"error": f"{type(error).__name__}: {error}"[:500]}


def evaluate_all(evaluate, fixtures):
    results = {}
    for fixture_id, value, present in fixtures:
        if not present:
            results[fixture_id] = {"not_applicable": ABSENT}
            continue
        results[fixture_id] = evaluate_one(evaluate, value)
    return results


def evaluate_after_refusals(evaluate, fixtures, exhausting):
    """The exhausting input, then each fixture, on the one instance behind `evaluate`."""
    results, refusals = {}, {}
    for fixture_id, value, present in fixtures:
        refusals[fixture_id] = evaluate_one(evaluate, exhausting)
        results[fixture_id] = (
            evaluate_one(evaluate, value) if present else {"not_applicable": ABSENT}
        )
    return results, refusals


def column(host, package, how, results, memory_capped=False, refusals=None):
    entry = {
        "host": host,
        "version": metadata.version(package),
        "how": how,
        "memory_capped": memory_capped,
        "results": results,
    }
    if refusals is not None:
        entry["refusals"] = refusals
    return entry


def without_growth(evaluate):
    """For SDKs that write the input without growing the memory: an input larger than the whole
    capped memory then fails in that write as an IndexError, which is said as the limit it is (the
    matrix accepts a limit only for the large fixtures); any other error is left as it is."""

    def evaluate_capped(value):
        try:
            return evaluate(value)
        except IndexError as error:
            size = len(json.dumps(value))
            if size < CAPPED_PAGES * 65536:
                raise
            raise RuntimeError(
                f"the SDK does not grow the memory: {size} bytes cannot be written into "
                f"{CAPPED_PAGES} pages (IndexError: {error})"
            ) from error

    return evaluate_capped


def refusals_column(host, package, how, evaluate, fixtures, exhausting):
    results, refusals = evaluate_after_refusals(evaluate, fixtures, exhausting)
    return column(host, package, f"{REFUSALS_HOW}: {how}", results, True, refusals)


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
    # max_memory_pages caps the memory, pool_size 1 keeps one instance; but this SDK marks an
    # instance "poisoned" after any failure inside wasm and its pool replaces it, so every fixture
    # after a refusal runs on a fresh instance: this column shows the SDK's own recovery, not the
    # module surviving refusals. A check note says so, with the pool's count of instances.
    capped = OpaWasmPolicy.from_wasm_file(
        arguments.module, PolicyConfig(max_memory_pages=CAPPED_PAGES, pool_size=1)
    )
    refusals = refusals_column(
        host,
        "opa-py-wasm",
        f"PolicyConfig(max_memory_pages={CAPPED_PAGES}, pool_size=1), opa_eval, no data",
        lambda value: capped.evaluate_raw(as_input(value), ENTRYPOINT),
        fixtures,
        arguments.exhausting_value,
    )
    CHECKS.append(
        {
            "host": host,
            "name": "one instance through refusals (note)",
            "ok": True,
            "detail": (
                f"cannot be kept: the pool discards an instance after any failure in wasm "
                f"({capped.instances_created} instances created, {capped.instances_recreated} "
                f"recreated for {len(fixtures)} refusals), so its refusals column tests the "
                "SDK's recovery; the module's own survival is shown by the other hosts"
            ),
        }
    )
    return [
        column(
            host,
            "opa-py-wasm",
            "opa_eval, no data (data address 0), default 1 MB input guard",
            plain,
            memory_capped=True,
        ),
        column(host, "opa-py-wasm", "opa_eval, set_data(inventory), max_input_bytes 8 MiB", data),
        refusals,
    ]


def opa_wasmtime(arguments, fixtures):
    import opa_wasmtime as host_module

    policy = host_module.OPAPolicy(arguments.module)
    results = evaluate_all(policy.evaluate, fixtures)
    host = "PyPI opa-wasmtime"
    # This SDK writes the input without growing the memory first (hence its 2024-page default),
    # so the capped memory starts at its maximum: the exhausting input fits, its evaluation not.
    capped = host_module.OPAPolicy(arguments.module, min_memory=CAPPED_PAGES, max_memory=CAPPED_PAGES)
    return [
        column(host, "opa-wasmtime", "opa_eval, 2024..5120 pages", results),
        refusals_column(
            host,
            "opa-wasmtime",
            f"OPAPolicy(min_memory={CAPPED_PAGES}, max_memory={CAPPED_PAGES}), opa_eval",
            without_growth(capped.evaluate),
            fixtures,
            arguments.exhausting_value,
        ),
    ]


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
    # The fast path writes the input without growing the memory, so it starts at the cap; the
    # slow path parses through opa_malloc, so the module grows it from 2 pages.
    capped = OPAPolicy(arguments.module, memory_pages=CAPPED_PAGES, max_memory_pages=CAPPED_PAGES)
    capped_slow = OPAPolicy(arguments.context_module, memory_pages=2, max_memory_pages=CAPPED_PAGES)
    return [
        column(host, "opa-wasm", "fast path (opa_eval), 5 pages, no growth before writing", fast_results),
        column(host, "opa-wasm", "slow path (eval context, ABI 1.1 copy)", slow_results),
        refusals_column(
            host,
            "opa-wasm",
            f"OPAPolicy(memory_pages={CAPPED_PAGES}, max_memory_pages={CAPPED_PAGES}), fast path",
            without_growth(lambda value: capped.evaluate(value, ENTRYPOINT)),
            fixtures,
            arguments.exhausting_value,
        ),
        refusals_column(
            host,
            "opa-wasm",
            f"OPAPolicy(memory_pages=2, max_memory_pages={CAPPED_PAGES}), slow path (ABI 1.1 copy)",
            lambda value: capped_slow.evaluate(value, ENTRYPOINT),
            fixtures,
            arguments.exhausting_value,
        ),
    ]


# Notes and checks the hosts add beside their columns.
CHECKS = []

HOSTS = {"opa-py-wasm": opa_py_wasm, "opa-wasmtime": opa_wasmtime, "opa-wasm": opa_wasm_wasmer}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", required=True, help=",".join(HOSTS))
    parser.add_argument("--module", required=True)
    parser.add_argument("--context-module", required=True)
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--exhausting", required=True, help="the input sent before every fixture")
    arguments = parser.parse_args()
    arguments.exhausting_value = json.loads(Path(arguments.exhausting).read_text())
    fixtures = load_fixtures(arguments.fixtures)
    columns = []
    for name in arguments.hosts.split(","):
        if name not in HOSTS:
            parser.error(f"unknown host {name}; known: {', '.join(HOSTS)}")
        columns.extend(HOSTS[name](arguments, fixtures))
    json.dump({"columns": columns, "checks": CHECKS}, sys.stdout)


if __name__ == "__main__":
    main()
