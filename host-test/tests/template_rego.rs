//! The ConstraintTemplate's Rego (`constraints/gatekeeper/template.yaml`), evaluated by regorus
//! as Gatekeeper evaluates it: `input` = `{"review": ..., "parameters": ...}`, the rule
//! `violation`, and `external_data` supplied by the host. Here the host's `external_data` is an
//! extension that answers the way Gatekeeper's External Data client does (frameworks'
//! `RegoResponse`: `{"responses": [[key, value]], "errors": [[key, message]], "status_code",
//! "system_error"}`), with the value computed by the meshlife wasm module, so the test checks
//! that the Rego hands the module exactly its input and passes its violations through, and
//! that every provider failure becomes a violation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use meshlife::engine::Engine;
use meshlife::manifests;
use meshlife_policy::Violation;
use serde_json::{Value, json};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn template() -> Value {
    let text =
        std::fs::read_to_string(workspace_root().join("constraints/gatekeeper/template.yaml"))
            .expect("the template");
    serde_yaml_ng::from_str(&text).expect("the template is YAML")
}

fn template_rego() -> String {
    template()["spec"]["targets"][0]["rego"]
        .as_str()
        .expect("the template's Rego")
        .to_string()
}

/// Package of the template's Rego, which is where Gatekeeper queries `violation`.
fn violation_rule() -> String {
    let rego = template_rego();
    let package = rego
        .lines()
        .find_map(|line| line.trim().strip_prefix("package "))
        .expect("a package line")
        .trim()
        .to_string();
    format!("data.{package}.violation")
}

fn module() -> Arc<Engine> {
    static MODULE: std::sync::OnceLock<Arc<Engine>> = std::sync::OnceLock::new();
    MODULE
        .get_or_init(|| Arc::new(Engine::embedded().expect("the embedded module")))
        .clone()
}

/// What the provider returns for one key (the module's input): the module's violation list.
fn provider_value(engine: &Engine, key: &str) -> Result<Value, String> {
    let violations = engine
        .evaluate(key.as_bytes())
        .map_err(|error| format!("{error:#}"))?;
    Ok(serde_json::to_value(violations).expect("violations serialise"))
}

/// How the fake `external_data` answers a call.
#[derive(Clone)]
enum Provider {
    /// Like a healthy provider: every key evaluated by the module.
    Module,
    /// A fixed `RegoResponse`; `{key}` in its JSON text stands for the call's first key.
    Fixed(String),
}

/// Every `external_data` request the extension received, to check the batching.
type Calls = Arc<Mutex<Vec<Value>>>;

/// A regorus engine with the template's Rego (v0 syntax, as Gatekeeper's `rego:` field is)
/// and `external_data` answered by `provider`.
fn rego_engine(provider: Provider) -> (regorus::Engine, Calls) {
    let mut engine = regorus::Engine::new();
    engine.set_rego_v0(true);
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let recorded = calls.clone();
    let module = module();
    engine
        .add_extension(
            "external_data".to_string(),
            1,
            Box::new(move |arguments: Vec<regorus::Value>| {
                let request: Value = serde_json::from_str(&arguments[0].to_json_str()?)?;
                recorded.lock().expect("calls").push(request.clone());
                assert_eq!(request["provider"], "meshlife", "the Provider's name");
                let keys: Vec<String> = request["keys"]
                    .as_array()
                    .expect("keys")
                    .iter()
                    .map(|key| key.as_str().expect("keys are strings").to_string())
                    .collect();
                let response = match &provider {
                    Provider::Module => {
                        let mut responses = Vec::new();
                        let mut errors = Vec::new();
                        for key in &keys {
                            match provider_value(&module, key) {
                                Ok(value) => responses.push(json!([key, value])),
                                Err(error) => errors.push(json!([key, error])),
                            }
                        }
                        json!({"responses": responses, "errors": errors, "status_code": 200, "system_error": ""})
                    }
                    Provider::Fixed(text) => {
                        let key = serde_json::to_string(&keys[0]).expect("a JSON string");
                        serde_json::from_str(&text.replace("\"{key}\"", &key))
                            .expect("a fixed response")
                    }
                };
                regorus::Value::from_json_str(&response.to_string())
            }),
        )
        .expect("external_data registers");
    engine
        .add_policy("template.rego".to_string(), template_rego())
        .expect("the template's Rego parses");
    (engine, calls)
}

/// `violation` of the template for `input`, as JSON objects.
fn rego_violations(engine: &mut regorus::Engine, input: &Value) -> Vec<Value> {
    engine.set_input(regorus::Value::from_json_str(&input.to_string()).expect("input"));
    let result = engine
        .eval_rule(violation_rule())
        .unwrap_or_else(|error| panic!("evaluating violation: {error}"));
    let json: Value = serde_json::from_str(&result.to_json_str().expect("JSON")).expect("JSON");
    // A partial set rule is a set; regorus renders sets as arrays.
    json.as_array()
        .unwrap_or_else(|| panic!("violation is a set: {json}"))
        .clone()
}

