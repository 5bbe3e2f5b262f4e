//! The ConstraintTemplate's Rego (`constraints/gatekeeper/template.yaml`), evaluated by regorus
//! as Gatekeeper evaluates it: `input` = `{"review": ..., "parameters": ...}`, the rule
//! `violation`, and `external_data` supplied by the host. Here the host's `external_data` is an
//! extension that answers the way Gatekeeper's External Data client does (frameworks'
//! `RegoResponse`: `{"responses": [[key, value]], "errors": [[key, message]], "status_code",
//! "system_error"}`), with the value computed by the meshlife wasm module, so the test checks
//! that the Rego's trimmed key and its own selection give exactly what the module gives with
//! the whole input and parameters, that a cluster's deny and warn constraints send the same
//! key, and that every provider failure is reported or not as `providerFailure` says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use meshlife::fixtures;
use meshlife::inputs::manifests;
use meshlife::module::engine::Engine;
use meshlife_policy::{Violation, catalogue};
use regex::Regex;
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
            let namespace = if object.is_namespace() || object.identity.namespace.is_empty() {
                None
            } else {
                namespaces.get(&object.identity.namespace)
            };
            let file = object
                .identity
                .file
                .replace(&root.display().to_string(), "");
            (
                format!("{file} {} {}", object.location(), object.display_name()),
                serde_json::to_value(object.review(namespace)).expect("a review serialises"),
            )
        })
        .collect();
    assert!(reviews.len() > 50, "{} example objects", reviews.len());
    reviews
}

/// Each cluster file's constraints, in file order: (file name, [deny, warn]).
fn cluster_constraints() -> Vec<(String, Vec<Value>)> {
    let folder = workspace_root().join("constraints/gatekeeper/clusters");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .expect("the cluster constraints")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|file| {
            use serde::Deserialize;
            let text = std::fs::read_to_string(file).expect("a constraint file");
            let constraints = serde_yaml_ng::Deserializer::from_str(&text)
                .map(|document| Value::deserialize(document).expect("YAML"))
                .collect();
            (
                file.file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned(),
                constraints,
            )
        })
        .collect()
}

/// Selections the cluster files do not use, each against the module's own reading: ids in
/// any case and with spaces, names, both lists together, every severity, an empty and a
/// null list, and the selections the module refuses (whose ML000 must come through as the
/// module words it).
fn selection_variants() -> Vec<(String, Value)> {
    [
        json!({"rules": ["ml101", " ML301 ", "prestop-exceeds-grace"]}),
        json!({"rules": ["job-sidecar-never-exits"], "minSeverity": "warning"}),
        json!({"rules": [], "excludeRules": ["startup-no-hold", "ml404"]}),
        json!({"excludeRules": ["ML501", "missing-readiness"], "minSeverity": "warning"}),
        json!({"rules": ["ML000", "ML501"], "excludeRules": ["ML501"]}),
        json!({"rules": null, "excludeRules": null, "minSeverity": null, "providerFailure": null}),
        json!({"minSeverity": "info", "providerFailure": "report"}),
        json!({"minSeverity": "error", "providerFailure": "ignore", "istio": {"cni": true}}),
        json!({"rules": ["ML999"]}),
        json!({"excludeRules": ["Startup-No-Hold"]}),
        json!({"minSeverity": "critical"}),
        json!({"minSeverity": 2}),
        json!({"rules": "ML101"}),
        json!({"rules": [101]}),
        json!({"providerFailure": "deny"}),
        json!({"rules": ["ML999"], "istio": {"terminationDrainDuration": "5 seconds"}}),
        json!({"excludeRules": ["ML999"], "minSeverity": "warning", "istoi": {}}),
    ]
    .into_iter()
    .map(|parameters| (parameters.to_string(), parameters))
    .collect()
}

