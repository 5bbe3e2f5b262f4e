//! Admission inputs that tests and the compatibility matrix feed to every host: the policy's rule
//! cases (`policy/tests/cases/*.yaml`) and the objects of manifest folders, turned into the
//! Gatekeeper-shaped OPA input the module reads.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::inputs::manifests;

/// One input document for the module, with a label that says where it came from.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// `cases/startup.yaml: classic sidecar without hold`, `examples/istio/job.yaml document 1`.
    pub label: String,
    /// The OPA input as JSON bytes.
    pub input: Vec<u8>,
}

#[derive(Deserialize)]
struct CaseFile {
    cases: Vec<RuleCase>,
}

/// The input half of a rule case; the expectation fields are the policy tests' business.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleCase {
    name: String,
    object: Value,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    namespace_object: Option<Value>,
    #[serde(default)]
    operation: Option<Value>,
    #[serde(default)]
    services: Option<Value>,
    #[serde(default)]
    top_level: Option<serde_json::Map<String, Value>>,
}

impl RuleCase {
    /// `{"review": {"object", "namespaceObject", "operation"}, "parameters", "services"}`.
    fn input(&self) -> Vec<u8> {
        let mut review = json!({ "object": self.object });
        if let Some(namespace) = &self.namespace_object {
            review["namespaceObject"] = namespace.clone();
        }
        if let Some(operation) = &self.operation {
            review["operation"] = operation.clone();
        }
        let mut input = json!({ "review": review });
        if let Some(parameters) = &self.parameters {
            input["parameters"] = parameters.clone();
        }
        if let Some(services) = &self.services {
            input["services"] = services.clone();
        }
        for (key, value) in self.top_level.iter().flatten() {
            input[key.as_str()] = value.clone();
        }
        serde_json::to_vec(&input).expect("a serde_json::Value always serialises")
    }
}

/// Every case of every `*.yaml` file in `directory`, files in name order, labelled
/// `<file>: <case name>`.
pub fn rule_cases(directory: &Path) -> Result<Vec<Fixture>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .with_context(|| format!("reading the rule cases in {}", directory.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    files.sort();
    let mut fixtures = Vec::new();
    for file in files {
        let text = crate::inputs::files::read_text(&file, Default::default())
            .with_context(|| format!("reading {}", file.display()))?;
        let parsed: CaseFile = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("{}: not a rule case file", file.display()))?;
        let file_name = file.file_name().unwrap_or_default().to_string_lossy();
        for case in parsed.cases {
            fixtures.push(Fixture {
                label: format!("{file_name}: {}", case.name),
                input: case.input(),
            });
        }
    }
    if fixtures.is_empty() {
        bail!("no rule cases in {}", directory.display());
    }
    Ok(fixtures)
}

/// Every object under `paths`, read as `meshlife check` reads them (Namespaces of the input
/// become `namespaceObject`), with the given constraint parameters.
pub fn manifest_objects(paths: &[String], parameters: &Value) -> Result<Vec<Fixture>> {
    let loaded = manifests::load(paths);
    if let Some(error) = loaded.errors.first() {
        bail!(
            "{} (and {} more input errors)",
            error,
            loaded.errors.len() - 1
        );
    }
    let namespaces = loaded.namespaces();
    let fixtures: Vec<Fixture> = loaded
        .objects
        .iter()
        .map(|object| {
            let namespace_object = namespaces.get(&object.identity.namespace);
            let input =
                json!({"review": object.review(namespace_object), "parameters": parameters});
            Fixture {
                label: format!("{} {}", object.identity.file, object.location()),
                input: serde_json::to_vec(&input).expect("a serde_json::Value always serialises"),
            }
        })
        .collect();
    if fixtures.is_empty() {
        bail!("no Kubernetes objects under {}", paths.join(", "));
    }
    Ok(fixtures)
}