/// Every object under `examples/` with its review, as `meshlife check` builds them (the
/// object's Namespace, when the input holds it, as `namespaceObject`).
fn example_reviews() -> Vec<(String, Value)> {
    let root = workspace_root();
    let examples = root.join("examples");
    let loaded = manifests::load(&[examples.display().to_string()]);
    assert_eq!(loaded.errors, vec![], "the examples read cleanly");
    let namespaces = loaded.namespaces();
    let reviews: Vec<(String, Value)> = loaded
        .objects
        .iter()
        .map(|object| {
            let namespace = if object.is_namespace() || object.namespace.is_empty() {
                None
            } else {
                namespaces.get(&object.namespace)
            };
            let file = object.file.replace(&root.display().to_string(), "");
            (
                format!("{file} {} {}", object.location(), object.display_name()),
                object.review(namespace),
            )
        })
        .collect();
    assert!(reviews.len() > 50, "{} example objects", reviews.len());
    reviews
}

/// The parameter sets the comparison runs under: the defaults and each cluster constraint.
fn parameter_sets() -> Vec<(String, Value)> {
    let mut sets = vec![("defaults".to_string(), json!({}))];
    let folder = workspace_root().join("constraints/gatekeeper/clusters");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .expect("the cluster constraints")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a constraint file");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            use serde::Deserialize;
            let constraint = Value::deserialize(document).expect("YAML");
            sets.push((
                format!(
                    "{} {}",
                    file.file_name().expect("a name").to_string_lossy(),
                    constraint["metadata"]["name"].as_str().unwrap_or_default()
                ),
                constraint["spec"]["parameters"].clone(),
            ));
        }
    }
    assert!(sets.len() > 5);
    sets
}

#[test]
fn the_rego_gives_the_modules_violations_for_every_example() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let module = module();
    let mut compared = 0;
    let mut with_findings = 0;
    let mut rules_seen = BTreeSet::new();
    for (parameters_name, parameters) in parameter_sets() {
        for (name, review) in example_reviews() {
            let input = json!({"review": review, "parameters": parameters});
            let direct: BTreeSet<Violation> = module
                .evaluate(input.to_string().as_bytes())
                .expect("the module evaluates")
                .into_iter()
                .collect();
            let through_rego: BTreeSet<Violation> = rego_violations(&mut rego, &input)
                .into_iter()
                .map(|violation| serde_json::from_value(violation).expect("a violation"))
                .collect();
            let messages = |violations: &BTreeSet<Violation>| -> BTreeSet<String> {
                violations
                    .iter()
                    .map(|violation| violation.msg.clone())
                    .collect()
            };
            assert_eq!(
                messages(&through_rego),
                messages(&direct),
                "{name} under {parameters_name}"
            );
            // The details survive the trip too (Rego sets drop exact duplicates, as Gatekeeper's do).
            assert_eq!(through_rego, direct, "{name} under {parameters_name}");
            compared += 1;
            if !direct.is_empty() {
                with_findings += 1;
            }
            rules_seen.extend(
                direct
                    .iter()
                    .map(|violation| violation.details.rule.clone()),
            );
        }
    }
    // One batched call per evaluation, with the one key that is the module's input.
    let calls = calls.lock().expect("calls");
    assert_eq!(calls.len(), compared, "one external_data call per review");
    for call in calls.iter() {
        assert_eq!(call["keys"].as_array().map(Vec::len), Some(1), "{call}");
    }
    assert!(
        with_findings > 40,
        "{with_findings} of {compared} reviews with findings"
    );
    // Every rule of the catalogue shows up in the comparison.
    for rule in [
        "ML101", "ML102", "ML103", "ML104", "ML201", "ML202", "ML301", "ML302", "ML303", "ML401",
        "ML402", "ML403", "ML404", "ML405", "ML501", "ML502", "ML601",
    ] {
        assert!(
            rules_seen.contains(rule),
            "{rule} is compared: {rules_seen:?}"
        );
    }
}

/// The key is exactly `{"review": input.review, "parameters": input.parameters}`, and a review
/// without parameters gets `{}`.
#[test]
fn the_key_is_the_modules_input() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let review = json!({"kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}});
    rego_violations(
        &mut rego,
        &json!({"review": review, "parameters": {"minAvailable": 2}}),
    );
    rego_violations(&mut rego, &json!({"review": review}));
    let calls = calls.lock().expect("calls");
    let keys: Vec<Value> = calls
        .iter()
        .map(|call| serde_json::from_str(call["keys"][0].as_str().expect("a key")).expect("JSON"))
        .collect();
    assert_eq!(
        keys,
        vec![
            json!({"review": review, "parameters": {"minAvailable": 2}}),
            json!({"review": review, "parameters": {}}),
        ]
    );
}

/// A module ML000 (a misspelt parameter) comes through like any other violation.
#[test]
fn invalid_parameters_come_through_as_ml000() {
    let (mut rego, _) = rego_engine(Provider::Module);
    let (_, review) = example_reviews()
        .into_iter()
        .find(|(name, _)| name.contains("job-classic-no-exit") && name.contains("Job "))
        .expect("the Job example");
    let violations = rego_violations(
        &mut rego,
        &json!({"review": review, "parameters": {"istio": {"nativeSidecar": true}}}),
    );
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["details"]["rule"], "ML000");
    assert!(
        violations[0]["msg"]
            .as_str()
            .is_some_and(|msg| msg.contains("parameters.istio.nativeSidecar")),
        "{violations:?}"
    );
}