/// The parameter sets the comparison runs under: the defaults, each cluster constraint and
/// the selection variants.
fn parameter_sets() -> Vec<(String, Value)> {
    let mut sets = vec![
        ("defaults".to_string(), json!({})),
        // RestartAllContainers (ML407) is on by default from Kubernetes 1.36.
        (
            "kubernetes 1.36".to_string(),
            json!({"kubernetesMinorVersion": 36}),
        ),
    ];
    for (file, constraints) in cluster_constraints() {
        for constraint in constraints {
            sets.push((
                format!(
                    "{file} {}",
                    constraint["metadata"]["name"].as_str().unwrap_or_default()
                ),
                constraint["spec"]["parameters"].clone(),
            ));
        }
    }
    sets.extend(selection_variants());
    assert!(sets.len() > 20);
    sets
}

/// `violations` with the JSON positions inside ML000 messages masked: they count in the text
/// the module read, and the key is not the text of the whole input.
fn positions_masked(violations: BTreeSet<Violation>) -> BTreeSet<Violation> {
    let position = Regex::new(r"line \d+ column \d+").expect("a valid regex");
    violations
        .into_iter()
        .map(|mut violation| {
            violation.msg = position
                .replace_all(&violation.msg, "line _ column _")
                .into_owned();
            violation
        })
        .collect()
}

/// The module's violations for `input`, and the Rego's (which call the module with the
/// trimmed key and apply the selection themselves): they must be the same set, details
/// included (Rego sets drop exact duplicates, as Gatekeeper's do).
fn assert_rego_equals_module(
    rego: &mut regorus::Engine,
    input: &Value,
    label: &str,
) -> BTreeSet<Violation> {
    let direct: BTreeSet<Violation> = positions_masked(
        module()
            .evaluate(input.to_string().as_bytes())
            .expect("the module evaluates")
            .into_iter()
            .collect(),
    );
    let through_rego: BTreeSet<Violation> = positions_masked(
        rego_violations(rego, input)
            .into_iter()
            .map(|violation| serde_json::from_value(violation).expect("a violation"))
            .collect(),
    );
    let messages = |violations: &BTreeSet<Violation>| -> BTreeSet<String> {
        violations
            .iter()
            .map(|violation| violation.msg.clone())
            .collect()
    };
    assert_eq!(messages(&through_rego), messages(&direct), "{label}");
    assert_eq!(through_rego, direct, "{label}");
    direct
}

/// The keys of the calls recorded since the last look, emptying the record. Every call must
/// carry exactly one key.
fn take_keys(calls: &Calls) -> Vec<String> {
    let mut calls = calls.lock().expect("calls");
    calls
        .drain(..)
        .map(|call| {
            let keys = call["keys"].as_array().expect("keys");
            assert_eq!(keys.len(), 1, "one key per call: {call}");
            keys[0].as_str().expect("a string key").to_string()
        })
        .collect()
}

