//! The Gatekeeper configuration in `constraints/gatekeeper/`: the cluster constraints validate
//! against the ConstraintTemplate's structural schema the way the API server checks them, a
//! misspelt or mistyped parameter is refused by both the schema and the module, the template
//! and the Provider are well formed, and `meshlife check --constraint` runs with every file.

use crate::cli_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cli_support::{Outcome, run_in};
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value, json};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn gatekeeper_dir() -> PathBuf {
    workspace_root().join("constraints/gatekeeper")
}

/// Every YAML document of `path`, as JSON values.
fn documents(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| {
            Value::deserialize(document)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        })
        .filter(|value| !value.is_null())
        .collect()
}

fn template() -> Value {
    let mut all = documents(&gatekeeper_dir().join("template.yaml"));
    assert_eq!(all.len(), 1, "template.yaml holds one document");
    all.remove(0)
}

fn schema() -> Value {
    template()["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"].clone()
}

/// The cluster constraint files, sorted.
fn cluster_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(gatekeeper_dir().join("clusters"))
        .expect("constraints/gatekeeper/clusters")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    files.sort();
    files
}

/// The five clusters the issue asks for, by file name.
const CLUSTER_FILES: [&str; 5] = [
    "istio-1.26-classic.yaml",
    "istio-1.27-native.yaml",
    "istio-cni.yaml",
    "linkerd-2.19-classic.yaml",
    "linkerd-2.20-native.yaml",
];

