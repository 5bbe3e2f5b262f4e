//! An object as it is held between reading and the report: its compact JSON text.
//!
//! A parsed tree of a small object is dozens of times its text (every map an IndexMap, every
//! value 72 bytes), and a run holds every object until its report: a stream of a million
//! ConfigMaps, 80 MB of YAML, took 3.2 GB as trees. The text is what the module reads anyway,
//! so an input is written by splicing it in, and the few readers of a field parse it again.

use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Clone, Debug)]
pub struct ObjectBody(Box<RawValue>);

impl ObjectBody {
    pub fn new(value: &Value) -> ObjectBody {
        // A `Value` always serialises: its keys are strings and its numbers finite.
        ObjectBody(
            serde_json::value::to_raw_value(value).expect("serialising a JSON value cannot fail"),
        )
    }

    /// The object as a tree, for the readers of more than one field.
    pub fn value(&self) -> Value {
        // The text was written from a `Value` nested at most `values::KEPT_DEPTH` levels, under
        // serde_json's reading limit of 128, so it reads back.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The value at a JSON pointer (`/metadata/labels`), if the object has one.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        self.value().pointer_mut(pointer).map(Value::take)
    }

    /// Whether the text holds `needle` anywhere: a quick "certainly not" before parsing, sound
    /// for keys and plain values, which the writer never escapes.
    pub fn mentions(&self, needle: &str) -> bool {
        self.0.get().contains(needle)
    }

    pub fn text(&self) -> &str {
        self.0.get()
    }
}

impl Serialize for ObjectBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_text_reads_back_as_the_same_value_in_the_same_key_order() {
        let value = json!({"z": 1, "a": [1.5, u64::MAX, i64::MIN, "\u{2028}"], "m": {"b": null}});
        let body = ObjectBody::new(&value);
        assert_eq!(body.value(), value);
        assert_eq!(
            body.text(),
            "{\"z\":1,\"a\":[1.5,18446744073709551615,-9223372036854775808,\"\u{2028}\"],\"m\":{\"b\":null}}"
        );
        assert_eq!(body.pointer("/m"), Some(json!({"b": null})));
        assert_eq!(body.pointer("/missing"), None);
    }

    #[test]
    fn it_is_spliced_into_what_embeds_it_unchanged() {
        let body = ObjectBody::new(&json!({"kind": "Pod", "spec": {}}));
        let input = serde_json::to_string(&json!({"review": {"object": body}})).unwrap();
        assert_eq!(input, r#"{"review":{"object":{"kind":"Pod","spec":{}}}}"#);
    }
}
