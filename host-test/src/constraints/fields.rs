//! Reading a constraint's fields: each typed, a wrong one named by its path.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::inputs::manifests;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct KindsDocument {
    #[serde(default)]
    pub(super) api_groups: Vec<String>,
    #[serde(default)]
    pub(super) kinds: Vec<String>,
}

pub(super) type FieldError = (String, String);

/// Deserialises `fields[key]` (absent or null: `None`), naming `parent.key` on a type error.
pub(super) fn typed_field<T: serde::de::DeserializeOwned>(
    fields: &Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<Option<T>, FieldError> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|error| (format!("{parent}.{key}"), error.to_string())),
    }
}

/// The mapping at `value`, with every key in `allowed`; `None` when absent or null.
pub(super) fn mapping<'a>(
    value: Option<&'a Value>,
    field: &str,
    allowed: &[&str],
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(fields)) => {
            if let Some(unknown) = fields.keys().find(|key| !allowed.contains(&key.as_str())) {
                return Err((
                    format!("{field}.{unknown}"),
                    format!("unknown field; expected one of {}", allowed.join(", ")),
                ));
            }
            Ok(Some(fields))
        }
        Some(other) => Err((
            field.to_string(),
            format!(
                "must be a mapping, got {}",
                manifests::json_type_name(other)
            ),
        )),
    }
}
