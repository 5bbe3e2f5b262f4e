//! The drill's report: the calls by phase (before the event, during it, after the rollout),
//! their errors by reason and latency, what the watch saw of each pod, and each error put down
//! to what the evidence shows caused it, with the rule that predicted it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::calls::{Call, ClientSummary, Connection, Line, StreamEnding};
use super::observe::PodLife;

/// When the drill did what, in ms since the epoch.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Moments {
    /// The load pod was ready (its proxy too, where it is meshed): calls before are warm-up.
    pub load_ready_ms: u64,
    pub event_ms: u64,
    /// The rollout (or the replacement of the pod) was complete.
    pub settled_ms: u64,
    pub end_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    WarmUp,
    Before,
    During,
    After,
    /// Sent once the drill had decided to stop: the load pod's own shutdown (its proxy
    /// leaving first) may cut them, so they do not count.
    CoolDown,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::WarmUp => "warm-up",
            Phase::Before => "before",
            Phase::During => "during",
            Phase::After => "after",
            Phase::CoolDown => "cool-down",
        }
    }

    /// Whether its calls count: warm-up and cool-down are the load pod's own start and end.
    pub fn counts(self) -> bool {
        !matches!(self, Phase::WarmUp | Phase::CoolDown)
    }

    fn of(at_ms: u64, moments: &Moments) -> Phase {
        if at_ms < moments.load_ready_ms {
            Phase::WarmUp
        } else if at_ms < moments.event_ms {
            Phase::Before
        } else if at_ms < moments.settled_ms {
            Phase::During
        } else if at_ms < moments.end_ms {
            Phase::After
        } else {
            Phase::CoolDown
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseStats {
    pub phase: Phase,
    pub seconds: f64,
    pub calls: usize,
    pub errors: usize,
    /// Error label → count.
    pub errors_by_reason: BTreeMap<String, usize>,
    /// Calls on new and on reused connections, and their errors.
    pub by_connection: BTreeMap<Connection, (usize, usize)>,
    /// Of the answered calls, in milliseconds.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Answers that said `Connection: close` (a server or its proxy draining).
    pub closed_by_server: usize,
}

/// What caused a group of errors, as far as the evidence shows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attribution {
    /// The rule that predicts it, when `check` gave that finding for the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub cause: String,
    pub errors: usize,
    /// The first and last error's time.
    pub from_ms: u64,
    pub until_ms: u64,
}

impl Attribution {
    /// `54 errors 0.6s-5.2s: web-1 killed at its grace period [ML401]`, times from `zero_ms`.
    pub fn line(&self, zero_ms: u64) -> String {
        format!(
            "{} errors {}-{}: {}{}",
            self.errors,
            seconds_after(self.from_ms, zero_ms),
            seconds_after(self.until_ms, zero_ms),
            self.cause,
            self.rule
                .as_ref()
                .map(|rule| format!(" [{rule}]"))
                .unwrap_or_default()
        )
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub target: String,
    pub namespace: String,
    pub event: String,
    pub service: String,
    pub rate_per_second: u32,
    /// What the load was: `25 calls/s on new connections and 25 on reused ones`.
    pub load: String,
    pub moments: Moments,
    pub phases: Vec<PhaseStats>,
    pub pods: Vec<PodLife>,
    pub attributions: Vec<Attribution>,
    /// Errors after warm-up no evidence explains.
    pub unattributed: usize,
    /// `check`'s findings on the target as it was, by rule id and severity.
    pub predicted: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientSummary>,
    /// The WebSocket or gRPC streams held, where the drill held any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamStats>,
    pub max_errors: usize,
    /// Calls and errors second by second, from the load being ready to its end.
    pub seconds: Vec<Second>,
    pub notes: Vec<String>,
    /// `explain`'s timeline of the target's pod spec, for the HTML page.
    #[serde(skip)]
    pub prediction: Option<crate::commands::explain::Explained>,
}

/// One second of the load.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Second {
    /// Its start, in ms since the epoch.
    pub at_ms: u64,
    pub calls: usize,
    pub errors: usize,
}

/// The calls sent in each second from the load being ready to its end (cool-down aside).
pub fn seconds(calls: &[Call], moments: &Moments) -> Vec<Second> {
    let start = moments.load_ready_ms;
    let count = moments.end_ms.saturating_sub(start).div_ceil(1000) as usize;
    let mut seconds: Vec<Second> = (0..count)
        .map(|index| Second {
            at_ms: start + index as u64 * 1000,
            calls: 0,
            errors: 0,
        })
        .collect();
    for call in calls {
        if call.at_ms < start || call.at_ms >= moments.end_ms {
            continue;
        }
        if let Some(second) = seconds.get_mut(((call.at_ms - start) / 1000) as usize) {
            second.calls += 1;
            second.errors += usize::from(call.failed());
        }
    }
    seconds
}

/// What became of the long-lived streams, once the load was warm.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamStats {
    /// Streams held at once.
    pub held: usize,
    /// Opens, the first ones included.
    pub opened: usize,
    /// Ends with the server's close frame: the client was told, nothing was lost.
    pub closed_by_server: usize,
    pub cuts: Vec<StreamCut>,
    /// From a stream's end to its reopening, of the ends that counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_p50_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_max_ms: Option<u64>,
}