#[test]
fn the_rego_gives_the_modules_violations_for_every_example() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let mut compared = 0;
    let mut with_findings = 0;
    let mut rules_seen = BTreeSet::new();
    for (parameters_name, parameters) in parameter_sets() {
        for (name, review) in example_reviews() {
            let input = json!({"review": review, "parameters": parameters});
            let direct = assert_rego_equals_module(
                &mut rego,
                &input,
                &format!("{name} under {parameters_name}"),
            );
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
    // One batched call per evaluation, with one key.
    assert_eq!(
        take_keys(&calls).len(),
        compared,
        "one external_data call per review"
    );
    assert!(
        with_findings > 40,
        "{with_findings} of {compared} reviews with findings"
    );
    // Every rule of the catalogue shows up in the comparison.
    for rule in catalogue::RULES {
        assert!(
            rules_seen.contains(rule.id),
            "{} is compared: {rules_seen:?}",
            rule.id
        );
    }
}

/// The policy's rule cases (every rule firing, its near misses, every parameter, the refused
/// ones included), as they are and with each valid selection added to their parameters.
#[test]
fn the_rego_gives_the_modules_violations_for_every_rule_case() {
    let (mut rego, _) = rego_engine(Provider::Module);
    let cases = fixtures::rule_cases(&workspace_root().join("policy/tests/cases"))
        .expect("the rule cases load");
    assert!(cases.len() > 100, "{} rule cases", cases.len());
    let selections: Vec<Value> = selection_variants()
        .into_iter()
        .map(|(_, selection)| selection)
        .filter(|selection| {
            // Only the selections the module accepts: a refused one is compared above, and
            // here it would only hide the case's own answer behind its ML000.
            module()
                .evaluate(
                    json!({"review": {"object": {"kind": "Pod"}}, "parameters": selection})
                        .to_string()
                        .as_bytes(),
                )
                .expect("the module evaluates")
                .is_empty()
        })
        .collect();
    assert!(selections.len() >= 6, "{selections:?}");
    let mut with_ml000 = 0;
    for case in cases {
        let mut input: Value = serde_json::from_slice(&case.input).expect("a JSON input");
        // Gatekeeper's input holds only `review` and `parameters`: a case's top-level
        // `services` (which CLI hosts pass) and other keys never reach the template.
        if let Some(members) = input.as_object_mut() {
            members.retain(|key, _| key == "review" || key == "parameters");
        }
        let direct = assert_rego_equals_module(&mut rego, &input, &case.label);
        if direct
            .iter()
            .any(|violation| violation.details.rule == "ML000")
        {
            with_ml000 += 1;
        }
        let own = input
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let Some(own) = own.as_object() else {
            continue;
        };
        for selection in &selections {
            let mut parameters = own.clone();
            for (key, value) in selection.as_object().expect("an object") {
                parameters.insert(key.clone(), value.clone());
            }
            let mut input = input.clone();
            input["parameters"] = Value::Object(parameters);
            assert_rego_equals_module(
                &mut rego,
                &input,
                &format!("{} with {selection}", case.label),
            );
        }
    }
    assert!(with_ml000 > 5, "{with_ml000} cases with ML000");
}

/// The Rego's catalogue (the rule ids and names it accepts in `rules` and `excludeRules`) is
/// the module's.
#[test]
fn the_rego_catalogue_is_the_modules() {
    let (mut rego, _) = rego_engine(Provider::Module);
    let package = violation_rule();
    let package = package
        .strip_suffix(".violation")
        .expect("data.<package>.violation");
    rego.set_input(regorus::Value::from_json_str("{}").expect("input"));
    let value = rego
        .eval_rule(format!("{package}.meshlife_rules"))
        .expect("meshlife_rules evaluates");
    let in_rego: BTreeMap<String, String> =
        serde_json::from_str(&value.to_json_str().expect("JSON")).expect("an id-to-name object");
    let in_module: BTreeMap<String, String> = catalogue::RULES
        .iter()
        .map(|rule| (rule.id.to_string(), rule.name.to_string()))
        .collect();
    assert_eq!(in_rego, in_module);
}

/// A review as a webhook sends it, with everything the rules never read filled in.
fn noisy(review: &Value, operation: &str) -> Value {
    let mut review = review.clone();
    let fields = review.as_object_mut().expect("a review object");
    fields.insert("uid".into(), json!("705ab4f5-6393-11e8-b7cc-42010a800002"));
    fields.insert("operation".into(), json!(operation));
    fields.insert(
        "userInfo".into(),
        json!({"username": "alice", "uid": "42", "groups": ["system:authenticated"]}),
    );
    fields.insert("dryRun".into(), json!(false));
    fields.insert(
        "options".into(),
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions", "fieldManager": "kubectl"}),
    );
    let bookkeeping = |object: &mut Value| {
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("uid".into(), json!("d2f4a6a0-0000-4000-8000-000000000001"));
            metadata.insert("resourceVersion".into(), json!("123456"));
            metadata.insert("generation".into(), json!(7));
            metadata.insert("creationTimestamp".into(), json!("2026-11-29T10:00:00Z"));
            metadata.insert(
                "managedFields".into(),
                json!([{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {}}}]),
            );
            // kubectl apply's copy of the object, beside the annotations it already has.
            if let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.insert(LAST_APPLIED.into(), json!("{\"apiVersion\":\"v1\"}"));
            }
        }
        if let Some(object) = object.as_object_mut() {
            object.insert(
                "status".into(),
                json!({"observedGeneration": 7, "conditions": [{"type": "Ready", "status": "True"}]}),
            );
        }
    };
    if let Some(object) = fields.get_mut("object") {
        bookkeeping(object);
    }
    let mut old = fields.get("object").cloned().unwrap_or(Value::Null);
    bookkeeping(&mut old);
    fields.insert("oldObject".into(), old);
    if let Some(namespace) = fields.get_mut("namespaceObject") {
        bookkeeping(namespace);
    }
    review
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Every field the key drops, by where it sits.
fn assert_trimmed(key: &Value, label: &str) {
    let review = &key["review"];
    for field in ["uid", "userInfo", "options", "dryRun"] {
        assert!(
            review.get(field).is_none(),
            "{label}: review.{field} in {key}"
        );
    }
    if review["operation"] != "DELETE" {
        assert!(
            review.get("oldObject").is_none(),
            "{label}: oldObject in {key}"
        );
    }
    for object in ["object", "oldObject", "namespaceObject"] {
        let Some(object) = review.get(object).filter(|object| object.is_object()) else {
            continue;
        };
        assert!(object.get("status").is_none(), "{label}: {object}");
        for field in [
            "managedFields",
            "resourceVersion",
            "uid",
            "generation",
            "creationTimestamp",
        ] {
            assert!(object["metadata"].get(field).is_none(), "{label}: {object}");
        }
        assert!(
            object["metadata"]["annotations"]
                .get(LAST_APPLIED)
                .is_none(),
            "{label}: {object}"
        );
    }
    for selection in ["rules", "excludeRules", "minSeverity", "providerFailure"] {
        assert!(key["parameters"].get(selection).is_none(), "{label}: {key}");
    }
}

