//! ML101: the app started before its proxy was ready.

use meshlife_policy::catalogue;

use super::{Conclusion, Status, cite, conclusion, no_proxy, proxy_log_hint};
use crate::commands::diagnose::clock::{self, Millis};
use crate::commands::diagnose::observed::{Mesh, Moment, MomentKind, Observed};

/// ML101: did an app start before its proxy was ready?
pub(super) fn startup_race(observed: &Observed) -> Conclusion {
    let rule = &catalogue::STARTUP_NO_HOLD;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let tolerance = observed.clock_skew_ms;
    let mut raced = Vec::new();
    let mut safe = Vec::new();
    let mut unknown = Vec::new();
    for app in observed.apps() {
        match (app.started, proxy.ready) {
            (Some(started), Some(ready)) if ready.before(&started, tolerance) => safe.push(app),
            (Some(started), Some(ready)) if started.before(&ready, tolerance) => {
                raced.push((app, started, ready))
            }
            _ => unknown.push(app),
        }
    }
    let ready_moment = proxy.moments_of(MomentKind::ProxyReady).next().cloned();
    if !raced.is_empty() {
        let mut confirmed = conclusion(rule, Status::Confirmed, String::new());
        let mut parts = Vec::new();
        for (app, started, ready) in &raced {
            let window_end = ready.latest.unwrap_or(Millis::MAX);
            let errors: Vec<&Moment> = app
                .moments_of(MomentKind::ConnectionError)
                .filter(|moment| {
                    moment.at.point().is_some_and(|at| {
                        at.saturating_add(tolerance) >= started.earliest.unwrap_or(Millis::MIN)
                            && at <= window_end.saturating_add(tolerance)
                    })
                })
                .collect();
            parts.push(format!(
                "{} started {}, before {} was ready ({}){}",
                app.name,
                started.phrase(),
                proxy.name,
                ready.phrase(),
                match errors.len() {
                    0 => String::new(),
                    1 => ": 1 connection error in between".into(),
                    count => format!(": {count} connection errors in between"),
                }
            ));
            if let Some(started_moment) = app.moments_of(MomentKind::Started).next() {
                confirmed
                    .evidence
                    .push(cite(started_moment, &format!("{} started", app.name)));
            }
            for error in errors.iter().take(3) {
                confirmed.evidence.push(cite(
                    error,
                    &format!("{} failed to connect before the proxy was ready", app.name),
                ));
            }
            if errors.is_empty() && !app.log {
                confirmed.missing.push(format!(
                    "{}'s log with timestamps, for the connections that failed in between",
                    app.name
                ));
            }
        }
        match &ready_moment {
            Some(moment) => confirmed
                .evidence
                .push(cite(moment, &format!("{} ready", proxy.name))),
            None => confirmed.evidence.extend(
                proxy
                    .moments_of(MomentKind::ProbeFailed)
                    .last()
                    .map(|moment| cite(moment, &format!("{} not ready yet", proxy.name))),
            ),
        }
        confirmed.summary = parts.join("; ");
        confirmed.fix = Some(match observed.mesh {
            Some(Mesh::Linkerd) => "annotate the pod template `config.linkerd.io/proxy-await: \
                                    enabled` (or run Linkerd's proxy as a native sidecar)"
                .into(),
            _ => "annotate the pod template `proxy.istio.io/config: \
                  '{\"holdApplicationUntilProxyStarts\": true}'`, or use native sidecars \
                  (Kubernetes 1.29+, Istio 1.19+)"
                .into(),
        });
        return confirmed;
    }
    if !safe.is_empty() && unknown.is_empty() {
        let ready = proxy.ready.expect("compared above");
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} was ready {}, before {} started: not a startup race",
                proxy.name,
                ready.phrase(),
                safe.iter()
                    .map(|app| format!(
                        "{} ({})",
                        app.name,
                        app.started
                            .map_or_else(String::new, |started| started.phrase())
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        ruled_out.evidence.extend(
            ready_moment
                .iter()
                .map(|moment| cite(moment, &format!("{} ready", proxy.name))),
        );
        for app in &safe {
            if let Some(moment) = app.moments_of(MomentKind::Started).next() {
                ruled_out
                    .evidence
                    .push(cite(moment, &format!("{} started", app.name)));
            }
        }
        return ruled_out;
    }
    let mut cannot = conclusion(rule, Status::CannotTell, String::new());
    let mut reasons = Vec::new();
    if observed.apps().next().is_none() {
        reasons.push("the data names no app container".to_string());
        cannot
            .missing
            .push("the pod (`kubectl get pod POD -o yaml`) or `kubectl describe pod POD`".into());
    }
    if proxy.ready.is_none() && unknown.iter().any(|app| !app.waiting) {
        reasons.push(format!(
            "the data does not say when {} was ready",
            proxy.name
        ));
        cannot.missing.push(proxy_log_hint(observed));
    }
    for app in &unknown {
        match (app.started, proxy.ready) {
            (None, _) if app.waiting => reasons.push(format!(
                "{} has not started ({})",
                app.name,
                app.reason.as_deref().unwrap_or("waiting")
            )),
            (None, _) => {
                reasons.push(format!("the data does not say when {} started", app.name));
                cannot.missing.push(format!(
                    "the pod's status (`kubectl get pod POD -o yaml`) for when {} started",
                    app.name
                ));
            }
            (Some(_), Some(ready)) if ready.latest.is_none() => {
                reasons.push(format!(
                    "the data does not say when {} was ready, only that it was {}",
                    proxy.name,
                    ready.phrase()
                ));
                cannot.missing.push(proxy_log_hint(observed));
            }
            (Some(started), Some(ready)) => {
                reasons.push(format!(
                    "{} started {} and {} was ready {}: too close to order{}",
                    app.name,
                    started.phrase(),
                    proxy.name,
                    ready.phrase(),
                    if tolerance > 0 {
                        format!(" with clocks {} apart", clock::span(tolerance))
                    } else {
                        String::new()
                    }
                ));
                if !app.log {
                    cannot.missing.push(format!(
                        "{}'s log with timestamps (its first line bounds its start closer than \
                         the status's second)",
                        app.name
                    ));
                }
                if ready_moment.is_none() {
                    cannot.missing.push(proxy_log_hint(observed));
                }
            }
            (Some(_), None) => {}
        }
    }
    let errors: usize = observed
        .apps()
        .map(|app| app.moments_of(MomentKind::ConnectionError).count())
        .sum();
    if errors > 0 {
        reasons.push(format!(
            "the apps' logs hold {errors} connection error(s), but they cannot be placed against \
             the proxy's readiness"
        ));
    }
    cannot.summary = reasons.join("; ");
    cannot.missing.dedup();
    cannot
}
