//! ML101: the app started before its proxy was ready; ML102: the same race of an app listed
//! before a classic proxy that has the hold hook; ML103: the same race of a native sidecar with
//! no startup gate (neither a startupProbe nor a postStart hook).
//!
//! The moments decide first: the app's start (its status, its first log line) against the
//! proxy's ready line. Where they are too close to order, the kubelet's own order decides
//! (k8s.io/kubernetes v1.35.4, pkg/kubelet/kuberuntime):
//! - A classic proxy's postStart hook: `startContainer` runs it before it returns
//!   (kuberuntime_container.go:319-337), and `SyncPod` starts the regular containers one after
//!   another in spec order (kuberuntime_manager.go:1704-1707), so an app after the proxy starts
//!   only once the hook has returned; the mesh's hook (`pilot-agent wait`, `linkerd-await`)
//!   returns once the proxy is ready. If the hook fails, the kubelet records
//!   `FailedPostStartHook` ("PostStartHook failed"), stops the proxy (a `Killing` event with
//!   the message `FailedPostStartHook`) and returns an error that the loop does not look at:
//!   it goes on to start the next containers, with the proxy stopped.
//! - A native sidecar (an init container with `restartPolicy: Always`) with a startupProbe:
//!   `computeInitContainerActions` starts the next init container, and counts the pod
//!   initialized for its regular containers, only once the probe has succeeded
//!   (kuberuntime_container.go:1122-1154, kuberuntime_manager.go:1228-1233); a probe failing
//!   past its threshold restarts the sidecar and still holds the rest. So does a postStart
//!   hook: a sidecar whose hook failed was stopped, and is restarted, not passed.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, cite, conclusion, no_proxy, proxy_log_hint};
use crate::commands::diagnose::clock::{self, Bound, Millis, SECOND};
use crate::commands::diagnose::evidence::Evidence;
use crate::commands::diagnose::observed::{ContainerTimeline, Mesh, Moment, MomentKind, Observed};
use crate::commands::diagnose::pod::SpecPart;

