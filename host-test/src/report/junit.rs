//! `-o junit`: JUnit XML, a testsuite per file and a testcase per object.

use std::fmt::Write as _;

use super::{ObjectReport, Report, error_location_and_message, xml_escape};

/// JUnit XML: a testsuite per file, a testcase per object, a `<failure>` per finding that
/// fails the run (the `failures` counts are of failing testcases); findings that do not (below `--fail-on`, or from a warn/dryrun constraint)
/// are listed in the testcase's `<system-out>` so the test does not turn red for them.
/// Unreadable documents are testcases with an `<error>`.
pub(super) fn render_junit(report: &Report) -> String {
    let groups = report.by_file();
    // `failures` counts failing test cases (objects), as JUnit readers do, not findings.
    let fails = |object: &ObjectReport| object.findings.iter().any(|finding| finding.fails_run);
    let failures = report.objects.iter().filter(|object| fails(object)).count();
    let tests = report.objects.len() + report.errors.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"meshlife\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        report.errors.len()
    );
    for group in groups {
        let suite_failures = group.objects.iter().filter(|object| fails(object)).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{suite_failures}\" errors=\"{}\">",
            xml_escape(group.file),
            group.objects.len() + group.errors.len(),
            group.errors.len()
        );
        for object in &group.objects {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml_escape(group.file),
                xml_escape(&object.identity.title())
            );
            if object.findings.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            let mut not_failing = String::new();
            for finding in &object.findings {
                let body = format!(
                    "{} {} ({}) at {}\n{}\nfix: {}\nenforcementAction: {}",
                    finding.rule,
                    finding.check,
                    finding.severity.as_str(),
                    finding.path,
                    finding.msg,
                    finding.fix,
                    finding.enforcement_action.as_str()
                );
                if finding.fails_run {
                    let _ = writeln!(
                        out,
                        "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                        xml_escape(&finding.msg),
                        xml_escape(&finding.rule),
                        xml_escape(&body)
                    );
                } else {
                    not_failing.push_str(&body);
                    not_failing.push_str("\n\n");
                }
            }
            if !not_failing.is_empty() {
                let _ = writeln!(
                    out,
                    "      <system-out>{}</system-out>",
                    xml_escape(not_failing.trim_end())
                );
            }
            out.push_str("    </testcase>\n");
        }
        for error in &group.errors {
            let name = match error.document {
                Some(document) => format!("document {}", document + 1),
                None => "file".to_string(),
            };
            let _ = writeln!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\">\n      <error message=\"{}\" type=\"input-error\"/>\n    </testcase>",
                xml_escape(group.file),
                xml_escape(&name),
                xml_escape(&error_location_and_message(error))
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaping() {
        assert_eq!(
            super::xml_escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{fffd}"
        );
    }
}