/// The key leaves out what no rule reads and what makes each request's key unique, and that
/// changes nothing: the Rego still answers what the module answers for the whole request.
#[test]
fn the_key_leaves_out_what_the_rules_never_read() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let (_, deny_and_warn) = cluster_constraints().remove(0);
    let parameter_sets = [
        json!({}),
        deny_and_warn[0]["spec"]["parameters"].clone(),
        deny_and_warn[1]["spec"]["parameters"].clone(),
    ];
    let mut with_findings = 0;
    for (name, review) in example_reviews() {
        for operation in ["CREATE", "UPDATE", "DELETE"] {
            for parameters in &parameter_sets {
                let label = format!("{name} {operation} under {parameters}");
                let input = json!({"review": noisy(&review, operation), "parameters": parameters});
                let answer = assert_rego_equals_module(&mut rego, &input, &label);
                let keys = take_keys(&calls);
                let key: Value = serde_json::from_str(&keys[0]).expect("a JSON key");
                assert_trimmed(&key, &label);
                if operation == "DELETE" {
                    assert!(key["review"]["oldObject"].is_object(), "{label}: {key}");
                    assert!(answer.is_empty(), "{label}");
                    continue;
                }
                // The module gives the same answer without the noise: it reads none of it.
                let mut clean_review = review.clone();
                clean_review["operation"] = json!(operation);
                let clean = json!({"review": clean_review, "parameters": parameters});
                let clean_answer: BTreeSet<Violation> = positions_masked(
                    module()
                        .evaluate(clean.to_string().as_bytes())
                        .expect("the module evaluates")
                        .into_iter()
                        .collect(),
                );
                assert_eq!(answer, clean_answer, "{label}");
                if !answer.is_empty() {
                    with_findings += 1;
                }
            }
        }
    }
    assert!(with_findings > 40, "{with_findings}");
}

/// kubectl apply's copy of the object leaves the key, and the other annotations stay; the
/// module answers the same without it.
#[test]
fn the_key_leaves_out_kubectls_last_applied_configuration() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let object = |annotations: Value| {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "shop", "annotations": annotations},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "migrate", "image": "migrate:1"}]}}}})
    };
    let review = |annotations: Value| {
        json!({"kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
            "name": "migrate", "namespace": "shop", "object": object(annotations),
            "namespaceObject": {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "shop", "labels": {"istio-injection": "enabled"}}}})
    };
    let copy = object(json!({"sidecar.istio.io/inject": "true"})).to_string();
    for (kept, sent) in [
        (
            json!({"sidecar.istio.io/inject": "true"}),
            json!({"sidecar.istio.io/inject": "true", LAST_APPLIED: copy}),
        ),
        (json!({}), json!({LAST_APPLIED: copy})),
    ] {
        let input = json!({"review": review(sent.clone())});
        let answer = assert_rego_equals_module(&mut rego, &input, &sent.to_string());
        let key: Value = serde_json::from_str(&take_keys(&calls)[0]).expect("a JSON key");
        assert_eq!(key["review"], review(kept.clone()), "{sent}");
        let without: BTreeSet<Violation> = positions_masked(
            module()
                .evaluate(json!({"review": review(kept)}).to_string().as_bytes())
                .expect("the module evaluates")
                .into_iter()
                .collect(),
        );
        assert_eq!(answer, without, "{sent}");
    }
}

