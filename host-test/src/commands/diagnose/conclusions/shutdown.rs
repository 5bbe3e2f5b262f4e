//! ML401 and ML404: the proxy killed mid-drain at the grace period; streams cut at exit. ML603:
//! the same kill, of a waypoint's proxy, which is the workload.

use meshlife_policy::catalogue::{self, Rule};

use super::{Conclusion, Status, cite, conclusion, no_proxy};
use crate::commands::diagnose::clock::{self, Bound, Millis, SECOND};
use crate::commands::diagnose::observed::{ContainerTimeline, Moment, MomentKind, Observed};
use crate::commands::diagnose::patterns::DrainDetail;

/// ML401's fix, whichever evidence confirms it.
const DRAIN_FIX: &str = "make the drain shorter than the grace period: lower \
                         `terminationDrainDuration` in `proxy.istio.io/config`, or raise \
                         `terminationGracePeriodSeconds` above it";

/// pilot-agent's planned drain, and Envoy's SIGTERM line that came before the plan ended.
struct DrainCut<'a> {
    planned: &'a Moment,
    length: Millis,
    cut: &'a Moment,
    /// How far into the drain Envoy was stopped.
    into: Millis,
}

/// The proxy's drain cut short, by its own log: pilot-agent planned a drain of `length`, and
/// Envoy caught SIGTERM before it ended. pilot-agent ends its planned drain by killing Envoy
/// (SIGKILL, pkg/envoy/proxy.go), never with SIGTERM: a SIGTERM line inside the plan is the
/// drain stopped from outside it. Both lines are of one log, one clock.
fn drain_cut(proxy: &ContainerTimeline) -> Option<DrainCut<'_>> {
    let (planned, length) = proxy
        .moments_of(MomentKind::ProxyDraining)
        .find_map(|moment| match moment.drain {
            Some(DrainDetail::Planned(length)) => Some((moment, length)),
            _ => None,
        })?;
    let start = planned.at.earliest?;
    let cut = proxy
        .moments_of(MomentKind::ProxyDraining)
        .filter(|moment| moment.drain == Some(DrainDetail::EnvoySigterm))
        .find(|moment| moment.at.earliest.is_some_and(|at| at >= start))?;
    let into = cut.at.earliest? - start;
    // A second's margin for the agent's timer and Envoy's own stamp: a drain that ran its plan
    // and a SIGTERM just after it are not a cut.
    (into + SECOND < length).then_some(DrainCut {
        planned,
        length,
        cut,
        into,
    })
}

/// ML401 confirmed by the proxy's drain cut short, unless the pod's own SIGTERM and grace
/// period place the cut well before the grace period ended (then something else stopped it).
fn confirmed_by_cut(
    rule: &'static Rule,
    observed: &Observed,
    proxy: &ContainerTimeline,
    sigterm: Option<&(Bound, Option<Moment>)>,
) -> Option<Conclusion> {
    let cut = drain_cut(proxy)?;
    let grace = observed.grace_seconds.map(|seconds| seconds * SECOND);
    if let (Some(grace), Some(told), Some(cut_at)) = (
        grace,
        sigterm.and_then(|(at, _)| at.earliest),
        cut.cut.at.latest,
    ) && cut_at + 2 * SECOND + observed.clock_skew_ms < told + grace
    {
        return None;
    }
    let mut confirmed = conclusion(
        rule,
        Status::Confirmed,
        format!(
            "{}'s drain, planned for {} {}, was cut {} in: Envoy caught SIGTERM {}, {} before \
             the drain's planned end{}{}",
            proxy.name,
            clock::span(cut.length),
            cut.planned.at.phrase(),
            clock::span(cut.into),
            cut.cut.at.phrase(),
            clock::span(cut.length - cut.into),
            if proxy.exit_code == Some(137) {
                format!(", and {} was killed (exit 137)", proxy.name)
            } else {
                String::new()
            },
            match grace {
                Some(grace) => format!(
                    "; the grace period is {} ({})",
                    clock::span(grace),
                    observed.grace_source
                ),
                None => String::new(),
            }
        ),
    );
    if let Some((_, Some(moment))) = sigterm {
        confirmed.evidence.push(cite(moment, "SIGTERM"));
    }
    confirmed.evidence.push(cite(
        cut.planned,
        &format!("pilot-agent planned a drain of {}", clock::span(cut.length)),
    ));
    confirmed.evidence.push(cite(
        cut.cut,
        &format!(
            "Envoy stopped {} into the drain, {} before its planned end",
            clock::span(cut.into),
            clock::span(cut.length - cut.into)
        ),
    ));
    confirmed.evidence.extend(
        proxy
            .moments_of(MomentKind::ProxyExiting)
            .chain(proxy.moments_of(MomentKind::Terminated))
            .map(|moment| cite(moment, "the proxy ended")),
    );
    confirmed.fix = Some(DRAIN_FIX.into());
    Some(confirmed)
}