/// A stream that ended without the server's close frame.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamCut {
    pub stream: u32,
    pub at_ms: u64,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl Report {
    /// Errors once the load was warm.
    pub fn errors(&self) -> usize {
        self.phases
            .iter()
            .filter(|phase| phase.phase.counts())
            .map(|phase| phase.errors)
            .sum()
    }

    pub fn calls(&self) -> usize {
        self.phases
            .iter()
            .filter(|phase| phase.phase.counts())
            .map(|phase| phase.calls)
            .sum()
    }

    pub fn streams_cut(&self) -> usize {
        self.streams
            .as_ref()
            .map_or(0, |streams| streams.cuts.len())
    }

    /// Errors and cut streams within `--max-errors`.
    pub fn passed(&self) -> bool {
        self.errors() + self.streams_cut() <= self.max_errors
    }
}

/// The statistics of each phase.
pub fn phases(calls: &[Call], moments: &Moments) -> Vec<PhaseStats> {
    let mut grouped: BTreeMap<Phase, Vec<&Call>> = BTreeMap::new();
    for call in calls {
        grouped
            .entry(Phase::of(call.at_ms, moments))
            .or_default()
            .push(call);
    }
    let span = |phase: Phase| -> f64 {
        let (from, to) = match phase {
            Phase::WarmUp => (
                calls.first().map_or(moments.load_ready_ms, |c| c.at_ms),
                moments.load_ready_ms,
            ),
            Phase::Before => (moments.load_ready_ms, moments.event_ms),
            Phase::During => (moments.event_ms, moments.settled_ms),
            Phase::After => (moments.settled_ms, moments.end_ms),
            Phase::CoolDown => (
                moments.end_ms,
                calls.last().map_or(moments.end_ms, |c| c.at_ms),
            ),
        };
        to.saturating_sub(from) as f64 / 1000.0
    };
    [
        Phase::WarmUp,
        Phase::Before,
        Phase::During,
        Phase::After,
        Phase::CoolDown,
    ]
    .into_iter()
    .filter_map(|phase| {
        let calls = grouped.get(&phase)?;
        let mut stats = PhaseStats {
            phase,
            seconds: span(phase),
            calls: calls.len(),
            errors: 0,
            errors_by_reason: BTreeMap::new(),
            by_connection: BTreeMap::new(),
            p50_ms: None,
            p99_ms: None,
            closed_by_server: 0,
        };
        let mut latencies: Vec<u64> = Vec::new();
        for call in calls {
            let counts = stats.by_connection.entry(call.connection).or_default();
            counts.0 += 1;
            match &call.failure {
                Some(failure) => {
                    stats.errors += 1;
                    counts.1 += 1;
                    *stats.errors_by_reason.entry(failure.label()).or_default() += 1;
                }
                None => latencies.push(call.latency_us),
            }
            stats.closed_by_server += usize::from(call.closed_by_server);
        }
        latencies.sort_unstable();
        stats.p50_ms = percentile(&latencies, 50);
        stats.p99_ms = percentile(&latencies, 99);
        Some(stats)
    })
    .collect()
}

