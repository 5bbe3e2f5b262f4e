//! What a rule reports, and the two renderings of the OPA result set.

use serde::{Deserialize, Serialize};

use crate::json_cursor::plain_run_end;

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
    let mut out = String::with_capacity(32 + violations.len() * 640);
    out.push_str("[{\"result\":[");
    for (index, violation) in violations.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        violation.write_json(&mut out);
    }
    out.push_str("]}]");
    out
}

/// OPA result set in Rego syntax (`opa_eval` format 1, `opa_value_dump`): the set of bindings
/// `{{"result": {v1, v2}}}`, and `{{"result": set()}}` when nothing fires. JSON objects and
/// strings are valid Rego terms, so each violation is written as JSON.
pub fn result_set_rego(violations: &[Violation]) -> String {
    let mut out = String::with_capacity(32 + violations.len() * 640);
    out.push_str("{{\"result\": ");
    if violations.is_empty() {
        out.push_str("set()");
    } else {
        out.push('{');
        for (index, violation) in violations.iter().enumerate() {
            if index > 0 {
                out.push_str(", ");
            }
            violation.write_json(&mut out);
        }
        out.push('}');
    }
    out.push_str("}}");
    out
}

impl Violation {
    /// Compact JSON, byte for byte what `serde_json::to_string` writes for this struct. Written
    /// by hand because serialising the result is a sixth of an evaluation in the module, most of
    /// it serde_json's byte-at-a-time escape scan.
    fn write_json(&self, out: &mut String) {
        let details = &self.details;
        out.push_str("{\"msg\":");
        write_json_string(out, &self.msg);
        out.push_str(",\"details\":{\"rule\":");
        write_json_string(out, &details.rule);
        out.push_str(",\"name\":");
        write_json_string(out, &details.name);
        out.push_str(",\"severity\":\"");
        out.push_str(details.severity.as_str());
        out.push_str("\",\"path\":");
        write_json_string(out, &details.path);
        out.push_str(",\"fix\":");
        write_json_string(out, &details.fix);
        if let Some(mesh) = &details.mesh {
            out.push_str(",\"mesh\":");
            write_json_string(out, mesh);
        }
        if let Some(container) = &details.container {
            out.push_str(",\"container\":");
            write_json_string(out, container);
        }
        out.push_str("}}");
    }
}

/// A JSON string literal with serde_json's escapes: `\"`, `\\`, the short forms of control
/// characters and `\u00XX` for the rest; everything else, non-ASCII included, as it is.
fn write_json_string(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    out.push('"');
    let mut index = 0;
    loop {
        let run_end = plain_run_end(bytes, index);
        out.push_str(&text[index..run_end]);
        let Some(&byte) = bytes.get(run_end) else {
            break;
        };
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(byte >> 4)] as char);
                out.push(HEX[usize::from(byte & 0xf)] as char);
            }
        }
        index = run_end + 1;
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn violation(msg: String, container: Option<String>) -> Violation {
        Violation {
            msg,
            details: Details {
                rule: "ML101".into(),
                name: "startup-no-hold".into(),
                severity: Severity::Warning,
                path: "spec.template.spec.containers[0]".into(),
                fix: "Set \"holdApplicationUntilProxyStarts\": true.".into(),
                mesh: Some("istio".into()),
                container,
            },
        }
    }

    #[test]
    fn writes_the_empty_result_sets() {
        assert_eq!(result_set_json(&[]), r#"[{"result":[]}]"#);
        assert_eq!(result_set_rego(&[]), r#"{{"result": set()}}"#);
    }

    proptest! {
        #[test]
        fn writes_what_serde_json_writes(
            msg in "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}]){0,40}",
            container in proptest::option::of("\\PC{0,12}"),
        ) {
            let violations = vec![violation(msg.clone(), container), violation(msg, None)];
            let expected = format!(
                "[{{\"result\":{}}}]",
                serde_json::to_string(&violations).unwrap()
            );
            prop_assert_eq!(result_set_json(&violations), expected);
        }
    }
}