/// The kinds the module reviews (rules.md §1), as (API group, kind).
const REVIEWED_KINDS: [(&str, &str); 21] = [
    ("", "Pod"),
    ("", "ReplicationController"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("argoproj.io", "Rollout"),
    ("argoproj.io", "AnalysisTemplate"),
    ("argoproj.io", "ClusterAnalysisTemplate"),
    ("kubeflow.org", "Experiment"),
    ("kubeflow.org", "PyTorchJob"),
    ("kubeflow.org", "TFJob"),
    ("kubeflow.org", "MPIJob"),
    ("kubeflow.org", "XGBoostJob"),
    ("kubeflow.org", "PaddleJob"),
    ("kubeflow.org", "JAXJob"),
    ("jobset.x-k8s.io", "JobSet"),
    ("batch.volcano.sh", "Job"),
    ("networking.k8s.io", "NetworkPolicy"),
];

#[test]
fn the_listed_kinds_are_the_ones_the_module_reviews() {
    use meshlife_policy::workload::WorkloadKind;
    for (group, kind) in REVIEWED_KINDS {
        let api_version = if group.is_empty() {
            "v1".to_string()
        } else {
            format!("{group}/v1")
        };
        assert!(
            WorkloadKind::of(kind, Some(&api_version)).is_some()
                || meshlife_policy::network_policy::is_network_policy(kind, Some(&api_version)),
            "{group} {kind} is listed but not reviewed"
        );
    }
    assert!(WorkloadKind::of("Experiment", Some("argoproj.io/v1alpha1")).is_none());
}

/// Rules whose findings are always errors (the warn constraints leave them out); ML401 and
/// ML403 are errors in some cases and warnings in others, so the warn constraints keep them.
const ERROR_RULES: [&str; 5] = ["ML104", "ML301", "ML302", "ML304", "ML405"];

/// The always-error rules are the rows of docs/rules.md's table whose severity is `error` and
/// nothing else, and `meshlife constraint` leaves the same ones out of its warn constraint.
#[test]
fn the_always_error_rules_are_the_ones_the_rule_table_says_are() {
    let table = std::fs::read_to_string(workspace_root().join("docs/rules.md")).unwrap();
    let from_table: BTreeSet<String> = table
        .lines()
        .filter(|line| line.starts_with("| [ML"))
        .filter(|line| line.split('|').nth(3).map(str::trim) == Some("error"))
        .map(|line| line[3..8].to_string())
        .collect();
    let listed: BTreeSet<String> = ERROR_RULES.iter().map(|rule| rule.to_string()).collect();
    assert_eq!(from_table, listed);
    assert_eq!(
        meshlife::constraints::generate::ALWAYS_ERROR_RULES
            .iter()
            .map(|rule| rule.to_string())
            .collect::<BTreeSet<_>>(),
        listed
    );
}

/// A drain exactly as long as the grace period is an ML401 warning: the deny constraint drops
/// it (below error), so the warn constraint must report it. The cluster files left ML401 out of
/// the warn constraint, and the warning was lost.
#[test]
fn an_ml401_warning_is_reported_by_the_warn_constraint_of_every_classic_istio_cluster() {
    let workspace = cli_support::Workspace::new();
    workspace.write(
        "drain.yaml",
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    istio-injection: enabled
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true}'
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: web
          image: registry.example/web:1
          readinessProbe:
            httpGet: {path: /ready, port: 8080}
"#,
    );
    // Classic proxies: a native one's drain is judged otherwise (no ML401 at equality).
    let classic_istio = CLUSTER_FILES
        .iter()
        .filter(|file| file.starts_with("istio") && !file.contains("native"));
    for file in classic_istio {
        let constraint = workspace_root()
            .join("constraints/gatekeeper/clusters")
            .join(file);
        let outcome = workspace.run(&[
            "check",
            "drain.yaml",
            "--constraint",
            constraint.to_str().unwrap(),
            "-o",
            "json",
        ]);
        let ml401: Vec<Value> = outcome
            .json()
            .into_iter()
            .filter(|finding| finding["rule"] == "ML401")
            .collect();
        assert_eq!(ml401.len(), 1, "{file}: {outcome:?}");
        assert_eq!(ml401[0]["severity"], "warning", "{file}: {outcome:?}");
        assert_eq!(
            ml401[0]["constraint"], "mesh-lifecycle-warnings",
            "{file}: {outcome:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A structural-schema validator for the subset of OpenAPI v3 the template uses.

/// What the API server would do with a value that does not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    /// A field the schema does not declare. The API server prunes it from a structural schema
    /// (the object is stored without it, so the module never sees the typo), and rejects the
    /// request under strict field validation (`kubectl apply`'s default since Kubernetes 1.27).
    Unknown(String),
    /// A value of the wrong type, outside the enum, below the minimum or not matching the
    /// pattern: the API server rejects the object.
    Invalid(String, String),
}

impl Problem {
    fn path(&self) -> &str {
        match self {
            Problem::Unknown(path) | Problem::Invalid(path, _) => path,
        }
    }
}

/// The keywords this validator implements (`default` and `description` do not constrain).
const KNOWN_KEYWORDS: [&str; 8] = [
    "type",
    "properties",
    "items",
    "enum",
    "minimum",
    "pattern",
    "default",
    "description",
];

/// Checks `value` against `schema`, appending every problem, with paths such as
/// `parameters.istio.cni`. Panics on a schema keyword it does not implement, so the validator
/// can never pass something because it skipped a rule.
fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<Problem>) {
    let fields = schema.as_object().expect("a schema is a mapping");
    for keyword in fields.keys() {
        assert!(
            KNOWN_KEYWORDS.contains(&keyword.as_str()),
            "the validator does not implement `{keyword}` (at {path}); extend it"
        );
    }
    let kind = fields
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("structural schemas have a type at every level ({path})"));
    let invalid = |message: String| Problem::Invalid(path.to_string(), message);
    let type_matches = match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        other => panic!("unknown type {other:?} at {path}"),
    };
    if value.is_null() {
        // Not nullable: pruned, like an unknown field.
        problems.push(Problem::Unknown(path.to_string()));
        return;
    }
    if !type_matches {
        problems.push(invalid(format!("expected {kind}, got {value}")));
        return;
    }
    if let Some(allowed) = fields.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        problems.push(invalid(format!("{value} is not one of {allowed:?}")));
    }
    if let Some(minimum) = fields.get("minimum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|number| number < minimum)
    {
        problems.push(invalid(format!("{value} is below the minimum {minimum}")));
    }
    if let Some(pattern) = fields.get("pattern").and_then(Value::as_str) {
        let regex = Regex::new(pattern).expect("the template's pattern compiles");
        if !regex.is_match(value.as_str().unwrap_or_default()) {
            problems.push(invalid(format!("{value} does not match {pattern}")));
        }
    }
    match kind {
        "object" => {
            let properties = fields
                .get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (key, inner) in value.as_object().expect("checked above") {
                let inner_path = format!("{path}.{key}");
                match properties.get(key) {
                    Some(property) => validate(property, inner, &inner_path, problems),
                    None => problems.push(Problem::Unknown(inner_path)),
                }
            }
        }
        "array" => {
            let items = fields
                .get("items")
                .unwrap_or_else(|| panic!("structural arrays have items ({path})"));
            for (index, inner) in value.as_array().expect("checked above").iter().enumerate() {
                validate(items, inner, &format!("{path}[{index}]"), problems);
            }
        }
        _ => {}
    }
}