/// The moment SIGTERM reached the proxy: its Killing event, else the pod's deletion.
fn sigterm_of(observed: &Observed, proxy: &ContainerTimeline) -> Option<(Bound, Option<Moment>)> {
    if let Some(moment) = proxy.moments_of(MomentKind::Sigterm).next() {
        return Some((moment.at, Some(moment.clone())));
    }
    observed.deleted.map(|deleted| (deleted, None))
}

/// ML603's fix, as the rule gives it.
const WAYPOINT_FIX: &str = "upgrade Istio to 1.28 or later, whose waypoints keep the default \
                            grace period of 30 s, or give the waypoint a \
                            `terminationGracePeriodSeconds` longer than its drain through the \
                            ConfigMap its Gateway names in `spec.infrastructure.parametersRef`";

/// ML401: was the proxy killed at the grace period while it drained? A waypoint's proxy is
/// ML603's to judge.
pub(super) fn killed_mid_drain(observed: &Observed) -> Conclusion {
    let rule = &catalogue::DRAIN_EXCEEDS_GRACE;
    if observed.waypoint == Some(true) {
        return conclusion(
            rule,
            Status::RuledOut,
            "the pod is an Istio waypoint, whose proxy is the workload: ML603 judges its drain"
                .into(),
        );
    }
    proxy_killed_mid_drain(rule, observed)
}

/// ML603: was a waypoint's proxy killed at the grace period while it drained?
pub(super) fn waypoint_killed_mid_drain(observed: &Observed) -> Conclusion {
    let rule = &catalogue::WAYPOINT_SHORT_GRACE;
    match observed.waypoint {
        Some(true) => {
            let mut judged = proxy_killed_mid_drain(rule, observed);
            if judged.fix.is_some() {
                judged.fix = Some(WAYPOINT_FIX.into());
            }
            judged
        }
        Some(false) => conclusion(
            rule,
            Status::RuledOut,
            "the pod is not an Istio waypoint (no gateway-class-name istio-waypoint label, no \
             istio-proxy running `proxy waypoint`)"
                .into(),
        ),
        None => {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                "the data does not say whether the pod is an Istio waypoint".into(),
            );
            cannot
                .missing
                .push("the pod's object (`kubectl get pod -o yaml`): its labels and args".into());
            cannot
        }
    }
}

