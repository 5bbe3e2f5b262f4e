//! The API objects the facts are read from, as JSON, whether they came from a live API server
//! (reader.rs) or from rendered manifests (the tests).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use crate::constraints::selectors::Selector;

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

/// A Namespace's labels as the API server matches selectors on them: with
/// `kubernetes.io/metadata.name`, which it sets on every Namespace (rendered manifests do not
/// carry it).
pub(super) fn namespace_labels(namespace: &Value) -> BTreeMap<String, String> {
    let mut labels = labels(namespace);
    labels
        .entry("kubernetes.io/metadata.name".into())
        .or_insert_with(|| name(namespace).to_string());
    labels
}

/// One webhook of a MutatingWebhookConfiguration: where it is, and its selectors (`None`:
/// absent, which selects everything).
pub(super) struct WebhookSelectors {
    /// `webhooks[2]`.
    pub(super) field: String,
    pub(super) namespace: Option<Selector>,
    pub(super) object: Option<Selector>,
}

impl WebhookSelectors {
    /// Whether the webhook sees pods that carry no label asking for or against injection:
    /// a webhook whose object selector needs one injects only pods that ask.
    pub(super) fn takes_unlabelled_pods(&self) -> bool {
        self.object
            .as_ref()
            .is_none_or(|selector| selector.matches(&BTreeMap::new()))
    }

    pub(super) fn selects_namespace(&self, labels: &BTreeMap<String, String>) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|selector| selector.matches(labels))
    }
}

/// The webhooks of a MutatingWebhookConfiguration, their selectors checked as the API server
/// checks them.
pub(super) fn webhook_selectors(configuration: &Value) -> Result<Vec<WebhookSelectors>, String> {
    let webhooks = configuration
        .get("webhooks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    webhooks
        .iter()
        .enumerate()
        .map(|(index, webhook)| {
            let field = format!("webhooks[{index}]");
            let selector = |name: &str| -> Result<Option<Selector>, String> {
                let Some(value) = webhook.get(name).filter(|value| !value.is_null()) else {
                    return Ok(None);
                };
                let at = format!("{field}.{name}");
                let parsed: LabelSelector = serde_json::from_value(value.clone())
                    .map_err(|error| format!("{}: {at}: {error}", title(configuration)))?;
                Selector::new(parsed, &at)
                    .map(Some)
                    .map_err(|(at, problem)| format!("{}: {at}: {problem}", title(configuration)))
            };
            Ok(WebhookSelectors {
                namespace: selector("namespaceSelector")?,
                object: selector("objectSelector")?,
                field,
            })
        })
        .collect()
}
