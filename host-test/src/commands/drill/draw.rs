//! The drill's timeline drawn: the load's calls and errors second by second, each pod's life
//! (ready, deleted, killed, out of the endpoints, gone) and the cut streams, on one time axis
//! counted from the event; as text lines for the terminal report, as one SVG picture, and as an
//! HTML page with the picture, what each error was put down to, and `explain`'s prediction for
//! the target's pod spec beside it.

use std::fmt::Write as _;

use super::observe::PodLife;
use super::report::{Report, Second};
use crate::commands::explain;
use crate::report::xml_escape;

/// The text timeline's width in columns, the labels aside.
const TEXT_COLUMNS: usize = 60;
const LABEL_WIDTH: usize = 24;

/// The span drawn: from the load being ready to the end of the load.
fn span(report: &Report) -> (u64, u64) {
    let start = report.moments.load_ready_ms;
    let end = report.moments.end_ms.max(start + 1);
    (start, end)
}

fn seconds_from_event(at_ms: u64, report: &Report) -> f64 {
    (at_ms as f64 - report.moments.event_ms as f64) / 1000.0
}

/// A pod's state at a time, for the text rows.
fn pod_glyph(pod: &PodLife, from: u64, to: u64) -> char {
    let within = |at: Option<u64>| at.is_some_and(|at| at >= from && at < to);
    if within(pod.gone_ms) {
        return '|';
    }
    if pod
        .exits
        .iter()
        .any(|exit| exit.exit_code == 137 && within(Some(exit.seen_ms)))
    {
        return 'K';
    }
    if within(pod.deleted_ms) {
        return 'T';
    }
    if within(pod.left_endpoints_ms) {
        return 'E';
    }
    if !pod.old && within(pod.ready_ms) {
        return 'R';
    }
    let seen = if pod.old { Some(0) } else { pod.seen_ms };
    let present = seen.is_some_and(|seen| seen < to) && pod.gone_ms.is_none_or(|gone| gone > from);
    if !present {
        return ' ';
    }
    if pod.deleted_ms.is_some_and(|deleted| deleted < from) {
        return '~';
    }
    let ready = pod.old || pod.ready_ms.is_some_and(|ready| ready < from);
    if ready { '=' } else { '-' }
}

/// The calls row's glyph: nothing sent, all answered, or errors (how many, up to 9).
fn calls_glyph(seconds: &[Second], from: u64, to: u64) -> char {
    let (calls, errors) = seconds
        .iter()
        .filter(|second| second.at_ms >= from && second.at_ms < to)
        .fold((0, 0), |(calls, errors), second| {
            (calls + second.calls, errors + second.errors)
        });
    match (calls, errors) {
        (0, _) => ' ',
        (_, 0) => '.',
        (_, 1..=9) => char::from_digit(errors as u32, 10).unwrap_or('x'),
        _ => 'x',
    }
}

