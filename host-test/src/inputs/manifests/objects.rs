//! Documents into objects: Lists expanded (nested up to a bound), anything that is not a
//! Kubernetes object said so with the field to blame.

use serde_json::Value;

use super::admission::admission_review_object;
use super::body::ObjectBody;
use super::errors::{InputError, Skipped};
use super::loaded::FileContents;
use super::object::{ManifestObject, ObjectIdentity, json_type_name, namespace_and_name};

/// Turns one parsed document into objects: a List is expanded, an AdmissionReview contributes
/// its request, anything that is not a Kubernetes object is an error naming the field.
pub(super) fn add_document(
    file: &str,
    document: usize,
    first_line: usize,
    value: Value,
    contents: &mut FileContents,
) {
    if value.is_null() {
        return;
    }
    if !looks_like_a_kubernetes_object(&value) {
        contents.skipped.push(Skipped {
            file: file.into(),
            document: Some(document),
            line: Some(first_line),
            reason: format!(
                "not a Kubernetes object ({})",
                match &value {
                    Value::Object(_) => "no apiVersion or kind".to_string(),
                    other => format!("{}, not a mapping", json_type_name(other)),
                }
            ),
        });
        return;
    }
    match object_identity(&value) {
        Err(error) => contents
            .errors
            .push(error.at(file, document, first_line, None)),
        Ok((_, kind)) if is_list(&kind, &value) => expand_list(
            file,
            document,
            first_line,
            &kind,
            value,
            &mut Vec::new(),
            contents,
        ),
        Ok((api_version, kind)) => {
            match build_object(file, document, None, first_line, api_version, kind, value) {
                Ok(object) => contents.objects.push(object),
                Err(error) => contents.errors.push(error),
            }
        }
    }
}

/// Lists inside Lists expanded, at most: `kubectl get -o yaml` writes one, a tool wrapping its
/// output in another List two. The bound keeps an item's own fields far from
/// `values::KEPT_DEPTH` (each List adds two levels, `items` and the index), so an object in
/// Lists is judged as it would be alone; deeper Lists are an error, never skipped.
pub(super) const MAX_LIST_NESTING: usize = 3;

/// Turns each item of a List (and of the Lists among its items) into an object; `items` holds
/// the indexes of the Lists around this one.
pub(super) fn expand_list(
    file: &str,
    document: usize,
    first_line: usize,
    kind: &str,
    value: Value,
    items: &mut Vec<usize>,
    contents: &mut FileContents,
) {
    let error = |message: String, items: &[usize]| {
        InputError::document(file, document, first_line, message)
            .with_field("items")
            .with_items(items)
    };
    if items.len() >= MAX_LIST_NESTING {
        contents.errors.push(error(
            format!(
                "a {kind} nested in {} Lists: more than {MAX_LIST_NESTING} levels of Lists are \
                 not read",
                items.len()
            ),
            &items[..],
        ));
        return;
    }
    let Value::Object(mut fields) = value else {
        return;
    };
    let Some(Value::Array(list_items)) = fields.remove("items") else {
        contents.errors.push(error(
            format!("a {kind} needs `items` to be a list"),
            &items[..],
        ));
        return;
    };
    for (item_index, item) in list_items.into_iter().enumerate() {
        if item.is_null() {
            continue;
        }
        items.push(item_index);
        match object_identity(&item) {
            Err(problem) => contents.errors.push(
                problem
                    .at(file, document, first_line, None)
                    .with_items(items),
            ),
            Ok((_, item_kind)) if is_list(&item_kind, &item) => expand_list(
                file, document, first_line, &item_kind, item, items, contents,
            ),
            Ok((item_api_version, item_kind)) => match build_object(
                file,
                document,
                Some(items[0]),
                first_line,
                item_api_version,
                item_kind,
                item,
            ) {
                Ok(mut object) => {
                    object.identity.inner_items = items[1..].to_vec();
                    contents.objects.push(object)
                }
                Err(error) => contents.errors.push(error.with_items(items)),
            },
        }
        items.pop();
    }
}

/// Whether a document is meant as a Kubernetes object: a mapping with `kind`, or with
/// `apiVersion` and `metadata`. One that is meant so but lacks a field, or has the wrong type,
/// is a broken object (an error); `values.yaml`, compose files, `package.json` and Helm's
/// `Chart.yaml` (an `apiVersion`, no `kind` or `metadata`) are not manifests at all.
pub(super) fn looks_like_a_kubernetes_object(value: &Value) -> bool {
    value.as_object().is_some_and(|fields| {
        fields.contains_key("kind")
            || (fields.contains_key("apiVersion") && fields.contains_key("metadata"))
    })
}

/// `kind: List`, or another `*List` kind, carrying `items` (a CRD kind that merely ends in
/// "List", such as `AllowList`, has no `items` and is an ordinary object).
pub(super) fn is_list(kind: &str, value: &Value) -> bool {
    kind == "List" || (kind.ends_with("List") && value.get("items").is_some())
}

/// A problem with one field, before the file and document are attached.
pub(super) struct FieldProblem {
    /// `None` when the whole document is wrong (not a mapping).
    pub(super) field: Option<&'static str>,
    pub(super) message: String,
}

impl FieldProblem {
    pub(super) fn at(
        self,
        file: &str,
        document: usize,
        first_line: usize,
        item: Option<usize>,
    ) -> InputError {
        let error = InputError::document(file, document, first_line, self.message).with_item(item);
        match self.field {
            Some(field) => error.with_field(field),
            None => error,
        }
    }
}

pub(super) fn object_identity(value: &Value) -> Result<(String, String), FieldProblem> {
    let Some(fields) = value.as_object() else {
        return Err(FieldProblem {
            field: None,
            message: format!(
                "expected a Kubernetes object (a mapping), got {}",
                json_type_name(value)
            ),
        });
    };
    let string_field = |field: &'static str| match fields.get(field) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        Some(Value::String(_)) => Err(FieldProblem {
            field: Some(field),
            message: "is empty".into(),
        }),
        Some(other) => Err(FieldProblem {
            field: Some(field),
            message: format!("must be a string, got {}", json_type_name(other)),
        }),
        None => Err(FieldProblem {
            field: Some(field),
            message: "is missing: not a Kubernetes object".into(),
        }),
    };
    let api_version = string_field("apiVersion")?;
    let kind = string_field("kind")?;
    Ok((api_version, kind))
}

// One error per unreadable document, on a path that is not hot: boxing it would buy nothing.
#[allow(clippy::result_large_err)]
pub(super) fn build_object(
    file: &str,
    document: usize,
    item: Option<usize>,
    first_line: usize,
    api_version: String,
    kind: String,
    value: Value,
) -> Result<ManifestObject, InputError> {
    if kind == "AdmissionReview" && api_version.starts_with("admission.k8s.io/") {
        return admission_review_object(file, document, item, first_line, value);
    }
    let (namespace, name) = namespace_and_name(&value);
    Ok(ManifestObject {
        identity: ObjectIdentity {
            file: file.into(),
            document,
            item,
            inner_items: Vec::new(),
            line: first_line,
            api_version,
            kind,
            namespace,
            name,
        },
        object: ObjectBody::new(&value),
        admission_request: None,
    })
}