/// The exact key for one webhook review: what is left of the review, and the parameters
/// without the selection; parameters left out give `{}`.
#[test]
fn the_key_is_the_trimmed_review_and_the_cluster_facts() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop", "labels": {"app": "p"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "p-1"}]},
        "spec": {"containers": [{"name": "p", "image": "p:1"}]}});
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"istio-injection": "enabled"}},
        "spec": {"finalizers": ["kubernetes"]}});
    let review = json!({"kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "p", "namespace": "shop", "operation": "UPDATE",
        "object": object, "namespaceObject": namespace});
    let selection = json!({"rules": ["ML101"], "excludeRules": [], "minSeverity": "warning",
                           "providerFailure": "report"});
    let facts = json!({"minAvailable": 2, "istio": {"cni": true}});
    let mut parameters = facts.clone();
    for (key, value) in selection.as_object().expect("an object") {
        parameters[key] = value.clone();
    }
    rego_violations(
        &mut rego,
        &json!({"review": noisy(&review, "UPDATE"), "parameters": parameters}),
    );
    rego_violations(&mut rego, &json!({"review": review}));
    rego_violations(&mut rego, &json!({"review": review, "parameters": null}));
    let keys: Vec<Value> = take_keys(&calls)
        .iter()
        .map(|key| serde_json::from_str(key).expect("JSON"))
        .collect();
    assert_eq!(
        keys,
        vec![
            json!({"review": review, "parameters": facts}),
            json!({"review": review, "parameters": {}}),
            json!({"review": review, "parameters": {}}),
        ]
    );
    // A DELETE keeps oldObject, the object it deletes, trimmed like the object.
    rego_violations(
        &mut rego,
        &json!({"review": noisy(&json!({"name": "p", "object": null}), "DELETE")}),
    );
    let key: Value = serde_json::from_str(&take_keys(&calls)[0]).expect("JSON");
    assert_eq!(key["review"]["oldObject"], json!(null));
    rego_violations(
        &mut rego,
        &json!({"review": {"operation": "DELETE", "object": null, "oldObject": noisy(&json!({"object": object}), "DELETE")["object"]}}),
    );
    let key: Value = serde_json::from_str(&take_keys(&calls)[0]).expect("JSON");
    assert_eq!(
        key["review"],
        json!({"operation": "DELETE", "object": null, "oldObject": object})
    );
    // A selection the module refuses goes to the module whole, to be named by it.
    let refused = json!({"rules": ["ML999"], "minSeverity": "warning", "minAvailable": 2});
    let violations = rego_violations(&mut rego, &json!({"review": review, "parameters": refused}));
    let key: Value = serde_json::from_str(&take_keys(&calls)[0]).expect("JSON");
    assert_eq!(key["parameters"], refused);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0]["msg"]
            .as_str()
            .is_some_and(|msg| msg.contains("parameters.rules[0]: unknown rule \"ML999\"")),
        "{violations:?}"
    );
}

