//! The API objects the facts are read from, as JSON, whether they came from a live API server
//! (reader.rs) or from rendered manifests (the tests).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// What was read from one cluster, by kind.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Which cluster: `context kind-dev (https://127.0.0.1:6443)`.
    pub cluster: String,
    /// The API server's `/version` `gitVersion`.
    pub server_version: Option<String>,
    pub nodes: Vec<Value>,
    pub namespaces: Vec<Value>,
    pub deployments: Vec<Value>,
    pub daemon_sets: Vec<Value>,
    pub config_maps: Vec<Value>,
    pub mutating_webhooks: Vec<Value>,
}

impl Snapshot {
    /// Sorts `objects` by kind; kinds the facts are not read from are left out.
    pub fn from_objects(cluster: &str, objects: impl IntoIterator<Item = Value>) -> Snapshot {
        let mut snapshot = Snapshot {
            cluster: cluster.into(),
            ..Snapshot::default()
        };
        for object in objects {
            let list = match object.get("kind").and_then(Value::as_str) {
                Some("Node") => &mut snapshot.nodes,
                Some("Namespace") => &mut snapshot.namespaces,
                Some("Deployment") => &mut snapshot.deployments,
                Some("DaemonSet") => &mut snapshot.daemon_sets,
                Some("ConfigMap") => &mut snapshot.config_maps,
                Some("MutatingWebhookConfiguration") => &mut snapshot.mutating_webhooks,
                _ => continue,
            };
            list.push(object);
        }
        snapshot
    }

    /// The ConfigMap `namespace/name`, if it was read.
    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.config_maps
            .iter()
            .find(|map| self::name(map) == name && self::namespace(map) == namespace)
    }

    /// A ConfigMap named `name` in any namespace.
    pub fn config_map_named(&self, name: &str) -> Option<&Value> {
        self.config_maps.iter().find(|map| self::name(map) == name)
    }
}

pub(super) fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn namespace(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `Deployment istio-system/istiod`, `Node worker-1`.
pub(super) fn title(object: &Value) -> String {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    match namespace(object) {
        "" => format!("{kind} {}", name(object)),
        namespace => format!("{kind} {namespace}/{}", name(object)),
    }
}

/// `metadata.labels` (or `annotations`) as a map of strings; other values are left out.
pub(super) fn string_map(object: &Value, field: &str) -> BTreeMap<String, String> {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn labels(object: &Value) -> BTreeMap<String, String> {
    string_map(object, "labels")
}

/// A Namespace as the module reads `namespaceObject`: its name, labels and annotations.
pub(super) fn namespace_object(namespace: &Value) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::from(name(namespace)));
    for field in ["labels", "annotations"] {
        if let Some(map) = namespace.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), map.clone());
        }
    }
    serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
}