/// Whether the proxy was killed at the grace period while it drained, for `rule`.
fn proxy_killed_mid_drain(rule: &'static Rule, observed: &Observed) -> Conclusion {
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let draining = proxy.moments_of(MomentKind::ProxyDraining).next().cloned();
    let exiting = proxy.moments_of(MomentKind::ProxyExiting).next().cloned();
    let end = proxy.moments_of(MomentKind::Terminated).next().cloned();
    let sigterm = sigterm_of(observed, proxy);
    if let Some(confirmed) = confirmed_by_cut(rule, observed, proxy, sigterm.as_ref()) {
        return confirmed;
    }
    if !proxy.running && proxy.finished.is_none() && (exiting.is_some() || draining.is_some()) {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "the log shows {} {}, but the data holds neither its exit code nor when it ended",
                proxy.name,
                match (&draining, &exiting) {
                    (Some(draining), Some(exiting)) => format!(
                        "draining {} and exiting {}",
                        draining.at.phrase(),
                        exiting.at.phrase()
                    ),
                    (Some(draining), None) => format!("draining {}", draining.at.phrase()),
                    (None, Some(exiting)) => format!("exiting {}", exiting.at.phrase()),
                    (None, None) => String::new(),
                }
            ),
        );
        cannot.evidence.extend(
            draining
                .iter()
                .map(|moment| cite(moment, "the proxy began to drain")),
        );
        cannot.evidence.extend(
            exiting
                .iter()
                .map(|moment| cite(moment, "the proxy exiting")),
        );
        cannot.missing.push(format!(
            "the pod's status after it stopped (`kubectl get pod -o yaml`: the exit code of {}) \
             and its terminationGracePeriodSeconds",
            proxy.name
        ));
        return cannot;
    }
    if proxy.running || proxy.finished.is_none() {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            if proxy.running {
                format!(
                    "{} had not ended when the data was taken: no shutdown to judge",
                    proxy.name
                )
            } else {
                format!("the data does not say whether or how {} ended", proxy.name)
            },
        );
        cannot.missing.push(format!(
            "the pod's status after it stopped (exit code and time of {}), or `kubectl describe` \
             of the terminated pod",
            proxy.name
        ));
        return cannot;
    }
    let grace = observed.grace_seconds.map(|seconds| seconds * SECOND);
    let out_of_memory = proxy.reason.as_deref() == Some("OOMKilled");
    let killed = proxy.exit_code == Some(137) && !out_of_memory;
    let finished = proxy.finished.expect("checked above");
    // Both are status or event times, to the second: their seconds are compared.
    let since_sigterm = sigterm
        .as_ref()
        .and_then(|(sigterm, _)| Some(finished.earliest? - sigterm.earliest?));
    let at_grace = match (since_sigterm, grace) {
        (Some(since), Some(grace)) => Some(since + 2 * SECOND >= grace),
        _ => None,
    };
    let mut evidence = Vec::new();
    if let Some((_, Some(moment))) = &sigterm {
        evidence.push(cite(moment, "SIGTERM"));
    }
    evidence.extend(
        draining
            .iter()
            .map(|moment| cite(moment, "the proxy began to drain")),
    );
    evidence.extend(end.iter().map(|moment| cite(moment, "the proxy ended")));
    if killed && (at_grace == Some(true) || (draining.is_some() && exiting.is_none())) {
        let mut confirmed = conclusion(
            rule,
            Status::Confirmed,
            format!(
                "{} was killed (exit 137){}{}{}",
                proxy.name,
                match since_sigterm {
                    Some(since) => format!(" {} after SIGTERM", clock::span(since)),
                    None => String::new(),
                },
                match (grace, &observed.grace_source) {
                    (Some(grace), source) =>
                        format!(", at the grace period ({}, {source})", clock::span(grace)),
                    _ => String::new(),
                },
                match (&draining, &exiting) {
                    (Some(_), None) =>
                        ", while draining: its log never says the drain ended".into(),
                    (Some(_), Some(_)) => ", after its drain".into(),
                    (None, _) if proxy.log => ", with no drain line in its log".into(),
                    (None, _) => String::new(),
                }
            ),
        );
        confirmed.evidence = evidence;
        confirmed.fix = Some(DRAIN_FIX.into());
        return confirmed;
    }
    if proxy.exit_code.is_some_and(|code| code != 137) && !out_of_memory {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} exited on its own (exit {}){}",
                proxy.name,
                proxy.exit_code.unwrap_or_default(),
                match (since_sigterm, grace) {
                    (Some(since), Some(grace)) => format!(
                        ", {} after SIGTERM, within the grace period ({})",
                        clock::span(since),
                        clock::span(grace)
                    ),
                    _ => String::new(),
                }
            ),
        );
        ruled_out.evidence = evidence;
        return ruled_out;
    }
    let mut cannot = conclusion(
        rule,
        Status::CannotTell,
        if out_of_memory {
            format!(
                "{} was killed for running out of memory (OOMKilled), not at the grace period",
                proxy.name
            )
        } else if killed {
            format!(
                "{} was killed (exit 137), but the data does not place it at the grace period",
                proxy.name
            )
        } else {
            format!("the data does not say how {} ended", proxy.name)
        },
    );
    cannot.evidence = evidence;
    if sigterm.is_none() {
        cannot
            .missing
            .push("the pod's events (the Killing event: SIGTERM), or its deletionTimestamp".into());
    }
    if grace.is_none() {
        cannot
            .missing
            .push("the pod's terminationGracePeriodSeconds (`kubectl get pod -o yaml`)".into());
    }
    if !proxy.log {
        cannot.missing.push(format!(
            "{}'s log (`kubectl logs POD -c {} --previous --timestamps`): its drain lines",
            proxy.name, proxy.name
        ));
    }
    cannot
}