/// ML101: did an app start before its proxy was ready?
pub(super) fn startup_race(observed: &Observed) -> Conclusion {
    let rule = &catalogue::STARTUP_NO_HOLD;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let tolerance = observed.clock_skew_ms;
    let mut raced = Vec::new();
    let mut unheld = Vec::new();
    let mut safe = Vec::new();
    let mut held_apps = Vec::new();
    let mut unknown = Vec::new();
    let mut gate_reasons = Vec::new();
    let mut gate_missing = Vec::new();
    for app in observed.apps() {
        let held = held(observed, proxy, app);
        match (app.started, proxy.ready) {
            (Some(started), Some(ready)) if ready.before(&started, tolerance) => safe.push(app),
            (Some(started), Some(ready)) if started.before(&ready, tolerance) => {
                raced.push((app, started, ready, held.failed_hook()))
            }
            // Not started (or not known when): nothing to order.
            (None, _) => unknown.push(app),
            _ => match held {
                Held::Yes { why, evidence } => held_apps.push((app, why, evidence)),
                Held::HookFailed(failure) => unheld.push((app, failure)),
                Held::Unknown { why, missing } => {
                    gate_reasons.push(why);
                    gate_missing.extend(missing);
                    unknown.push(app);
                }
                Held::No => unknown.push(app),
            },
        }
    }
    let ready_moment = proxy.moments_of(MomentKind::ProxyReady).next().cloned();
    if !raced.is_empty() || !unheld.is_empty() {
        let mut confirmed = conclusion(rule, Status::Confirmed, String::new());
        let mut parts = Vec::new();
        for (app, started, ready, failure) in &raced {
            let errors = errors_between(app, started, ready.latest, tolerance);
            parts.push(format!(
                "{} started {}, before {} was ready ({}){}{}",
                app.name,
                started.phrase(),
                proxy.name,
                ready.phrase(),
                errors_phrase(errors.len()),
                failure.map_or_else(String::new, |failure| format!(
                    "; {}'s postStart hook had failed ({}): the kubelet stops the proxy and \
                     starts the containers after it anyway",
                    proxy.name,
                    failure.at.phrase()
                ))
            ));
            cite_start_and_errors(&mut confirmed, app, &errors);
            confirmed.evidence.extend(failure.map(|failure| {
                cite(
                    failure,
                    &format!(
                        "{}'s postStart hook failed: the kubelet stopped it and started the \
                         containers after it anyway",
                        proxy.name
                    ),
                )
            }));
        }
        for (app, failure) in &unheld {
            let started = app.started.unwrap_or_default();
            // Without the proxy's ready moment, the errors after the start cannot be said to
            // come before it.
            let errors = match proxy.ready {
                Some(Bound {
                    latest: Some(latest),
                    ..
                }) => errors_between(app, &started, Some(latest), tolerance),
                _ => Vec::new(),
            };
            parts.push(format!(
                "{}'s postStart hook failed ({}): the kubelet stops the proxy and starts the \
                 containers after it anyway, so {} started {} with no ready proxy{}",
                proxy.name,
                failure.at.phrase(),
                app.name,
                started.phrase(),
                errors_phrase(errors.len())
            ));
            confirmed.evidence.push(cite(
                failure,
                &format!(
                    "{}'s postStart hook failed: the kubelet stopped it and started the \
                     containers after it anyway",
                    proxy.name
                ),
            ));
            cite_start_and_errors(&mut confirmed, app, &errors);
        }
        let hook_failed = !unheld.is_empty() || raced.iter().any(|(.., failure)| failure.is_some());
        match &ready_moment {
            Some(moment) => confirmed
                .evidence
                .push(cite(moment, &format!("{} ready", proxy.name))),
            // Without its ready line, the proxy was ready after its last failed probe, and
            // after it started (again).
            None => confirmed.evidence.extend(
                proxy
                    .moments_of(MomentKind::ProbeFailed)
                    .last()
                    .map(|moment| cite(moment, &format!("{} not ready yet", proxy.name)))
                    .or_else(|| {
                        // The status's start is its current run's: after a failed hook, the
                        // restart.
                        proxy
                            .moments_of(MomentKind::Started)
                            .find(|moment| moment.count.is_none() && hook_failed)
                            .map(|moment| {
                                cite(
                                    moment,
                                    &format!("{} started again: not ready before", proxy.name),
                                )
                            })
                    }),
            ),
        }
        confirmed.summary = parts.join("; ");
        said_once(&mut confirmed.evidence);
        confirmed.fix = Some(match (hook_failed, &proxy.post_start, observed.mesh) {
            (true, Some(hook), mesh) => {
                let (name, command) = (&proxy.name, hook.evidence.text.as_deref().unwrap_or(""));
                let failed = match (waits_for_proxy(mesh, hook), mesh) {
                    (true, Some(Mesh::Istio)) => format!(
                        "the hold is there, but {name} was not ready within its postStart hook \
                         (`{command}`, which gives up after 60 s unless given `--timeoutSeconds`)"
                    ),
                    (true, _) => format!(
                        "the hold is there, but {name} was not ready within its postStart hook \
                         (`{command}`)"
                    ),
                    (false, _) => format!("{name}'s postStart hook (`{command}`) failed"),
                };
                format!(
                    "{failed}: its previous run's log says why (`kubectl logs POD -c {name} \
                     --previous --timestamps`); a native sidecar's startupProbe holds the apps \
                     for as long as it fails, and never starts them anyway"
                )
            }
            // The hold is there, but the apps that raced come before the proxy: ML102's.
            (false, Some(hook), mesh)
                if waits_for_proxy(mesh, hook)
                    && raced.iter().any(|(app, ..)| {
                        // Indexes count within their own list: a native sidecar's is not
                        // spec.containers'.
                        !app.native_sidecar
                            && matches!((app.index, proxy.index), (Some(app), Some(proxy)) if app < proxy)
                    }) =>
            {
                format!(
                    "{} has the hold hook, but the apps listed before it in spec.containers \
                     start without waiting for it: move it to spec.containers[0] (ML102)",
                    proxy.name
                )
            }
            (_, _, Some(Mesh::Linkerd)) => "annotate the pod template \
                                            `config.linkerd.io/proxy-await: enabled` (or run \
                                            Linkerd's proxy as a native sidecar)"
                .into(),
            _ => "annotate the pod template `proxy.istio.io/config: \
                  '{\"holdApplicationUntilProxyStarts\": true}'`, or use native sidecars \
                  (Kubernetes 1.29+, Istio 1.19+)"
                .into(),
        });
        return confirmed;
    }
    if (!safe.is_empty() || !held_apps.is_empty()) && unknown.is_empty() {
        let mut ruled_out = conclusion(rule, Status::RuledOut, String::new());
        let mut parts = Vec::new();
        if !safe.is_empty() {
            let ready = proxy.ready.expect("compared above");
            parts.push(format!(
                "{} was ready {}, before {} started",
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
            ));
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
        }
        for (app, why, evidence) in held_apps {
            let mut part = format!(
                "{why}: {} started {}",
                app.name,
                app.started.unwrap_or_default().phrase()
            );
            ruled_out.evidence.extend(evidence);
            if let Some(moment) = app.moments_of(MomentKind::Started).next() {
                ruled_out
                    .evidence
                    .push(cite(moment, &format!("{} started", app.name)));
            }
            if let (Some(ready), Some(moment)) = (proxy.ready, &ready_moment) {
                part.push_str(&format!(", {} was ready {}", proxy.name, ready.phrase()));
                ruled_out
                    .evidence
                    .push(cite(moment, &format!("{} ready", proxy.name)));
                // The app's first line after the ready line agrees with the hold (one before it
                // by more than the clocks' skew would have ordered the two above).
                if let Some(first) = &app.first_line
                    && let (Some(line), Some(ready)) = (first.at.earliest, ready.earliest)
                    && line >= ready
                {
                    part.push_str(&format!(
                        ", and {}'s first log line ({}) comes after it, as the hold says",
                        app.name,
                        first.at.phrase()
                    ));
                    ruled_out.evidence.push(cite(
                        first,
                        &format!(
                            "{}'s first log line, after {} was ready",
                            app.name, proxy.name
                        ),
                    ));
                }
            }
            parts.push(part);
        }
        ruled_out.summary = format!("{}: not a startup race", parts.join("; "));
        said_once(&mut ruled_out.evidence);
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
    reasons.extend(gate_reasons);
    cannot.missing.extend(gate_missing);
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

/// The app's connection errors from its start to `until` (the latest the proxy was ready).
fn errors_between<'a>(
    app: &'a ContainerTimeline,
    started: &Bound,
    until: Option<Millis>,
    tolerance: Millis,
) -> Vec<&'a Moment> {
    let window_end = until.unwrap_or(Millis::MAX);
    app.moments_of(MomentKind::ConnectionError)
        .filter(|moment| {
            moment.at.point().is_some_and(|at| {
                at.saturating_add(tolerance) >= started.earliest.unwrap_or(Millis::MIN)
                    && at <= window_end.saturating_add(tolerance)
            })
        })
        .collect()
}

