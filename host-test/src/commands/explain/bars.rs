//! What every renderer of a timeline draws alike: the bars, in milliseconds (which part of each
//! container's life is starting, running, in preStop or stopping; later runs paint over
//! earlier ones), and the words of lanes and fates.

use meshlife_policy::timeline::{
    Anchor, Event, EventKind, Fate, Lane, Outcome, Phase, Request, Role, Timeline, format_seconds,
};

use super::PlacedFinding;

/// What a stretch of a bar shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Idle,
    /// Started, not ready yet.
    Starting,
    Running,
    /// In its preStop hook.
    PreStop,
    /// Draining (a proxy), or shutting down after SIGTERM (an app).
    Stopping,
}

#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub from_ms: u64,
    pub to_ms: u64,
    pub cell: Cell,
}

fn run(from_ms: u64, to_ms: u64, cell: Cell) -> Run {
    Run {
        from_ms,
        to_ms,
        cell,
    }
}

fn event_of(timeline: &Timeline, phase: Phase, kind: EventKind, container: &str) -> Option<u64> {
    timeline
        .events
        .iter()
        .find(|event| {
            event.phase == phase
                && event.kind == kind
                && event.container.as_deref() == Some(container)
        })
        .map(|event| event.at_ms)
}

/// A lane at startup, drawn up to `end` (containers that keep running reach it).
pub fn startup_runs(timeline: &Timeline, lane: &Lane, end: u64) -> Vec<Run> {
    let Some((start, stop)) = lane.startup else {
        return Vec::new();
    };
    if let Some(stop) = stop {
        return vec![run(start, stop, Cell::Running)];
    }
    let ready_kind = match lane.role {
        Role::Proxy => EventKind::ProxyReady,
        _ => EventKind::AppReady,
    };
    let ready = event_of(timeline, Phase::Startup, ready_kind, &lane.container).unwrap_or(start);
    let mut runs = Vec::new();
    if ready > start {
        runs.push(run(start, ready, Cell::Starting));
    }
    runs.push(run(ready, end, Cell::Running));
    runs
}

/// A lane at shutdown, from the deletion (0) to its exit.
pub fn shutdown_runs(timeline: &Timeline, lane: &Lane) -> Vec<Run> {
    let Some(exit) = lane.shutdown_exit_ms else {
        return Vec::new();
    };
    let mut runs = vec![run(0, exit, Cell::Running)];
    let span_of = |kind: EventKind| {
        timeline
            .events
            .iter()
            .find(|event| {
                event.phase == Phase::Shutdown
                    && event.kind == kind
                    && event.container.as_deref() == Some(lane.container.as_str())
            })
            .map(|event| (event.at_ms, event.until_ms.unwrap_or(exit)))
    };
    match lane.role {
        Role::App => {
            let pre_stop_end = span_of(EventKind::PreStop).map_or(0, |(_, until)| until);
            if pre_stop_end > 0 {
                runs.push(run(0, pre_stop_end, Cell::PreStop));
            }
            if exit > pre_stop_end {
                runs.push(run(pre_stop_end, exit, Cell::Stopping));
            }
        }
        Role::Proxy => {
            if let Some((_, until)) = span_of(EventKind::PreStop) {
                runs.push(run(0, until, Cell::PreStop));
            }
            if let Some((from, until)) = span_of(EventKind::DrainStart) {
                let until = until.max(from).min(exit);
                let until = if until > from { until } else { exit };
                if until > from {
                    runs.push(run(from, until, Cell::Stopping));
                }
            }
        }
        Role::Init | Role::MeshInit => {}
    }
    runs
}

/// `istio-init (init, predicted)`: the container and what it is, when that is not plain.
pub fn lane_label(lane: &Lane) -> String {
    let notes: Vec<&str> = [
        matches!(lane.role, Role::Init | Role::MeshInit).then_some("init"),
        lane.predicted.then_some("predicted"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if notes.is_empty() {
        lane.container.clone()
    } else {
        format!("{} ({})", lane.container, notes.join(", "))
    }
}

pub fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Served => "served",
        Outcome::Refused => "refused",
        Outcome::Cut => "cut",
    }
}

/// `a new request during endpoint removal: refused 0s-3s`: the request, its outcome, when.
pub fn fate_phrase(fate: &Fate) -> String {
    format!(
        "{}: {}{}",
        request_phrase(fate.request),
        outcome_word(fate.outcome),
        window_phrase(fate)
    )
}

/// ` at 5s`, ` 0s-3s`, or nothing for a fate without a window.
pub fn window_phrase(fate: &Fate) -> String {
    match fate.window {
        Some((from, to)) if from == to => format!(" at {}", format_seconds(from)),
        Some((from, to)) => format!(" {}-{}", format_seconds(from), format_seconds(to)),
        None => String::new(),
    }
}

