//! Writes the fuzz targets' seed corpora from the repository: the example manifests, the rule
//! cases (policy/tests/cases/*.yaml) and the ProxyConfig annotations they hold. Generated, not
//! committed, so the seeds follow the examples and cases as they grow.
//!
//! `cargo run -p meshlife-fuzz-seed -- REPO_ROOT OUT_DIR` writes OUT_DIR/TARGET/HASH files
//! for one_pass_vs_exact, yaml_subset, proxy_config and manifest_reading.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

const PROXY_CONFIG: &str = "proxy.istio.io/config";

/// Spellings the examples and cases may lack: block style, block scalars, comments, quoting.
const EXTRA_PROXY_CONFIGS: &[&str] = &[
    "holdApplicationUntilProxyStarts: true\nterminationDrainDuration: 45s\n",
    "# proxy settings\nproxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true'\n  MINIMUM_DRAIN_DURATION: \"10s\"\n",
    "{holdApplicationUntilProxyStarts: true, proxyMetadata: {A: 'x', B: [1, two]}}",
    "proxyStatsMatcher:\n  inclusionPrefixes:\n  - cluster.outbound\n  - listener\nextra:\n  - name: a\n    value: b\n  - {name: c}\n",
    "a: |\n  line one\n  line two\nb: >\n  folded\n  text\nc: ~\n",
    "drainDuration: 1h2m3.5s\nconcurrency: 2\ntracing:\n  sampling: 1.5\n",
];

fn main() {
    let mut arguments = std::env::args().skip(1);
    let (Some(root), Some(out)) = (arguments.next(), arguments.next()) else {
        eprintln!("usage: meshlife-fuzz-seed REPO_ROOT OUT_DIR");
        std::process::exit(2);
    };
    let (root, out) = (PathBuf::from(root), PathBuf::from(out));
    let mut seeds = Seeds::default();

    let mut files = Vec::new();
    yaml_files(&root.join("examples"), &mut files);
    yaml_files(&root.join("policy/tests/cases"), &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "no examples or cases under {}",
        root.display()
    );
    for file in &files {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        seeds.manifests.insert(text.clone());
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            // Suites and templates that are not plain YAML are still manifest seeds above.
            let Ok(value) = Value::deserialize(document) else {
                continue;
            };
            proxy_configs(&value, &mut seeds.proxy_configs);
            if let Some(cases) = value.get("cases").and_then(Value::as_array) {
                seeds.inputs.extend(cases.iter().map(case_input));
            } else if value.get("kind").is_some() {
                seeds.inputs.insert(review_of(&value));
            }
        }
    }
    seeds
        .proxy_configs
        .extend(EXTRA_PROXY_CONFIGS.iter().map(|text| text.to_string()));

    let proxy: Vec<&String> = seeds.proxy_configs.iter().collect();
    write_all(&out.join("one_pass_vs_exact"), seeds.inputs.iter());
    write_all(&out.join("yaml_subset"), proxy.iter().copied());
    write_all(&out.join("proxy_config"), proxy.iter().copied());
    write_all(&out.join("manifest_reading"), seeds.manifests.iter());
    println!(
        "seeds: {} inputs, {} ProxyConfig texts, {} manifest files in {}",
        seeds.inputs.len(),
        seeds.proxy_configs.len(),
        seeds.manifests.len(),
        out.display()
    );
}

#[derive(Default)]
struct Seeds {
    inputs: BTreeSet<String>,
    proxy_configs: BTreeSet<String>,
    manifests: BTreeSet<String>,
}

fn yaml_files(folder: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, files);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "yaml" || extension == "yml")
        {
            files.push(path);
        }
    }
}

/// A rule case as the Gatekeeper-shaped input `policy/tests/it/cases.rs` makes of it.
fn case_input(case: &Value) -> String {
    let mut review = json!({ "object": case.get("object").cloned().unwrap_or(Value::Null) });
    if let Some(namespace) = case.get("namespaceObject") {
        review["namespaceObject"] = namespace.clone();
    }
    if let Some(operation) = case.get("operation") {
        review["operation"] = operation.clone();
    }
    let mut input = json!({ "review": review });
    for key in ["parameters", "services"] {
        if let Some(value) = case.get(key) {
            input[key] = value.clone();
        }
    }
    if let Some(Value::Object(top_level)) = case.get("topLevel") {
        for (key, value) in top_level {
            input[key.as_str()] = value.clone();
        }
    }
    input.to_string()
}

/// An example object as the CLI reviews it: a CREATE with the default parameters.
fn review_of(object: &Value) -> String {
    json!({"review": {"operation": "CREATE", "object": object}, "parameters": {}}).to_string()
}

fn proxy_configs(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(fields) => {
            for (key, value) in fields {
                match value {
                    Value::String(text) if key == PROXY_CONFIG => {
                        found.insert(text.clone());
                    }
                    _ => proxy_configs(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| proxy_configs(item, found)),
        _ => {}
    }
}

fn write_all<'a>(folder: &Path, seeds: impl Iterator<Item = &'a String>) {
    std::fs::create_dir_all(folder).unwrap_or_else(|error| panic!("{}: {error}", folder.display()));
    for seed in seeds {
        let path = folder.join(format!("seed-{:016x}", fnv1a(seed.as_bytes())));
        std::fs::write(&path, seed).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    }
}

/// A stable name per seed, so reseeding an existing corpus adds nothing twice.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
