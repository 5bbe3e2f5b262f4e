//! ML406: a classic istio-proxy answers SIGTERM by draining its inbound listeners, which Envoy
//! closes after `--drain-time-s` (drainDuration), while pilot-agent keeps it running for
//! terminationDrainDuration: new connections to an app still serving are refused in between.
//! Read from istio-proxy's own log: pilot-agent's `Envoy command: [... --drain-time-s N ...]` at
//! its start, its drain line at SIGTERM, and its exit.

use meshlife_policy::catalogue;

use super::{Conclusion, Status, cite, conclusion, no_proxy, proxy_log_hint};
use crate::commands::diagnose::clock::{self, Millis, SECOND};
use crate::commands::diagnose::observed::{Mesh, Moment, MomentKind, Observed};

/// The listeners count as closing before the proxy's exit only when they do by more than this:
/// Envoy's drain ends within a fraction of a second of its planned time.
const MARGIN: Millis = SECOND;

/// ML406: did Envoy close the inbound listeners (drainDuration) long before the proxy exited,
/// while the app still ran?
pub(super) fn listeners_close_before_app(observed: &Observed) -> Conclusion {
    let rule = &catalogue::LISTENERS_CLOSE_BEFORE_APP;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    if observed.mesh != Some(Mesh::Istio) {
        return conclusion(
            rule,
            Status::RuledOut,
            "not an Istio proxy: the rule is about Istio's drain".into(),
        );
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    if proxy.native_sidecar {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} is a native sidecar: its preStop drains with the listeners kept open, and it \
                 stops only after the app",
                proxy.name
            ),
        );
    }
    if !proxy.log {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!("no log of {}: its drain is not in the data", proxy.name),
        );
        cannot.missing.push(proxy_log_hint(observed));
        return cannot;
    }
    let Some(drain) = proxy
        .moments_of(MomentKind::ProxyDraining)
        .find(|moment| moment.at.point().is_some() && !is_envoy_line(moment))
    else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "{}'s log holds no drain (the pod was not stopped while it was logged?)",
                proxy.name
            ),
        );
        cannot
            .missing
            .push("istio-proxy's log through the pod's shutdown".into());
        return cannot;
    };
    let drain_at = drain.at.point().expect("found with a point");
    if drain_text(drain).contains("handling /drain") {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} drained through its preStop's /drain (a native sidecar's, with the listeners \
                 kept open)",
                proxy.name
            ),
        );
    }
    let Some((drain_time, command)) = proxy
        .moments_of(MomentKind::ProxyStarting)
        .find_map(|moment| drain_time_of(moment).map(|seconds| (seconds, moment)))
    else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "{}'s log does not show its start (pilot-agent's `Envoy command: [...]` line, \
                 with --drain-time-s): when its listeners close is not known",
                proxy.name
            ),
        );
        cannot
            .missing
            .push("istio-proxy's whole log, from its start (`kubectl logs --timestamps`)".into());
        return cannot;
    };
    let closed = drain_at + drain_time;
    let exit_moment = proxy
        .moments_of(MomentKind::ProxyExiting)
        .find(|moment| moment.at.point().is_some_and(|at| at >= drain_at));
    let exit = exit_moment
        .and_then(|moment| moment.at.point())
        .or_else(|| proxy.finished.and_then(|finished| finished.earliest));
    let Some(exit) = exit else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "{} began draining at {}, and the data does not say when it exited",
                proxy.name,
                clock::clock(drain_at)
            ),
        );
        cannot
            .missing
            .push("istio-proxy's log or status after it exited".into());
        return cannot;
    };
    let kept = exit - drain_at;
    let mut verdict = if closed + MARGIN >= exit {
        conclusion(
            rule,
            Status::RuledOut,
            format!(
                "Envoy's drain time ({}, drainDuration) is not shorter than the {} pilot-agent \
                 kept {} draining (from {} to {}): its inbound listeners stayed open until it \
                 exited",
                clock::span(drain_time),
                clock::span(kept),
                proxy.name,
                clock::clock(drain_at),
                clock::clock(exit)
            ),
        )
    } else {
        let app_end = observed
            .apps()
            .filter_map(|app| app.finished.and_then(|finished| finished.earliest))
            .max();
        let app_running = observed.apps().any(|app| app.running);
        match app_end {
            Some(end) if end <= closed => conclusion(
                rule,
                Status::RuledOut,
                format!(
                    "the listeners closed at {} ({} into the drain), but the app had already \
                     ended at {}",
                    clock::clock(closed),
                    clock::span(drain_time),
                    clock::clock(end)
                ),
            ),
            None if !app_running => {
                let mut cannot = conclusion(
                    rule,
                    Status::CannotTell,
                    format!(
                        "the listeners closed at {} and {} ran on until {}, but the data does \
                         not say whether the app still ran then",
                        clock::clock(closed),
                        proxy.name,
                        clock::clock(exit)
                    ),
                );
                cannot
                    .missing
                    .push("the pod's status after its containers ended".into());
                cannot
            }
            _ => {
                let mut confirmed = conclusion(
                    rule,
                    Status::Confirmed,
                    format!(
                        "{} began draining at {}; Envoy, started with --drain-time-s {} \
                         (drainDuration), closed its inbound listeners by {}, while pilot-agent \
                         kept it running {} more, until {}, and the app ran until {}: new \
                         connections to the app were refused for {}",
                        proxy.name,
                        clock::clock(drain_at),
                        drain_time / SECOND,
                        clock::clock(closed),
                        clock::span(exit - closed),
                        clock::clock(exit),
                        app_end.map_or_else(|| "the data was taken".to_string(), clock::clock),
                        clock::span(exit.min(app_end.unwrap_or(exit)) - closed)
                    ),
                );
                confirmed.evidence.extend(
                    observed
                        .apps()
                        .filter_map(|app| app.moments_of(MomentKind::Terminated).next())
                        .map(|moment| cite(moment, "app ended")),
                );
                confirmed.fix = Some(
                    "make drainDuration at least terminationDrainDuration \
                     (`proxy.istio.io/config: '{\"drainDuration\": \"…\"}'`), or run the proxy \
                     as a native sidecar (`sidecar.istio.io/nativeSidecar: \"true\"`)"
                        .into(),
                );
                confirmed
            }
        }
    };
    let mut evidence = vec![
        cite(command, "Envoy's drain time (--drain-time-s)"),
        cite(drain, "pilot-agent began draining"),
    ];
    evidence.extend(exit_moment.map(|moment| cite(moment, "the proxy exited")));
    evidence.append(&mut verdict.evidence);
    verdict.evidence = evidence;
    verdict
}

/// Envoy's own drain line (`caught ENVOY_SIGTERM`): not pilot-agent's start of the drain.
fn is_envoy_line(moment: &Moment) -> bool {
    drain_text(moment).contains("caught ")
}

fn drain_text(moment: &Moment) -> &str {
    moment.evidence.text.as_deref().unwrap_or("")
}

/// `--drain-time-s 4` of pilot-agent's `Envoy command: [...]` line, in milliseconds.
fn drain_time_of(moment: &Moment) -> Option<Millis> {
    let text = moment.evidence.text.as_deref()?;
    let (_, after) = text.split_once("--drain-time-s ")?;
    let seconds: String = after.chars().take_while(char::is_ascii_digit).collect();
    seconds
        .parse::<Millis>()
        .ok()
        .and_then(|seconds| seconds.checked_mul(SECOND))
}
