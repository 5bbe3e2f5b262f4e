//! The terminal drawing of a timeline: a Gantt of the containers at startup and at shutdown,
//! the events with their times and sources, and each request's fate. ASCII and no colour when
//! stdout is not a terminal, so a CI log or a pull-request comment shows it as drawn.

use std::fmt::Write as _;

use meshlife_policy::timeline::{
    Anchor, Event, Fate, Lane, Outcome, Phase, Role, Source, format_seconds,
};

use super::bars::{
    Cell, Run, anchor_phrase, completion_words, event_when, fate_phrase, lane_label, mode_line,
    outcome_word, rules_at, shutdown_runs, startup_runs,
};
use super::{Explained, PlacedFinding};
use crate::terminal::printable;

pub struct Style {
    pub colour: bool,
    pub unicode: bool,
    pub width: usize,
    /// Each finding's message under the drawing (`check --explain` has them in its report).
    pub finding_messages: bool,
}

impl Style {
    fn glyph(&self, cell: Cell) -> char {
        match (cell, self.unicode) {
            (Cell::Idle, _) => ' ',
            (Cell::Starting, true) => '░',
            (Cell::Running, true) => '█',
            (Cell::PreStop, true) => '▓',
            (Cell::Stopping, true) => '▒',
            (Cell::Starting, false) => '.',
            (Cell::Running, false) => '#',
            (Cell::PreStop, false) => '=',
            (Cell::Stopping, false) => '~',
        }
    }