/// A cluster's deny and warn constraints send byte for byte the same key for every object, so
/// Gatekeeper makes one provider call for both (memoised in the query, then cached).
#[test]
fn deny_and_warn_constraints_send_the_same_key() {
    let (mut rego, calls) = rego_engine(Provider::Module);
    let reviews = example_reviews();
    for (file, constraints) in cluster_constraints() {
        assert_eq!(constraints.len(), 2, "{file}");
        let (deny, warn) = (
            &constraints[0]["spec"]["parameters"],
            &constraints[1]["spec"]["parameters"],
        );
        assert_ne!(
            deny, warn,
            "{file}: the constraints differ in their selection"
        );
        for (name, review) in &reviews {
            for review in [review.clone(), noisy(review, "CREATE")] {
                rego_violations(&mut rego, &json!({"review": review, "parameters": deny}));
                rego_violations(&mut rego, &json!({"review": review, "parameters": warn}));
                let keys = take_keys(&calls);
                assert_eq!(keys.len(), 2);
                assert_eq!(keys[0], keys[1], "{file}: {name}");
            }
        }
        // The key's parameters are the facts: the constraint's parameters without the
        // selection, which is all the two constraints differ in.
        rego_violations(
            &mut rego,
            &json!({"review": reviews[0].1, "parameters": deny}),
        );
        let key: Value = serde_json::from_str(&take_keys(&calls)[0]).expect("JSON");
        let mut facts = deny.clone();
        for selection in ["rules", "excludeRules", "minSeverity", "providerFailure"] {
            facts.as_object_mut().expect("an object").remove(selection);
        }
        assert_eq!(key["parameters"], facts, "{file}");
        assert!(
            facts.get("kubernetesMinorVersion").is_some(),
            "{file}: {facts}"
        );
    }
}