fn errors_phrase(count: usize) -> String {
    match count {
        0 => String::new(),
        1 => ": 1 connection error in between".into(),
        count => format!(": {count} connection errors in between"),
    }
}

/// The app's start and (the first three of) its connection errors, as evidence of a race.
fn cite_start_and_errors(confirmed: &mut Conclusion, app: &ContainerTimeline, errors: &[&Moment]) {
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

/// What the kubelet's order of starting containers says of one app's start.
enum Held<'a> {
    /// The kubelet started it only once the proxy was ready: why, and the evidence.
    Yes { why: String, evidence: Vec<Cited> },
    /// The proxy's postStart hook failed before it started: the kubelet started it anyway.
    HookFailed(&'a Moment),
    /// The proxy's spec holds it, but the data does not say whether the hold held: why, and
    /// what would tell.
    Unknown {
        why: String,
        missing: Option<String>,
    },
    /// Nothing in the data holds it.
    No,
}

impl<'a> Held<'a> {
    fn failed_hook(&self) -> Option<&'a Moment> {
        match self {
            Held::HookFailed(failure) => Some(failure),
            _ => None,
        }
    }
}

/// Whether the kubelet held `app`'s start until `proxy` was ready, from the proxy's spec (its
/// postStart hook, its startupProbe, its place) and events (a failed hook, its starts).
fn held<'a>(
    observed: &'a Observed,
    proxy: &'a ContainerTimeline,
    app: &'a ContainerTimeline,
) -> Held<'a> {
    let wait_hook = proxy
        .post_start
        .as_ref()
        .filter(|hook| waits_for_proxy(observed.mesh, hook));
    if proxy.native_sidecar {
        let gate = match (&proxy.startup_probe, wait_hook) {
            (Some(probe), _) => ("startupProbe", probe, "succeeded"),
            (None, Some(hook)) => ("postStart hook", hook, "returned"),
            (None, None) => return Held::No,
        };
        let (what, part, done) = gate;
        if app.restarts > 0 {
            return Held::Unknown {
                why: format!(
                    "{} restarted ({} times): the start seen is not its first, the one {}'s {what} \
                     held",
                    app.name, app.restarts, proxy.name
                ),
                missing: None,
            };
        }
        return Held::Yes {
            why: format!(
                "{} is a native sidecar with a {what} ({}): the kubelet starts the app \
                 containers only once it has {done}",
                proxy.name,
                part.evidence.text.as_deref().unwrap_or("")
            ),
            evidence: vec![cite_spec(
                part,
                &format!(
                    "{}'s {what}: the containers after it start only once it has {done}",
                    proxy.name
                ),
            )],
        };
    }
    let Some(hook) = &proxy.post_start else {
        return Held::No;
    };
    // The containers are listed in spec order: the hook holds only those after the proxy.
    let position = |name: &str| {
        observed
            .containers
            .iter()
            .position(|container| container.name == name)
    };
    if position(&app.name) < position(&proxy.name) {
        return Held::No;
    }
    let proxy_started = proxy
        .moments_of(MomentKind::Started)
        .find(|moment| moment.count.is_some());
    let failures: Vec<&Moment> = proxy.moments_of(MomentKind::PostStartHookFailed).collect();
    // Any failed hook lets the app through, whatever the hook runs.
    if let Some(start) = first_start(app) {
        let restarted_after = |failure: &Moment| {
            // The proxy started again after the failure and before the app: that run's hook
            // may have held it. Events and status share the kubelet's clock, whole seconds.
            proxy_started.is_some_and(|started| {
                started.count.unwrap_or(1) > 1
                    && matches!(
                        (last_occurrence(started), failure.at.earliest, start.earliest),
                        (Some(again), Some(failed), Some(app)) if failed < again && again < app
                    )
            })
        };
        if let Some(failure) = failures.iter().find(|failure| {
            matches!((failure.at.earliest, start.latest), (Some(failed), Some(app)) if failed <= app)
                && !restarted_after(failure)
        }) {
            return Held::HookFailed(failure);
        }
    }
    if wait_hook.is_none() {
        return Held::No;
    }
    let command = hook.evidence.text.as_deref().unwrap_or("postStart");
    let holds = format!(
        "{}'s postStart hook (`{command}`) holds {} until the proxy is ready",
        proxy.name, app.name
    );
    if app.restarts > 0 {
        return Held::Unknown {
            why: format!(
                "{holds}, but {} restarted ({} times): the start seen is not the one it held",
                app.name, app.restarts
            ),
            missing: None,
        };
    }
    match (proxy_started, failures.first()) {
        // The kubelet records Started just before it runs the hook (kuberuntime_container.go:298,
        // :320): a FailedPostStartHook of that run comes after it, and events pass out of the
        // API server in order (their TTL counts from their last write). A proxy started once,
        // with that Started event in the data, would show its hook's failure.
        (Some(started), None) if started.count == Some(1) => Held::Yes {
            why: format!(
                "{holds}, and it did not fail ({} started once, with no FailedPostStartHook \
                 event)",
                proxy.name
            ),
            evidence: vec![
                cite_spec(
                    hook,
                    &format!(
                        "{}'s postStart hook: the containers after it start only once it has \
                         returned",
                        proxy.name
                    ),
                ),
                cite(
                    started,
                    &format!(
                        "{} started once, and no FailedPostStartHook event follows: its hook \
                         returned",
                        proxy.name
                    ),
                ),
            ],
        },
        (Some(_), Some(failure)) => Held::Unknown {
            why: format!(
                "{holds}; it failed ({}), but the data does not show that failure letting {} \
                 through (it is not before {}'s start, or {} started again in between)",
                failure.at.phrase(),
                app.name,
                app.name,
                proxy.name
            ),
            missing: None,
        },
        (Some(started), None) => Held::Unknown {
            why: format!(
                "{holds}, but {} started {} times: whether the hook of its first run failed \
                 (FailedPostStartHook) may have passed out of the events",
                proxy.name,
                started.count.unwrap_or(0)
            ),
            missing: None,
        },
        (None, _) => Held::Unknown {
            why: format!(
                "{holds}, but the data holds no event of {}'s start, so whether the hook failed \
                 (FailedPostStartHook) is not known",
                proxy.name
            ),
            missing: Some(format!(
                "the pod's events (`kubectl get events --field-selector involvedObject.name=POD \
                 -o json`), for whether {}'s postStart hook failed (FailedPostStartHook)",
                proxy.name
            )),
        },
    }
}