    fn paint(&self, text: &str, code: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// `lines` with ` <- ML401` (the findings at `anchor`) after the last one, or under it,
    /// indented by `indent`, where the line has no room left.
    fn with_marks(
        &self,
        lines: &str,
        findings: &[PlacedFinding],
        anchor: Anchor,
        indent: usize,
    ) -> String {
        let Some(rules) = rules_at(findings, anchor) else {
            return lines.to_string();
        };
        let arrow = if self.unicode { "◀" } else { "<-" };
        let mark = format!("{arrow} {rules}");
        let painted = self.paint(&mark, "1;31");
        let lines = lines.trim_end_matches('\n');
        let last = lines.rsplit('\n').next().unwrap_or("");
        let last_width = printable_width(last);
        if last_width + 1 + mark.chars().count() <= self.width {
            format!("{lines} {painted}\n")
        } else {
            format!("{lines}\n{}{painted}\n", " ".repeat(indent))
        }
    }

    fn legend(&self) -> String {
        format!(
            "{} starting  {} running  {} preStop  {} draining or stopping",
            self.glyph(Cell::Starting),
            self.glyph(Cell::Running),
            self.glyph(Cell::PreStop),
            self.glyph(Cell::Stopping)
        )
    }
}

/// Every drawing, a blank line between two.
pub fn draw_all(explained: &[Explained], style: &Style) -> String {
    explained
        .iter()
        .map(|one| draw(one, style))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn draw(explained: &Explained, style: &Style) -> String {
    let timeline = &explained.timeline;
    let findings = &explained.findings;
    let mut out = String::new();
    let title = wrap(
        "",
        &printable(&format!(
            "{} ({}, {}) at {}{}",
            explained.object,
            explained.file,
            explained.location,
            explained.pod_spec,
            explained
                .constraint
                .as_ref()
                .map_or(String::new(), |name| format!(", under constraint {name}"))
        )),
        2,
        style.width,
    );
    out.push_str(&style.paint(title.trim_end(), "1"));
    out.push('\n');
    let mesh = wrap("", &printable(&mode_line(timeline)), 2, style.width);
    out.push_str(&style.with_marks(&mesh, findings, Anchor::Mode, 2));
    let label_width = timeline
        .lanes
        .iter()
        .map(|lane| label(lane).chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 30);
    let bar_width = style.width.saturating_sub(label_width + 4).max(20);

    // A margin after the last readiness, so that every bar shows its running part.
    let startup_end = (timeline.startup_end_ms() * 9 / 8).max(1);
    let _ = writeln!(out, "\nStartup");
    out.push_str(&axis(label_width, bar_width, startup_end));
    for lane in timeline.lanes.iter().filter(|lane| lane.startup.is_some()) {
        let cells = cells(
            &startup_runs(timeline, lane, startup_end),
            bar_width,
            startup_end,
        );
        out.push_str(&bar_line(lane, &cells, label_width, style, None));
    }
    let startup_events = keyed_events(explained, Phase::Startup);
    out.push_str(&event_row(
        &startup_events,
        label_width,
        bar_width,
        startup_end,
    ));
    out.push_str(&events(explained, &startup_events, style));
    out.push_str(&fates(explained, Phase::Startup, style));

    let sigkill = timeline.sigkill_ms();
    let shutdown_end = timeline.shutdown_end_ms().max(sigkill).max(1);
    let kill_column = column(sigkill, bar_width, shutdown_end).min(bar_width - 1);
    let _ = writeln!(out, "\nShutdown (t = 0: the pod is deleted)");
    out.push_str(&axis(label_width, bar_width, shutdown_end));
    for lane in timeline
        .lanes
        .iter()
        .filter(|lane| lane.shutdown_exit_ms.is_some())
    {
        let cells = cells(&shutdown_runs(timeline, lane), bar_width, shutdown_end);
        out.push_str(&bar_line(
            lane,
            &cells,
            label_width,
            style,
            Some(kill_column),
        ));
    }
    let shutdown_events = keyed_events(explained, Phase::Shutdown);
    out.push_str(&event_row(
        &shutdown_events,
        label_width,
        bar_width,
        shutdown_end,
    ));
    let kill = format!("SIGKILL at {}", format_seconds(sigkill));
    let marker = if kill_column + 2 + kill.len() <= bar_width {
        format!("{}^ {kill}", " ".repeat(kill_column))
    } else {
        // No room after the caret: the words go before it.
        format!(
            "{}{kill} ^",
            " ".repeat(kill_column.saturating_sub(kill.len() + 1))
        )
    };
    let _ = writeln!(out, "  {:label_width$}  {marker}", "");
    out.push_str(&events(explained, &shutdown_events, style));
    out.push_str(&fates(explained, Phase::Shutdown, style));
    if let Some(completion) = &timeline.completion {
        let words = completion_words(completion.completes);
        let verdict = style.paint(words, if completion.completes { "32" } else { "31" });
        let plain = wrap(
            "\n  When the work is done: ",
            &printable(&format!("{words}: {}", completion.why)),
            4,
            style.width,
        );
        out.push_str(&style.with_marks(
            &plain.replacen(words, &verdict, 1),
            findings,
            Anchor::Completion,
            4,
        ));
    }
    if !findings.is_empty() {
        out.push_str(&findings_list(explained, style));
    }
    let _ = writeln!(out, "\n  {}", style.legend());
    let assumed = &timeline.assumptions;
    out.push_str(&wrap(
        "  ",
        &format!(
            "Assumed (flags of `meshlife explain`): --proxy-ready {}, --init-container {}, \
             --app-ready {}, --endpoint-removal {}, --app-exit {}, --short-request {}.",
            format_seconds(assumed.proxy_ready_ms),
            format_seconds(assumed.init_container_ms),
            format_seconds(assumed.app_ready_ms),
            format_seconds(assumed.endpoint_removal_ms),
            format_seconds(assumed.app_exit_ms),
            format_seconds(assumed.short_request_ms),
        ),
        4,
        style.width,
    ));
    out
}

fn label(lane: &Lane) -> String {
    printable(&lane_label(lane)).into_owned()
}

/// `text` broken at spaces into lines of at most `width` columns, the first starting with
/// `first`, the others indented by `indent` spaces.
pub(super) fn wrap(first: &str, text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut line_length = first.chars().count();
    let mut fresh = true;
    // A word wider than a line (a long field path) is broken where it must be.
    let room = width.saturating_sub(indent).max(10);
    let words = text.split(' ').flat_map(|word| {
        let characters: Vec<char> = word.chars().collect();
        characters
            .chunks(room)
            .map(|chunk| chunk.iter().collect::<String>())
            .collect::<Vec<_>>()
    });
    for word in words {
        let word = word.as_str();
        let length = word.chars().count();
        if !fresh && line_length + 1 + length > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
            line_length = indent;
            fresh = true;
        }
        if !fresh {
            line.push(' ');
            line_length += 1;
        }
        line.push_str(word);
        line_length += length;
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

fn column(ms: u64, width: usize, end: u64) -> usize {
    ((ms as u128 * width as u128) / end.max(1) as u128) as usize
}

/// `0s` under the first column, the end under the last, and round marks between.
fn axis(label_width: usize, width: usize, end: u64) -> String {
    let mut line: Vec<char> = vec![' '; width + 8];
    let last = format_seconds(end);
    let last_start = width.saturating_sub(last.len());
    // A label that would touch the one before it or the last is left out (narrow drawings).
    let mut free_from = 0;
    for ms in super::bars::axis_marks(end) {
        let position = column(ms, width, end);
        let label = format_seconds(ms);
        if position < free_from || position + label.len() + 1 > last_start {
            continue;
        }
        for (offset, character) in label.chars().enumerate() {
            line[position + offset] = character;
        }
        free_from = position + label.len() + 1;
    }
    for (offset, character) in last.chars().enumerate() {
        line[last_start + offset] = character;
    }
    format!(
        "  {:label_width$}  {}\n",
        "",
        line.iter().collect::<String>().trim_end()
    )
}

fn fill(cells: &mut [Cell], from: u64, to: u64, end: u64, cell: Cell) {
    let width = cells.len();
    let first = column(from, width, end).min(width);
    let last = column(to, width, end).min(width).max(first + 1).min(width);
    for slot in &mut cells[first..last] {
        *slot = cell;
    }
}

fn cells(runs: &[Run], width: usize, end: u64) -> Vec<Cell> {
    let mut cells = vec![Cell::Idle; width];
    for run in runs {
        fill(&mut cells, run.from_ms, run.to_ms, end, run.cell);
    }
    cells
}

fn bar_line(
    lane: &Lane,
    cells: &[Cell],
    label_width: usize,
    style: &Style,
    kill_column: Option<usize>,
) -> String {
    let mut bar: String = cells.iter().map(|cell| style.glyph(*cell)).collect();
    if let Some(kill) = kill_column {
        let mut characters: Vec<char> = bar.chars().collect();
        if characters[kill] == ' ' {
            characters[kill] = '|';
        }
        bar = characters.into_iter().collect();
    }
    let bar = bar.trim_end().to_string();
    let bar = if lane.role == Role::Proxy {
        style.paint(&bar, "36")
    } else {
        bar
    };
    let mut name = label(lane);
    if name.chars().count() > label_width {
        let ellipsis = if style.unicode { "…" } else { "." };
        name = name.chars().take(label_width - 1).collect::<String>() + ellipsis;
    }
    format!("  {name:label_width$}  {bar}\n")
}

fn source_phrase(source: &Source) -> String {
    match source {
        Source::Manifest(path) => format!("manifest: {path}"),
        Source::Parameter(name) => format!("parameter {name}"),
        Source::Default(what) => format!("default: {what}"),
        Source::Assumption(name) => format!("assumed: {name}"),
        Source::Derived(how) => how.clone(),
    }
}

/// How many events of a phase have a key of their own (`a`-`z`, `A`-`Z`); later ones share `*`.
const KEYS: usize = 52;

/// The events of `phase` in time order, each with the key that marks it under the bars.
fn keyed_events(explained: &Explained, phase: Phase) -> Vec<(usize, &Event, char)> {
    let mut listed: Vec<(usize, &Event)> = explained
        .timeline
        .events
        .iter()
        .enumerate()
        .filter(|(_, event)| event.phase == phase)
        .collect();
    listed.sort_by_key(|(_, event)| (event.at_ms, event.until_ms));
    let keys = ('a'..='z').chain('A'..='Z').chain(std::iter::repeat('*'));
    listed
        .into_iter()
        .zip(keys)
        .map(|((index, event), key)| (index, event, key))
        .collect()
}

/// The row under the bars with each event's key at its moment. Several events often share a
/// moment: their keys sit side by side, in order, from that column (or ending at the last one).
fn event_row(
    keyed: &[(usize, &Event, char)],
    label_width: usize,
    bar_width: usize,
    end: u64,
) -> String {
    if keyed.len() > bar_width.min(KEYS) {
        return format!(
            "  {:label_width$}  ({} events, more than keys or columns: see the list)\n",
            "events",
            keyed.len()
        );
    }
    let mut columns: Vec<usize> = Vec::with_capacity(keyed.len());
    for (_, event, _) in keyed {
        let wanted = column(event.at_ms, bar_width, end);
        let after_previous = columns.last().map_or(0, |previous| previous + 1);
        columns.push(wanted.max(after_previous));
    }
    let mut limit = bar_width.saturating_sub(1);
    for slot in columns.iter_mut().rev() {
        *slot = (*slot).min(limit);
        limit = slot.saturating_sub(1);
    }
    let mut row = vec![' '; bar_width];
    for ((_, _, key), slot) in keyed.iter().zip(columns) {
        if let Some(cell) = row.get_mut(slot) {
            *cell = *key;
        }
    }
    let row: String = row.into_iter().collect();
    if row.trim().is_empty() {
        return String::new();
    }
    format!("  {:label_width$}  {}\n", "events", row.trim_end())
}

/// The events' list: key, time, what happens and where the figure comes from.
fn events(explained: &Explained, keyed: &[(usize, &Event, char)], style: &Style) -> String {
    let mut out = String::new();
    for (index, event, key) in keyed {
        let line = wrap(
            &format!("  {key} {:>11}  ", event_when(event)),
            &printable(&format!(
                "{} [{}]",
                event.what,
                source_phrase(&event.source)
            )),
            17,
            style.width,
        );
        out.push_str(&style.with_marks(&line, &explained.findings, Anchor::Event(*index), 17));
    }
    out
}

/// The columns `line` takes: its characters, less colour escapes.
fn printable_width(line: &str) -> usize {
    let mut width = 0;
    let mut in_escape = false;
    for character in line.chars() {
        match (in_escape, character) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => width += 1,
        }
    }
    width
}

/// Each finding with its place: `ML401 drain-exceeds-grace (error): MESSAGE` and, under it,
/// `on the timeline: shutdown 30s: ...` (with the message only when the report has none).
fn findings_list(explained: &Explained, style: &Style) -> String {
    let mut out = String::from("\n  Findings (marked on the timeline above)\n");
    for finding in &explained.findings {
        let place = match finding.anchor {
            Some(anchor) => format!(
                "on the timeline: {}",
                anchor_phrase(&explained.timeline, anchor)
            ),
            None => "not on the timeline (the input could not be read)".into(),
        };
        let title = format!(
            "{} {} ({})",
            finding.rule,
            finding.name,
            finding.severity.as_str()
        );
        let text = if style.finding_messages {
            format!("{title}: {}", finding.message())
        } else {
            format!("{title}, {place}")
        };
        let line = wrap("  - ", &printable(&text), 4, style.width);
        out.push_str(&line.replacen(&finding.rule, &style.paint(&finding.rule, "1;31"), 1));
        if style.finding_messages {
            out.push_str(&wrap("    ", &printable(&place), 6, style.width));
        }
    }
    out
}

/// The fates of `phase`, each marked with its findings.
fn fates(explained: &Explained, phase: Phase, style: &Style) -> String {
    let mut out = String::new();
    for (index, fate) in explained.timeline.fates.iter().enumerate() {
        if fate.phase == phase {
            out.push_str(&style.with_marks(
                &fate_line(fate, style),
                &explained.findings,
                Anchor::Fate(index),
                5,
            ));
        }
    }
    out
}

fn fate_line(fate: &Fate, style: &Style) -> String {
    let code = match fate.outcome {
        Outcome::Served => "32",
        Outcome::Refused => "33",
        Outcome::Cut => "31",
    };
    let word = outcome_word(fate.outcome);
    // Wrapped before painting: escape codes have no width.
    let plain = wrap(
        "  -> ",
        &printable(&format!("{}: {}", fate_phrase(fate), fate.why)),
        5,
        style.width,
    );
    plain.replacen(
        &format!(": {word}"),
        &format!(": {}", style.paint(word, code)),
        1,
    )
}