/// The template's provider-error violations for `response`, by message.
fn provider_failure(response: &str) -> Vec<Value> {
    let (mut rego, _) = rego_engine(Provider::Fixed(response.to_string()));
    let review = json!({"kind": {"group": "batch", "version": "v1", "kind": "Job"},
                        "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}});
    let violations = rego_violations(&mut rego, &json!({"review": review, "parameters": {}}));
    for violation in &violations {
        assert_eq!(
            violation["details"],
            json!({"rule": "ML000", "name": "provider-error", "severity": "error", "path": "",
                   "fix": violation["details"]["fix"]}),
            "{violation}"
        );
        assert!(
            violation["msg"]
                .as_str()
                .is_some_and(|msg| msg.starts_with("[ML000 provider-error] ")),
            "{violation}"
        );
        assert!(
            violation["details"]["fix"]
                .as_str()
                .is_some_and(|fix| fix.contains("Provider")),
            "{violation}"
        );
    }
    violations
}

fn messages(violations: &[Value]) -> Vec<String> {
    let mut messages: Vec<String> = violations
        .iter()
        .map(|violation| violation["msg"].as_str().expect("a msg").to_string())
        .collect();
    messages.sort();
    messages
}

#[test]
fn a_per_key_error_is_a_violation() {
    let violations = provider_failure(
        r#"{"responses": [], "errors": [["{key}", "module trapped: out of fuel"]], "status_code": 200, "system_error": ""}"#,
    );
    assert_eq!(
        messages(&violations),
        [
            "[ML000 provider-error] the meshlife External Data provider failed for this object: module trapped: out of fuel"
        ]
    );
}

#[test]
fn a_system_error_is_a_violation() {
    let violations = provider_failure(
        r#"{"responses": [], "errors": [], "status_code": 500, "system_error": "Post \"https://meshlife-provider.gatekeeper-system:8443/validate\": context deadline exceeded"}"#,
    );
    assert_eq!(
        messages(&violations),
        [
            "[ML000 provider-error] the meshlife External Data provider could not be called: Post \"https://meshlife-provider.gatekeeper-system:8443/validate\": context deadline exceeded"
        ]
    );
}

#[test]
fn a_system_error_beside_answers_is_still_reported() {
    let violations = provider_failure(
        r#"{"responses": [["{key}", []]], "errors": [], "status_code": 200, "system_error": "partial failure"}"#,
    );
    assert_eq!(
        messages(&violations),
        [
            "[ML000 provider-error] the meshlife External Data provider could not be called: partial failure"
        ]
    );
}

#[test]
fn an_answer_that_is_not_a_list_is_a_violation() {
    let violations = provider_failure(
        r#"{"responses": [["{key}", {"allowed": true}]], "errors": [], "status_code": 200, "system_error": ""}"#,
    );
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        messages(&violations)[0].contains("answered")
            && messages(&violations)[0].contains("instead of a violation list"),
        "{violations:?}"
    );
}

#[test]
fn no_answer_for_the_key_is_a_violation() {
    let expected = [
        "[ML000 provider-error] the meshlife External Data provider gave no answer for this object",
    ];
    // Nothing at all.
    let violations = provider_failure(
        r#"{"responses": [], "errors": [], "status_code": 200, "system_error": ""}"#,
    );
    assert_eq!(messages(&violations), expected);
    // An answer for another key only (a provider mixing up batched keys).
    let violations = provider_failure(
        r#"{"responses": [["another key", []]], "errors": [], "status_code": 200, "system_error": ""}"#,
    );
    assert_eq!(messages(&violations), expected);
}

#[test]
fn a_healthy_empty_answer_allows() {
    let violations = provider_failure(
        r#"{"responses": [["{key}", []]], "errors": [], "status_code": 200, "system_error": ""}"#,
    );
    assert_eq!(violations, Vec::<Value>::new());
}

/// Errors for several keys each become a violation (the batch is one key today, but a
/// provider answering a retried call twice must not hide anything).
#[test]
fn every_per_key_error_is_reported() {
    let violations = provider_failure(
        r#"{"responses": [], "errors": [["{key}", "first"], ["{key}", "second"]], "status_code": 200, "system_error": ""}"#,
    );
    let found: BTreeMap<usize, String> = messages(&violations).into_iter().enumerate().collect();
    assert_eq!(found.len(), 2, "{violations:?}");
}
