//! `meshlife explain -o html`: one page for a whole folder, every workload's timeline (the SVG
//! of `svg.rs`, inline) beside its findings, each finding saying where on the timeline it is.
//! Self-contained: no script at all, styles inline, and a Content-Security-Policy that forbids
//! loading anything, so the page can be attached to a CI run or a pull request as one file.
//! The inline pictures' own `<style>` rules apply to the whole page: the page's classes are
//! named apart from the picture's (`mode-mark`, not `mark`).

use std::fmt::Write as _;

use meshlife_policy::timeline::Anchor;
use meshlife_policy::violation::Severity;

use super::bars::{anchor_phrase, mode_line, rules_at};
use super::{Explained, svg};
use crate::inputs::manifests::InputError;
use crate::report::xml_escape;

const STYLE: &str = "
body { font-family: system-ui, sans-serif; color: #2f3542; margin: 0 auto; padding: 1.5rem;
  max-width: 1500px; background: #f5f6fa; }
h1 { margin: 0 0 .25rem; font-size: 1.6rem; }
.summary { margin: 0 0 1rem; color: #57606f; }
nav ol { columns: 2; font-size: .9rem; padding-left: 1.5rem; }
nav a { color: #1e3799; }
.count { display: inline-block; min-width: 1.4em; padding: 0 .35em; margin-left: .4em;
  border-radius: .7em; font-size: .8rem; text-align: center; background: #dfe4ea; }
.count.error { background: #b33939; color: #fff; }
.count.warning { background: #cc8e35; color: #fff; }
section.workload { background: #fff; border: 1px solid #dfe4ea; border-radius: 6px;
  margin: 1rem 0; padding: 1rem; }
section.workload h2 { font-size: 1.15rem; margin: 0; }
.where, .mode { color: #57606f; margin: .2rem 0; font-size: .9rem; }
.pair { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; margin-top: .5rem; }
.pair figure { margin: 0; flex: 0 1 960px; min-width: 0; }
.pair figure svg { width: 100%; height: auto; display: block; }
.findings { flex: 1 1 320px; min-width: 280px; }
.findings h3 { font-size: 1rem; margin: 0 0 .4rem; }
.findings ul { list-style: none; margin: 0; padding: 0; }
.findings li { border-left: 4px solid #a4b0be; padding: .3rem .6rem; margin-bottom: .6rem;
  background: #f8f9fb; }
.findings li.error { border-color: #b33939; }
.findings li.warning { border-color: #cc8e35; }
.findings li.info { border-color: #2e86de; }
.findings p { margin: .2rem 0; font-size: .9rem; }
.rule { font-weight: bold; }
.severity { font-size: .8rem; text-transform: uppercase; color: #57606f; margin-left: .4rem; }
.place { color: #1e3799; }
.mode-mark { color: #b33939; font-weight: bold; }
.fix { color: #218c74; }
.none { color: #218c74; }
section.problems { background: #fff; border: 1px solid #dfe4ea; border-radius: 6px;
  padding: 1rem; }
";

/// The page for `explained`, with what could not be explained (`notes`, `errors`) at its end.
pub fn page(
    paths: &[String],
    explained: &[Explained],
    notes: &[String],
    errors: &[InputError],
) -> String {
    let inputs = xml_escape(&paths.join(", "));
    let with_findings = explained
        .iter()
        .filter(|one| !one.findings.is_empty())
        .count();
    let count_of = |severity: Severity| {
        explained
            .iter()
            .flat_map(|one| &one.findings)
            .filter(|finding| finding.severity == severity)
            .count()
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="meshlife {version}">
<title>meshlife explain: {inputs}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>Startup and shutdown timelines</h1>
<p class="summary">{workloads} from {inputs}; {with_findings} with findings: {findings}. Drawn by <code>meshlife explain -o html</code> {version}: figures come from the manifests, the constraint's parameters, the meshes' documented defaults, and the assumptions each picture names.</p>
</header>
"#,
        version = env!("CARGO_PKG_VERSION"),
        workloads = match explained.len() {
            1 => "1 pod spec".to_string(),
            count => format!("{count} pod specs"),
        },
        findings = [
            (Severity::Error, "error"),
            (Severity::Warning, "warning"),
            (Severity::Info, "info")
        ]
        .iter()
        .map(|&(severity, word)| {
            let count = count_of(severity);
            let plural = if count == 1 || severity == Severity::Info {
                ""
            } else {
                "s"
            };
            format!("{count} {word}{plural}")
        })
        .collect::<Vec<_>>()
        .join(", "),
    );
    out.push_str("<nav>\n<ol>\n");
    for (index, one) in explained.iter().enumerate() {
        let worst = one.findings.iter().map(|finding| finding.severity).max();
        let class = worst.map_or("", Severity::as_str);
        let _ = writeln!(
            out,
            r##"<li><a href="#workload-{index}">{}</a> <span class="where">{}</span><span class="count {class}">{}</span></li>"##,
            xml_escape(&one.object),
            xml_escape(&one.file),
            one.findings.len()
        );
    }
    out.push_str("</ol>\n</nav>\n<main>\n");
    for (index, one) in explained.iter().enumerate() {
        workload(&mut out, index, one);
    }
    if !notes.is_empty() || !errors.is_empty() {
        out.push_str("<section class=\"problems\">\n<h2>Not explained</h2>\n<ul>\n");
        for error in errors {
            let _ = writeln!(out, "<li>error: {}</li>", xml_escape(&error.to_string()));
        }
        for note in notes {
            let _ = writeln!(out, "<li>{}</li>", xml_escape(note));
        }
        out.push_str("</ul>\n</section>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn workload(out: &mut String, index: usize, one: &Explained) {
    let _ = write!(
        out,
        r#"<section class="workload" id="workload-{index}">
<h2>{}</h2>
<p class="where">{}, {}, pod spec at <code>{}</code></p>
<p class="mode">{}{}</p>
<div class="pair">
<figure>
{}</figure>
<div class="findings">
"#,
        xml_escape(&one.object),
        xml_escape(&one.file),
        xml_escape(&one.location),
        xml_escape(&one.pod_spec),
        xml_escape(&mode_line(&one.timeline)),
        rules_at(&one.findings, Anchor::Mode).map_or(String::new(), |rules| format!(
            " <span class=\"mode-mark\">\u{25c0} {}</span>",
            xml_escape(&rules)
        )),
        svg::draw_unheaded(one),
    );
    if one.findings.is_empty() {
        out.push_str("<h3>Findings</h3>\n<p class=\"none\">No findings.</p>\n");
    } else {
        let _ = writeln!(out, "<h3>Findings ({})</h3>\n<ul>", one.findings.len());
        for finding in &one.findings {
            let place = match finding.anchor {
                Some(anchor) => {
                    format!("On the timeline: {}", anchor_phrase(&one.timeline, anchor))
                }
                None => "Not on the timeline: the input could not be read.".into(),
            };
            let message = finding.message();
            let _ = writeln!(
                out,
                r#"<li class="{severity}"><p><span class="rule">{} {}</span><span class="severity">{severity}</span></p>
<p>{}</p>
<p class="place">{}</p>
<p class="fix">Fix: {}</p></li>"#,
                xml_escape(&finding.rule),
                xml_escape(&finding.name),
                xml_escape(message),
                xml_escape(&place),
                xml_escape(&finding.fix),
                severity = finding.severity.as_str(),
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</div>\n</div>\n</section>\n");
}