/// The mesh's own wait until its proxy is ready, as its injector writes the hook: Istio's
/// `pilot-agent wait` (holdApplicationUntilProxyStarts; it exits non-zero when its timeout
/// passes first, pilot/cmd/pilot-agent/app/wait.go), Linkerd's `linkerd-await` (proxy-await;
/// `--timeout` makes it fail likewise).
fn waits_for_proxy(mesh: Option<Mesh>, hook: &SpecPart) -> bool {
    let Some(command) = &hook.command else {
        return false;
    };
    match mesh {
        Some(Mesh::Istio) => command.contains("pilot-agent") && command.contains("wait"),
        Some(Mesh::Linkerd) => command.contains("linkerd-await"),
        None => false,
    }
}

/// When the app first started: its status's start, unless it restarted since; then its
/// `Started` event's first occurrence.
fn first_start(app: &ContainerTimeline) -> Option<Bound> {
    if app.restarts == 0 {
        return app.started;
    }
    app.moments_of(MomentKind::Started)
        .find(|moment| moment.count.is_some())
        .and_then(|event| event.at.earliest)
        .map(|first| Bound::at(first, SECOND))
}

/// An event's last occurrence: its moment runs to the end of that second.
fn last_occurrence(event: &Moment) -> Option<Millis> {
    event.at.latest.map(|latest| latest - (SECOND - 1))
}