fn percentile(sorted_us: &[u64], percent: usize) -> Option<f64> {
    if sorted_us.is_empty() {
        return None;
    }
    let rank = (sorted_us.len() * percent).div_ceil(100).max(1) - 1;
    Some(sorted_us[rank.min(sorted_us.len() - 1)] as f64 / 1000.0)
}

/// How far an error may lie from the moment that explains it: the watch sees a change a few
/// hundred milliseconds after it happens, and the load pod's clock is another machine's.
const SLACK_MS: u64 = 1_500;
/// How long after a new pod counts as ready its errors are put down to it.
const NEW_POD_WINDOW_MS: u64 = 5_000;

/// What the target's pod template makes possible, for the attribution: a window is a cause only
/// where the spec allows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct TemplateGaps {
    /// An app container declares ports and has no readinessProbe: a new pod counts as ready
    /// before it serves.
    pub serves_without_readiness: bool,
    /// An app container has no preStop hook: its shutdown starts while it is still an
    /// endpoint.
    pub stops_without_pre_stop: bool,
}

/// Puts each error after warm-up down to the first cause whose window holds it: an old pod
/// killed at its grace period (ML401 where predicted, else ML405); a new pod that got traffic
/// as soon as it counted as ready, where the template lets a pod be ready before it serves
/// (ML502); an old pod that stopped serving while still an endpoint, where the template has no
/// preStop delay to cover the endpoint's removal.
pub fn attribute(
    calls: &[Call],
    moments: &Moments,
    pods: &[PodLife],
    predicted: &[String],
    gaps: TemplateGaps,
) -> (Vec<Attribution>, usize) {
    let predicts = |rule: &str| predicted.iter().any(|finding| finding.starts_with(rule));
    let mut groups: BTreeMap<(Option<String>, String), Attribution> = BTreeMap::new();
    let mut unattributed = 0;
    for call in calls.iter().filter(|call| call.failed()) {
        if !Phase::of(call.at_ms, moments).counts() {
            continue;
        }
        // When it failed: a long call sent before the deletion fails at the kill.
        let at = call.at_ms + call.latency_us / 1000;
        let near = |from: u64, until: u64| at + SLACK_MS >= from && at <= until + SLACK_MS;
        let mut cause: Option<(Option<&str>, String)> = None;
        for pod in pods.iter().filter(|pod| pod.old && pod.killed()) {
            let Some(deleted) = pod.deleted_ms else {
                continue;
            };
            let kill = deleted + pod.grace_seconds.unwrap_or(30).max(0) as u64 * 1000;
            if near(kill, kill) {
                let rule = if predicts("ML401") {
                    Some("ML401")
                } else if predicts("ML405") {
                    Some("ML405")
                } else {
                    None
                };
                cause = Some((
                    rule,
                    format!(
                        "{} was killed at its grace period ({} s after its deletion): what it still carried was cut",
                        pod.name,
                        pod.grace_seconds.unwrap_or(30)
                    ),
                ));
                break;
            }
        }
        if cause.is_none() && gaps.serves_without_readiness {
            for pod in pods.iter().filter(|pod| !pod.old) {
                let Some(ready) = pod.ready_ms else { continue };
                if at + SLACK_MS >= ready && at <= ready + NEW_POD_WINDOW_MS {
                    cause = Some((
                        predicts("ML502").then_some("ML502"),
                        format!(
                            "{} got traffic as soon as it counted as ready, before it served (no readinessProbe)",
                            pod.name
                        ),
                    ));
                    break;
                }
            }
        }
        if cause.is_none() && gaps.stops_without_pre_stop {
            for pod in pods.iter().filter(|pod| pod.old) {
                let Some(deleted) = pod.deleted_ms else {
                    continue;
                };
                let left = pod.left_endpoints_ms.or(pod.gone_ms).unwrap_or(deleted);
                if near(deleted, left) {
                    cause = Some((
                        None,
                        format!(
                            "{} stopped serving while still an endpoint: its shutdown began at its deletion, and its removal from the endpoints reached the callers later (no preStop delay covers it)",
                            pod.name
                        ),
                    ));
                    break;
                }
            }
        }
        match cause {
            Some((rule, text)) => {
                let rule = rule.map(str::to_string);
                let group = groups
                    .entry((rule.clone(), text.clone()))
                    .or_insert(Attribution {
                        rule,
                        cause: text,
                        errors: 0,
                        from_ms: at,
                        until_ms: at,
                    });
                group.errors += 1;
                group.from_ms = group.from_ms.min(at);
                group.until_ms = group.until_ms.max(at);
            }
            None => unattributed += 1,
        }
    }
    let mut attributions: Vec<Attribution> = groups.into_values().collect();
    attributions.sort_by_key(|group| group.from_ms);
    (attributions, unattributed)
}

