//! Data-driven rule cases: every `tests/cases/*.yaml` file lists inputs and the rule ids they must
//! (and must only) produce. The wasm end-to-end tests in host-test run the same files through
//! the module, so the native and wasm builds cannot drift apart.

use std::path::{Path, PathBuf};

use std::sync::OnceLock;

use meshlife_policy::mesh::NotMeshed;
use meshlife_policy::verdicts::{MeshVerdict, NotJudged};
use meshlife_policy::{Severity, evaluate, evaluate_with_exact_reader, mesh_verdicts};
use proptest::prelude::*;
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
    /// The input's top-level `services`: Service objects of the object's namespace.
    #[serde(default)]
    services: Option<Value>,
    /// More top-level input members (keys the policy does not know, say).
    #[serde(default)]
    top_level: Option<serde_json::Map<String, Value>>,
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
    /// `details.path` values that must each appear among the violations.
    #[serde(default)]
    paths: Vec<String>,
    /// Substrings that must appear in no message and no fix (another mesh's words, say).
    #[serde(default)]
    absent: Vec<String>,
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

fn load_cases() -> Vec<(String, Case)> {
    let mut cases = Vec::new();
    for file in case_files() {
        let text = std::fs::read_to_string(&file).expect("readable case file");
        let parsed: CaseFile = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
        cases.extend(
            parsed
                .cases
                .into_iter()
                .map(|case| (file_name.clone(), case)),
        );
    }
    cases
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
    if let Some(services) = &case.services {
        input["services"] = services.clone();
    }
    for (key, value) in case.top_level.iter().flatten() {
        input[key.as_str()] = value.clone();
    }
    input
}