/// Several apps held (or let through) by one hook rest on the same hook, event and ready
/// line: each is cited once.
fn said_once(evidence: &mut Vec<Cited>) {
    let mut seen = Vec::new();
    evidence.retain(|cited| {
        let key = (cited.evidence.place(), cited.shows.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
}

fn cite_spec(part: &SpecPart, shows: &str) -> Cited {
    Cited {
        evidence: part.evidence.clone(),
        time: None,
        shows: shows.to_string(),
    }
}

/// ML103: did an app start before its native proxy was ready, the proxy having neither a
/// startupProbe nor a postStart hook to hold it? The native flavour of ML101's race: without
/// either, the kubelet counts the sidecar started as soon as it runs, and starts the app
/// containers at once. The spec says whether the gate is there; ML101's ordering of the moments
/// says whether the race bit this time.
pub(super) fn native_without_gate(observed: &Observed) -> Conclusion {
    let rule = &catalogue::NATIVE_SIDECAR_NO_STARTUP_GATE;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    if !proxy.native_sidecar {
        if observed.containers_complete {
            let mut ruled_out = conclusion(
                rule,
                Status::RuledOut,
                format!(
                    "{} is a classic proxy (in the pod's containers), not a native sidecar: ML101 \
                     judges the classic race",
                    proxy.name
                ),
            );
            ruled_out
                .evidence
                .extend(proxy.spec.iter().map(|spec| Cited {
                    evidence: spec.clone(),
                    time: None,
                    shows: format!("{} listed in spec.containers", proxy.name),
                }));
            return ruled_out;
        }
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "the data does not say whether {} is a native sidecar (an init container with \
                 restartPolicy: Always)",
                proxy.name
            ),
        );
        cannot
            .missing
            .push("the pod's object (`kubectl get pod POD -o json`), for its spec".into());
        return cannot;
    }
    if !observed.has_spec {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "{} is a native sidecar, but without the pod's object whether it has a \
                 startupProbe or a postStart hook is not known (describe text does not show them \
                 all)",
                proxy.name
            ),
        );
        cannot
            .missing
            .push("the pod's object (`kubectl get pod POD -o json`), for its spec".into());
        return cannot;
    }
    let race = startup_race(observed);
    let gate = proxy
        .startup_probe
        .as_ref()
        .map(|probe| ("startupProbe", probe, "succeeded"))
        .or_else(|| {
            proxy
                .post_start
                .as_ref()
                .map(|hook| ("postStart hook", hook, "returned"))
        });
    if let Some((what, part, done)) = gate {
        let gated = format!(
            "{} is a native sidecar with a {what} ({}): the kubelet starts the app containers \
             only once it has {done}",
            proxy.name,
            part.evidence.text.as_deref().unwrap_or("")
        );
        let mut ruled_out = conclusion(rule, Status::RuledOut, gated);
        ruled_out.evidence.push(cite_spec(
            part,
            &format!(
                "{}'s {what}: the containers after it start only once it has {done}",
                proxy.name
            ),
        ));
        // The gate is there, so this rule's bug (no gate) is not; an app seen starting before
        // the proxy's ready line anyway is not the gate missing. pilot-agent writes its ready
        // line at the first passing probe it serves, which may come after Envoy was ready, and
        // a restarted app's start is not the one the gate held. ML101 weighs the moments.
        if race.status == Status::Confirmed {
            ruled_out.summary.push_str(&format!(
                "; yet the moments show an app starting before {} was ready ({}): not this \
                 rule's missing gate (ML101 judges the race seen; a ready line written late, or a \
                 {what} that checks something other than the proxy's readiness, would explain \
                 it)",
                proxy.name, race.summary
            ));
            ruled_out.evidence.extend(race.evidence);
        }
        return ruled_out;
    }
    let ungated = format!(
        "{} is a native sidecar with neither a startupProbe nor a postStart hook: the kubelet \
         counts it started as soon as it runs and starts the app containers at once",
        proxy.name
    );
    let spec_cited = proxy.spec.iter().map(|spec| Cited {
        evidence: Evidence {
            text: Some("restartPolicy: Always, no startupProbe, no lifecycle.postStart".into()),
            ..spec.clone()
        },
        time: None,
        shows: format!("{}: a native sidecar with no startup gate", proxy.name),
    });
    let mut judged = conclusion(rule, race.status, String::new());
    judged.evidence.extend(spec_cited);
    judged.evidence.extend(race.evidence);
    judged.missing = race.missing;
    judged.summary = match race.status {
        Status::Confirmed => {
            judged.fix = Some(match observed.mesh {
                Some(Mesh::Linkerd) => "annotate the pod template \
                                        `config.linkerd.io/proxy-await: enabled`, so the \
                                        injector gives linkerd-proxy a startupProbe on \
                                        :4191/ready"
                    .into(),
                _ => "keep the injector's startupProbe on istio-proxy (Helm \
                      `values.global.proxy.startupProbe.enabled: true`); do not strip it from \
                      the pod spec"
                    .into(),
            });
            format!("{ungated}; {}", race.summary)
        }
        Status::RuledOut => format!(
            "{ungated}, but the race did not bite this time: {} (the spec still allows it)",
            race.summary
        ),
        Status::CannotTell => format!(
            "{ungated}; whether an app started before it was ready is not known: {}",
            race.summary
        ),
    };
    judged
}

