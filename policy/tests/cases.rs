//! Data-driven rule cases: every `cases/*.yaml` file lists inputs and the rule ids they must
//! (and must only) produce. The wasm end-to-end tests in host-test run the same files through
//! the module, so the native and wasm builds cannot drift apart.

use std::path::{Path, PathBuf};

use meshlife_policy::{Severity, evaluate};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct CaseFile {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    name: String,
    object: Value,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    namespace_object: Option<Value>,
    #[serde(default)]
    operation: Option<String>,
    /// Rule ids expected, as a multiset.
    expect: Vec<String>,
    /// `rule id: severity` for findings whose severity differs from the rule's usual one.
    #[serde(default)]
    severity: Option<std::collections::BTreeMap<String, Severity>>,
    /// Substrings that must appear in some message.
    #[serde(default)]
    messages: Vec<String>,
    /// Substrings that must appear in some `details.fix`.
    #[serde(default)]
    fixes: Vec<String>,
}

fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/cases exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    files
}

fn input_of(case: &Case) -> Value {
    let mut review = json!({ "object": case.object });
    if let Some(namespace) = &case.namespace_object {
        review["namespaceObject"] = namespace.clone();
    }
    if let Some(operation) = &case.operation {
        review["operation"] = json!(operation);
    }
    let mut input = json!({ "review": review });
    if let Some(parameters) = &case.parameters {
        input["parameters"] = parameters.clone();
    }
    input
}

#[test]
fn every_case_gives_exactly_its_expected_rules() {
    let mut failures = Vec::new();
    let mut count = 0;
    for file in case_files() {
        let text = std::fs::read_to_string(&file).expect("readable case file");
        let cases: CaseFile = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        for case in cases.cases {
            count += 1;
            let input = serde_json::to_vec(&input_of(&case)).expect("serialisable");
            let violations = evaluate(&input);
            let mut got: Vec<&str> = violations.iter().map(|v| v.details.rule.as_str()).collect();
            got.sort();
            let mut expected: Vec<&str> = case.expect.iter().map(String::as_str).collect();
            expected.sort();
            let label = format!(
                "{} / {}",
                file.file_name().unwrap().to_string_lossy(),
                case.name
            );
            if got != expected {
                let messages: Vec<&str> = violations.iter().map(|v| v.msg.as_str()).collect();
                failures.push(format!(
                    "{label}: expected {expected:?}, got {got:?}\n    {messages:#?}"
                ));
                continue;
            }
            for (rule, severity) in case.severity.iter().flatten() {
                if !violations
                    .iter()
                    .any(|v| &v.details.rule == rule && v.details.severity == *severity)
                {
                    failures.push(format!(
                        "{label}: expected {rule} with severity {severity:?}"
                    ));
                }
            }
            for needle in &case.messages {
                if !violations.iter().any(|v| v.msg.contains(needle.as_str())) {
                    failures.push(format!("{label}: no message contains {needle:?}"));
                }
            }
            for needle in &case.fixes {
                if !violations
                    .iter()
                    .any(|v| v.details.fix.contains(needle.as_str()))
                {
                    failures.push(format!("{label}: no fix contains {needle:?}"));
                }
            }
            for violation in &violations {
                let prefix = format!("[{} {}] ", violation.details.rule, violation.details.name);
                if !violation.msg.starts_with(&prefix) || violation.details.fix.is_empty() {
                    failures.push(format!("{label}: malformed violation {violation:?}"));
                }
            }
        }
    }
    assert!(count > 0);
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