/// A module ML000 (a misspelt parameter) comes through like any other violation.
#[test]
fn invalid_parameters_come_through_as_ml000() {
    let (mut rego, _) = rego_engine(Provider::Module);
    let (_, review) = example_reviews()
        .into_iter()
        .find(|(name, _)| name.contains("job-classic-no-exit") && name.contains("Job "))
        .expect("the Job example");
    for parameters in [
        json!({"istio": {"nativeSidecar": true}}),
        json!({"istio": {"nativeSidecar": true}, "minSeverity": "error", "providerFailure": "ignore"}),
    ] {
        let violations = rego_violations(
            &mut rego,
            &json!({"review": review, "parameters": parameters}),
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
}

// ---------------------------------------------------------------------------------------------
// Provider failures.

/// The template's violations for `response` under `parameters`; every one must be an ML000
/// provider-error.
fn provider_failure(response: &str, parameters: &Value) -> Vec<Value> {
    let (mut rego, _) = rego_engine(Provider::Fixed(response.to_string()));
    let review = json!({"kind": {"group": "batch", "version": "v1", "kind": "Job"},
                        "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}});
    let violations = rego_violations(
        &mut rego,
        &json!({"review": review, "parameters": parameters}),
    );
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

/// Parameter sets that report provider failures: `report`, alone or with a selection that
/// would drop every finding (ML000 is never dropped), and each cluster's warn constraint.
fn reporting() -> Vec<Value> {
    let mut sets = vec![
        json!({"providerFailure": "report"}),
        json!({"providerFailure": "report", "rules": ["ML101"], "minSeverity": "error"}),
    ];
    for (file, constraints) in cluster_constraints() {
        assert_eq!(
            constraints[1]["spec"]["enforcementAction"], "warn",
            "{file}"
        );
        sets.push(constraints[1]["spec"]["parameters"].clone());
    }
    sets
}

/// Parameter sets that do not: the default (no parameters, none at all, null), `ignore`, and
/// each cluster's deny constraint.
fn not_reporting() -> Vec<Value> {
    let mut sets = vec![
        json!({}),
        json!(null),
        json!({"providerFailure": null}),
        json!({"providerFailure": "ignore", "minSeverity": "error"}),
    ];
    for (file, constraints) in cluster_constraints() {
        assert_eq!(
            constraints[0]["spec"]["enforcementAction"], "deny",
            "{file}"
        );
        sets.push(constraints[0]["spec"]["parameters"].clone());
    }
    sets
}

/// `response` gives `expected` wherever failures are reported and nothing elsewhere.
fn assert_failure_mode(response: &str, expected: &[&str]) {
    for parameters in reporting() {
        assert_eq!(
            messages(&provider_failure(response, &parameters)),
            expected,
            "report under {parameters}"
        );
    }
    for parameters in not_reporting() {
        assert_eq!(
            provider_failure(response, &parameters),
            Vec::<Value>::new(),
            "ignore under {parameters}"
        );
    }
}

#[test]
fn a_per_key_error_follows_provider_failure() {
    assert_failure_mode(
        r#"{"responses": [], "errors": [["{key}", "module trapped: out of fuel"]], "status_code": 200, "system_error": ""}"#,
        &[
            "[ML000 provider-error] the meshlife External Data provider failed for this object: module trapped: out of fuel",
        ],
    );
}

#[test]
fn a_system_error_follows_provider_failure() {
    assert_failure_mode(
        r#"{"responses": [], "errors": [], "status_code": 500, "system_error": "Post \"https://meshlife-provider.gatekeeper-system:8443/validate\": context deadline exceeded"}"#,
        &[
            "[ML000 provider-error] the meshlife External Data provider could not be called: Post \"https://meshlife-provider.gatekeeper-system:8443/validate\": context deadline exceeded",
        ],
    );
}

/// What Gatekeeper's `HandleError` gives the template: null lists beside the system error
/// (a provider not in its cache, a failed send, a body that is not JSON).
#[test]
fn null_responses_follow_provider_failure() {
    assert_failure_mode(
        r#"{"responses": null, "errors": null, "status_code": 400, "system_error": "key is not found in provider cache"}"#,
        &[
            "[ML000 provider-error] the meshlife External Data provider could not be called: key is not found in provider cache",
        ],
    );
    // Null lists and no system error: nothing answered the key.
    assert_failure_mode(
        r#"{"responses": null, "errors": null, "status_code": 200, "system_error": ""}"#,
        &[
            "[ML000 provider-error] the meshlife External Data provider gave no answer for this object",
        ],
    );
}

#[test]
fn a_system_error_beside_answers_follows_provider_failure() {
    assert_failure_mode(
        r#"{"responses": [["{key}", []]], "errors": [], "status_code": 200, "system_error": "partial failure"}"#,
        &[
            "[ML000 provider-error] the meshlife External Data provider could not be called: partial failure",
        ],
    );
}

#[test]
fn an_answer_that_is_not_a_list_follows_provider_failure() {
    let response = r#"{"responses": [["{key}", {"allowed": true}]], "errors": [], "status_code": 200, "system_error": ""}"#;
    for parameters in reporting() {
        let violations = provider_failure(response, &parameters);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            messages(&violations)[0].contains("answered")
                && messages(&violations)[0].contains("instead of a violation list"),
            "{violations:?}"
        );
    }
    for parameters in not_reporting() {
        assert_eq!(provider_failure(response, &parameters), Vec::<Value>::new());
    }
}

#[test]
fn no_answer_for_the_key_follows_provider_failure() {
    let expected = [
        "[ML000 provider-error] the meshlife External Data provider gave no answer for this object",
    ];
    // Nothing at all.
    assert_failure_mode(
        r#"{"responses": [], "errors": [], "status_code": 200, "system_error": ""}"#,
        &expected,
    );
    // An answer for another key only (a provider mixing up batched keys).
    assert_failure_mode(
        r#"{"responses": [["another key", []]], "errors": [], "status_code": 200, "system_error": ""}"#,
        &expected,
    );
}

#[test]
fn a_healthy_empty_answer_allows() {
    let response =
        r#"{"responses": [["{key}", []]], "errors": [], "status_code": 200, "system_error": ""}"#;
    for parameters in reporting().into_iter().chain(not_reporting()) {
        assert_eq!(
            provider_failure(response, &parameters),
            Vec::<Value>::new(),
            "{parameters}"
        );
    }
}

/// Errors for several keys each become a violation (the batch is one key today, but a
/// provider answering a retried call twice must not hide anything).
#[test]
fn every_per_key_error_is_reported() {
    let violations = provider_failure(
        r#"{"responses": [], "errors": [["{key}", "first"], ["{key}", "second"]], "status_code": 200, "system_error": ""}"#,
        &json!({"providerFailure": "report"}),
    );
    let found: BTreeMap<usize, String> = messages(&violations).into_iter().enumerate().collect();
    assert_eq!(found.len(), 2, "{violations:?}");
}