fn problems_of(parameters: &Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    validate(&schema(), parameters, "parameters", &mut problems);
    problems
}

#[test]
fn the_validator_catches_what_the_api_server_would() {
    assert_eq!(problems_of(&json!({})), vec![]);
    assert_eq!(
        problems_of(&json!({"istio": {"nativeSidecar": true}})),
        vec![Problem::Unknown("parameters.istio.nativeSidecar".into())]
    );
    for (parameters, path) in [
        (
            json!({"kubernetesMinorVersion": "33"}),
            "parameters.kubernetesMinorVersion",
        ),
        (
            json!({"kubernetesMinorVersion": 33.5}),
            "parameters.kubernetesMinorVersion",
        ),
        (
            json!({"kubernetesMinorVersion": -1}),
            "parameters.kubernetesMinorVersion",
        ),
        (json!({"minSeverity": "warn"}), "parameters.minSeverity"),
        (
            json!({"providerFailure": "deny"}),
            "parameters.providerFailure",
        ),
        (json!({"istio": {"cni": "true"}}), "parameters.istio.cni"),
        (
            json!({"istio": {"terminationDrainDuration": "5 seconds"}}),
            "parameters.istio.terminationDrainDuration",
        ),
        (json!({"rules": "ML101"}), "parameters.rules"),
        (json!({"rules": [101]}), "parameters.rules[0]"),
        (json!({"linkerd": []}), "parameters.linkerd"),
    ] {
        let problems = problems_of(&parameters);
        assert!(
            matches!(problems.as_slice(), [Problem::Invalid(found, _)] if found == path),
            "{parameters}: {problems:?}"
        );
    }
    assert_eq!(
        problems_of(&json!({"exemptImages": null})),
        vec![Problem::Unknown("parameters.exemptImages".into())]
    );
    for duration in ["5s", "1m30s", "500ms", "0", "1.5h", " 2s "] {
        assert_eq!(
            problems_of(&json!({"istio": {"terminationDrainDuration": duration}})),
            vec![],
            "{duration}"
        );
    }
}

/// Each default in the schema fits its own property, so a constraint that spells the defaults
/// out is valid.
#[test]
fn the_schema_defaults_fit_the_schema() {
    fn walk(schema: &Value, path: &str) {
        if let Some(default) = schema.get("default") {
            let mut problems = Vec::new();
            validate(schema, default, path, &mut problems);
            assert_eq!(problems, vec![], "default at {path}");
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, property) in properties {
                walk(property, &format!("{path}.{key}"));
            }
        }
    }
    walk(&schema(), "parameters");
}

// ---------------------------------------------------------------------------------------------
// The template and the Provider.

#[test]
fn the_template_name_is_the_lowercase_of_its_kind() {
    let template = template();
    assert_eq!(template["apiVersion"], "templates.gatekeeper.sh/v1");
    assert_eq!(template["kind"], "ConstraintTemplate");
    let kind = template["spec"]["crd"]["spec"]["names"]["kind"]
        .as_str()
        .expect("spec.crd.spec.names.kind");
    assert_eq!(kind, "MeshLifecycle");
    assert_eq!(template["metadata"]["name"], kind.to_lowercase());
    // Gatekeeper accepts exactly one target, the admission one.
    let targets = template["spec"]["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0]["target"], "admission.k8s.gatekeeper.sh");
    // Structural: the top level is an object.
    assert_eq!(schema()["type"], "object");
}

#[test]
fn the_provider_is_the_one_the_template_calls() {
    let mut all = documents(&gatekeeper_dir().join("provider.yaml"));
    assert_eq!(all.len(), 1);
    let provider = all.remove(0);
    assert_eq!(provider["apiVersion"], "externaldata.gatekeeper.sh/v1beta1");
    assert_eq!(provider["kind"], "Provider");
    let name = provider["metadata"]["name"].as_str().expect("a name");
    let rego = template()["spec"]["targets"][0]["rego"]
        .as_str()
        .expect("the Rego")
        .to_string();
    assert!(
        rego.contains(&format!("{{\"provider\": \"{name}\"")),
        "the template calls provider {name:?}"
    );
    let spec = provider["spec"].as_object().expect("spec");
    let keys: BTreeSet<&str> = spec.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["url", "timeout", "caBundle"]));
    let url = spec["url"].as_str().expect("url");
    // HTTPS (Gatekeeper 3.11+ refuses anything else), to a Service `<name>.<namespace>`.
    let service = Regex::new(r"^https://[a-z0-9-]+\.[a-z0-9-]+(:\d+)?(/.*)?$").expect("regex");
    assert!(service.is_match(url), "{url}");
    // Whole seconds, explicit, inside Gatekeeper's 3 s validating webhook timeout.
    let timeout = spec["timeout"].as_i64().expect("an integer timeout");
    assert!((1..3).contains(&timeout), "{timeout}");
    assert!(
        spec["caBundle"]
            .as_str()
            .is_some_and(|bundle| !bundle.is_empty())
    );
}