/// The timeline as text lines for the report: one column per slice of time.
pub fn text(report: &Report) -> String {
    let (start, end) = span(report);
    let columns = TEXT_COLUMNS;
    let slice = (end - start).div_ceil(columns as u64).max(1);
    let column_of = |at: u64| ((at.saturating_sub(start)) / slice) as usize;
    let row = |glyph: &dyn Fn(u64, u64) -> char| -> String {
        (0..columns)
            .map(|column| {
                let from = start + column as u64 * slice;
                glyph(from, from + slice)
            })
            .collect()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  timeline: a column is {:.1}s, from {:+.1}s to {:+.1}s",
        slice as f64 / 1000.0,
        seconds_from_event(start, report),
        seconds_from_event(end, report)
    );
    let mut marks = vec![' '; columns];
    for (at, glyph) in [
        (report.moments.event_ms, 'v'),
        (report.moments.settled_ms, 's'),
    ] {
        if at >= start && at < end {
            marks[column_of(at).min(columns - 1)] = glyph;
        }
    }
    let _ = writeln!(
        out,
        "  {:<LABEL_WIDTH$} {}",
        "",
        marks.iter().collect::<String>().trim_end()
    );
    let _ = writeln!(
        out,
        "  {:<LABEL_WIDTH$} {}",
        "calls",
        row(&|from, to| calls_glyph(&report.seconds, from, to)).trim_end()
    );
    if let Some(streams) = &report.streams {
        let _ = writeln!(
            out,
            "  {:<LABEL_WIDTH$} {}",
            "stream cuts",
            row(&|from, to| {
                let cuts = streams
                    .cuts
                    .iter()
                    .filter(|cut| cut.at_ms >= from && cut.at_ms < to)
                    .count();
                match cuts {
                    0 => ' ',
                    1..=9 => char::from_digit(cuts as u32, 10).unwrap_or('x'),
                    _ => 'x',
                }
            })
            .trim_end()
        );
    }
    for pod in &report.pods {
        let label = format!("{} {}", if pod.old { "old" } else { "new" }, pod.name);
        let label: String = if label.chars().count() > LABEL_WIDTH {
            let tail: Vec<char> = label.chars().rev().take(LABEL_WIDTH - 1).collect();
            format!("…{}", tail.into_iter().rev().collect::<String>())
        } else {
            label
        };
        let _ = writeln!(
            out,
            "  {label:<LABEL_WIDTH$} {}",
            row(&|from, to| pod_glyph(pod, from, to)).trim_end()
        );
    }
    let _ = writeln!(
        out,
        "  v the event  s settled  . calls answered  1-9 x errors  - starting  = ready  R ready (new)\n  T deleted (SIGTERM)  E out of the endpoints  ~ stopping  K killed at the grace period  | gone"
    );
    out
}

const SVG_WIDTH: f64 = 960.0;
const SVG_LABEL: f64 = 210.0;
const SVG_RIGHT: f64 = 940.0;
const SVG_ROW: f64 = 24.0;
const CALLS_HEIGHT: f64 = 60.0;

