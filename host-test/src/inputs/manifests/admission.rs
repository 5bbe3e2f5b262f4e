//! AdmissionReviews: a review given as input is judged as its request, exactly as the webhook
//! would see it.

use serde_json::Value;

use super::body::ObjectBody;
use super::errors::InputError;
use super::object::{ManifestObject, ObjectIdentity, json_type_name, namespace_and_name};

/// The object of an AdmissionReview a webhook received, read as `meshlife check` reads one
/// from a file (`meshlife serve`'s `POST /admission`).
#[allow(clippy::result_large_err)]
pub fn object_of_admission_review(review: Value) -> Result<ManifestObject, InputError> {
    admission_review_object("AdmissionReview", 0, None, 1, review)
}

/// An AdmissionReview is checked as its `request`, exactly as the webhook would see it.
// One error per unreadable document, on a path that is not hot: boxing it would buy nothing.
#[allow(clippy::result_large_err)]
pub(super) fn admission_review_object(
    file: &str,
    document: usize,
    item: Option<usize>,
    first_line: usize,
    mut value: Value,
) -> Result<ManifestObject, InputError> {
    let error = |field: &str, message: String| {
        InputError::document(file, document, first_line, message)
            .with_field(field)
            .with_item(item)
    };
    let request = match value.get_mut("request").map(Value::take) {
        Some(Value::Object(request)) => request,
        Some(other) => {
            return Err(error(
                "request",
                format!("must be an object, got {}", json_type_name(&other)),
            ));
        }
        None => {
            return Err(error(
                "request",
                "is missing: an AdmissionReview to check needs its request".into(),
            ));
        }
    };
    let mut request = Value::Object(request);
    // Gatekeeper reviews the old object on DELETE; it copies it into `object` likewise. Any
    // other request reaches the module as sent: a CREATE or UPDATE with only `oldObject` is
    // judged on it there, with the module's ML000 warning that says so.
    let object_is_missing = request.get("object").is_none_or(Value::is_null);
    let is_delete = request.get("operation").and_then(Value::as_str) == Some("DELETE");
    if object_is_missing
        && is_delete
        && let Some(old_object) = request.get("oldObject").cloned()
    {
        request["object"] = old_object;
    }
    let object = match request.get("object").filter(|object| !object.is_null()) {
        Some(object) => object.clone(),
        None => request.get("oldObject").cloned().unwrap_or(Value::Null),
    };
    let kind_field = |key: &str| {
        request
            .pointer(&format!("/kind/{key}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (api_version, kind) = match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some(api_version), Some(kind)) => (api_version.to_string(), kind.to_string()),
        _ => {
            let group = kind_field("group").unwrap_or_default();
            let version = kind_field("version").unwrap_or_default();
            let Some(kind) = kind_field("kind") else {
                return Err(error(
                    "request.kind",
                    "is missing and the request has no object to take it from".into(),
                ));
            };
            let api_version = if group.is_empty() {
                version
            } else {
                format!("{group}/{version}")
            };
            (api_version, kind)
        }
    };
    let (object_namespace, object_name) = namespace_and_name(&object);
    let namespace = request
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or(object_namespace);
    let name = request
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .unwrap_or(object_name);
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
        object: ObjectBody::new(&object),
        admission_request: Some(ObjectBody::new(&request)),
    })
}