/// The streams' opens and ends, once the load was warm: each cut with the time to reopen its
/// stream and, where an old pod was stopping then, that pod as its cause (ML404 where `check`
/// gives it).
pub fn streams(
    lines: &[Line],
    moments: &Moments,
    pods: &[PodLife],
    predicted: &[String],
) -> Option<StreamStats> {
    let opens: Vec<(u32, u64)> = lines
        .iter()
        .filter_map(|line| match line {
            Line::StreamOpen { stream, at_ms, .. } => Some((*stream, *at_ms)),
            _ => None,
        })
        .collect();
    if opens.is_empty() {
        return None;
    }
    let mut stats = StreamStats {
        held: opens
            .iter()
            .map(|(stream, _)| *stream)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        opened: opens.len(),
        ..StreamStats::default()
    };
    let predicts_ml404 = predicted.iter().any(|finding| finding.starts_with("ML404"));
    let mut reconnects = Vec::new();
    for line in lines {
        let Line::StreamEnd(end) = line else { continue };
        if end.ending == StreamEnding::Stopped || !Phase::of(end.at_ms, moments).counts() {
            continue;
        }
        let reconnect_ms = opens
            .iter()
            .filter(|(stream, at)| *stream == end.stream && *at >= end.at_ms)
            .map(|(_, at)| at - end.at_ms)
            .min();
        reconnects.extend(reconnect_ms);
        let reason = match &end.ending {
            StreamEnding::Closed(_) | StreamEnding::Ended => {
                stats.closed_by_server += 1;
                continue;
            }
            StreamEnding::Cut(reason) => reason.clone(),
            StreamEnding::Stalled => "stalled (nothing arrived)".into(),
            StreamEnding::Stopped => continue,
        };
        // Of the old pods stopping then, the one whose end is nearest: in a rollout two may be
        // stopping at once.
        let stopping = pods
            .iter()
            .filter(|pod| pod.old)
            .filter(|pod| {
                pod.deleted_ms.is_some_and(|deleted| {
                    let gone = pod.gone_ms.unwrap_or(u64::MAX);
                    end.at_ms + SLACK_MS >= deleted && end.at_ms <= gone.saturating_add(SLACK_MS)
                })
            })
            .min_by_key(|pod| {
                let ended = pod
                    .exits
                    .iter()
                    .map(|exit| exit.seen_ms)
                    .min()
                    .or(pod.gone_ms)
                    .unwrap_or(u64::MAX);
                ended.abs_diff(end.at_ms)
            });
        stats.cuts.push(StreamCut {
            stream: end.stream,
            at_ms: end.at_ms,
            reason,
            reconnect_ms,
            cause: stopping.map(|pod| format!("{} stopped without closing its streams", pod.name)),
            rule: stopping
                .filter(|_| predicts_ml404)
                .map(|_| "ML404".to_string()),
        });
    }
    reconnects.sort_unstable();
    stats.reconnect_p50_ms = reconnects
        .get(reconnects.len().saturating_sub(1) / 2)
        .copied();
    stats.reconnect_max_ms = reconnects.last().copied();
    Some(stats)
}