/// The timeline as one SVG picture, with what the errors were put down to under it.
pub fn svg(report: &Report) -> String {
    let (start, end) = span(report);
    let x = |at: u64| {
        let at = at.clamp(start, end);
        SVG_LABEL + (SVG_RIGHT - SVG_LABEL) * ((at - start) as f64) / ((end - start) as f64)
    };
    let mut body = String::new();
    let _ = writeln!(
        body,
        r#"<text x="10" y="22" class="title">drill {} in {}: {}</text>"#,
        xml_escape(&report.target),
        xml_escape(&report.namespace),
        xml_escape(&report.event)
    );
    // The calls: a bar per second, its height the calls sent, the errors in red over it.
    let top = 44.0;
    let busiest = report
        .seconds
        .iter()
        .map(|second| second.calls)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let _ = writeln!(
        body,
        r#"<text x="10" y="{:.1}">calls per second (errors in red)</text>"#,
        top + CALLS_HEIGHT / 2.0
    );
    for second in &report.seconds {
        let left = x(second.at_ms);
        let width = (x(second.at_ms + 1000) - left - 1.0).max(1.0);
        let height = CALLS_HEIGHT * second.calls as f64 / busiest;
        let error_height = CALLS_HEIGHT * second.errors as f64 / busiest;
        let _ = writeln!(
            body,
            "<rect x=\"{left:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{height:.1}\" fill=\"#c8d6e5\"><title>{:+.0}s: {} calls, {} errors</title></rect>",
            top + CALLS_HEIGHT - height,
            seconds_from_event(second.at_ms, report),
            second.calls,
            second.errors
        );
        if second.errors > 0 {
            let _ = writeln!(
                body,
                "<rect x=\"{left:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"#ee5253\"/>",
                top + CALLS_HEIGHT - error_height,
                error_height.max(2.0)
            );
        }
    }
    let mut y = top + CALLS_HEIGHT + 16.0;
    if let Some(streams) = &report.streams {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.1}">streams cut ({} held)</text>"#,
            y + 13.0,
            streams.held
        );
        for cut in &streams.cuts {
            let _ = writeln!(
                body,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"3\" height=\"18\" fill=\"#ee5253\"><title>stream {} cut {:+.1}s: {}</title></rect>",
                x(cut.at_ms) - 1.0,
                cut.stream,
                seconds_from_event(cut.at_ms, report),
                xml_escape(&cut.reason)
            );
        }
        y += SVG_ROW;
    }
    for pod in &report.pods {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.1}">{} {}</text>"#,
            y + 13.0,
            if pod.old { "old" } else { "new" },
            xml_escape(&pod.name)
        );
        let from = if pod.old {
            start
        } else {
            pod.seen_ms.unwrap_or(start)
        };
        let to = pod.gone_ms.unwrap_or(end);
        let ready = if pod.old { Some(start) } else { pod.ready_ms };
        let serving_until = pod.deleted_ms.unwrap_or(to).min(to);
        let mut bar = |from: u64, to: u64, colour: &str, what: &str| {
            if to > from {
                let _ = writeln!(
                    body,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{colour}\"><title>{what}</title></rect>",
                    x(from),
                    y + 2.0,
                    (x(to) - x(from)).max(1.0)
                );
            }
        };
        match ready {
            Some(ready) => {
                bar(from, ready.min(serving_until), "#dfe4ea", "starting");
                bar(ready, serving_until, "#10ac84", "ready");
            }
            None => bar(from, serving_until, "#dfe4ea", "starting"),
        }
        if let Some(deleted) = pod.deleted_ms {
            bar(deleted, to, "#f6b93b", "deleted: stopping");
        }
        let mut mark = |at: Option<u64>, colour: &str, what: String| {
            if let Some(at) = at {
                let _ = writeln!(
                    body,
                    "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"3\" height=\"18\" fill=\"{colour}\"><title>{} {:+.1}s</title></rect>",
                    x(at) - 1.0,
                    xml_escape(&what),
                    seconds_from_event(at, report)
                );
            }
        };
        mark(
            pod.left_endpoints_ms,
            "#8854d0",
            "out of the endpoints".into(),
        );
        mark(pod.killing_ms, "#576574", "the kubelet stopping it".into());
        for exit in &pod.exits {
            mark(
                Some(exit.seen_ms),
                if exit.exit_code == 137 {
                    "#c0392b"
                } else {
                    "#576574"
                },
                format!("{} exited {}", exit.container, exit.exit_code),
            );
        }
        y += SVG_ROW;
    }
    // The event and the settling, across every row.
    for (at, what) in [
        (report.moments.event_ms, "the event"),
        (report.moments.settled_ms, "settled"),
    ] {
        let _ = writeln!(
            body,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top:.1}\" y2=\"{y:.1}\" stroke=\"#2f3542\" stroke-dasharray=\"4 3\"><title>{what}</title></line>\n<text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" class=\"axis\">{what}</text>",
            x(at),
            top - 4.0
        );
    }
    // The axis: whole seconds from the event.
    let step = axis_step(end - start);
    let first = (start as i64 - report.moments.event_ms as i64).div_euclid(step) * step + step;
    let mut tick = first;
    while report.moments.event_ms as i64 + tick <= end as i64 {
        let at = (report.moments.event_ms as i64 + tick) as u64;
        let _ = writeln!(
            body,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis\">{:+}s</text>",
            x(at),
            y + 14.0,
            tick / 1000
        );
        tick += step;
    }
    y += 34.0;
    for line in findings_lines(report) {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y:.1}">{}</text>"#,
            xml_escape(&line)
        );
        y += 18.0;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SVG_WIDTH}\" height=\"{:.0}\" viewBox=\"0 0 {SVG_WIDTH} {:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<style>.title {{ font-weight: bold; font-size: 14px; }} .axis {{ fill: #57606f; font-size: 11px; }}</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n{body}</svg>\n",
        y + 6.0,
        y + 6.0
    )
}