pub fn request_phrase(request: Request) -> &'static str {
    match request {
        Request::StartupOutbound => "the app's outbound calls at startup",
        Request::InFlightAtSigterm => "a short request in flight at SIGTERM",
        Request::NewDuringDrain => "a new request during endpoint removal",
        Request::LongLivedStream => "a long-lived stream (gRPC, WebSocket)",
    }
}

/// `5s` or `0s-3s`.
pub fn event_when(event: &Event) -> String {
    match event.until_ms {
        Some(until) if until != event.at_ms => {
            format!("{}-{}", format_seconds(event.at_ms), format_seconds(until))
        }
        _ => format_seconds(event.at_ms),
    }
}

/// `istio, classic (injected)`; `predicted` says the injector will add the proxy.
pub fn mode_line(timeline: &Timeline) -> String {
    match timeline.mesh {
        Some(mesh) if timeline.injected => format!("{mesh}, {} (injected)", timeline.mode),
        Some(mesh) => format!(
            "{mesh}, {} (predicted: the injector adds the proxy)",
            timeline.mode
        ),
        None => timeline.mode.clone(),
    }
}

pub fn completion_words(completes: bool) -> &'static str {
    if completes {
        "completes"
    } else {
        "never completes"
    }
}

/// Where a finding is, in words: `shutdown 30s: istio-proxy killed at the grace period`.
pub fn anchor_phrase(timeline: &Timeline, anchor: Anchor) -> String {
    let phase = |phase: Phase| match phase {
        Phase::Startup => "startup",
        Phase::Shutdown => "shutdown",
    };
    match anchor {
        Anchor::Event(index) => match timeline.events.get(index) {
            Some(event) => format!(
                "{} {}: {}",
                phase(event.phase),
                event_when(event),
                event.what
            ),
            None => "the timeline".into(),
        },
        Anchor::Fate(index) => match timeline.fates.get(index) {
            Some(fate) => format!("{}: {}", phase(fate.phase), fate_phrase(fate)),
            None => "the timeline".into(),
        },
        Anchor::Completion => match &timeline.completion {
            Some(completion) => format!(
                "when the work is done: {}",
                completion_words(completion.completes)
            ),
            None => "the timeline".into(),
        },
        Anchor::Mode => format!("the mesh mode: {}", mode_line(timeline)),
    }
}

/// The rule ids of the findings at `anchor`, in order, once each: `ML401, ML405`.
pub fn rules_at(findings: &[PlacedFinding], anchor: Anchor) -> Option<String> {
    let mut rules: Vec<&str> = Vec::new();
    for finding in findings
        .iter()
        .filter(|finding| finding.anchor == Some(anchor))
    {
        if !rules.contains(&finding.rule.as_str()) {
            rules.push(&finding.rule);
        }
    }
    (!rules.is_empty()).then(|| rules.join(", "))
}

/// The marks of a time axis ending at `end` ms: 0 and every multiple of a round step (1, 2 or
/// 5 times a power of ten, ms) below `end`, so the labels read `1s 2s 3s`
/// rather than `843ms 1.6s 2.5s` (at most four after 0). The end itself is drawn apart: it is an event (the SIGKILL,
/// the last exit), not a round number.
pub fn axis_marks(end: u64) -> Vec<u64> {
    let mut step = 1u64;
    'search: loop {
        for multiplier in [1, 2, 5] {
            let candidate = step * multiplier;
            if end / candidate <= 4 {
                step = candidate;
                break 'search;
            }
        }
        step *= 10;
    }
    // Bounded by end / step, so that a grace period near u64::MAX (saturated from seconds)
    // cannot overflow the multiplication.
    (0..=end / step)
        .map(|index| index * step)
        .filter(|ms| *ms < end || (*ms == 0 && end == 0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_marks_fall_on_round_steps() {
        assert_eq!(axis_marks(3_373), [0, 1_000, 2_000, 3_000]);
        assert_eq!(
            axis_marks(u64::MAX),
            [
                0,
                5_000_000_000_000_000_000,
                10_000_000_000_000_000_000,
                15_000_000_000_000_000_000
            ]
        );
        assert_eq!(axis_marks(30_000), [0, 10_000, 20_000]);
        assert_eq!(axis_marks(35_000), [0, 10_000, 20_000, 30_000]);
        assert_eq!(axis_marks(45_000), [0, 10_000, 20_000, 30_000, 40_000]);
        assert_eq!(axis_marks(60_000), [0, 20_000, 40_000]);
        assert_eq!(axis_marks(800), [0, 200, 400, 600]);
        assert_eq!(axis_marks(0), [0]);
    }
}
