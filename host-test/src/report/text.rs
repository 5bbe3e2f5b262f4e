//! `-o text`, the default: findings grouped by file, each starting with `file:line:column`,
//! coloured on a terminal.

use std::fmt::Write as _;

use meshlife_policy::Severity;

use super::{EXEMPT_REASON_ANNOTATION, Report};
use crate::constraints::constraint::EnforcementAction;
use crate::terminal::printable;

struct Palette {
    colour: bool,
}

impl Palette {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn severity(&self, severity: Severity) -> String {
        let code = match severity {
            Severity::Error => "1;31",
            Severity::Warning => "1;33",
            Severity::Info => "1;36",
        };
        self.paint(code, &format!("{:<7}", severity.as_str()))
    }
}

pub(super) fn render_text(report: &Report, colour: bool) -> String {
    let palette = Palette { colour };
    let mut out = String::new();
    if let Some(config) = &report.config {
        let _ = writeln!(out, "Config: {}\n", printable(config));
    }
    if let Some(facts_read) = &report.facts_read {
        let _ = writeln!(out, "Facts read from {}:", printable(&facts_read.cluster));
        for fact in &facts_read.facts {
            let _ = writeln!(out, "  {}", printable(fact));
        }
        out.push('\n');
    }
    for group in report.by_file() {
        let objects_with_findings: Vec<_> = group
            .objects
            .iter()
            .filter(|object| !object.findings.is_empty())
            .collect();
        // Input errors are not repeated here: the CLI has written them to stderr already.
        if objects_with_findings.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}", palette.paint("1", &printable(group.file)));
        for object in objects_with_findings {
            let _ = writeln!(out, "  {}", printable(&object.identity.title()));
            for finding in &object.findings {
                let mut marker = String::new();
                if finding.enforcement_action != EnforcementAction::Deny {
                    let _ = write!(marker, " [{}]", finding.enforcement_action.as_str());
                }
                if !finding.constraint.is_empty() {
                    let _ = write!(marker, " (constraint {})", printable(&finding.constraint));
                }
                let (line, column) = finding.location.unwrap_or((object.identity.line.max(1), 1));
                let _ = writeln!(
                    out,
                    "    {}:{line}:{column}: {} {} {}{}  at {}",
                    printable(group.file),
                    palette.severity(finding.severity),
                    printable(&finding.rule),
                    printable(&finding.check),
                    marker,
                    if finding.path.is_empty() {
                        "(object)".into()
                    } else {
                        printable(&finding.path)
                    }
                );
                // The message repeats the `[ML301 job-sidecar-never-exits]` just printed above
                // it (other formats need it: a message stands alone there).
                let header = format!("[{} {}] ", finding.rule, finding.check);
                let message = finding.msg.strip_prefix(&header).unwrap_or(&finding.msg);
                let _ = writeln!(out, "      {}", printable(message));
                if !finding.fix.is_empty() {
                    let fix = printable(&finding.fix);
                    let _ = writeln!(out, "      {} {fix}", palette.paint("2", "fix:"));
                }
                if let Some(place) = &finding.timeline_place {
                    let _ = writeln!(
                        out,
                        "      {} {} (drawn below)",
                        palette.paint("2", "timeline:"),
                        printable(place)
                    );
                }
            }
        }
        out.push('\n');
    }
    if !report.exemptions.is_empty() {
        let _ = writeln!(out, "{}", palette.paint("1", "Exemptions in use:"));
        for exemption in &report.exemptions {
            let reason = match &exemption.reason {
                Some(reason) => format!("reason: {}", printable(reason)),
                None => format!("no reason given ({EXEMPT_REASON_ANNOTATION} is not set)"),
            };
            let misplaced = if exemption.misplaced {
                " [on the controller's metadata, where meshlife does not read it: move it to the pod template]".to_string()
            } else if !exemption.unknown.is_empty() {
                format!(
                    " [not a rule, exempting nothing: {}]",
                    exemption.unknown.join(", ")
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {}: {}: {} — {reason}{misplaced}",
                printable(&exemption.identity.file),
                printable(&exemption.identity.title()),
                printable(&exemption.rules)
            );
        }
        out.push('\n');
    }
    let summary = report.summary_line();
    let summary = if report.fails() || !report.errors.is_empty() {
        palette.paint("1;31", &summary)
    } else {
        palette.paint("1;32", &summary)
    };
    let _ = writeln!(out, "{summary}");
    out
}
