//! ML502: the pod turned Ready before an app that serves a port was serving, because the app
//! has no readinessProbe. A container without one counts as ready as soon as it runs
//! (pkg/kubelet/prober: no probe, ready), so the pod is Ready once the proxy is; the Service
//! then sends it requests the app cannot answer yet. The pod's `Ready` condition (its
//! lastTransitionTime, to the second) is set against the app's own first serving line.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, cite, conclusion};
use crate::commands::diagnose::observed::{ContainerTimeline, MomentKind, Observed, Role};

/// ML502: did the pod turn Ready before an unprobed app served?
pub(super) fn ready_before_serving(observed: &Observed) -> Conclusion {
    let rule = &catalogue::MISSING_READINESS;
    if !observed.has_spec {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "without the pod's object, the apps' ports and readiness probes are not known".into(),
        );
        cannot.missing.push(
            "the pod's object (`kubectl get pod POD -o json`), for its apps' ports, \
             readinessProbe and Ready condition"
                .into(),
        );
        return cannot;
    }
    let serving: Vec<&ContainerTimeline> = observed
        .apps()
        .filter(|app| app.ports.iter().any(|port| port.serves()))
        .collect();
    if serving.is_empty() {
        return conclusion(
            rule,
            Status::RuledOut,
            "no app container declares a serving port (none, or only metrics ports)".into(),
        );
    }
    let unprobed: Vec<&ContainerTimeline> = serving
        .iter()
        .copied()
        .filter(|app| app.readiness_probe.is_none())
        .collect();
    if unprobed.is_empty() {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "every app that serves a port has a readinessProbe ({}): the pod is Ready only \
                 once they pass",
                serving
                    .iter()
                    .map(|app| format!(
                        "{}: {}",
                        app.name,
                        app.readiness_probe
                            .as_ref()
                            .and_then(|probe| probe.evidence.text.as_deref())
                            .unwrap_or("")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        ruled_out.evidence.extend(serving.iter().filter_map(|app| {
            app.readiness_probe.as_ref().map(|probe| Cited {
                evidence: probe.evidence.clone(),
                time: None,
                shows: format!("{}'s readinessProbe", app.name),
            })
        }));
        return ruled_out;
    }
    let ready = match (&observed.pod_ready, &observed.pod_ready_changed) {
        (Some(status), Some(changed)) if status == "True" => changed,
        (status, _) => {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                format!(
                    "{} serve{} without a readinessProbe, but the data does not say when the \
                     pod turned Ready ({})",
                    names(&unprobed),
                    if unprobed.len() == 1 { "s" } else { "" },
                    match status.as_deref() {
                        Some("True") => "its Ready condition has no time".to_string(),
                        Some(status) => format!(
                            "its Ready condition is {status} now: when it was True is not kept"
                        ),
                        None => "no Ready condition".to_string(),
                    }
                ),
            );
            cannot.missing.push(
                "the pod's object while it is Ready (`kubectl get pod POD -o json`), for its \
                 Ready condition's lastTransitionTime"
                    .into(),
            );
            return cannot;
        }
    };
    let tolerance = observed.clock_skew_ms;
    let mut early = Vec::new();
    let mut after = Vec::new();
    let mut reasons = Vec::new();
    let mut missing = Vec::new();
    for app in &unprobed {
        let Some(line) = app.moments_of(MomentKind::Serving).next() else {
            reasons.push(if app.log {
                format!(
                    "no line of {}'s log says it serves (a line like `listening on :8080`, \
                     `Started App in 2.1 seconds`, `ready to accept connections` would settle \
                     it)",
                    app.name
                )
            } else {
                format!("no log of {} was given", app.name)
            });
            missing.push(format!(
                "{}'s log with timestamps (`kubectl logs POD -c {} --timestamps`), for its \
                 first line that says it serves",
                app.name, app.name
            ));
            continue;
        };
        if ready.at.before(&line.at, tolerance) {
            early.push((app, line));
        } else if line.at.before(&ready.at, tolerance) || line.at.latest <= ready.at.latest {
            after.push((app, line));
        } else {
            reasons.push(format!(
                "{}'s serving line ({}) and the Ready condition ({}) are too close to order",
                app.name,
                line.at.phrase(),
                ready.at.phrase()
            ));
        }
    }
    let spec_cited = |app: &ContainerTimeline| -> Vec<Cited> {
        let mut cited: Vec<Cited> = app
            .ports
            .iter()
            .filter(|port| port.serves())
            .map(|port| Cited {
                evidence: port.evidence.clone(),
                time: None,
                shows: format!("{} serves port {}", app.name, port.phrase()),
            })
            .collect();
        cited.extend(app.spec.iter().map(|spec| Cited {
            evidence: spec.clone(),
            time: None,
            shows: format!("{} has no readinessProbe", app.name),
        }));
        cited
    };
    if !early.is_empty() {
        let mut confirmed = conclusion(rule, Status::Confirmed, String::new());
        let mut parts = Vec::new();
        confirmed.evidence.push(cite(ready, "the pod turned Ready"));
        for (app, line) in &early {
            let at = line.at.earliest.unwrap_or_default();
            let (least, most) = (
                at - ready.at.latest.unwrap_or_default(),
                at - ready.at.earliest.unwrap_or_default(),
            );
            parts.push(format!(
                "{} serves {} with no readinessProbe: the pod turned Ready {}, {} before {}'s \
                 first serving line ({})",
                app.name,
                app.ports
                    .iter()
                    .filter(|port| port.serves())
                    .map(|port| port.phrase())
                    .collect::<Vec<_>>()
                    .join(", "),
                ready.at.phrase(),
                lead(least, most),
                app.name,
                line.at.phrase()
            ));
            confirmed.evidence.extend(spec_cited(app));
            confirmed
                .evidence
                .push(cite(line, &format!("{}'s first serving line", app.name)));
        }
        // Requests cut or refused in the proxy's log once the pod was Ready, before the app
        // served: the clients' side of the same window.
        if let Some(proxy) = observed.proxy() {
            let until = early
                .iter()
                .filter_map(|(_, line)| line.at.latest)
                .max()
                .unwrap_or_default();
            let failed: Vec<_> = proxy
                .moments
                .iter()
                .filter(|moment| {
                    matches!(
                        moment.kind,
                        MomentKind::ConnectionError | MomentKind::StreamCut
                    ) && moment.at.earliest.is_some_and(|at| {
                        at >= ready.at.earliest.unwrap_or_default() && at <= until
                    })
                })
                .collect();
            if !failed.is_empty() {
                parts.push(format!(
                    "{}'s log holds {} failed request(s) in between",
                    proxy.name,
                    failed.len()
                ));
                confirmed
                    .evidence
                    .extend(failed.iter().take(3).map(|moment| {
                        cite(moment, "a request failed while the app was not serving yet")
                    }));
            }
        }
        confirmed.summary = parts.join("; ");
        confirmed.fix = Some(format!(
            "add a readinessProbe to {}: an httpGet on its health endpoint, or a tcpSocket or \
             exec check for a TCP server",
            names(&early.iter().map(|(app, _)| **app).collect::<Vec<_>>())
        ));
        return confirmed;
    }
    if reasons.is_empty() {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            after
                .iter()
                .map(|(app, line)| {
                    format!(
                        "{} has no readinessProbe, but its first serving line ({}) comes before \
                         the pod turned Ready ({}): it served in time this once",
                        app.name,
                        line.at.phrase(),
                        ready.at.phrase()
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        );
        ruled_out.evidence.push(cite(ready, "the pod turned Ready"));
        for (app, line) in &after {
            ruled_out
                .evidence
                .push(cite(line, &format!("{}'s first serving line", app.name)));
        }
        return ruled_out;
    }
    let mut cannot = conclusion(
        rule,
        Status::CannotTell,
        format!(
            "{} serve{} without a readinessProbe, and the pod turned Ready {}; {}",
            names(&unprobed),
            if unprobed.len() == 1 { "s" } else { "" },
            ready.at.phrase(),
            reasons.join("; ")
        ),
    );
    cannot.evidence.push(cite(ready, "the pod turned Ready"));
    cannot.missing = missing;
    cannot
}

fn names(apps: &[&ContainerTimeline]) -> String {
    apps.iter()
        .filter(|app| app.role == Role::App)
        .map(|app| app.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `4.9 to 5.9 s`: the Ready time is a whole second.
fn lead(least: i64, most: i64) -> String {
    format!(
        "{:.1} to {:.1} s",
        least as f64 / 1_000.0,
        most as f64 / 1_000.0
    )
}