/// ML102: did an app listed before a classic proxy with the hold hook start before the proxy
/// was ready? The hook (`pilot-agent wait`, `linkerd-await`) holds only the containers after
/// the proxy in `spec.containers`: the kubelet starts them in that order and waits for a
/// container's postStart hook only before starting the next. The spec says which apps come
/// before the proxy; ML101's ordering of the moments says whether the race bit them this time.
pub(super) fn hold_not_first(observed: &Observed) -> Conclusion {
    let rule = &catalogue::STARTUP_HOLD_NOT_FIRST;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    if proxy.native_sidecar {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} is a native sidecar (an init container): the kubelet starts every app \
                 container after it, whatever their order, so no app comes before its gate \
                 (ML103 judges the gate)",
                proxy.name
            ),
        );
        ruled_out
            .evidence
            .extend(proxy.spec.iter().map(|spec| Cited {
                evidence: spec.clone(),
                time: None,
                shows: format!("{} listed in spec.initContainers", proxy.name),
            }));
        return ruled_out;
    }
    let (true, Some(proxy_index)) = (observed.has_spec, proxy.index) else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "without the pod's object, the order of the containers in spec.containers and \
                 {}'s postStart hook are not known",
                proxy.name
            ),
        );
        cannot.missing.push(
            "the pod's object (`kubectl get pod POD -o json`), for the order of \
             spec.containers and the proxy's lifecycle.postStart"
                .into(),
        );
        return cannot;
    };
    let proxy_place = format!("spec.containers[{proxy_index}]");
    let Some(hook) = proxy
        .post_start
        .as_ref()
        .filter(|hook| waits_for_proxy(observed.mesh, hook))
    else {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} ({proxy_place}) has no hold hook (a postStart of {}): no hold to be out of \
                 order; ML101 judges the race of a proxy without it",
                proxy.name,
                match observed.mesh {
                    Some(Mesh::Linkerd) => "`linkerd-await`",
                    _ => "`pilot-agent wait`",
                }
            ),
        );
    };
    let command = hook.evidence.text.as_deref().unwrap_or("postStart");
    let hook_cited = cite_spec(
        hook,
        &format!(
            "{}'s postStart hook: the containers after it start only once it has returned",
            proxy.name
        ),
    );
    let order_cited = |app: &ContainerTimeline, shows: String| {
        app.spec.as_ref().map(|spec| Cited {
            evidence: spec.clone(),
            time: None,
            shows,
        })
    };
    // Indexes count within their own list: the pod's own native sidecars (init containers)
    // start before every regular container, whatever their index.
    let before: Vec<&ContainerTimeline> = observed
        .apps()
        .filter(|app| !app.native_sidecar && app.index.is_some_and(|index| index < proxy_index))
        .collect();
    if before.is_empty() {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} is {proxy_place}, with its hold hook (`{command}`), before every app \
                 container: the hook holds them all",
                proxy.name
            ),
        );
        ruled_out
            .evidence
            .extend(proxy.spec.iter().map(|spec| Cited {
                evidence: spec.clone(),
                time: None,
                shows: format!("{} is {proxy_place}", proxy.name),
            }));
        ruled_out.evidence.push(hook_cited);
        return ruled_out;
    }
    let tolerance = observed.clock_skew_ms;
    let ready_moment = proxy.moments_of(MomentKind::ProxyReady).next();
    let out_of_order = |app: &ContainerTimeline| {
        format!(
            "{} (spec.containers[{}]) comes before {} ({proxy_place}) and its hold hook \
             (`{command}`): the kubelet starts it without waiting for the hook",
            app.name,
            app.index.unwrap_or_default(),
            proxy.name
        )
    };
    let mut confirmed = Vec::new();
    let mut safe = Vec::new();
    let mut unknown = Vec::new();
    for app in &before {
        match (app.started, proxy.ready) {
            (Some(started), Some(ready)) if started.before(&ready, tolerance) => {
                confirmed.push((*app, started, ready))
            }
            (Some(started), Some(ready)) if ready.before(&started, tolerance) => {
                safe.push((*app, started, ready))
            }
            _ => unknown.push(*app),
        }
    }
    if !confirmed.is_empty() {
        let mut judged = conclusion(rule, Status::Confirmed, String::new());
        let mut parts = Vec::new();
        judged.evidence.push(hook_cited);
        for (app, started, ready) in &confirmed {
            let errors = errors_between(app, started, ready.latest, tolerance);
            parts.push(format!(
                "{}; it started {}, before {} was ready ({}){}",
                out_of_order(app),
                started.phrase(),
                proxy.name,
                ready.phrase(),
                errors_phrase(errors.len())
            ));
            judged.evidence.extend(order_cited(
                app,
                format!("{} is before {} ({proxy_place})", app.name, proxy.name),
            ));
            cite_start_and_errors(&mut judged, app, &errors);
        }
        judged
            .evidence
            .extend(ready_moment.map(|moment| cite(moment, &format!("{} ready", proxy.name))));
        said_once(&mut judged.evidence);
        judged.summary = parts.join("; ");
        judged.fix = Some(format!(
            "move {} to spec.containers[0]: re-inject with the mesh's hold setting \
             (`holdApplicationUntilProxyStarts: true`, `config.linkerd.io/proxy-await: enabled`) \
             rather than editing hooks by hand, or keep a later webhook from putting containers \
             in front of it",
            proxy.name
        ));
        return judged;
    }
    if unknown.is_empty() {
        let mut ruled_out = conclusion(rule, Status::RuledOut, String::new());
        let mut parts = Vec::new();
        ruled_out.evidence.push(hook_cited);
        for (app, started, ready) in &safe {
            parts.push(format!(
                "{}, but {} was ready {}, before it started ({}): the race did not bite this \
                 time (the order still allows it)",
                out_of_order(app),
                proxy.name,
                ready.phrase(),
                started.phrase()
            ));
            ruled_out.evidence.extend(order_cited(
                app,
                format!("{} is before {} ({proxy_place})", app.name, proxy.name),
            ));
            ruled_out.evidence.extend(
                app.moments_of(MomentKind::Started)
                    .next()
                    .map(|moment| cite(moment, &format!("{} started", app.name))),
            );
        }
        ruled_out
            .evidence
            .extend(ready_moment.map(|moment| cite(moment, &format!("{} ready", proxy.name))));
        said_once(&mut ruled_out.evidence);
        ruled_out.summary = parts.join("; ");
        return ruled_out;
    }
    let mut cannot = conclusion(rule, Status::CannotTell, String::new());
    let mut parts = Vec::new();
    cannot.evidence.push(hook_cited);
    for app in &unknown {
        cannot.evidence.extend(order_cited(
            app,
            format!("{} is before {} ({proxy_place})", app.name, proxy.name),
        ));
        let why = match (app.started, proxy.ready) {
            (None, _) if app.waiting => format!(
                "it has not started ({})",
                app.reason.as_deref().unwrap_or("waiting")
            ),
            (None, _) => {
                cannot.missing.push(format!(
                    "the pod's status (`kubectl get pod POD -o yaml`) for when {} started",
                    app.name
                ));
                format!("the data does not say when {} started", app.name)
            }
            (Some(_), None) => {
                cannot.missing.push(proxy_log_hint(observed));
                format!("the data does not say when {} was ready", proxy.name)
            }
            (Some(started), Some(ready)) => {
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
                format!(
                    "it started {} and {} was ready {}: too close to order",
                    started.phrase(),
                    proxy.name,
                    ready.phrase()
                )
            }
        };
        parts.push(format!(
            "{}; whether it started before {} was ready is not known: {why}",
            out_of_order(app),
            proxy.name
        ));
    }
    cannot.summary = parts.join("; ");
    cannot.missing.dedup();
    cannot
}
