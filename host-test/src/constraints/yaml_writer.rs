//! The YAML a generated constraint is written as: ordered maps with a comment on each entry,
//! scalars quoted wherever YAML 1.1 or Go durations would read them otherwise.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

pub(super) enum Yaml {
    /// A scalar: as it is written, and the value a YAML reader takes it for.
    Scalar {
        text: String,
        value: Value,
    },
    /// `[a, b]`, of scalars.
    Flow(Vec<Yaml>),
    Map(Vec<Entry>),
    Seq(Vec<Item>),
}

pub(super) struct Entry {
    pub(super) key: String,
    pub(super) comment: Option<String>,
    pub(super) value: Yaml,
}

pub(super) struct Item {
    pub(super) comment: Option<String>,
    /// Scalars, or maps (without comments on their first key).
    pub(super) values: Vec<Yaml>,
}

impl Entry {
    pub(super) fn new(key: &str, value: Yaml) -> Entry {
        Entry {
            key: key.into(),
            comment: None,
            value,
        }
    }

    pub(super) fn comment(mut self, text: impl Into<String>) -> Entry {
        self.comment = Some(text.into());
        self
    }
}

impl Item {
    pub(super) fn new(value: Yaml) -> Item {
        Item {
            comment: None,
            values: vec![value],
        }
    }

    /// Several scalar list items under one comment.
    pub(super) fn list<S: AsRef<str>>(values: &[S]) -> Item {
        Item {
            comment: None,
            values: values
                .iter()
                .map(|value| Yaml::string(value.as_ref()))
                .collect(),
        }
    }

    pub(super) fn comment(mut self, text: impl Into<String>) -> Item {
        self.comment = Some(text.into());
        self
    }
}

/// Strings that YAML 1.1 readers (Kubernetes' go-yaml among them) take for booleans or null.
pub(super) const YAML_11_WORDS: [&str; 11] = [
    "y", "yes", "n", "no", "on", "off", "true", "false", "null", "~", "",
];

pub(super) static PLAIN_SAFE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z_/][A-Za-z0-9._/-]*$").expect("a valid regex"));
pub(super) static GO_DURATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$").expect("a valid regex"));

impl Yaml {
    /// A scalar known to need no quotes.
    pub(super) fn plain(text: &str) -> Yaml {
        Yaml::Scalar {
            text: text.to_string(),
            value: Value::String(text.to_string()),
        }
    }

    /// A string scalar, quoted when a YAML reader could take it for something else.
    pub(super) fn string(text: &str) -> Yaml {
        let plain = (PLAIN_SAFE.is_match(text) || GO_DURATION.is_match(text))
            && !YAML_11_WORDS.contains(&text.to_ascii_lowercase().as_str());
        let value = Value::String(text.to_string());
        if plain {
            Yaml::Scalar {
                text: text.to_string(),
                value,
            }
        } else {
            // A JSON string is a valid YAML double-quoted scalar.
            Yaml::Scalar {
                text: value.to_string(),
                value,
            }
        }
    }

    pub(super) fn from_json(value: &Value) -> Yaml {
        match value {
            Value::String(text) => Yaml::string(text),
            Value::Array(items) if items.iter().any(Value::is_object) => Yaml::Seq(
                items
                    .iter()
                    .map(|item| Item::new(Yaml::from_json(item)))
                    .collect(),
            ),
            Value::Array(items) => Yaml::Flow(items.iter().map(Yaml::from_json).collect()),
            Value::Object(fields) => Yaml::Map(
                fields
                    .iter()
                    .map(|(key, value)| Entry::new(key, Yaml::from_json(value)))
                    .collect(),
            ),
            other => Yaml::Scalar {
                text: other.to_string(),
                value: other.clone(),
            },
        }
    }

    /// The value a YAML reader makes of this, comments aside: what Gatekeeper and `meshlife
    /// check --constraint` read from the written file, without writing and parsing it.
    pub(super) fn to_value(&self) -> Value {
        match self {
            Yaml::Scalar { value, .. } => value.clone(),
            Yaml::Flow(items) => Value::Array(items.iter().map(Yaml::to_value).collect()),
            Yaml::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|entry| (entry.key.clone(), entry.value.to_value()))
                    .collect(),
            ),
            Yaml::Seq(items) => Value::Array(
                items
                    .iter()
                    .flat_map(|item| item.values.iter().map(Yaml::to_value))
                    .collect(),
            ),
        }
    }

    /// A mapping's entries at `indent` (the caller has written the key line).
    pub(super) fn render_entries(&self, indent: usize, out: &mut String) {
        let Yaml::Map(entries) = self else {
            return;
        };
        for entry in entries {
            if let Some(text) = &entry.comment {
                comment(indent, text, out);
            }
            out.push_str(&" ".repeat(indent));
            out.push_str(&entry.key);
            out.push(':');
            entry.value.render_value(indent, out);
        }
    }

    /// The value after `key:` at `indent`.
    pub(super) fn render_value(&self, indent: usize, out: &mut String) {
        match self {
            Yaml::Scalar { .. } | Yaml::Flow(_) => {
                out.push(' ');
                out.push_str(&self.inline());
                out.push('\n');
            }
            Yaml::Map(_) => {
                out.push('\n');
                self.render_entries(indent + 2, out);
            }
            Yaml::Seq(items) => {
                out.push('\n');
                for item in items {
                    if let Some(text) = &item.comment {
                        comment(indent + 2, text, out);
                    }
                    for value in &item.values {
                        match value {
                            Yaml::Map(_) => {
                                let mut nested = String::new();
                                value.render_entries(indent + 4, &mut nested);
                                // The first key goes on the dash's line.
                                out.push_str(&" ".repeat(indent + 2));
                                out.push_str("- ");
                                out.push_str(&nested[indent + 4..]);
                            }
                            _ => {
                                out.push_str(&" ".repeat(indent + 2));
                                out.push_str("- ");
                                out.push_str(&value.inline());
                                out.push('\n');
                            }
                        }
                    }
                }
            }
        }
    }

    pub(super) fn inline(&self) -> String {
        match self {
            Yaml::Scalar { text, .. } => text.clone(),
            Yaml::Flow(items) => {
                let items: Vec<String> = items.iter().map(Yaml::inline).collect();
                format!("[{}]", items.join(", "))
            }
            // Not used inline.
            Yaml::Map(_) | Yaml::Seq(_) => "{}".into(),
        }
    }
}

/// `text` as `# ` lines at `indent`, wrapped at [`COMMENT_WIDTH`].
pub(super) fn comment(indent: usize, text: &str, out: &mut String) {
    let prefix = format!("{}# ", " ".repeat(indent));
    let width = COMMENT_WIDTH.saturating_sub(prefix.len()).max(20);
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&prefix);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&prefix);
        out.push_str(&line);
        out.push('\n');
    }
}

/// Widest a comment line may be, indentation and `# ` included.
pub(super) const COMMENT_WIDTH: usize = 100;
