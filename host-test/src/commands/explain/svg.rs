//! One SVG picture of a timeline, for docs and pull-request comments: the startup and shutdown
//! Gantts (the same bars as the terminal's), the SIGKILL line, and each request's fate.
//! Self-contained: no script, no external font or stylesheet.

use std::fmt::Write as _;

use meshlife_policy::timeline::{Anchor, Fate, Lane, Outcome, Phase, format_seconds};

use super::bars::{
    Cell, Run, completion_words, fate_phrase, lane_label, mode_line, rules_at, shutdown_runs,
    startup_runs,
};
use super::{Explained, PlacedFinding};
use crate::report::xml_escape;

const WIDTH: u32 = 960;
const LABEL: u32 = 230;
const BAR_LEFT: u32 = LABEL + 10;
const BAR_RIGHT: u32 = WIDTH - 20;
const ROW: u32 = 22;
const LINE: u32 = 18;

fn colour(cell: Cell) -> &'static str {
    match cell {
        Cell::Idle => "none",
        Cell::Starting => "#c8d6e5",
        Cell::Running => "#2e86de",
        Cell::PreStop => "#f6b93b",
        Cell::Stopping => "#a4b0be",
    }
}

fn x_of(ms: u64, end: u64) -> f64 {
    let span = f64::from(BAR_RIGHT - BAR_LEFT);
    f64::from(BAR_LEFT) + span * (ms as f64) / (end.max(1) as f64)
}

/// `  ◀ ML404` after a line that carries findings.
fn marks(findings: &[PlacedFinding], anchor: Anchor) -> String {
    rules_at(findings, anchor).map_or(String::new(), |rules| format!("  \u{25c0} {rules}"))
}

fn fate_text(fate: &Fate) -> (String, &'static str) {
    let fill = match fate.outcome {
        Outcome::Served => "#218c74",
        Outcome::Refused => "#cc8e35",
        Outcome::Cut => "#b33939",
    };
    (fate_phrase(fate), fill)
}

struct Picture {
    body: String,
    y: u32,
}

impl Picture {
    fn text(&mut self, x: u32, text: &str, attributes: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x}" y="{}" {attributes}>{}</text>"#,
            self.y,
            xml_escape(text)
        );
    }

    fn axis(&mut self, end: u64) {
        let marks = super::bars::axis_marks(end);
        // A round mark too close to the end would print over the end's label.
        let marks = marks
            .iter()
            .copied()
            .filter(|ms| *ms == 0 || end - ms >= end / 10)
            .chain(std::iter::once(end).filter(|end| *end > 0));
        for ms in marks {
            let x = x_of(ms, end);
            let anchor = if ms == 0 {
                "start"
            } else if ms == end {
                "end"
            } else {
                "middle"
            };
            let _ = writeln!(
                self.body,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#dfe4ea"/><text x="{x:.1}" y="{}" text-anchor="{anchor}" class="axis">{}</text>"##,
                self.y + 4,
                self.y + 6,
                self.y,
                format_seconds(ms)
            );
        }
        self.y += ROW - 6;
    }

    /// One bar, with a marker at each `(ms, rules)` of the findings on its events.
    fn lane(&mut self, lane: &Lane, runs: &[Run], end: u64, markers: &[(u64, String)]) {
        self.text(10, &lane_label(lane), "class=\"lane\"");
        for run in runs.iter().filter(|run| run.cell != Cell::Idle) {
            let from = x_of(run.from_ms, end);
            let to = x_of(run.to_ms, end).max(from + 2.0);
            let _ = writeln!(
                self.body,
                r#"<rect class="bar" x="{from:.1}" y="{}" width="{:.1}" height="14" fill="{}"><title>{} {}-{}</title></rect>"#,
                self.y - 11,
                to - from,
                colour(run.cell),
                xml_escape(&lane.container),
                format_seconds(run.from_ms),
                format_seconds(run.to_ms)
            );
        }
        for (ms, rules) in markers {
            let x = x_of(*ms, end);
            let y = self.y - 4;
            // Right of the marker, or left of it where the label would leave the picture.
            let label_width = 7.0 * rules.len() as f64;
            let (label_x, label_anchor) = if x + 7.0 + label_width > f64::from(WIDTH) {
                (x - 7.0, "end")
            } else {
                (x + 7.0, "start")
            };
            let _ = writeln!(
                self.body,
                r##"<path d="M{x:.1} {} l5 5 l-5 5 l-5 -5 z" fill="#b33939" stroke="#ffffff" stroke-width="1"/><text x="{label_x:.1}" y="{}" text-anchor="{label_anchor}" class="mark">{}</text>"##,
                y - 5,
                y + 4,
                xml_escape(rules)
            );
        }
        self.y += ROW;
    }

    fn fates(&mut self, explained: &Explained, phase: Phase) {
        for (index, fate) in explained.timeline.fates.iter().enumerate() {
            if fate.phase != phase {
                continue;
            }
            let (text, fill) = fate_text(fate);
            let text = text + &marks(&explained.findings, Anchor::Fate(index));
            self.text(20, &text, &format!("class=\"fate\" style=\"fill:{fill}\""));
            self.y += LINE;
        }
    }
}

