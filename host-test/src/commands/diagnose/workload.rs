//! The workload whose pods were never created (a ReplicaSet, a Job): its name and its pod
//! template, as far as the data shows it, from `kubectl describe replicaset|job` (`describe.rs`
//! reads its `Pod Template:` section) or from the API server's object. The template is what
//! the mesh's injector was given: its labels and annotations ask for injection, and its own init
//! containers come after the ones the injector adds.

use std::collections::BTreeMap;

use serde_json::Value;

use super::events::About;
use super::evidence::Evidence;

/// A value of the template's labels or annotations, with where it was read.
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: String,
    pub evidence: Evidence,
}

/// One init container of the template, in its order.
#[derive(Clone, Debug)]
pub struct TemplateInit {
    pub name: String,
    /// `restartPolicy: Always`: a native sidecar of the template's own. `None` when the data
    /// does not say (kubectl's describe prints a container's restart policy only in later
    /// versions).
    pub native: Option<bool>,
}

#[derive(Clone, Debug)]
pub struct WorkloadRecord {
    pub about: About,
    pub labels: BTreeMap<String, Entry>,
    pub annotations: BTreeMap<String, Entry>,
    pub init_containers: Vec<TemplateInit>,
    /// Where its pod template was read.
    pub evidence: Evidence,
}

/// The kinds whose objects hold the pod template at `spec.template`.
const TEMPLATE_KINDS: [&str; 5] = [
    "ReplicaSet",
    "Job",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
];

impl WorkloadRecord {
    /// A workload as the API server gives it (`replicaset/web-7d9c5f8b4`); `None` for an object
    /// of another kind or without a name.
    pub fn of_object(object: &Value, file: &str) -> Option<WorkloadRecord> {
        let kind = object.get("kind").and_then(Value::as_str)?;
        if !TEMPLATE_KINDS.contains(&kind) {
            return None;
        }
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let about = About {
            kind: kind.to_string(),
            namespace: text("/metadata/namespace").unwrap_or("").to_string(),
            name: text("/metadata/name")
                .filter(|name| !name.is_empty())?
                .to_string(),
        };
        let entries = |field: &str| -> BTreeMap<String, Entry> {
            object
                .pointer(&format!("/spec/template/metadata/{field}"))
                .and_then(Value::as_object)
                .map(|map| {
                    map.iter()
                        .filter_map(|(key, value)| {
                            let value = value.as_str()?.to_string();
                            Some((
                                key.clone(),
                                Entry {
                                    evidence: Evidence {
                                        text: Some(format!("{key}: {value}")),
                                        ..Evidence::field(
                                            file,
                                            &format!("spec.template.metadata.{field}[{key}]"),
                                        )
                                    },
                                    value,
                                },
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let init_containers = object
            .pointer("/spec/template/spec/initContainers")
            .and_then(Value::as_array)
            .map(|inits| {
                inits
                    .iter()
                    .map(|init| TemplateInit {
                        name: init
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("(unnamed)")
                            .to_string(),
                        native: Some(
                            init.get("restartPolicy").and_then(Value::as_str) == Some("Always"),
                        ),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(WorkloadRecord {
            about,
            labels: entries("labels"),
            annotations: entries("annotations"),
            init_containers,
            evidence: Evidence::field(file, "spec.template"),
        })
    }
}