/// Axis ticks in milliseconds: about ten over the span, on whole seconds.
fn axis_step(span_ms: u64) -> i64 {
    [1, 2, 5, 10, 15, 30, 60, 120, 300]
        .into_iter()
        .map(|seconds| seconds * 1000)
        .find(|step| span_ms as i64 / step <= 12)
        .unwrap_or(600_000)
}

/// What the errors were put down to, and what `check` predicted.
fn findings_lines(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report
        .attributions
        .iter()
        .map(|group| group.line(report.moments.event_ms))
        .collect();
    if report.unattributed > 0 {
        lines.push(format!(
            "{} errors no evidence explains",
            report.unattributed
        ));
    }
    lines.push(if report.predicted.is_empty() {
        "check predicted nothing for the target".into()
    } else {
        format!("check predicted {}", report.predicted.join(", "))
    });
    lines
}

/// One page: the summary, the phases, the observed picture, and explain's prediction beside.
pub fn html(report: &Report) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>meshlife \
         drill</title>\n<style>body { font-family: sans-serif; margin: 2rem; background: \
         #f5f6fa; } section { background: #fff; border: 1px solid #dfe4ea; border-radius: 6px; \
         padding: 1rem; margin-bottom: 1rem; } table { border-collapse: collapse; } td, th { \
         padding: .2rem .6rem; text-align: right; border-bottom: 1px solid #dfe4ea; } \
         .fail { color: #c0392b; } .pass { color: #218c74; } small { color: #57606f; }</style>\n\
         </head>\n<body>\n<h1>meshlife drill</h1>\n",
    );
    let summary = super::report::summary_line(report);
    let _ = writeln!(
        out,
        "<section>\n<h2 class=\"{}\">{}</h2>\n<p>{} under {}, to {}.</p>",
        if report.passed() { "pass" } else { "fail" },
        xml_escape(&summary),
        xml_escape(&report.event),
        xml_escape(&report.load),
        xml_escape(&report.service)
    );
    out.push_str(
        "<table>\n<tr><th>phase</th><th>seconds</th><th>calls</th><th>errors</th><th>p50 ms</th><th>p99 ms</th><th style=\"text-align:left\">errors by reason</th></tr>\n",
    );
    for phase in &report.phases {
        let reasons: Vec<String> = phase
            .errors_by_reason
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
            phase.phase.label(),
            phase.seconds,
            phase.calls,
            phase.errors,
            phase.p50_ms.map_or("-".into(), |p50| format!("{p50:.1}")),
            phase.p99_ms.map_or("-".into(), |p99| format!("{p99:.1}")),
            xml_escape(&reasons.join(", "))
        );
    }
    out.push_str("</table>\n</section>\n<section>\n<h3>What happened</h3>\n");
    out.push_str(&svg(report));
    out.push_str("</section>\n");
    if let Some(predicted) = &report.prediction {
        out.push_str("<section>\n<h3>What explain predicted for the target's pod spec</h3>\n");
        out.push_str(&explain::svg::draw(predicted));
        out.push_str("</section>\n");
    }
    if !report.notes.is_empty() {
        out.push_str("<section>\n<h3>Notes</h3>\n<ul>\n");
        for note in &report.notes {
            let _ = writeln!(out, "<li><small>{}</small></li>", xml_escape(note));
        }
        out.push_str("</ul>\n</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::observe::ContainerExit;
    use super::super::report::{Attribution, Moments};
    use super::*;

    /// A restart: load ready at 0, the event at 10 s, settled at 40 s, the end at 60 s; the old
    /// pod deleted at the event, out of the endpoints at 11 s, killed at 15 s, gone at 16 s; a
    /// new one seen at 10 s and ready at 14 s; errors in seconds 15 and 16.
    fn report() -> Report {
        let seconds = (0..60)
            .map(|index| Second {
                at_ms: index * 1000,
                calls: 50,
                errors: match index {
                    15 => 3,
                    16 => 12,
                    _ => 0,
                },
            })
            .collect();
        Report {
            target: "deployment/web".into(),
            namespace: "shop".into(),
            event: "a rollout restart".into(),
            service: "Service web port 80".into(),
            rate_per_second: 25,
            load: "25 calls/s on new connections and 25 on reused ones".into(),
            moments: Moments {
                load_ready_ms: 0,
                event_ms: 10_000,
                settled_ms: 40_000,
                end_ms: 60_000,
            },
            phases: Vec::new(),
            pods: vec![
                PodLife {
                    name: "web-old".into(),
                    old: true,
                    deleted_ms: Some(10_000),
                    left_endpoints_ms: Some(11_000),
                    exits: vec![ContainerExit {
                        container: "web".into(),
                        exit_code: 137,
                        seen_ms: 15_000,
                    }],
                    gone_ms: Some(16_000),
                    ..PodLife::default()
                },
                PodLife {
                    name: "web-new".into(),
                    seen_ms: Some(10_000),
                    ready_ms: Some(14_000),
                    ..PodLife::default()
                },
            ],
            attributions: vec![Attribution {
                rule: Some("ML401".into()),
                cause: "web-old killed at its grace period".into(),
                errors: 15,
                from_ms: 15_000,
                until_ms: 16_900,
            }],
            unattributed: 0,
            predicted: vec!["ML401 (error)".into()],
            client: None,
            streams: None,
            max_errors: 0,
            seconds,
            notes: vec!["a note <with> markup".into()],
            prediction: None,
        }
    }

    #[test]
    fn the_text_timeline_puts_each_moment_in_its_column() {
        let text = text(&report());
        let row = |label: &str| -> String {
            let line = text
                .lines()
                .find(|line| line.trim_start().starts_with(label))
                .unwrap_or_else(|| panic!("no row {label}: {text}"));
            line[2 + LABEL_WIDTH + 1..].to_string()
        };
        // A column is one second here: 60 s over 60 columns.
        assert!(
            text.contains("a column is 1.0s, from -10.0s to +50.0s"),
            "{text}"
        );
        assert_eq!(&row("calls")[..18], "...............3x.");
        assert_eq!(&row("old web-old")[..17], "==========TE~~~K|");
        assert_eq!(row("new web-new").trim_start().chars().next(), Some('-'));
        assert_eq!(row("new web-new").chars().nth(14), Some('R'));
        assert_eq!(row("new web-new").chars().nth(15), Some('='));
    }

    #[test]
    fn the_picture_and_the_page_are_well_formed_and_say_what_the_errors_were_put_down_to() {
        let report = report();
        let picture = svg(&report);
        let page = html(&report);
        {
            let mut reader = quick_xml::Reader::from_str(&picture);
            let mut depth = 0i32;
            loop {
                match reader.read_event() {
                    Ok(quick_xml::events::Event::Start(_)) => depth += 1,
                    Ok(quick_xml::events::Event::End(_)) => depth -= 1,
                    Ok(quick_xml::events::Event::Eof) => break,
                    Ok(_) => {}
                    Err(error) => panic!("{error}: {picture}"),
                }
            }
            assert_eq!(depth, 0);
        }
        for document in [&picture, &page] {
            assert!(
                document
                    .contains("15 errors 5.0s-6.9s: web-old killed at its grace period [ML401]"),
                "{document}"
            );
            assert!(document.contains("check predicted ML401 (error)"));
        }
        assert!(page.contains(&picture));
        assert!(page.contains("a note &lt;with&gt; markup"));
    }
}
