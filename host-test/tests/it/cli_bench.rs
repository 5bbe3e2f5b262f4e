//! `meshlife bench --json`: the shape machines read (results per input and engine, module
//! size, compile time, throughput) and that every figure was measured. Speed itself is only
//! printed, never asserted.

use std::process::Command;

use serde_json::Value;

const INPUTS: [&str; 4] = [
    "pod-small",
    "deployment-typical",
    "pod-50-containers",
    "object-1mb",
];
const ENGINES: [&str; 6] = [
    "wasm-warm",
    "wasm-fresh",
    "native",
    "parse-floor",
    "wasm-warm-3-rules",
    "regorus-3-rules",
];

#[test]
fn bench_json_reports_every_input_and_engine() {
    let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(["bench", "--json", "--budget-ms", "1"])
        .output()
        .expect("meshlife runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let results = report["results"].as_array().expect("results");
    for input in INPUTS {
        for engine in ENGINES {
            let measured = results
                .iter()
                .find(|r| r["input"] == input && r["engine"] == engine)
                .unwrap_or_else(|| panic!("no figure for {input} / {engine}"));
            let median = measured["median_ns"].as_u64().expect("median_ns");
            let p99 = measured["p99_ns"].as_u64().expect("p99_ns");
            assert!(
                median > 0 && median <= p99,
                "{input} / {engine}: {measured}"
            );
        }
    }
    // node-sdk is measured when compat/node has its packages, and otherwise said so.
    let node_measured = results.iter().any(|r| r["engine"] == "node-sdk");
    let node_explained = report["not_measured"]
        .as_array()
        .expect("not_measured")
        .iter()
        .any(|entry| entry[0] == "node-sdk");
    assert!(
        node_measured != node_explained,
        "{}",
        report["not_measured"]
    );
    assert!(report["module_bytes"].as_u64().expect("module_bytes") > 100_000);
    assert!(report["compile_ms"].as_f64().expect("compile_ms") > 0.0);
    let throughput = report["throughput"].as_array().expect("throughput");
    assert_eq!(throughput.len(), 2);
    assert!(
        throughput
            .iter()
            .all(|t| t["evaluations_per_second"].as_f64().unwrap() > 0.0)
    );
    assert!(
        report.get("memory_bytes_after_1e6").is_none(),
        "only with --memory"
    );
}

#[test]
fn bench_refuses_a_missing_module_with_its_path() {
    let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(["bench", "--module", "no/such/module.wasm"])
        .output()
        .expect("meshlife runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no/such/module.wasm"), "{stderr}");
}

#[test]
fn bench_serve_drives_a_real_server_and_reports_every_run() {
    let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args([
            "bench",
            "serve",
            "--json",
            "--duration",
            "200ms",
            "--concurrency",
            "1,2",
            "--opa",
            "/nonexistent/opa",
        ])
        .output()
        .expect("meshlife runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let runs = report["runs"].as_array().expect("runs");
    assert!(runs.len() >= 6, "{runs:?}");
    for run in runs {
        assert!(run["requests"].as_u64().unwrap() > 0, "{run}");
        assert_eq!(run["errors"], 0, "{run}");
        assert!(run["p99_us"].as_f64().unwrap() >= run["p50_us"].as_f64().unwrap());
    }
    assert!(
        runs.iter()
            .any(|run| run["mode"].as_str().unwrap().starts_with("open"))
    );
    // The peer that could not start is named, never silently left out.
    let not_measured = report["not_measured"].to_string();
    assert!(not_measured.contains("opa"), "{not_measured}");
}