// ---------------------------------------------------------------------------------------------
// The cluster constraints.

#[test]
fn there_is_a_file_for_every_typical_cluster() {
    let names: Vec<String> = cluster_files()
        .iter()
        .map(|path| {
            path.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, CLUSTER_FILES);
}

#[test]
fn every_cluster_constraint_validates_against_the_template_schema() {
    let kind = template()["spec"]["crd"]["spec"]["names"]["kind"].clone();
    for file in cluster_files() {
        let constraints = documents(&file);
        let name = file.display();
        assert_eq!(constraints.len(), 2, "{name}: a deny and a warn constraint");
        for constraint in &constraints {
            assert_eq!(
                constraint["apiVersion"], "constraints.gatekeeper.sh/v1beta1",
                "{name}"
            );
            assert_eq!(constraint["kind"], kind, "{name}");
            let parameters = &constraint["spec"]["parameters"];
            assert!(parameters.is_object(), "{name}: parameters");
            assert_eq!(problems_of(parameters), vec![], "{name}");
            assert!(
                !constraint.to_string().contains("null"),
                "{name}: nothing is left empty by accident"
            );
        }
    }
}

fn as_set(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a list: {value}"))
        .iter()
        .map(|entry| entry.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn each_cluster_denies_errors_and_warns_on_the_rest() {
    for file in cluster_files() {
        let name = file.display().to_string();
        let constraints = documents(&file);
        let (deny, warn) = (&constraints[0], &constraints[1]);
        assert_eq!(deny["metadata"]["name"], "mesh-lifecycle-errors", "{name}");
        assert_eq!(
            warn["metadata"]["name"], "mesh-lifecycle-warnings",
            "{name}"
        );
        assert_eq!(deny["spec"]["enforcementAction"], "deny", "{name}");
        assert_eq!(warn["spec"]["enforcementAction"], "warn", "{name}");

        // Deny: error findings only, from every rule.
        let deny_parameters = deny["spec"]["parameters"].as_object().expect("parameters");
        assert_eq!(deny_parameters["minSeverity"], "error", "{name}");
        assert!(!deny_parameters.contains_key("rules"), "{name}");
        assert!(!deny_parameters.contains_key("excludeRules"), "{name}");
        // Warn: every rule but the always-error ones, at every severity.
        let warn_parameters = warn["spec"]["parameters"].as_object().expect("parameters");
        assert!(!warn_parameters.contains_key("minSeverity"), "{name}");
        assert!(!warn_parameters.contains_key("rules"), "{name}");
        assert_eq!(
            as_set(&warn_parameters["excludeRules"]),
            ERROR_RULES.iter().map(|rule| rule.to_string()).collect(),
            "{name}"
        );
        // A provider failure never blocks, and always shows: as a warning and in audit.
        assert_eq!(deny_parameters["providerFailure"], "ignore", "{name}");
        assert_eq!(warn_parameters["providerFailure"], "report", "{name}");
        // The cluster's facts are the same in both.
        let facts = |parameters: &Map<String, Value>| {
            let mut facts = parameters.clone();
            facts.remove("minSeverity");
            facts.remove("excludeRules");
            facts.remove("providerFailure");
            facts
        };
        assert_eq!(facts(deny_parameters), facts(warn_parameters), "{name}");

        // One match for both: every reviewed kind, namespaced, outside the system namespaces.
        let matcher = &deny["spec"]["match"];
        assert_eq!(matcher, &warn["spec"]["match"], "{name}");
        assert_eq!(matcher["scope"], "*", "{name}");
        let mut kinds = BTreeSet::new();
        for entry in matcher["kinds"].as_array().expect("kinds") {
            for group in as_set(&entry["apiGroups"]) {
                for kind in as_set(&entry["kinds"]) {
                    kinds.insert((group.clone(), kind));
                }
            }
        }
        let reviewed: BTreeSet<(String, String)> = REVIEWED_KINDS
            .iter()
            .map(|(group, kind)| (group.to_string(), kind.to_string()))
            .collect();
        assert_eq!(kinds, reviewed, "{name}");
        let excluded = as_set(&matcher["excludedNamespaces"]);
        let mesh_namespaces: &[&str] = if name.contains("istio") {
            &["istio-system", "istio-ingress"]
        } else {
            &["linkerd", "linkerd-viz"]
        };
        for namespace in ["kube-system", "kube-public", "gatekeeper-system"]
            .iter()
            .chain(mesh_namespaces)
        {
            assert!(excluded.contains(*namespace), "{name} excludes {namespace}");
        }
    }
}

/// The facts that tell the clusters apart.
#[test]
fn the_cluster_facts_match_the_file_names() {
    let parameters = |file: &str| -> Value {
        documents(&gatekeeper_dir().join("clusters").join(file))[0]["spec"]["parameters"].clone()
    };
    let classic = parameters("istio-1.26-classic.yaml");
    assert_eq!(classic["istio"]["nativeSidecars"], false);
    assert_eq!(classic["istio"]["cni"], false);
    let native = parameters("istio-1.27-native.yaml");
    assert_eq!(native["istio"]["nativeSidecars"], true);
    assert_eq!(native["kubernetesMinorVersion"], 33);
    let cni = parameters("istio-cni.yaml");
    assert_eq!(cni["istio"]["cni"], true);
    assert_eq!(cni["istio"]["nativeSidecars"], false);
    let linkerd_classic = parameters("linkerd-2.19-classic.yaml");
    assert_eq!(linkerd_classic["linkerd"]["nativeSidecars"], false);
    assert_eq!(linkerd_classic["linkerd"]["proxyAwait"], true);
    let linkerd_native = parameters("linkerd-2.20-native.yaml");
    assert_eq!(linkerd_native["linkerd"]["nativeSidecars"], true);
    assert!(linkerd_native["kubernetesMinorVersion"].as_i64() >= Some(29));
    for file in CLUSTER_FILES {
        let parameters = parameters(file);
        let mesh = if file.starts_with("istio") {
            "istio"
        } else {
            "linkerd"
        };
        let other = if mesh == "istio" { "linkerd" } else { "istio" };
        assert!(parameters[mesh].is_object(), "{file}");
        assert!(
            parameters[other].is_null(),
            "{file} states only its own mesh's facts"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The CLI with the constraints.

fn meshlife(args: &[&str]) -> Outcome {
    run_in(&workspace_root(), args, None)
}

#[test]
fn meshlife_check_runs_the_examples_under_every_cluster_file() {
    for file in CLUSTER_FILES {
        let constraint = format!("constraints/gatekeeper/clusters/{file}");
        let outcome = meshlife(&[
            "check",
            "examples/",
            "--constraint",
            &constraint,
            "-o",
            "json",
        ]);
        // 1: the examples hold deny findings; never 2 (a constraint or input error).
        assert_eq!(outcome.code, 1, "{file}: {outcome:?}");
        assert!(!outcome.stderr.contains("error"), "{file}: {outcome:?}");
        let findings = outcome.json();
        assert!(!findings.is_empty(), "{file}");
        for finding in &findings {
            let rule = finding["rule"].as_str().expect("a rule");
            match finding["constraint"].as_str().expect("a constraint") {
                "mesh-lifecycle-errors" => {
                    assert_eq!(finding["severity"], "error", "{file}: {finding}");
                    assert_eq!(finding["enforcementAction"], "deny", "{file}: {finding}");
                }
                "mesh-lifecycle-warnings" => {
                    assert!(!ERROR_RULES.contains(&rule), "{file}: {finding}");
                    assert_eq!(finding["enforcementAction"], "warn", "{file}: {finding}");
                    assert_eq!(finding["failsRun"], false, "{file}: {finding}");
                }
                other => panic!("{file}: unexpected constraint {other}"),
            }
            assert_ne!(rule, "ML000", "{file}: {finding}");
        }
        let constraints: BTreeSet<&str> = findings
            .iter()
            .filter_map(|finding| finding["constraint"].as_str())
            .collect();
        assert_eq!(constraints.len(), 2, "{file}: both constraints report");
    }
}

/// Native-sidecar clusters report fewer Job findings than classic ones on the same examples:
/// the facts change the verdicts.
#[test]
fn native_clusters_see_fewer_job_failures() {
    let count = |file: &str, rule: &str| {
        let constraint = format!("constraints/gatekeeper/clusters/{file}");
        meshlife(&[
            "check",
            "examples/",
            "--constraint",
            &constraint,
            "-o",
            "json",
        ])
        .rules()
        .iter()
        .filter(|found| *found == rule)
        .count()
    };
    assert!(count("istio-1.27-native.yaml", "ML301") < count("istio-1.26-classic.yaml", "ML301"));
    assert!(
        count("linkerd-2.20-native.yaml", "ML301") < count("linkerd-2.19-classic.yaml", "ML301")
    );
}

/// A constraint with a misspelt or ill-typed parameter is refused twice: by the schema (the
/// API server prunes the unknown key or rejects the bad value) and by the module, which
/// `meshlife check --constraint` consults before checking anything (exit 2, naming the field).
#[test]
fn a_constraint_with_a_misspelt_parameter_is_rejected() {
    let file = std::fs::read_to_string(gatekeeper_dir().join("clusters/istio-1.26-classic.yaml"))
        .expect("the constraint");
    // The deny constraint alone.
    let original = file.split("\n---\n").next().expect("a document");
    let workspace = cli_support::Workspace::new();
    workspace.write(
        "job.yaml",
        &std::fs::read_to_string(workspace_root().join("examples/istio/job-classic-no-exit.yaml"))
            .expect("an example"),
    );
    // (replace, with, the field the schema and the module name)
    let cases = [
        (
            "      nativeSidecars: false",
            "      nativeSidecar: false",
            "parameters.istio.nativeSidecar",
        ),
        (
            "    minSeverity: error",
            "    minSeverities: error",
            "parameters.minSeverities",
        ),
        (
            "    minSeverity: error",
            "    minSeverity: errors",
            "parameters.minSeverity",
        ),
        (
            "      cni: false",
            "      cni: \"no\"",
            "parameters.istio.cni",
        ),
        (
            "    kubernetesMinorVersion: 31",
            "    kubernetesMinorVersion: \"1.31\"",
            "parameters.kubernetesMinorVersion",
        ),
        (
            "      terminationDrainDuration: 5s",
            "      terminationDrainDuration: 5 seconds",
            "parameters.istio.terminationDrainDuration",
        ),
        (
            "    minSeverity: error",
            "    minSeverity: error\n    minAvailable: -1",
            "parameters.minAvailable",
        ),
        (
            "    providerFailure: ignore",
            "    providerFailure: deny",
            "parameters.providerFailure",
        ),
    ];
    for (from, to, field) in cases {
        assert_eq!(original.matches(from).count(), 1, "{from:?}");
        let broken = original.replacen(from, to, 1);
        let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&broken)
            .map(|document| Value::deserialize(document).expect("YAML"))
            .collect();
        let problems = problems_of(&documents[0]["spec"]["parameters"]);
        assert_eq!(problems.len(), 1, "{to}: {problems:?}");
        assert_eq!(problems[0].path(), field, "{to}");

        workspace.write("broken.yaml", &broken);
        let outcome = workspace.run(&["check", "job.yaml", "--constraint", "broken.yaml"]);
        assert_eq!(outcome.code, 2, "{to}: {outcome:?}");
        assert_eq!(outcome.stdout, "", "{to}: nothing is checked: {outcome:?}");
        assert!(
            outcome.stderr.contains(&format!("field `spec.{field}`"))
                && outcome.stderr.contains("ML000"),
            "{to}: {outcome:?}"
        );
    }
}