fn seconds_after(at_ms: u64, zero_ms: u64) -> String {
    if at_ms >= zero_ms {
        format!("{:.1}s", (at_ms - zero_ms) as f64 / 1000.0)
    } else {
        format!("-{:.1}s", (zero_ms - at_ms) as f64 / 1000.0)
    }
}

/// The report as text; times count from the event.
pub fn text(report: &Report) -> String {
    let zero = report.moments.event_ms;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "drill {} in {}: {} under {}, to {}",
        report.target, report.namespace, report.event, report.load, report.service
    );
    let _ = writeln!(out, "  (times from the event at 0s)");
    for phase in &report.phases {
        let latency = match (phase.p50_ms, phase.p99_ms) {
            (Some(p50), Some(p99)) => format!("p50 {p50:.1}ms p99 {p99:.1}ms"),
            _ => "no answers".into(),
        };
        let reasons: Vec<String> = phase
            .errors_by_reason
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        let reasons = if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join(", "))
        };
        let closes = if phase.closed_by_server > 0 {
            format!(
                ", {} answers with Connection: close",
                phase.closed_by_server
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<8} {:>6.1}s {:>6} calls {:>5} errors{reasons}, {latency}{closes}",
            phase.phase.label(),
            phase.seconds,
            phase.calls,
            phase.errors
        );
    }
    if !report.seconds.is_empty() {
        out.push_str(&super::draw::text(report));
    }
    for pod in &report.pods {
        let mut parts = Vec::new();
        if let Some(at) = pod.ready_ms.filter(|_| !pod.old) {
            parts.push(format!("ready {}", seconds_after(at, zero)));
        }
        if let Some(at) = pod.deleted_ms {
            parts.push(format!(
                "deleted {} (grace {}s)",
                seconds_after(at, zero),
                pod.grace_seconds.unwrap_or(30)
            ));
        }
        if let Some(at) = pod.killing_ms {
            parts.push(format!("kubelet stopping it {}", seconds_after(at, zero)));
        }
        if let Some(at) = pod.left_endpoints_ms {
            parts.push(format!("left the endpoints {}", seconds_after(at, zero)));
        }
        for exit in &pod.exits {
            parts.push(format!(
                "{} exited {} with {}",
                exit.container,
                seconds_after(exit.seen_ms, zero),
                exit.exit_code
            ));
        }
        if let Some(at) = pod.gone_ms {
            parts.push(format!("gone {}", seconds_after(at, zero)));
        }
        let _ = writeln!(
            out,
            "  {} pod {}: {}",
            if pod.old { "old" } else { "new" },
            pod.name,
            if parts.is_empty() {
                "unchanged".to_string()
            } else {
                parts.join(", ")
            }
        );
    }
    if let Some(streams) = &report.streams {
        let reconnect = match (streams.reconnect_p50_ms, streams.reconnect_max_ms) {
            (Some(p50), Some(max)) => format!(", reopened after {p50}ms (p50), at most {max}ms"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  streams: {} held, {} opens, {} closed by the server, {} cut{reconnect}",
            streams.held,
            streams.opened,
            streams.closed_by_server,
            streams.cuts.len()
        );
        for cut in &streams.cuts {
            let _ = writeln!(
                out,
                "    stream {} cut {}: {}{}{}",
                cut.stream,
                seconds_after(cut.at_ms, zero),
                cut.reason,
                cut.cause
                    .as_ref()
                    .map(|cause| format!(": {cause}"))
                    .unwrap_or_default(),
                cut.rule
                    .as_ref()
                    .map(|rule| format!(" [{rule}]"))
                    .unwrap_or_default()
            );
        }
    }
    if !report.predicted.is_empty() {
        let _ = writeln!(out, "  predicted by check: {}", report.predicted.join(", "));
    }
    for group in &report.attributions {
        let _ = writeln!(out, "  {}", group.line(zero));
    }
    if report.unattributed > 0 {
        let _ = writeln!(
            out,
            "  {} errors no observed change explains",
            report.unattributed
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "{}", summary_line(report));
    out
}

/// The one line a pipeline (and the node stage of CI) prints per drill.
pub fn summary_line(report: &Report) -> String {
    // Errors per rule, in the order each rule was first met.
    let mut per_rule: Vec<(&str, usize)> = Vec::new();
    for group in &report.attributions {
        let Some(rule) = group.rule.as_deref() else {
            continue;
        };
        match per_rule.iter_mut().find(|(seen, _)| *seen == rule) {
            Some((_, count)) => *count += group.errors,
            None => per_rule.push((rule, group.errors)),
        }
    }
    for cut in report.streams.iter().flat_map(|streams| &streams.cuts) {
        let Some(rule) = cut.rule.as_deref() else {
            continue;
        };
        match per_rule.iter_mut().find(|(seen, _)| *seen == rule) {
            Some((_, count)) => *count += 1,
            None => per_rule.push((rule, 1)),
        }
    }
    let rules: Vec<String> = per_rule
        .iter()
        .map(|(rule, count)| format!("{rule} ({count})"))
        .collect();
    format!(
        "drill {} in {}: {} requests, {} errors, {} streams cut, attributed to {}: {}",
        report.target,
        report.namespace,
        report.calls(),
        report.errors(),
        report.streams_cut(),
        if rules.is_empty() {
            "no rule".to_string()
        } else {
            rules.join(", ")
        },
        if report.passed() {
            "PASS".to_string()
        } else {
            format!("FAIL (more than --max-errors {})", report.max_errors)
        }
    )
}

#[cfg(test)]
mod tests {
    use super::super::calls::Failure;
    use super::*;

    fn call(at_ms: u64, failure: Option<Failure>) -> Call {
        Call {
            at_ms,
            connection: Connection::New,
            latency_us: 1_000,
            status: failure.is_none().then_some(200),
            failure,
            closed_by_server: false,
            served_by: None,
        }
    }

    fn moments() -> Moments {
        Moments {
            load_ready_ms: 1_000,
            event_ms: 10_000,
            settled_ms: 40_000,
            end_ms: 50_000,
        }
    }

    #[test]
    fn calls_fall_into_their_phase_and_warm_up_errors_do_not_count() {
        let calls = [
            call(500, Some(Failure::Refused)),
            call(5_000, None),
            call(20_000, Some(Failure::Reset)),
            call(45_000, None),
            call(50_500, Some(Failure::Reset)),
        ];
        let phases = phases(&calls, &moments());
        let counts: Vec<(Phase, usize, usize)> = phases
            .iter()
            .map(|phase| (phase.phase, phase.calls, phase.errors))
            .collect();
        assert_eq!(
            counts,
            [
                (Phase::WarmUp, 1, 1),
                (Phase::Before, 1, 0),
                (Phase::During, 1, 1),
                (Phase::After, 1, 0),
                (Phase::CoolDown, 1, 1)
            ]
        );
    }

    #[test]
    fn errors_go_to_the_pod_whose_window_holds_them() {
        let old = PodLife {
            name: "web-old".into(),
            old: true,
            deleted_ms: Some(12_000),
            grace_seconds: Some(5),
            left_endpoints_ms: Some(13_000),
            exits: vec![super::super::observe::ContainerExit {
                container: "web".into(),
                exit_code: 137,
                seen_ms: 17_100,
            }],
            ..PodLife::default()
        };
        let new = PodLife {
            name: "web-new".into(),
            ready_ms: Some(25_000),
            ..PodLife::default()
        };
        let calls = [
            call(12_400, Some(Failure::Refused)),
            call(17_000, Some(Failure::Reset)),
            call(26_000, Some(Failure::Refused)),
            call(35_000, Some(Failure::Timeout)),
        ];
        let gaps = TemplateGaps {
            serves_without_readiness: true,
            stops_without_pre_stop: true,
        };
        let (groups, unattributed) = attribute(
            &calls,
            &moments(),
            &[old, new],
            &["ML401 (error)".into(), "ML502 (warning)".into()],
            gaps,
        );
        let summary: Vec<(Option<&str>, usize)> = groups
            .iter()
            .map(|group| (group.rule.as_deref(), group.errors))
            .collect();
        assert_eq!(summary, [(None, 1), (Some("ML401"), 1), (Some("ML502"), 1)]);
        assert_eq!(unattributed, 1);
    }

    #[test]
    fn the_summary_line_counts_errors_per_rule_and_says_pass_or_fail() {
        let group = |rule: Option<&str>, errors: usize| Attribution {
            rule: rule.map(str::to_string),
            cause: "cause".into(),
            errors,
            from_ms: 12_000,
            until_ms: 13_000,
        };
        let calls = [call(5_000, None), call(20_000, Some(Failure::Reset))];
        let mut report = Report {
            target: "deployment/web".into(),
            namespace: "shop".into(),
            event: "a rollout restart".into(),
            service: "Service web port 80".into(),
            rate_per_second: 25,
            load: "25 calls/s on new connections and 25 on reused ones".into(),
            moments: moments(),
            phases: phases(&calls, &moments()),
            pods: Vec::new(),
            attributions: vec![
                group(Some("ML401"), 31),
                group(None, 2),
                group(Some("ML401"), 23),
            ],
            unattributed: 0,
            predicted: vec!["ML401 (error)".into()],
            client: None,
            streams: None,
            max_errors: 0,
            seconds: Vec::new(),
            notes: Vec::new(),
            prediction: None,
        };
        assert_eq!(
            summary_line(&report),
            "drill deployment/web in shop: 2 requests, 1 errors, 0 streams cut, attributed to ML401 (54): FAIL (more than --max-errors 0)"
        );
        report.max_errors = 1;
        assert!(summary_line(&report).ends_with(": PASS"));
    }

    #[test]
    fn a_stream_cut_while_an_old_pod_stops_is_put_down_to_it() {
        use super::super::calls::StreamEnd;
        let open = |at_ms| Line::StreamOpen {
            stream: 1,
            at_ms,
            failed_attempts: 0,
        };
        let end = |at_ms, ending| {
            Line::StreamEnd(StreamEnd {
                stream: 1,
                opened_ms: 0,
                at_ms,
                messages: 10,
                ending,
            })
        };
        let lines = [
            open(2_000),
            end(12_500, StreamEnding::Cut("reset".into())),
            open(12_700),
            end(30_000, StreamEnding::Closed(1001)),
            open(30_050),
            end(60_000, StreamEnding::Stopped),
        ];
        let old = PodLife {
            name: "web-old".into(),
            old: true,
            deleted_ms: Some(12_000),
            gone_ms: Some(14_000),
            ..PodLife::default()
        };
        // Another old pod, deleted earlier and gone later, whose app ended well after the cut.
        let other = PodLife {
            name: "web-other".into(),
            old: true,
            deleted_ms: Some(11_000),
            gone_ms: Some(20_000),
            exits: vec![super::super::observe::ContainerExit {
                container: "app".into(),
                exit_code: 0,
                seen_ms: 19_000,
            }],
            ..PodLife::default()
        };
        let streams = streams(&lines, &moments(), &[other, old], &["ML404 (info)".into()]).unwrap();
        assert_eq!(
            (streams.held, streams.opened, streams.closed_by_server),
            (1, 3, 1)
        );
        assert_eq!(streams.cuts.len(), 1);
        let cut = &streams.cuts[0];
        assert_eq!(cut.reconnect_ms, Some(200));
        assert_eq!(cut.rule.as_deref(), Some("ML404"));
        assert_eq!(
            cut.cause.as_deref(),
            Some("web-old stopped without closing its streams")
        );
        assert_eq!(
            (streams.reconnect_p50_ms, streams.reconnect_max_ms),
            (Some(50), Some(200))
        );
    }
}
