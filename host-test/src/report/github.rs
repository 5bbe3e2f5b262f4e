//! `-o github`: GitHub Actions workflow commands (`::error file=...`), one per finding.

use std::fmt::Write as _;

use meshlife_policy::Severity;

use super::Report;

/// Workflow command escaping: data escapes `%`, CR, LF; properties also `:` and `,`.
fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}

pub(super) fn render_github(report: &Report) -> String {
    let mut out = String::new();
    for (identity, finding) in report.findings() {
        let command = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let title = format!("{} {} ({})", finding.rule, finding.check, identity.title());
        let mut message = finding.msg.clone();
        if !finding.fix.is_empty() {
            message.push_str("\nfix: ");
            message.push_str(&finding.fix);
        }
        let position = match finding.location {
            Some((line, column)) => format!("line={line},col={column}"),
            None => format!("line={}", identity.line.max(1)),
        };
        let _ = writeln!(
            out,
            "::{command} file={},{position},title={}::{}",
            github_property(&identity.file),
            github_property(&title),
            github_data(&message)
        );
    }
    for error in &report.errors {
        let _ = writeln!(
            out,
            "::error file={},line={},title={}::{}",
            github_property(&error.file),
            error.line.unwrap_or(1).max(1),
            github_property("meshlife: cannot read input"),
            github_data(&error.to_string())
        );
    }
    let _ = writeln!(out, "{}", report.summary_line());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaping() {
        assert_eq!(super::github_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
    }
}
