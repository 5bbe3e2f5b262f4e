//! A sparse JSON tree, the first half of the exact reader: the parse keeps only the keys the
//! rules can read and skips everything else (managedFields, volumes, env sources, status)
//! without allocating, and type checks happen afterwards with exact paths (see `input`). Valid
//! input is read faster by `one_pass`; this reader answers the rest, and `parameters` always.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Kept containers nest no deeper than this; the bound keeps the recursive visitor within the
/// module's 32 KiB stack. Skipped subtrees may nest deeper: serde_json skips them iteratively.
pub const MAX_DEPTH: usize = 64;

/// Strings borrow from the input unless they hold escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// A number with a fraction or an exponent that is not an integer beyond `i64` (`1.5`,
    /// `30.0`): the API server refuses it in an integer field, as Go's JSON decoder does.
    Fraction(f64),
    /// An integer beyond `i64`, or a number beyond `f64` (which `parse_sparse` reads as this).
    OutOfRange,
    Str(Cow<'a, str>),
    List(Vec<Node<'a>>),
    /// Entries in document order; lookups are linear, the maps the rules read are small.
    Map(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
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
            Node::Fraction(number) => match serde_json::Number::from_f64(*number) {
                Some(number) => format!("the number {number}, which is not an integer"),
                None => "a number that is not an integer".into(),
            },
            Node::OutOfRange => "a number beyond the 64-bit integer range".into(),
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
    /// Every key, each holding a value read by rule keys: the role maps of a Kubeflow
    /// training job (`pytorchReplicaSpecs: {Master: {...}, Worker: {...}}`).
    DataKeys,
}

/// Maps from role names to replica specs (Kubeflow training jobs).
const ROLE_MAPS: &[&str] = &[
    "jaxReplicaSpecs",
    "mpiReplicaSpecs",
    "paddleReplicaSpecs",
    "pytorchReplicaSpecs",
    "tfReplicaSpecs",
    "xgbReplicaSpecs",
];

/// Keys the rules read anywhere in an admission object.
const RULE_KEYS: &[&str] = &[
    "action",
    "activeDeadlineSeconds",
    "annotations",
    "apiVersion",
    "appProtocol",
    "args",
    "blueGreen",
    "canary",
    "cidr",
    "command",
    "concurrencyPolicy",
    "containerPort",
    "containers",
    "endPort",
    "env",
    "except",
    "exec",
    "exitCodes",
    "from",
    "grpc",
    "hostNetwork",
    "httpGet",
    "image",
    "ingress",
    "initContainers",
    "ipBlock",
    "job",
    "jobTemplate",
    "kind",
    "labels",
    "lifecycle",
    "livenessProbe",
    "maxSurge",
    "maxUnavailable",
    "metadata",
    "metrics",
    "name",
    "namespace",
    "namespaceObject",
    "object",
    "operation",
    "operator",
    "os",
    "ownerReferences",
    "parameters",
    "path",
    "podSelector",
    "policyTypes",
    "port",
    "ports",
    "postStart",
    "preStop",
    "protocol",
    "provider",
    "readinessProbe",
    "replicas",
    "replicatedJobs",
    "restartPolicy",
    "restartPolicyRules",
    "review",
    "rollingUpdate",
    "runAsUser",
    "runPolicy",
    "seconds",
    "securityContext",
    "selector",
    "services",
    "sleep",
    "spec",
    "startupProbe",
    "stopSignal",
    "strategy",
    "targetPort",
    "tasks",
    "template",
    "terminationGracePeriodSeconds",
    "trialSpec",
    "trialTemplate",
    "type",
    "value",
    "values",
    "workloadRef",
];

/// Keys whose whole subtree is kept: their keys are data, not schema.
const KEEP_ALL_BELOW: &[&str] = &[
    "annotations",
    "labels",
    "parameters",
    "podSelector",
    "selector",
];

fn keep_for_child(key: &str) -> Keep {
    if KEEP_ALL_BELOW.contains(&key) {
        Keep::All
    } else if ROLE_MAPS.contains(&key) {
        Keep::DataKeys
    } else {
        Keep::RuleKeys
    }
}

/// Numbers beyond `f64` replaced before the input is refused as a whole: more than this many is
/// not a Kubernetes object (and each costs a parse).
const MAX_HUGE_NUMBERS: usize = 8;

/// `json`, with each number beyond `f64` (`1e400`) that serde_json refuses replaced by a
/// stand-in it reads as `Node::OutOfRange`; `None` when there is none, or too many, or the text
/// fails for another reason. Why: serde_json refuses such a number wherever it is, with only a
/// line and column, while the API server refuses it only in a field it decodes (unknown fields
/// are dropped unread). So a huge number in `status` is skipped like the rest of `status`, and
/// one in a field the rules read is an ML000 naming that field, as for `1.5`; and the exact
/// reader then agrees with `one_pass`, whose cursor skips such numbers.
pub fn with_huge_numbers_replaced(json: &str) -> Option<String> {
    let mut text: Option<String> = None;
    for _ in 0..MAX_HUGE_NUMBERS {
        let current = text.as_deref().unwrap_or(json);
        let error = match parse_sparse(current) {
            Ok(_) => return text,
            Err(error) => error,
        };
        if !error.to_string().starts_with("number out of range") {
            return None;
        }
        let (start, end) = number_around(current, error.line(), error.column())?;
        let negative = current.as_bytes()[start] == b'-';
        // A whole float beyond i64, which `visit_f64` reads as `OutOfRange`.
        let stand_in = if negative { "-1e300" } else { "1e300" };
        text = Some(format!(
            "{}{stand_in}{}",
            &current[..start],
            &current[end..]
        ));
    }
    None
}

/// The span of the JSON number at or just before `line`/`column` (serde_json's 1-based byte
/// position of an error).
fn number_around(text: &str, line: usize, column: usize) -> Option<(usize, usize)> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    let bytes = text.as_bytes();
    let at = (line_start + column).min(bytes.len());
    let in_number =
        |byte: u8| byte.is_ascii_digit() || matches!(byte, b'-' | b'+' | b'.' | b'e' | b'E');
    let mut start = at;
    while start > 0 && in_number(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = at;
    while end < bytes.len() && in_number(bytes[end]) {
        end += 1;
    }
    let starts_right = bytes
        .get(start)
        .is_some_and(|&b| b == b'-' || b.is_ascii_digit());
    (start < end && starts_right).then_some((start, end))
}

/// Parses JSON into a sparse `Node`, refusing kept nesting deeper than `MAX_DEPTH`.
pub fn parse_sparse(json: &str) -> Result<Node<'_>, serde_json::Error> {
    parse_with(
        json,
        NodeSeed {
            keep: Keep::RuleKeys,
            depth: 0,
            old_object: false,
        },
    )
}

/// [`parse_sparse`], keeping the review's `oldObject` too. Only for a review without `object`:
/// an UPDATE carries both, and its old object is never read, so the first parse skips it (its
/// size and nesting cost nothing there).
pub fn parse_sparse_with_old_object(json: &str) -> Result<Node<'_>, serde_json::Error> {
    parse_with(
        json,
        NodeSeed {
            keep: Keep::RuleKeys,
            depth: 0,
            old_object: true,
        },
    )
}