/// The markers of `lane` in `phase`: the findings on its container's events; those on events
/// of no container (SIGTERM, SIGKILL) go on the phase's first lane.
fn markers(explained: &Explained, phase: Phase, lane: &Lane, first: bool) -> Vec<(u64, String)> {
    explained
        .timeline
        .events
        .iter()
        .enumerate()
        .filter(|(_, event)| event.phase == phase)
        .filter(|(_, event)| match &event.container {
            Some(container) => *container == lane.container,
            None => first,
        })
        .filter_map(|(index, event)| {
            rules_at(&explained.findings, Anchor::Event(index)).map(|rules| (event.at_ms, rules))
        })
        .collect()
}

/// The picture, headed by the object and its mesh mode.
pub fn draw(explained: &Explained) -> String {
    picture(explained, true)
}

/// The picture without its heading, for a page that says both beside it.
pub fn draw_unheaded(explained: &Explained) -> String {
    picture(explained, false)
}

fn picture(explained: &Explained, headed: bool) -> String {
    let timeline = &explained.timeline;
    let mut picture = Picture {
        body: String::new(),
        y: 24,
    };
    if headed {
        picture.text(
            10,
            &format!("{} at {}", explained.object, explained.pod_spec),
            "class=\"title\"",
        );
        picture.y += LINE;
        let mode = mode_line(timeline) + &marks(&explained.findings, Anchor::Mode);
        picture.text(10, &mode, "class=\"note\"");
        picture.y += LINE + 8;
    }

    let startup_end = (timeline.startup_end_ms() * 9 / 8).max(1);
    picture.text(10, "Startup", "class=\"phase\"");
    picture.axis(startup_end);
    for (row, lane) in timeline
        .lanes
        .iter()
        .filter(|lane| lane.startup.is_some())
        .enumerate()
    {
        picture.lane(
            lane,
            &startup_runs(timeline, lane, startup_end),
            startup_end,
            &markers(explained, Phase::Startup, lane, row == 0),
        );
    }
    picture.fates(explained, Phase::Startup);
    picture.y += 12;

    let sigkill = timeline.sigkill_ms();
    let shutdown_end = timeline.shutdown_end_ms().max(sigkill).max(1);
    picture.text(
        10,
        "Shutdown (t = 0: the pod is deleted)",
        "class=\"phase\"",
    );
    picture.axis(shutdown_end);
    let lanes_top = picture.y - 12;
    for (row, lane) in timeline
        .lanes
        .iter()
        .filter(|lane| lane.shutdown_exit_ms.is_some())
        .enumerate()
    {
        picture.lane(
            lane,
            &shutdown_runs(timeline, lane),
            shutdown_end,
            &markers(explained, Phase::Shutdown, lane, row == 0),
        );
    }
    // Whole pixels and 2 wide, so that the line is drawn crisp rather than blurred over two.
    let kill = x_of(sigkill, shutdown_end).round();
    let _ = writeln!(
        picture.body,
        r##"<line x1="{kill:.1}" y1="{lanes_top}" x2="{kill:.1}" y2="{}" stroke="#b33939" stroke-width="2" stroke-dasharray="4 3"/><text x="{kill:.1}" y="{}" text-anchor="end" class="kill">SIGKILL at {}</text>"##,
        picture.y - 8,
        picture.y + 4,
        format_seconds(sigkill)
    );
    picture.y += LINE;
    picture.fates(explained, Phase::Shutdown);
    if let Some(completion) = &timeline.completion {
        let word = completion_words(completion.completes);
        let fill = if completion.completes {
            "#218c74"
        } else {
            "#b33939"
        };
        picture.text(
            20,
            &format!(
                "when the work is done: {word}{}",
                marks(&explained.findings, Anchor::Completion)
            ),
            &format!("class=\"fate\" style=\"fill:{fill}\""),
        );
        picture.y += LINE;
    }
    picture.y += 6;
    let mut legend_x = 10;
    for (cell, name) in [
        (Cell::Starting, "starting"),
        (Cell::Running, "running"),
        (Cell::PreStop, "preStop"),
        (Cell::Stopping, "draining or stopping"),
    ] {
        let _ = writeln!(
            picture.body,
            r#"<rect x="{legend_x}" y="{}" width="14" height="10" fill="{}"/><text x="{}" y="{}" class="note">{name}</text>"#,
            picture.y - 9,
            colour(cell),
            legend_x + 18,
            picture.y
        );
        legend_x += 30 + 8 * name.len() as u32;
    }
    let height = picture.y + 14;
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img">
<title>{}</title>
<style>text {{ font-family: sans-serif; font-size: 12px; fill: #2f3542; }} .title {{ font-size: 14px; font-weight: bold; }} .phase {{ font-weight: bold; }} .axis {{ font-size: 10px; fill: #747d8c; }} .note {{ fill: #57606f; }} .kill {{ fill: #b33939; font-size: 11px; }} .mark {{ fill: #b33939; font-size: 11px; font-weight: bold; paint-order: stroke; stroke: #ffffff; stroke-width: 3px; }}</style>
<rect width="100%" height="100%" fill="#ffffff"/>
{}</svg>
"##,
        xml_escape(&format!("meshlife timeline: {}", explained.object)),
        picture.body
    )
}
