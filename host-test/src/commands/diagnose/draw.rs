//! The diagnosis for a terminal (text), as one SVG picture of the observed timeline, or as one
//! HTML page with the observed and the predicted pictures beside the conclusions.

use std::fmt::Write as _;

use super::clock::{self, Bound, Millis};
use super::conclusions::{Conclusion, Status};
use super::observed::{ContainerTimeline, Moment, MomentKind, Observed};
use super::refused::RefusedPods;
use super::{DiagnoseRun, Diagnosis};
use crate::commands::explain;
use crate::report::xml_escape;

/// The most moments listed per container and kind of error, for text; JSON has them all.
const ERRORS_LISTED: usize = 5;

fn status_mark(status: Status, colour: bool) -> String {
    let (mark, code) = match status {
        Status::Confirmed => ("\u{2717}", "31"),
        Status::RuledOut => ("\u{2713}", "32"),
        Status::CannotTell => ("?", "33"),
    };
    if colour {
        format!("\x1b[{code}m{mark}\x1b[0m")
    } else {
        mark.to_string()
    }
}

fn role_word(container: &ContainerTimeline) -> &'static str {
    use super::observed::Role;
    match (container.role, container.native_sidecar) {
        (Role::Proxy, true) => "proxy (native sidecar)",
        (Role::Proxy, false) => "proxy",
        (Role::MeshInit, _) => "mesh init",
        (Role::Init, true) => "sidecar",
        (Role::Init, false) => "init",
        (Role::App, _) => "app",
    }
}

