//! ML405: an app's preStop hook outlasted the grace period, and the app was killed.
//!
//! The kubelet's order of stopping a container (k8s.io/kubernetes v1.35.4,
//! pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer): it records `Killing`
//! ("Stopping container X") as it begins, runs the preStop hook for at most the grace period
//! (executePreStopHook), then sends SIGTERM with what is left of the grace period but at least
//! 2 s (minimumGracePeriodInSeconds), then SIGKILL. So an app whose preStop delay reaches the
//! grace period gets SIGTERM at the grace period and is SIGKILLed (exit 137) 2 s later unless
//! it exits within those 2 s. An exec hook still running when its container is killed fails,
//! and the kubelet records `FailedPreStopHook` then.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, cite, conclusion};
use crate::commands::diagnose::clock::SECOND;
use crate::commands::diagnose::observed::{ContainerTimeline, MomentKind, Observed};
use crate::commands::diagnose::pod::SpecPart;

/// The kubelet's least SIGTERM-to-SIGKILL time after a hook that used up the grace period
/// (kuberuntime_container.go minimumGracePeriodInSeconds).
const KUBELET_MINIMUM_SECONDS: i64 = 2;

/// Exit code of a process killed by SIGKILL (128 + 9).
const SIGKILLED: i64 = 137;

/// One app's part of the conclusion.
enum Judged {
    Confirmed { part: String, evidence: Vec<Cited> },
    RuledOut { part: String, evidence: Vec<Cited> },
    CannotTell { part: String, missing: Vec<String> },
}

