//! The object model: one Kubernetes object of the input with where it came from, its identity
//! read leniently, and the AdmissionRequest the module reviews it as.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::body::ObjectBody;
use super::errors::{InputError, item_text};

/// Where an object came from and what it is: what every report, note and error names it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectIdentity {
    /// The file as named on the command line (or found under a named folder), or `<stdin>`.
    pub file: String,
    /// 0-based document index within the file (reports show it 1-based: `document 1`).
    pub document: usize,
    /// 0-based index in the `items` of a List, when the object came from one (shown 1-based).
    pub item: Option<usize>,
    /// 0-based indexes in the Lists nested inside that item, outermost first (`document 1,
    /// item 2, item 1`); empty for an object of a List that is not nested.
    pub inner_items: Vec<usize>,
    /// 1-based line of the first key of the object's document (not its `---`), for reports
    /// that point at lines; for a List item, the List's.
    pub line: usize,
    pub api_version: String,
    pub kind: String,
    /// `metadata.namespace`, empty when the object does not name one.
    pub namespace: String,
    /// `metadata.name` (or `generateName` when there is no name), empty when neither is set.
    pub name: String,
}

impl ObjectIdentity {
    /// `Deployment shop/web (document 1)`: documents and items counted from 1.
    pub fn title(&self) -> String {
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        let location = format!(
            "document {}{}",
            self.document + 1,
            item_text(self.item, &self.inner_items)
        );
        if self.namespace.is_empty() {
            format!("{} {name} ({location})", self.kind)
        } else {
            format!("{} {}/{name} ({location})", self.kind, self.namespace)
        }
    }
}

/// One Kubernetes object from the input, with its origin.
#[derive(Clone, Debug)]
pub struct ManifestObject {
    pub identity: ObjectIdentity,
    pub object: ObjectBody,
    /// The `request` of an AdmissionReview, used as the review instead of a synthesised one.
    pub admission_request: Option<ObjectBody>,
}

impl ManifestObject {
    /// The API group: `apps` for `apps/v1`, empty for the core group (`v1`).
    pub fn group(&self) -> &str {
        split_api_version(&self.identity.api_version).0
    }

    pub fn version(&self) -> &str {
        split_api_version(&self.identity.api_version).1
    }

    /// Whether the policy reviews this kind's pod specs (its own definition, not a copy).
    /// A kind the policy reviews: a workload, or a NetworkPolicy (ML604).
    pub fn is_reviewed_kind(&self) -> bool {
        self.holds_pod_specs()
            || meshlife_policy::network_policy::is_network_policy(
                &self.identity.kind,
                Some(&self.identity.api_version),
            )
    }

    /// A workload kind: one whose pod specs the rules review.
    pub fn holds_pod_specs(&self) -> bool {
        meshlife_policy::workload::WorkloadKind::of(
            &self.identity.kind,
            Some(&self.identity.api_version),
        )
        .is_some()
    }

    pub fn is_namespace(&self) -> bool {
        self.identity.kind == "Namespace" && self.group().is_empty()
    }

    /// `metadata.labels`, ignoring values that are not strings (the policy reports those).
    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.object.pointer("/metadata/labels").as_ref())
    }

    /// `Kind namespace/name`, or `Kind name` for objects without a namespace.
    pub fn display_name(&self) -> String {
        let name = if self.identity.name.is_empty() {
            "<unnamed>"
        } else {
            &self.identity.name
        };
        if self.identity.namespace.is_empty() {
            format!("{} {name}", self.identity.kind)
        } else {
            format!("{} {}/{name}", self.identity.kind, self.identity.namespace)
        }
    }

    /// `document 2` or `document 2, item 5` (`, item 1` more per nested List), counted from 1
    /// as people count.
    pub fn location(&self) -> String {
        format!(
            "document {}{}",
            self.identity.document + 1,
            item_text(self.identity.item, &self.identity.inner_items)
        )
    }

    /// `file: document N: Kind ns/name`, for notes that list objects.
    pub fn listing(&self) -> String {
        format!(
            "{}: {}: {}",
            self.identity.file,
            self.location(),
            self.display_name()
        )
    }

    /// An error about this object, placed at its document (and `field`, when one is to blame).
    pub fn error(&self, field: Option<&str>, message: String) -> InputError {
        InputError {
            file: self.identity.file.clone(),
            document: Some(self.identity.document),
            item: self.identity.item,
            inner_items: self.identity.inner_items.clone(),
            line: Some(self.identity.line),
            field: field.map(str::to_string),
            message: format!("{}: {message}", self.display_name()),
        }
    }

    /// An object as the reader would make it from `value`, for unit tests of what reads objects.
    #[cfg(test)]
    pub(crate) fn for_test(
        file: &str,
        kind: &str,
        namespace: &str,
        value: Value,
    ) -> ManifestObject {
        let api_version = match kind {
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps/v1",
            _ => "v1",
        };
        let (_, name) = namespace_and_name(&value);
        ManifestObject {
            identity: ObjectIdentity {
                file: file.into(),
                document: 0,
                item: None,
                inner_items: Vec::new(),
                line: 1,
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: namespace.into(),
                name,
            },
            object: ObjectBody::new(&value),
            admission_request: None,
        }
    }

    /// The Gatekeeper-shaped review for this object (`input.review`), with `namespaceObject`
    /// when the input holds the object's Namespace.
    pub fn review<'a>(&'a self, namespace_object: Option<&'a Value>) -> Review<'a> {
        if let Some(request) = &self.admission_request {
            let Some(namespace) = namespace_object else {
                return Review::Sent(request);
            };
            let mut review = request.value();
            if let Some(fields) = review.as_object_mut() {
                fields
                    .entry("namespaceObject")
                    .or_insert_with(|| namespace.clone());
            }
            return Review::SentWithNamespace(review);
        }
        Review::Made(MadeReview {
            kind: ReviewKind {
                group: self.group(),
                version: self.version(),
                kind: &self.identity.kind,
            },
            name: &self.identity.name,
            namespace: &self.identity.namespace,
            operation: "CREATE",
            object: &self.object,
            namespace_object,
        })
    }
}

/// `input.review`: an AdmissionReview's request, or one made for a manifest. Serialised
/// straight into the module's input, the object's text spliced in unparsed.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Review<'a> {
    Sent(&'a ObjectBody),
    SentWithNamespace(Value),
    Made(MadeReview<'a>),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MadeReview<'a> {
    pub(super) kind: ReviewKind<'a>,
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(super) namespace: &'a str,
    pub(super) operation: &'a str,
    pub(super) object: &'a ObjectBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) namespace_object: Option<&'a Value>,
}

#[derive(Debug, Serialize)]
pub(super) struct ReviewKind<'a> {
    pub(super) group: &'a str,
    pub(super) version: &'a str,
    pub(super) kind: &'a str,
}

/// Read leniently: wrong types here are the policy's to report (as ML000), not the reader's.
pub(super) fn namespace_and_name(value: &Value) -> (String, String) {
    let metadata_string = |key: &str| {
        value
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let name = match metadata_string("name") {
        "" => metadata_string("generateName"),
        name => name,
    };
    (metadata_string("namespace").to_string(), name.to_string())
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// A `map[string]string` field such as labels; entries with non-string values are dropped.
pub fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|fields| {
            fields
                .iter()
                .filter_map(|(key, value)| {
                    value.as_str().map(|text| (key.clone(), text.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
