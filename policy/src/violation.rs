//! What a rule reports, and the two renderings of the OPA result set.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
}

/// One finding, in the shape Gatekeeper templates return: `{"msg", "details"}`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Violation {
    pub msg: String,
    pub details: Details,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Details {
    /// Rule id, e.g. `ML101`.
    pub rule: String,
    /// Rule slug, e.g. `startup-no-hold`.
    pub name: String,
    pub severity: Severity,
    /// Where in the reviewed object, e.g. `spec.template.spec.containers[1]`.
    pub path: String,
    /// One sentence naming the exact annotation, field or value to change.
    pub fix: String,
    /// `istio` or `linkerd` when the finding concerns one mesh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<String>,
    /// The container the finding is about, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// OPA result set as JSON (`opa_eval` format 0, `opa_json_dump`):
/// `[{"result":[violation, ...]}]`, `[{"result":[]}]` when nothing fires.
pub fn result_set_json(violations: &[Violation]) -> String {
    let mut out = String::with_capacity(32 + violations.len() * 512);
    out.push_str("[{\"result\":");
    // Serialising plain strings and enums cannot fail.
    out.push_str(&serde_json::to_string(violations).unwrap_or_else(|_| "[]".into()));
    out.push_str("}]");
    out
}

/// OPA result set in Rego syntax (`opa_eval` format 1, `opa_value_dump`): the set of bindings
/// `{{"result": {v1, v2}}}`, and `{{"result": set()}}` when nothing fires. JSON objects and
/// strings are valid Rego terms, so each violation is written as JSON.
pub fn result_set_rego(violations: &[Violation]) -> String {
    let mut out = String::with_capacity(32 + violations.len() * 512);
    out.push_str("{{\"result\": ");
    if violations.is_empty() {
        out.push_str("set()");
    } else {
        out.push('{');
        for (index, violation) in violations.iter().enumerate() {
            if index > 0 {
                out.push_str(", ");
            }
            out.push_str(&serde_json::to_string(violation).unwrap_or_else(|_| "{}".into()));
        }
        out.push('}');
    }
    out.push_str("}}");
    out
}