#[test]
fn every_case_gives_exactly_its_expected_rules() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (file_name, case) in load_cases() {
        {
            count += 1;
            let input = serde_json::to_vec(&input_of(&case)).expect("serialisable");
            let violations = evaluate(&input);
            let mut got: Vec<&str> = violations.iter().map(|v| v.details.rule.as_str()).collect();
            got.sort();
            let mut expected: Vec<&str> = case.expect.iter().map(String::as_str).collect();
            expected.sort();
            let label = format!("{file_name} / {}", case.name);
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
            for path in &case.paths {
                if !violations.iter().any(|v| &v.details.path == path) {
                    failures.push(format!("{label}: no violation has path {path:?}"));
                }
            }
            for needle in &case.absent {
                if violations.iter().any(|v| {
                    v.msg.contains(needle.as_str()) || v.details.fix.contains(needle.as_str())
                }) {
                    failures.push(format!("{label}: a message or fix contains {needle:?}"));
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

/// Every case's input, serialised once.
fn case_inputs() -> &'static [(String, Value)] {
    static INPUTS: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    INPUTS.get_or_init(|| {
        load_cases()
            .into_iter()
            .map(|(file_name, case)| (format!("{file_name} / {}", case.name), input_of(&case)))
            .collect()
    })
}

#[test]
fn both_readers_answer_every_case_alike() {
    for (label, input) in case_inputs() {
        let bytes = serde_json::to_vec(input).expect("serialisable");
        assert_eq!(
            evaluate(&bytes),
            evaluate_with_exact_reader(&bytes),
            "{label}"
        );
    }
}

/// The mesh verdicts agree with the rules: a case with mesh findings has a meshed pod spec or an
/// ambient one (ML304 judges batch helpers whether or not the pod is meshed, and names no mesh),
/// and an
/// ML000 error (the input cannot be evaluated) is invalid input there too. An ML000 warning
/// (an odd request, judged anyway) stands beside the findings.
#[test]
fn mesh_verdicts_agree_with_the_findings() {
    for (label, input) in case_inputs() {
        let bytes = serde_json::to_vec(input).expect("serialisable");
        let violations = evaluate(&bytes);
        let verdicts = mesh_verdicts(&bytes);
        assert!(!verdicts.is_empty(), "{label}");
        if violations
            .iter()
            .any(|v| v.details.rule == "ML000" && v.details.severity == Severity::Error)
        {
            assert!(
                matches!(
                    verdicts[0].verdict,
                    MeshVerdict::NotJudged(NotJudged::InvalidInput { .. })
                ),
                "{label}: {verdicts:?}"
            );
        } else if violations
            .iter()
            .any(|v| v.details.rule != "ML000" && v.details.mesh.is_some())
        {
            // An ambient pod's findings (ML404 for ztunnel) name Istio, with no proxy in it; a
            // waypoint's (ML603) name Istio, whose proxy is the workload; a NetworkPolicy's
            // (ML604) name Istio, whose ambient pods it selects.
            assert!(
                verdicts.iter().any(|v| matches!(
                    v.verdict,
                    MeshVerdict::Meshed { .. }
                        | MeshVerdict::Gateway
                        | MeshVerdict::AmbientNetworkPolicy { .. }
                        | MeshVerdict::NotMeshed(NotMeshed::Ambient { .. })
                )),
                "{label}: {verdicts:?}"
            );
        }
    }
}

/// A rule selected alone reports what it reports among all rules: selection skips the rule
/// families that cannot report a selected rule, and this holds the families' rule lists true.
#[test]
fn a_rule_selected_alone_reports_as_among_all_rules() {
    for (label, input) in case_inputs() {
        let all = evaluate(&serde_json::to_vec(input).expect("serialisable"));
        let mut rule_ids: Vec<&str> = all.iter().map(|v| v.details.rule.as_str()).collect();
        rule_ids.dedup();
        for rule_id in rule_ids.into_iter().filter(|id| *id != "ML000") {
            let mut alone = input.clone();
            alone["parameters"]["rules"] = json!([rule_id]);
            let selected = evaluate(&serde_json::to_vec(&alone).expect("serialisable"));
            // ML000 is never deselected: an odd request's warning stays beside the rule.
            let expected: Vec<_> = all
                .iter()
                .filter(|v| v.details.rule == rule_id || v.details.rule == "ML000")
                .collect();
            assert_eq!(
                selected.iter().collect::<Vec<_>>(),
                expected,
                "{label}: {rule_id}"
            );
        }
    }
}

/// Values of every JSON type and the edges of the ones the rules read.
const SUBSTITUTES: &[&str] = &[
    "null",
    "true",
    "0",
    "-1",
    "30",
    "1.5",
    "1e3",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "\"\"",
    "\"30\"",
    "\"25%\"",
    "\"Always\"",
    "\"DELETE\"",
    "\"istio-proxy\"",
    "[]",
    "[null]",
    "[\"x\"]",
    "[1]",
    "{}",
    "{\"x\": 1}",
    "{\"name\": \"istio-proxy\"}",
    "[{}]",
];

/// Every place in `value`: object members and list items, as paths of keys and indices.
fn places(value: &Value, path: &mut Vec<Value>, found: &mut Vec<Vec<Value>>) {
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                path.push(json!(key));
                found.push(path.clone());
                places(member, path, found);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(json!(index));
                found.push(path.clone());
                places(item, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The parent of the place and the place's key or index.
fn parent_of<'v>(root: &'v mut Value, path: &[Value]) -> (&'v mut Value, Value) {
    let (last, parents) = path.split_last().expect("a place has a path");
    let mut parent = root;
    for step in parents {
        parent = match step {
            Value::String(key) => &mut parent[key.as_str()],
            _ => &mut parent[step.as_u64().unwrap() as usize],
        };
    }
    (parent, last.clone())
}

/// One change to a case's input, as JSON text: a value replaced, a member removed, or a
/// member given a duplicate (which `serde_json::Value` cannot hold, hence text).
fn mutate(input: &Value, place: usize, substitute: usize, change: u8) -> String {
    const DUPLICATE_MARK: &str = "__meshlife_duplicate__";
    let mut input = input.clone();
    let mut found = Vec::new();
    places(&input, &mut Vec::new(), &mut found);
    let path = &found[place % found.len()];
    let replacement: Value =
        serde_json::from_str(SUBSTITUTES[substitute % SUBSTITUTES.len()]).unwrap();
    let (parent, last) = parent_of(&mut input, path);
    let mut duplicate_of = None;
    match (change % 3, parent, &last) {
        (1, Value::Object(members), Value::String(key)) => {
            members.remove(key);
        }
        (2, Value::Object(members), Value::String(key)) => {
            members.insert(DUPLICATE_MARK.into(), replacement);
            duplicate_of = Some(key.clone());
        }
        (_, parent, Value::String(key)) => parent[key.as_str()] = replacement,
        (_, parent, index) => parent[index.as_u64().unwrap() as usize] = replacement,
    }
    let text = serde_json::to_string(&input).unwrap();
    match duplicate_of {
        Some(key) => text.replace(
            &format!("\"{DUPLICATE_MARK}\""),
            &serde_json::to_string(&key).unwrap(),
        ),
        None => text,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Wherever the one-pass reader answers, it answers as the exact reader does: a wrong
    /// type, a null, a missing or duplicated member anywhere in any case.
    #[test]
    fn both_readers_answer_every_mutated_case_alike(
        case in any::<prop::sample::Index>(),
        place in any::<usize>(),
        substitute in any::<usize>(),
        change in any::<u8>(),
    ) {
        let (label, input) = case.get(case_inputs());
        let text = mutate(input, place, substitute, change);
        // Never panics, whatever the input.
        let _ = mesh_verdicts(text.as_bytes());
        prop_assert_eq!(
            evaluate(text.as_bytes()),
            evaluate_with_exact_reader(text.as_bytes()),
            "{} mutated: {}", label, text
        );
    }

    /// Text-level edits (JSON syntax, escapes, number forms): wherever the one-pass reader
    /// answers, the exact reader, whose parser is serde_json, answers the same.
    #[test]
    fn both_readers_answer_every_garbled_case_alike(
        case in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<usize>(), 0..GARBLE.len() + 1), 1..4),
    ) {
        let (label, input) = case.get(case_inputs());
        let mut text = serde_json::to_string(input).unwrap();
        for (place, edit) in edits {
            let mut at = place % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match GARBLE.get(edit) {
                Some(insert) => text.insert_str(at, insert),
                None if at < text.len() => {
                    text.remove(at);
                }
                None => {}
            }
        }
        prop_assert_eq!(
            evaluate(text.as_bytes()),
            evaluate_with_exact_reader(text.as_bytes()),
            "{} garbled: {}", label, text
        );
    }
}

/// What `both_readers_answer_every_garbled_case_alike` inserts.
const GARBLE: &[&str] = &[
    "\"", "\\", "{", "}", "[", "]", ",", ":", " ", "0", "1", "-", ".", "e", "E", "+", "null",
    "true", "\u{1}", "é", "\\u0041", "\\ud83d", "\\n", "\\/", "-0", "1e3", "01",
];
