//! The admission fixtures every host evaluates, and what the native build says of each.
//!
//! The set: every rule case of the policy (each rule firing and its near misses, ML000 inputs),
//! every object of `examples/` as `meshlife check` sends it, and the edges hosts differ on: an
//! empty result, hand-made ML000 inputs of each JSON type, a 400 KB and a 2 MB object, and an
//! absent input.

use std::path::Path;

use anyhow::{Context, Result};
use meshlife::fixtures::{manifest_objects, rule_cases};
use serde::Serialize;
use serde_json::{Value, json};

/// One admission fixture.
pub struct Fixture {
    pub id: String,
    pub label: String,
    /// The column of the matrix it is counted in.
    pub group: &'static str,
    /// The OPA input as JSON bytes; `None` for the absent input.
    pub input: Option<Vec<u8>>,
    /// The native build's `msg` strings for this input, sorted.
    pub expected: Vec<String>,
}

impl Fixture {
    pub fn input_len(&self) -> usize {
        self.input.as_ref().map_or(0, Vec::len)
    }

    pub fn input_value(&self) -> Option<Value> {
        self.input
            .as_ref()
            .map(|bytes| serde_json::from_slice(bytes).expect("fixtures are written as JSON"))
    }
}

/// The `msg` strings of the native policy for the bytes a host sent the module, which may be
/// OPA value text (Rego terms, as OPA's Go host prints its input), sorted.
pub fn native_msgs_of_value_text(text: &[u8]) -> Vec<String> {
    sorted_msgs(meshlife_policy::evaluate_value_text(text))
}

/// The `msg` strings of the native policy for `input` (absent input: empty bytes), sorted.
pub fn native_msgs(input: &[u8]) -> Vec<String> {
    sorted_msgs(meshlife_policy::evaluate(input))
}

fn sorted_msgs(violations: Vec<meshlife_policy::Violation>) -> Vec<String> {
    let mut msgs: Vec<String> = violations
        .into_iter()
        .map(|violation| violation.msg)
        .collect();
    msgs.sort();
    msgs
}

/// Column order of the matrix: the rule case files, the examples, then the edge cases.
pub const GROUPS: &[&str] = &[
    "startup",
    "init",
    "batch",
    "batch_helpers",
    "shutdown",
    "restarts",
    "rollout",
    "annotations",
    "ambient",
    "network_policy",
    "streams",
    "embedded",
    "injected",
    "input",
    "review-fixes",
    "examples",
    "empty",
    "escapes",
    "ML000",
    "400KB",
    "2MB",
    "absent",
];

pub fn load(workspace: &Path) -> Result<Vec<Fixture>> {
    let mut fixtures = Vec::new();
    let mut push = |label: String, group: &'static str, input: Option<Vec<u8>>| {
        let expected = native_msgs(input.as_deref().unwrap_or_default());
        let id = format!("f{:04}", fixtures.len());
        fixtures.push(Fixture {
            id,
            label,
            group,
            input,
            expected,
        });
    };
    for case in rule_cases(&workspace.join("policy/tests/cases"))? {
        let file = case.label.split(".yaml").next().unwrap_or_default();
        let group = GROUPS
            .iter()
            .find(|group| **group == file)
            .with_context(|| format!("rule case file `{file}.yaml` has no matrix column"))?;
        push(format!("cases/{}", case.label), group, Some(case.input));
    }
    let examples = workspace.join("examples").to_string_lossy().into_owned();
    for object in manifest_objects(&[examples], &json!({}))? {
        push(object.label, "examples", Some(object.input));
    }
    push(
        "an un-meshed Pod: no violations".into(),
        "empty",
        Some(bytes(
            &json!({"review": {"object": plain_pod()}, "parameters": {}}),
        )),
    );
    push(
        "control characters, non-BMP and format characters in strings".into(),
        "escapes",
        Some(bytes(&escaped_strings())),
    );
    for (label, input) in malformed_inputs() {
        push(label.into(), "ML000", Some(bytes(&input)));
    }
    push(
        "a Deployment with a 400 KB annotation".into(),
        "400KB",
        Some(bytes(&large_deployment(400 << 10))),
    );
    push(
        "a Deployment with a 2 MB annotation".into(),
        "2MB",
        Some(bytes(&large_deployment(2 << 20))),
    );
    push("no input at all".into(), "absent", None);
    Ok(fixtures)
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a serde_json::Value always serialises")
}

fn plain_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "plain", "namespace": "shop"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]}})
}