/// ML404: were streams cut as the pod stopped?
pub(super) fn streams_cut(observed: &Observed) -> Conclusion {
    let rule = &catalogue::LONG_LIVED_STREAMS;
    // A classic proxy begins to drain at SIGTERM: its log shows a shutdown no event may.
    let sigterm = observed
        .proxy()
        .and_then(|proxy| {
            sigterm_of(observed, proxy).map(|(at, _)| at).or_else(|| {
                proxy
                    .moments_of(MomentKind::ProxyDraining)
                    .next()
                    .map(|moment| moment.at)
            })
        })
        .or(observed.deleted)
        .or_else(|| {
            observed
                .containers
                .iter()
                .find_map(|container| container.sigterm)
        });
    let cuts: Vec<(&ContainerTimeline, &Moment)> = observed
        .containers
        .iter()
        .flat_map(|container| {
            container
                .moments_of(MomentKind::StreamCut)
                .map(move |moment| (container, moment))
        })
        .collect();
    let Some(sigterm) = sigterm else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "the data holds no shutdown of the pod (no Killing event, no deletion)".into(),
        );
        if !cuts.is_empty() {
            cannot.summary.push_str(&format!(
                "; the logs hold {} cut stream(s), not tied to an exit",
                cuts.len()
            ));
        }
        cannot
            .missing
            .push("the events and logs of a rollout or deletion of the pod".into());
        return cannot;
    };
    let tolerance = observed.clock_skew_ms;
    let after: Vec<&(&ContainerTimeline, &Moment)> = cuts
        .iter()
        .filter(|(_, moment)| {
            matches!((moment.at.point(), sigterm.earliest), (Some(at), Some(start)) if at + tolerance >= start)
        })
        .collect();
    if !after.is_empty() {
        let mut confirmed = conclusion(
            rule,
            Status::Confirmed,
            format!(
                "{} stream(s) or request(s) cut after SIGTERM ({}), the first {} in {}",
                after.len(),
                sigterm.phrase(),
                after[0].1.at.phrase(),
                after[0].0.name
            ),
        );
        for (container, moment) in after.iter().take(4) {
            confirmed.evidence.push(cite(
                moment,
                &format!("cut, in the log of {}", container.name),
            ));
        }
        confirmed.fix = Some(
            "clients need tested reconnect logic; give the app a preStop that stops accepting \
             streams and lets them finish, and a grace period long enough for it (30 s or more)"
                .into(),
        );
        return confirmed;
    }
    let logged = observed.containers.iter().any(|container| container.log);
    let mut cannot = conclusion(
        rule,
        Status::CannotTell,
        if logged {
            format!(
                "no cut stream in the logs given after SIGTERM ({}); the clients' side would show \
                 the ones this pod's logs do not",
                sigterm.phrase()
            )
        } else {
            format!(
                "the pod stopped ({}), and no log was given",
                sigterm.phrase()
            )
        },
    );
    cannot
        .missing
        .push("the logs of the app and proxy around the shutdown, and of their clients".into());
    cannot
}