/// ML405: was an app killed because its preStop hook used up the grace period?
pub(super) fn prestop_past_grace(observed: &Observed) -> Conclusion {
    let rule = &catalogue::PRESTOP_EXCEEDS_GRACE;
    let grace = match (observed.has_spec, observed.grace_seconds) {
        (true, Some(grace)) => grace,
        _ => {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                "without the pod's object, the apps' preStop hooks (and the grace period) are \
                 not known"
                    .into(),
            );
            cannot.missing.push(
                "the pod's object (`kubectl get pod POD -o json`), for its apps' \
                 lifecycle.preStop and terminationGracePeriodSeconds"
                    .into(),
            );
            return cannot;
        }
    };
    let hooked: Vec<&ContainerTimeline> = observed
        .apps()
        .filter(|app| app.pre_stop.is_some())
        .collect();
    if hooked.is_empty() {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "no app container has a preStop hook ({}): the kubelet sends SIGTERM as it \
                 begins to stop them",
                observed
                    .apps()
                    .map(|app| app.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let judged: Vec<Judged> = hooked
        .iter()
        .map(|app| judge(observed, app, grace))
        .collect();
    let status = if judged
        .iter()
        .any(|one| matches!(one, Judged::Confirmed { .. }))
    {
        Status::Confirmed
    } else if judged
        .iter()
        .any(|one| matches!(one, Judged::CannotTell { .. }))
    {
        Status::CannotTell
    } else {
        Status::RuledOut
    };
    let mut concluded = conclusion(rule, status, String::new());
    let mut parts = Vec::new();
    for one in judged {
        match one {
            Judged::Confirmed { part, evidence } => {
                parts.push(part);
                concluded.evidence.extend(evidence);
            }
            Judged::RuledOut { part, evidence } => {
                // Beside a confirmed app, the others' evidence would only crowd it.
                if status != Status::Confirmed {
                    concluded.evidence.extend(evidence);
                }
                parts.push(part);
            }
            Judged::CannotTell { part, missing } => {
                parts.push(part);
                concluded.missing.extend(missing);
            }
        }
    }
    concluded.summary = parts.join("; ");
    concluded.missing.dedup();
    if status == Status::Confirmed {
        concluded.fix = Some(format!(
            "raise terminationGracePeriodSeconds (now {grace}) above the preStop delay, leaving \
             time for the app and the proxy to stop, or shorten the preStop delay below the grace \
             period"
        ));
    }
    concluded
}

fn judge(observed: &Observed, app: &ContainerTimeline, grace: i64) -> Judged {
    let hook = app.pre_stop.as_ref().expect("only apps with a preStop");
    let command = hook.evidence.text.as_deref().unwrap_or("preStop");
    let hook_words = match app.pre_stop_delay {
        Some(delay) => format!("{}'s preStop (`{command}`, {delay} s)", app.name),
        None => format!("{}'s preStop (`{command}`)", app.name),
    };
    let grace_words = match observed.grace_evidence {
        Some(_) => format!("the grace period ({grace} s)"),
        None => format!("the grace period ({grace} s, {})", observed.grace_source),
    };
    let Some(exit_code) = app.exit_code else {
        return Judged::CannotTell {
            part: format!(
                "{} has not stopped yet ({}): whether {hook_words} outlasted {grace_words} shows \
                 only once it has",
                app.name,
                if app.running {
                    "running"
                } else {
                    app.reason
                        .as_deref()
                        .unwrap_or("no terminated state in the data")
                }
            ),
            missing: vec![
                "the pod's object once its containers have stopped (`kubectl get pod POD -o \
                 json`), and its events"
                    .into(),
            ],
        };
    };
    let terminated = app.moments_of(MomentKind::Terminated).next();
    let finished = app
        .finished
        .map_or_else(|| "at a time not given".to_string(), |at| at.phrase());
    let spec_cited = cite_spec(hook, &format!("{}'s preStop hook", app.name));
    let grace_cited = observed.grace_evidence.as_ref().map(|evidence| Cited {
        evidence: evidence.clone(),
        time: None,
        shows: format!("the grace period: {grace} s"),
    });
    let mut evidence: Vec<Cited> = [Some(spec_cited), grace_cited]
        .into_iter()
        .flatten()
        .collect();
    evidence
        .extend(terminated.map(|moment| cite(moment, &format!("{} {}", app.name, moment.what))));
    if exit_code == 0 {
        let within = match app.pre_stop_delay {
            Some(delay) if delay >= grace => format!(
                ": its delay reaches the grace period, but it exited within the kubelet's {} s \
                 after SIGTERM",
                KUBELET_MINIMUM_SECONDS
            ),
            _ => String::new(),
        };
        return Judged::RuledOut {
            part: format!(
                "{hook_words} with {grace_words}: {} exited 0 {finished}, by itself{within}",
                app.name
            ),
            evidence,
        };
    }
    if exit_code != SIGKILLED || app.reason.as_deref() == Some("OOMKilled") {
        return Judged::RuledOut {
            part: format!(
                "{} ended with exit code {exit_code} ({}) {finished}: not the kubelet's SIGKILL \
                 at the end of the grace period",
                app.name,
                app.reason.as_deref().unwrap_or("no reason given")
            ),
            evidence,
        };
    }
    let Some(killing) = app.moments_of(MomentKind::Sigterm).next() else {
        return Judged::CannotTell {
            part: format!(
                "{} was killed (exit 137) {finished}, but no Killing event says when the kubelet \
                 began to stop it",
                app.name
            ),
            missing: vec![
                "the pod's events (`kubectl get events --field-selector \
                 involvedObject.name=POD -o json`), for the Killing of the app"
                    .into(),
            ],
        };
    };
    // An exit 137 before the Killing is an earlier kill (an OOM, a restart), not this stop's.
    if let (Some(began), Some(ended)) = (killing.at.earliest, app.finished.and_then(|at| at.latest))
        && ended < began
    {
        return Judged::CannotTell {
            part: format!(
                "{} was killed (exit 137) {finished}, before the kubelet's Killing event ({}): \
                 not the kill at the end of this stop's grace period",
                app.name,
                killing.at.phrase()
            ),
            missing: vec![
                "the pod's events of the stop that ended the app, and its Killing".into(),
            ],
        };
    }
    let after_killing = match (killing.at.earliest, app.finished.and_then(|at| at.earliest)) {
        (Some(began), Some(ended)) => format!(", {} s after the Killing", (ended - began) / SECOND),
        _ => String::new(),
    };
    let killed = format!(
        "{} was killed: exit 137 {finished}{after_killing}",
        app.name
    );
    let began = format!(
        "the kubelet's Killing event says it began to stop it {}",
        killing.at.phrase()
    );
    evidence.insert(
        2.min(evidence.len()),
        cite(killing, &format!("the kubelet began to stop {}", app.name)),
    );
    match app.pre_stop_delay {
        Some(delay) if delay >= grace => Judged::Confirmed {
            part: format!(
                "{hook_words} is not shorter than {grace_words}: {began}, abandoned the hook at \
                 the grace period and gave the app {} s after SIGTERM; {killed}",
                KUBELET_MINIMUM_SECONDS
            ),
            evidence,
        },
        Some(delay) => Judged::RuledOut {
            part: format!(
                "{hook_words} is shorter than {grace_words}: the app got SIGTERM after it with \
                 {} s left and did not stop in them ({killed}): its own shutdown was too slow, \
                 not its hook",
                (grace - delay).max(KUBELET_MINIMUM_SECONDS)
            ),
            evidence,
        },
        None => {
            // An exec hook that fails at or after the grace period was still running when the
            // container was killed under it: it ran for the whole grace period.
            let grace_end = killing.at.earliest.map(|began| began + grace * SECOND);
            let cut = app.moments_of(MomentKind::PreStopHookFailed).find(|failed| {
                matches!((failed.at.latest, grace_end), (Some(failed), Some(end)) if failed >= end)
            });
            match cut {
                Some(failed) => {
                    evidence.push(cite(
                        failed,
                        "the preStop hook failed as the container was killed under it",
                    ));
                    Judged::Confirmed {
                        part: format!(
                            "{hook_words} takes a time the spec does not say, but it was still \
                             running at the end of {grace_words}: the kubelet recorded \
                             FailedPreStopHook {}, as the container was killed under it; {began}, \
                             abandoned the hook at the grace period and gave the app {} s after \
                             SIGTERM; {killed}",
                            failed.at.phrase(),
                            KUBELET_MINIMUM_SECONDS
                        ),
                        evidence,
                    }
                }
                None => Judged::CannotTell {
                    part: format!(
                        "{killed}, but how long {hook_words} takes cannot be read from the spec \
                         (only a sleep action, `sleep N` or a shell's literal sleeps can), and no \
                         FailedPreStopHook at the grace period's end shows it still running"
                    ),
                    missing: vec![format!(
                        "how long {}'s preStop hook runs (its own log, or a FailedPreStopHook \
                         event at the container's end)",
                        app.name
                    )],
                },
            }
        }
    }
}

fn cite_spec(part: &SpecPart, shows: &str) -> Cited {
    Cited {
        evidence: part.evidence.clone(),
        time: None,
        shows: shows.to_string(),
    }
}
