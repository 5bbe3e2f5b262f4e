//! A sparse JSON tree: the parse keeps only the keys the rules can read and skips everything
//! else (managedFields, volumes, env sources, status) without allocating. One visitor serves
//! every shape, which keeps the wasm module small, and type checks happen afterwards with
//! exact paths (see `input`).

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    /// A number that is not an `i64` (fractional or out of range). Its value is never needed.
    OtherNumber,
    Str(String),
    List(Vec<Node>),
    /// Entries in document order; lookups are linear, the maps the rules read are small.
    Map(Vec<(String, Node)>),
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The JSON type, with the value when short, for error messages: `string "30"`.
    pub fn describe(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(flag) => format!("boolean `{flag}`"),
            Node::Int(number) => format!("integer `{number}`"),
            Node::OtherNumber => "a fractional or out-of-range number".into(),
            Node::Str(text) if text.len() <= 40 => format!("string \"{text}\""),
            Node::Str(_) => "a string".into(),
            Node::List(_) => "a list".into(),
            Node::Map(_) => "an object".into(),
        }
    }
}

/// Which keys to keep below a map.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only the keys the rules read (`RULE_KEYS`).
    RuleKeys,
    /// Every key: annotations, labels, parameters.
    All,
}

/// Keys the rules read anywhere in an admission object.
const RULE_KEYS: &[&str] = &[
    "activeDeadlineSeconds",
    "annotations",
    "apiVersion",
    "appProtocol",
    "args",
    "blueGreen",
    "canary",
    "command",
    "containerPort",
    "containers",
    "env",
    "exec",
    "hostNetwork",
    "httpGet",
    "image",
    "initContainers",
    "jobTemplate",
    "kind",
    "labels",
    "lifecycle",
    "maxSurge",
    "maxUnavailable",
    "metadata",
    "name",
    "namespace",
    "namespaceObject",
    "object",
    "operation",
    "ownerReferences",
    "parameters",
    "path",
    "ports",
    "postStart",
    "preStop",
    "readinessProbe",
    "replicas",
    "restartPolicy",
    "review",
    "rollingUpdate",
    "runAsUser",
    "seconds",
    "securityContext",
    "sleep",
    "spec",
    "startupProbe",
    "strategy",
    "template",
    "terminationGracePeriodSeconds",
    "type",
    "value",
    "workloadRef",
];

/// Keys whose whole subtree is kept: their keys are data, not schema.
const KEEP_ALL_BELOW: &[&str] = &["annotations", "labels", "parameters"];

fn keep_for_child(key: &str) -> Keep {
    if KEEP_ALL_BELOW.contains(&key) {
        Keep::All
    } else {
        Keep::RuleKeys
    }
}

/// Parses JSON into a sparse `Node`. Nesting must already be bounded by the caller.
pub fn parse_sparse(json: &str) -> Result<Node, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    // serde_json's own limit is a second guard; the caller's scan is the first.
    let node = NodeSeed {
        keep: Keep::RuleKeys,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(node)
}

#[derive(Clone, Copy)]
struct NodeSeed {
    keep: Keep,
}

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = Node;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed {
    type Value = Node;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node, E> {
        Ok(Node::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Node, E> {
        Ok(Node::Int(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Node, E> {
        Ok(i64::try_from(value).map_or(Node::OtherNumber, Node::Int))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::OtherNumber)
    }

    fn visit_str<E>(self, value: &str) -> Result<Node, E> {
        Ok(Node::Str(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Node, E> {
        Ok(Node::Str(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Node::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<KeyText>()? {
            let key = key.0;
            if self.keep == Keep::All || RULE_KEYS.contains(&key.as_str()) {
                let child = NodeSeed {
                    keep: if self.keep == Keep::All {
                        Keep::All
                    } else {
                        keep_for_child(&key)
                    },
                };
                let value = map.next_value_seed(child)?;
                entries.push((key, value));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Node::Map(entries))
    }
}

/// A map key, borrowed from the input when it has no escapes.
struct KeyText(String);

impl<'de> de::Deserialize<'de> for KeyText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyText;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string key")
            }

            fn visit_str<E>(self, value: &str) -> Result<KeyText, E> {
                Ok(KeyText(value.to_owned()))
            }

            fn visit_string<E>(self, value: String) -> Result<KeyText, E> {
                Ok(KeyText(value))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_rule_keys_and_whole_annotation_maps() {
        let node = parse_sparse(
            r#"{"metadata": {"name": "a", "managedFields": [{"x": 1}], "annotations": {"any/key": "v"}},
                "spec": {"volumes": [{"name": "v"}], "replicas": 3, "ratio": 1.5}}"#,
        )
        .unwrap();
        let metadata = node.get("metadata").unwrap();
        assert_eq!(metadata.get("name"), Some(&Node::Str("a".into())));
        assert_eq!(metadata.get("managedFields"), None);
        assert_eq!(
            metadata.get("annotations").unwrap().get("any/key"),
            Some(&Node::Str("v".into()))
        );
        let spec = node.get("spec").unwrap();
        assert_eq!(spec.get("volumes"), None);
        assert_eq!(spec.get("replicas"), Some(&Node::Int(3)));
    }

    #[test]
    fn refuses_malformed_json() {
        assert!(parse_sparse(r#"{"a": }"#).is_err());
        assert!(parse_sparse(r#"{"a": 1} trailing"#).is_err());
    }
}
