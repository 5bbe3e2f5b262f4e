//! `-o tap`: TAP 13, a test point per object and per input error.

use std::fmt::Write as _;

use super::Report;

/// TAP descriptions end at `#` (it starts a directive), so it is escaped.
fn tap_description(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('#', "\\#")
        .replace('\n', " ")
}

/// A YAML double-quoted scalar for TAP's diagnostic blocks.
fn yaml_quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// TAP 13: a test point per object (`not ok` when a finding fails the run) and per input
/// error, each followed by a YAML block with the findings.
pub(super) fn render_tap(report: &Report) -> String {
    let mut out = String::from("TAP version 13\n");
    let _ = writeln!(out, "1..{}", report.objects.len() + report.errors.len());
    let mut number = 0;
    for object in &report.objects {
        number += 1;
        let failed = object.findings.iter().any(|finding| finding.fails_run);
        let _ = writeln!(
            out,
            "{} {number} - {}",
            if failed { "not ok" } else { "ok" },
            tap_description(&format!(
                "{}: {}",
                object.identity.file,
                object.identity.title()
            ))
        );
        if object.findings.is_empty() {
            continue;
        }
        out.push_str("  ---\n  findings:\n");
        for finding in &object.findings {
            let _ = writeln!(out, "    - rule: {}", yaml_quoted(&finding.rule));
            let _ = writeln!(out, "      check: {}", yaml_quoted(&finding.check));
            let _ = writeln!(out, "      severity: {}", finding.severity.as_str());
            let _ = writeln!(out, "      path: {}", yaml_quoted(&finding.path));
            let _ = writeln!(out, "      message: {}", yaml_quoted(&finding.msg));
            let _ = writeln!(out, "      fix: {}", yaml_quoted(&finding.fix));
            let _ = writeln!(
                out,
                "      enforcementAction: {}",
                finding.enforcement_action.as_str()
            );
            let _ = writeln!(out, "      failsRun: {}", finding.fails_run);
        }
        out.push_str("  ...\n");
    }
    for error in &report.errors {
        number += 1;
        let _ = writeln!(
            out,
            "not ok {number} - {}",
            tap_description(&format!("{}: cannot read", error.file))
        );
        out.push_str("  ---\n");
        let _ = writeln!(out, "  message: {}", yaml_quoted(&error.to_string()));
        out.push_str("  ...\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaping() {
        assert_eq!(super::tap_description("x # y"), "x \\# y");
    }
}
