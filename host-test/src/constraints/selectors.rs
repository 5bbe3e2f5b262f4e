//! Kubernetes label selectors and namespace wildcards as Gatekeeper reads them, with the API
//! server's rules for label keys and values.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use regex::Regex;

use crate::constraints::fields::FieldError;

/// Gatekeeper's glob: `kube-*` (prefix), `*-system` (suffix), `*mesh*` (contains), or exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wildcard(pub String);

impl Wildcard {
    /// Gatekeeper's CRD refuses other patterns (`pkg/wildcard`'s kubebuilder validation
    /// `^(\*|\*-)?[a-z0-9]([-:a-z0-9]*[a-z0-9])?(\*|-\*)?$`), so the API server would never
    /// store a constraint holding one: here it is an error, not a pattern that matches nothing.
    pub(super) fn check(pattern: &str, field: &str) -> Result<(), FieldError> {
        static PATTERN: OnceLock<Regex> = OnceLock::new();
        let valid = PATTERN.get_or_init(|| {
            Regex::new(r"^(\*|\*-)?[a-z0-9]([-:a-z0-9]*[a-z0-9])?(\*|-\*)?$").expect("valid regex")
        });
        if valid.is_match(pattern) {
            return Ok(());
        }
        Err((
            field.to_string(),
            format!(
                "{pattern:?} is not a namespace or name pattern Gatekeeper accepts: lower-case \
                 letters, digits, '-' and ':', starting and ending with a letter or digit, with \
                 an optional '*' or '*-' in front and '*' or '-*' at the end"
            ),
        ))
    }

    pub fn matches(&self, candidate: &str) -> bool {
        let pattern = self.0.as_str();
        match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
            (Some(after_star), Some(_)) => {
                candidate.contains(after_star.strip_suffix('*').unwrap_or(after_star))
            }
            (Some(suffix), None) => candidate.ends_with(suffix),
            (None, Some(prefix)) => candidate.starts_with(prefix),
            (None, None) => pattern == candidate,
        }
    }
}

/// A validated Kubernetes label selector (k8s-openapi's type, checked like the API server's
/// `LabelSelectorAsSelector`: In/NotIn need values, Exists/DoesNotExist must have none).
#[derive(Clone, Debug)]
pub struct Selector {
    pub(super) match_labels: BTreeMap<String, String>,
    pub(super) requirements: Vec<Requirement>,
}

#[derive(Clone, Debug)]
pub(super) enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    pub fn new(selector: LabelSelector, field: &str) -> Result<Selector, (String, String)> {
        let mut requirements = Vec::new();
        for (index, expression) in selector
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let at = |name: &str| format!("{field}.matchExpressions[{index}].{name}");
            let values = expression.values.unwrap_or_default();
            let key = expression.key;
            label_key_problem(&key).map_or(Ok(()), |problem| Err((at("key"), problem)))?;
            for (value_index, value) in values.iter().enumerate() {
                if let Some(problem) = label_value_problem(value) {
                    return Err((format!("{}[{value_index}]", at("values")), problem));
                }
            }
            let requirement = match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err((
                        at("values"),
                        format!("must not be empty for operator {}", expression.operator),
                    ));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err((
                        at("values"),
                        format!("must be empty for operator {}", expression.operator),
                    ));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err((
                        at("operator"),
                        format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                    ));
                }
            };
            requirements.push(requirement);
        }
        let match_labels = selector.match_labels.unwrap_or_default();
        for (key, value) in &match_labels {
            let at = format!("{field}.matchLabels.{key}");
            if let Some(problem) = label_key_problem(key) {
                return Err((at, format!("the key {problem}")));
            }
            if let Some(problem) = label_value_problem(value) {
                return Err((at, problem));
            }
        }
        Ok(Selector {
            match_labels,
            requirements,
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self
                .requirements
                .iter()
                .all(|requirement| match requirement {
                    Requirement::In(key, values) => {
                        labels.get(key).is_some_and(|value| values.contains(value))
                    }
                    // As in Kubernetes: an absent key satisfies NotIn.
                    Requirement::NotIn(key, values) => {
                        labels.get(key).is_none_or(|value| !values.contains(value))
                    }
                    Requirement::Exists(key) => labels.contains_key(key),
                    Requirement::DoesNotExist(key) => !labels.contains_key(key),
                })
    }
}

/// Why `key` is not a label key, as apimachinery's `IsQualifiedName` judges it (Gatekeeper
/// turns selectors into label selectors with `LabelSelectorAsSelector`, which refuses such keys).
pub(super) fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        static SUBDOMAIN: OnceLock<Regex> = OnceLock::new();
        let subdomain = SUBDOMAIN.get_or_init(|| {
            Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
                .expect("valid regex")
        });
        if prefix.len() > 253 || !subdomain.is_match(prefix) {
            return Some(format!(
                "{key:?} is not a label key: its prefix {prefix:?} must be a DNS subdomain \
                 (lower-case letters, digits, '-' and '.', at most 253 characters)"
            ));
        }
    }
    if name.is_empty() || label_value_problem(name).is_some() {
        return Some(format!(
            "{key:?} is not a label key: the name part must be 1 to 63 characters of letters, \
             digits, '-', '_' and '.', starting and ending with a letter or digit, after an \
             optional DNS-subdomain prefix and '/'"
        ));
    }
    None
}

/// Why `value` is not a label value (apimachinery's `IsValidLabelValue`).
pub(super) fn label_value_problem(value: &str) -> Option<String> {
    static VALUE: OnceLock<Regex> = OnceLock::new();
    let valid = VALUE.get_or_init(|| {
        Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("valid regex")
    });
    if value.len() <= 63 && valid.is_match(value) {
        return None;
    }
    Some(format!(
        "{value:?} is not a label value: at most 63 characters of letters, digits, '-', '_' and \
         '.', starting and ending with a letter or digit (or empty)"
    ))
}