/// Parses the text of the input's `parameters` as `parse_sparse` parses it in place: every key
/// kept, nesting counted from the depth it has inside the input.
pub fn parse_parameters(json: &str) -> Result<Node<'_>, serde_json::Error> {
    parse_with(
        json,
        NodeSeed {
            keep: Keep::All,
            depth: 1,
            old_object: false,
        },
    )
}

fn parse_with(json: &str, root: NodeSeed) -> Result<Node<'_>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let node = root.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(node)
}

#[derive(Clone, Copy)]
struct NodeSeed {
    keep: Keep,
    depth: usize,
    /// Keep `review.oldObject` (a key of the map at depth 1).
    old_object: bool,
}

impl NodeSeed {
    fn nested<E: de::Error>(self, keep: Keep) -> Result<NodeSeed, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format_args!(
                "nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(NodeSeed {
            keep,
            depth: self.depth + 1,
            old_object: self.old_object,
        })
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed {
    type Value = Node<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Node<'de>, E> {
        Ok(Node::Int(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Node<'de>, E> {
        Ok(i64::try_from(value).map_or(Node::OutOfRange, Node::Int))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Node<'de>, E> {
        // 2^63: every whole f64 at or beyond it is outside i64 (`-2^63` itself is an `i64`, but
        // serde_json reads `-9223372036854775808` as one, never as a float).
        const BEYOND_I64: f64 = 9_223_372_036_854_775_808.0;
        Ok(if value.fract() == 0.0 && value.abs() >= BEYOND_I64 {
            Node::OutOfRange
        } else {
            Node::Fraction(value)
        })
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let child = self.nested(self.keep)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(child)? {
            items.push(item);
        }
        Ok(Node::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some(KeyText(key)) = map.next_key()? {
            let key_text = key.as_ref();
            if self.keep != Keep::RuleKeys
                || RULE_KEYS.contains(&key_text)
                || ROLE_MAPS.contains(&key_text)
                || (self.old_object && self.depth == 1 && key_text == "oldObject")
            {
                let keep = match self.keep {
                    Keep::All => Keep::All,
                    Keep::DataKeys => Keep::RuleKeys,
                    Keep::RuleKeys => keep_for_child(key_text),
                };
                let value = map.next_value_seed(self.nested(keep)?)?;
                entries.push((key, value));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Node::Map(entries))
    }
}

/// A map key, borrowed from the input when it has no escapes.
struct KeyText<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string key")
            }

            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Borrowed(value)))
            }

            fn visit_str<E>(self, value: &str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Owned(value.to_owned())))
            }

            fn visit_string<E>(self, value: String) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Owned(value)))
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
        assert!(matches!(
            metadata.get("name"),
            Some(Node::Str(Cow::Borrowed(_)))
        ));
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
    fn bounds_kept_nesting_but_skips_deep_unkept_subtrees() {
        let deep_kept = format!(
            "{}1{}",
            "{\"parameters\":".to_string() + &"[".repeat(100),
            "]".repeat(100) + "}"
        );
        let error = parse_sparse(&deep_kept).unwrap_err().to_string();
        assert!(error.contains("nests deeper than 64"), "{error}");
        let deep_skipped = format!(
            "{{\"status\":{}1{}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(parse_sparse(&deep_skipped).unwrap(), Node::Map(vec![]));
    }

    #[test]
    fn refuses_malformed_json() {
        assert!(parse_sparse(r#"{"a": }"#).is_err());
        assert!(parse_sparse(r#"{"a": 1} trailing"#).is_err());
    }
}