/// Strings OPA's Go host sends with `\x1f`, `\a`, `\v`, `\u00a0` and `\U000e0001` escapes,
/// in an object that fires rules so the messages (which quote names) must survive the trip.
fn escaped_strings() -> Value {
    let mut input = large_deployment(0);
    let metadata = &mut input["review"]["object"]["metadata"];
    metadata["name"] = json!("web\u{a0}ü😀");
    metadata["annotations"] = json!({
        "example.com/controls": "bell\u{7} tab\t vt\u{b} unit\u{1f} del\u{7f}",
        "example.com/format": "zero\u{200b}width bom\u{feff} tag\u{e0001}",
    });
    input
}

/// Inputs that are not admission reviews, or carry parameters the module refuses: ML000.
fn malformed_inputs() -> Vec<(&'static str, Value)> {
    vec![
        ("input is an array", json!([1, 2, 3])),
        ("input is a string", json!("review")),
        ("input is null", Value::Null),
        ("input has no review", json!({"parameters": {}})),
        (
            "review.object is a string",
            json!({"review": {"object": "Pod"}}),
        ),
        (
            "parameters.istio has a misspelt key",
            json!({"review": {"object": plain_pod()}, "parameters": {"istio": {"holdAplicationUntilProxyStarts": true}}}),
        ),
        (
            "parameters.kubernetesMinorVersion is a string",
            json!({"review": {"object": plain_pod()}, "parameters": {"kubernetesMinorVersion": "33"}}),
        ),
    ]
}

/// An Istio-injected Deployment whose app starts before the proxy (ML101 and friends fire) and
/// that carries one annotation of `size` bytes, so that the input exceeds the memory hosts
/// provide by default and the parser has to handle long strings.
fn large_deployment(size: usize) -> Value {
    json!({"review": {"operation": "CREATE", "object": {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "large", "namespace": "shop",
            "annotations": {"example.com/blob": "x".repeat(size)}},
        "spec": {"replicas": 3, "template": {
            "metadata": {"labels": {"app": "large", "sidecar.istio.io/inject": "true"}},
            "spec": {"containers": [{"name": "large", "image": "large:1",
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}}}]}}}}},
        "parameters": {}})
}

/// The input sent before every fixture in the "refusals then valid inputs" columns (as in
/// `host-test/tests/never_traps.rs`): a Deployment whose pod spec holds 150,000 empty containers,
/// about 450 KB that fit a memory capped at `matrix::CAPPED_PAGES` (1 MiB), while the module's
/// values for them do not, so the module refuses it with "meshlife: out of memory".
pub fn exhausting_input() -> Vec<u8> {
    let mut input = large_deployment(0);
    input["review"]["object"]["spec"]["template"]["spec"]["containers"] =
        Value::Array(vec![json!({}); 150_000]);
    bytes(&input)
}

#[derive(Serialize)]
struct IndexEntry<'a> {
    id: &'a str,
    label: &'a str,
    group: &'a str,
    /// Path of the input JSON, relative to the index; absent for the absent input.
    file: Option<String>,
}

/// Writes each input to `<directory>/fixtures/<id>.json` and an index `<directory>/fixtures.json`
/// that the Node.js and Python runners read.
pub fn write(directory: &Path, fixtures: &[Fixture]) -> Result<()> {
    let inputs = directory.join("fixtures");
    std::fs::create_dir_all(&inputs).with_context(|| format!("creating {}", inputs.display()))?;
    let mut index = Vec::new();
    for fixture in fixtures {
        let file = match &fixture.input {
            Some(input) => {
                let name = format!("fixtures/{}.json", fixture.id);
                let path = directory.join(&name);
                std::fs::write(&path, input)
                    .with_context(|| format!("writing {}", path.display()))?;
                Some(name)
            }
            None => None,
        };
        index.push(IndexEntry {
            id: &fixture.id,
            label: &fixture.label,
            group: fixture.group,
            file,
        });
    }
    let path = directory.join("fixtures.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&index)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let path = directory.join(EXHAUSTING_FILE);
    std::fs::write(&path, exhausting_input()).with_context(|| format!("writing {}", path.display()))
}

/// Where [`write`] puts [`exhausting_input`] for the runners, beside the index.
pub const EXHAUSTING_FILE: &str = "exhausting.json";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::CAPPED_PAGES;

    /// The exhausting input must reach the module whole (so that its refusal is the module's
    /// abort, not the host failing to write it), and the native build must judge it as the valid
    /// review it is: only the memory makes it fail.
    #[test]
    fn the_exhausting_input_fits_the_cap_and_is_a_valid_review() {
        let input = exhausting_input();
        let cap = CAPPED_PAGES as usize * 65536;
        assert!(
            input.len() < cap / 2,
            "{} bytes against a {cap}-byte memory",
            input.len()
        );
        let msgs = native_msgs(&input);
        assert!(
            msgs.iter().all(|msg| !msg.contains("ML000")),
            "the native build reads it as a review: {msgs:?}"
        );
    }
}