fn container_line(container: &ContainerTimeline) -> String {
    let mut parts = Vec::new();
    if let Some(started) = container.started {
        parts.push(format!("started {}", started.phrase()));
    }
    if let Some(ready) = container.ready {
        parts.push(format!("ready {}", ready.phrase()));
    }
    if let Some(sigterm) = container.sigterm {
        parts.push(format!("SIGTERM {}", sigterm.phrase()));
    }
    if let Some(finished) = container.finished {
        parts.push(format!(
            "ended {}: {} (exit {})",
            finished.phrase(),
            container.reason.as_deref().unwrap_or("no reason given"),
            container
                .exit_code
                .map_or_else(|| "?".to_string(), |code| code.to_string())
        ));
    }
    if container.running {
        parts.push("running when the data was taken".into());
    }
    if container.waiting {
        parts.push(format!(
            "waiting ({})",
            container.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    if container.restarts > 0 {
        parts.push(format!("{} restart(s)", container.restarts));
    }
    if parts.is_empty() {
        parts.push("no status given".into());
    }
    parts.join(" · ")
}

fn moment_time(at: &Bound) -> String {
    match (at.earliest, at.latest) {
        (Some(earliest), _) => clock::clock(earliest),
        (None, Some(latest)) => format!("<{}", clock::clock(latest)),
        (None, None) => "(no time)".into(),
    }
}

/// The moments to list: every one but connection errors and cut streams beyond the first few
/// of each container (their count is said).
fn listed_moments(observed: &Observed) -> (Vec<(&ContainerTimeline, &Moment)>, usize) {
    let mut listed = Vec::new();
    let mut left_out = 0;
    for container in &observed.containers {
        let mut errors = 0;
        for moment in &container.moments {
            if matches!(
                moment.kind,
                MomentKind::ConnectionError | MomentKind::StreamCut
            ) {
                errors += 1;
                if errors > ERRORS_LISTED {
                    left_out += 1;
                    continue;
                }
            }
            listed.push((container, moment));
        }
    }
    listed.sort_by_key(|(_, moment)| moment.at.point().unwrap_or(Millis::MAX));
    (listed, left_out)
}

pub fn text(run: &DiagnoseRun, colour: bool) -> String {
    let mut out = String::new();
    for diagnosis in &run.diagnoses {
        diagnosis_text(&mut out, diagnosis, colour);
    }
    out
}

fn diagnosis_text(out: &mut String, diagnosis: &Diagnosis, colour: bool) {
    if let Some(refused) = &diagnosis.refused {
        return refused_text(out, diagnosis, refused, colour);
    }
    let observed = &diagnosis.observed;
    let _ = writeln!(
        out,
        "Pod {}{}",
        diagnosis.pod,
        observed
            .mesh
            .map_or(String::new(), |mesh| format!(" ({mesh:?} mesh)")
                .to_lowercase())
    );
    if let Some(grace) = observed.grace_seconds {
        let _ = writeln!(out, "  grace period {grace} s ({})", observed.grace_source);
    }
    if let Some(origin) = observed.origin {
        let _ = writeln!(
            out,
            "\nObserved (times UTC, {}):",
            clock::iso(origin).get(..10).unwrap_or("")
        );
    } else {
        let _ = writeln!(out, "\nObserved:");
    }
    let width = observed
        .containers
        .iter()
        .map(|container| container.name.len())
        .max()
        .unwrap_or(0);
    for container in &observed.containers {
        let _ = writeln!(
            out,
            "  {:width$}  {:<10} {}",
            container.name,
            role_word(container),
            container_line(container)
        );
    }
    if let Some(deleted) = observed.deleted.and_then(|deleted| deleted.point()) {
        // With its date: a deletion can come days after the rest.
        let _ = writeln!(out, "  the pod was deleted at {}", clock::iso(deleted));
    }
    let (moments, left_out) = listed_moments(observed);
    if !moments.is_empty() {
        let _ = writeln!(out, "\n  Moments:");
        for (container, moment) in moments {
            let _ = writeln!(
                out,
                "    {:>12}  {:width$}  {}  [{}]",
                moment_time(&moment.at),
                container.name,
                moment.what,
                moment.evidence.place()
            );
        }
        if left_out > 0 {
            let _ = writeln!(
                out,
                "    … {left_out} more connection errors or cut streams (-o json lists them all)"
            );
        }
    }
    let _ = writeln!(out, "\nConclusions:");
    for conclusion in &diagnosis.conclusions {
        conclusion_text(out, conclusion, colour);
    }
    if let Some(predicted) = &diagnosis.predicted {
        let style = explain::terminal::Style {
            colour,
            unicode: colour,
            width: explain::terminal_width().max(60),
            finding_messages: true,
        };
        let _ = writeln!(
            out,
            "\nPredicted from the pod's spec (as `meshlife explain` draws it; assumed figures in \
             `meshlife explain --help`):"
        );
        out.push_str(&explain::terminal::draw(predicted, &style));
    }
    if !diagnosis.differences.is_empty() {
        let _ = writeln!(out, "\nWhere observed and predicted differ:");
        for difference in &diagnosis.differences {
            let _ = writeln!(out, "  - {difference}");
        }
    }
    if !observed.notes.is_empty() {
        let _ = writeln!(out, "\nLimits of this data:");
        for note in &observed.notes {
            let _ = writeln!(out, "  - {note}");
        }
    }
    out.push('\n');
}

/// A workload whose pods were never created: its refusals, then the conclusions.
fn refused_text(out: &mut String, diagnosis: &Diagnosis, refused: &RefusedPods, colour: bool) {
    let _ = writeln!(
        out,
        "Pods of {}{}: none created, the API server refused them",
        refused.workload,
        refused
            .mesh
            .map_or(String::new(), |mesh| format!(" ({mesh:?} mesh)")
                .to_lowercase())
    );
    let _ = writeln!(out, "\nRefused (times UTC):");
    for event in &refused.events {
        let refused_inits: Vec<String> = event
            .init_containers
            .iter()
            .map(|init| {
                format!(
                    "spec.initContainers[{}] {}",
                    init.index,
                    init.fields.join(", ")
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  {}{}: {}{} without restartPolicy: Always  [{}]",
            event
                .time
                .map_or_else(|| "(no time)".to_string(), |time| time.phrase()),
            if event.count > 1 {
                format!(", {} times", event.count)
            } else {
                String::new()
            },
            event
                .pod
                .as_ref()
                .map_or_else(String::new, |pod| format!("pod {pod}: ")),
            refused_inits.join("; "),
            event.evidence.place()
        );
    }
    let _ = writeln!(out, "\nConclusions:");
    for conclusion in &diagnosis.conclusions {
        conclusion_text(out, conclusion, colour);
    }
    out.push('\n');
}

fn conclusion_text(out: &mut String, conclusion: &Conclusion, colour: bool) {
    let _ = writeln!(
        out,
        "  {} {} {}: {}: {}",
        status_mark(conclusion.status, colour),
        conclusion.rule,
        conclusion.name,
        conclusion.status.word(),
        conclusion.summary
    );
    for cited in &conclusion.evidence {
        let _ = writeln!(
            out,
            "      evidence: {}{}: {}",
            cited.evidence.place(),
            cited
                .time
                .map_or(String::new(), |time| format!(" ({})", time.phrase())),
            cited.shows
        );
    }
    for missing in &conclusion.missing {
        let _ = writeln!(out, "      to tell: {missing}");
    }
    if let Some(fix) = &conclusion.fix {
        let _ = writeln!(out, "      fix: {fix}");
    }
}

const SVG_WIDTH: f64 = 960.0;
const SVG_LABEL: f64 = 200.0;
const SVG_RIGHT: f64 = 940.0;
const SVG_ROW: f64 = 26.0;

fn moment_colour(kind: MomentKind) -> &'static str {
    match kind {
        MomentKind::ProxyReady | MomentKind::Ready | MomentKind::Serving => "#10ac84",
        MomentKind::ConnectionError | MomentKind::StreamCut => "#ee5253",
        MomentKind::Sigterm | MomentKind::ProxyDraining => "#f6b93b",
        MomentKind::ProxyExiting | MomentKind::Terminated | MomentKind::EarlierRunEnded => {
            "#576574"
        }
        MomentKind::ProbeFailed
        | MomentKind::PostStartHookFailed
        | MomentKind::PreStopHookFailed => "#ff9f43",
        MomentKind::Started | MomentKind::ProxyStarting => "#2e86de",
    }
}

/// The observed timeline as one picture: a bar per container from its start to its end (or the
/// last moment seen), a mark per moment, and the conclusions under it.
pub fn svg(diagnosis: &Diagnosis) -> String {
    let observed = &diagnosis.observed;
    let points: Vec<Millis> = observed
        .containers
        .iter()
        .flat_map(|container| {
            container
                .started
                .iter()
                .chain(container.finished.iter())
                .chain(container.moments.iter().map(|moment| &moment.at))
                .filter_map(Bound::point)
                .collect::<Vec<_>>()
        })
        .chain(observed.deleted.and_then(|deleted| deleted.point()))
        .collect();
    let start = points.iter().copied().min().unwrap_or(0);
    let end = points.iter().copied().max().unwrap_or(start).max(start + 1);
    let x = |at: Millis| {
        SVG_LABEL + (SVG_RIGHT - SVG_LABEL) * ((at - start) as f64) / ((end - start) as f64)
    };
    let rows = observed.containers.len() as f64;
    let conclusions_height = 20.0 * diagnosis.conclusions.len() as f64;
    let height = 70.0 + rows * SVG_ROW + 30.0 + conclusions_height + 10.0;
    let mut body = String::new();
    if let Some(refused) = &diagnosis.refused {
        let _ = writeln!(
            body,
            r#"<text x="10" y="22" class="title">No pod of {} created: the API server refused them ({})</text>"#,
            xml_escape(&refused.workload),
            match refused.refusals() {
                1 => "once".to_string(),
                count => format!("{count} times"),
            }
        );
    } else {
        let _ = writeln!(
            body,
            r#"<text x="10" y="22" class="title">Observed: pod {} ({} to {} UTC, {})</text>"#,
            xml_escape(&diagnosis.pod),
            clock::clock(start),
            clock::clock(end),
            clock::span(end - start)
        );
    }
    for (row, container) in observed.containers.iter().enumerate() {
        let y = 50.0 + row as f64 * SVG_ROW;
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.1}">{} ({})</text>"#,
            y + 13.0,
            xml_escape(&container.name),
            role_word(container)
        );
        let from = container.started.and_then(|bound| bound.point());
        let to = container
            .finished
            .and_then(|bound| bound.point())
            .or_else(|| container.running.then_some(end))
            .or_else(|| {
                container
                    .moments
                    .iter()
                    .filter_map(|moment| moment.at.point())
                    .max()
            });
        if let (Some(from), Some(to)) = (from, to) {
            let _ = writeln!(
                body,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" fill=\"#c8d6e5\"><title>{}</title></rect>",
                x(from),
                y + 2.0,
                (x(to) - x(from)).max(1.0),
                xml_escape(&container_line(container))
            );
        }
        for moment in &container.moments {
            let Some(at) = moment.at.point() else {
                continue;
            };
            let _ = writeln!(
                body,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"3\" height=\"18\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                x(at) - 1.0,
                y,
                moment_colour(moment.kind),
                xml_escape(&moment.at.phrase()),
                xml_escape(&moment.what),
                xml_escape(&moment.evidence.place())
            );
        }
    }
    if let Some(deleted) = observed.deleted.and_then(|deleted| deleted.point()) {
        let _ = writeln!(
            body,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"40\" y2=\"{1:.1}\" stroke=\"#f6b93b\" stroke-dasharray=\"4 3\"><title>the pod deleted: SIGTERM</title></line>",
            x(deleted),
            50.0 + rows * SVG_ROW
        );
    }
    let mut y = 50.0 + rows * SVG_ROW + 24.0;
    for conclusion in &diagnosis.conclusions {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y:.1}" class="{}">{} {}: {}: {}</text>"#,
            match conclusion.status {
                Status::Confirmed => "confirmed",
                Status::RuledOut => "ruled-out",
                Status::CannotTell => "cannot-tell",
            },
            conclusion.rule,
            conclusion.name,
            conclusion.status.word(),
            xml_escape(&shorten(&conclusion.summary, 120))
        );
        y += 20.0;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SVG_WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {SVG_WIDTH} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<style>.title {{ font-weight: bold; font-size: 14px; }} .confirmed {{ fill: #c0392b; }} .ruled-out {{ fill: #218c74; }} .cannot-tell {{ fill: #8a6d3b; }}</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n{body}</svg>\n"
    )
}

fn shorten(text: &str, most: usize) -> String {
    if text.chars().count() <= most {
        return text.to_string();
    }
    let cut: String = text.chars().take(most).collect();
    format!("{cut}…")
}

/// One page: per pod, the conclusions, the observed picture and the predicted one.
pub fn html(run: &DiagnoseRun) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>meshlife \
         diagnose</title>\n<style>body { font-family: sans-serif; margin: 2rem; background: \
         #f5f6fa; } section { background: #fff; border: 1px solid #dfe4ea; border-radius: 6px; \
         padding: 1rem; margin-bottom: 1rem; } .confirmed { color: #c0392b; } .ruled-out { \
         color: #218c74; } .cannot-tell { color: #8a6d3b; } li { margin: .3rem 0; } \
         small { color: #57606f; }</style>\n</head>\n<body>\n<h1>meshlife diagnose</h1>\n",
    );
    for diagnosis in &run.diagnoses {
        let heading = match &diagnosis.refused {
            Some(refused) => format!(
                "No pod of {} created: the API server refused them",
                refused.workload
            ),
            None => format!("Pod {}", diagnosis.pod),
        };
        let _ = writeln!(out, "<section>\n<h2>{}</h2>\n<ul>", xml_escape(&heading));
        for conclusion in &diagnosis.conclusions {
            let class = match conclusion.status {
                Status::Confirmed => "confirmed",
                Status::RuledOut => "ruled-out",
                Status::CannotTell => "cannot-tell",
            };
            let _ = write!(
                out,
                "<li class=\"{class}\"><b>{} {}</b>: {}: {}",
                conclusion.rule,
                conclusion.name,
                conclusion.status.word(),
                xml_escape(&conclusion.summary)
            );
            for cited in &conclusion.evidence {
                let _ = write!(
                    out,
                    "<br><small>evidence: {}{}: {}</small>",
                    xml_escape(&cited.evidence.place()),
                    cited.time.map_or(String::new(), |time| format!(
                        " ({})",
                        xml_escape(&time.phrase())
                    )),
                    xml_escape(&cited.shows)
                );
            }
            for missing in &conclusion.missing {
                let _ = write!(out, "<br><small>to tell: {}</small>", xml_escape(missing));
            }
            if let Some(fix) = &conclusion.fix {
                let _ = write!(out, "<br><small>fix: {}</small>", xml_escape(fix));
            }
            out.push_str("</li>\n");
        }
        out.push_str("</ul>\n<h3>Observed</h3>\n");
        out.push_str(&svg(diagnosis));
        if let Some(predicted) = &diagnosis.predicted {
            out.push_str("<h3>Predicted from the pod's spec</h3>\n");
            out.push_str(&explain::svg::draw(predicted));
        }
        if !diagnosis.differences.is_empty() {
            out.push_str("<h3>Where they differ</h3>\n<ul>\n");
            for difference in &diagnosis.differences {
                let _ = writeln!(out, "<li>{}</li>", xml_escape(difference));
            }
            out.push_str("</ul>\n");
        }
        out.push_str("</section>\n");
    }
    if !run.notes.is_empty() || !run.errors.is_empty() {
        out.push_str("<section>\n<h3>What was read</h3>\n<ul>\n");
        for line in run.notes.iter().chain(&run.errors) {
            let _ = writeln!(out, "<li>{}</li>", xml_escape(line));
        }
        out.push_str("</ul>\n</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}
