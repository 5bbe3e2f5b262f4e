//! What the observed timeline confirms or rules out, rule by rule: each conclusion names the
//! rule whose bug class it is about, says `confirmed`, `ruled-out` or `cannot-tell`, and rests
//! on evidence (file, line or field, time). Where the data cannot decide, it says what is
//! missing, never a guess.

use meshlife_policy::catalogue::{self, Rule};
use serde::Serialize;

use super::clock::{self, Bound, Millis, SECOND};
use super::evidence::Evidence;
use super::observed::{ContainerTimeline, Mesh, Moment, MomentKind, Observed, Role};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Confirmed,
    RuledOut,
    CannotTell,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Confirmed => "confirmed",
            Status::RuledOut => "ruled out",
            Status::CannotTell => "cannot tell",
        }
    }
}

/// One evidence item with the moment it shows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cited {
    #[serde(flatten)]
    pub evidence: Evidence,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<Bound>,
    pub shows: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conclusion {
    pub rule: &'static str,
    pub name: &'static str,
    pub status: Status,
    /// What the data shows, in one or two sentences.
    pub summary: String,
    pub evidence: Vec<Cited>,
    /// What would settle it, for `cannot-tell` (and what would make a ruling firmer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The rule's fix, for a confirmed bug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn conclusion(rule: &Rule, status: Status, summary: String) -> Conclusion {
    Conclusion {
        rule: rule.id,
        name: rule.name,
        status,
        summary,
        evidence: Vec::new(),
        missing: Vec::new(),
        fix: None,
    }
}

fn cite(moment: &Moment, shows: &str) -> Cited {
    Cited {
        evidence: moment.evidence.clone(),
        time: moment.at.point().is_some().then_some(moment.at),
        shows: shows.to_string(),
    }
}

/// Every rule's conclusion about `observed`.
pub fn conclude(observed: &Observed) -> Vec<Conclusion> {
    vec![
        startup_race(observed),
        init_without_network(observed),
        job_proxy_runs_on(observed),
        killed_mid_drain(observed),
        streams_cut(observed),
    ]
}

/// How to see the proxy's own moments.
fn proxy_log_hint(observed: &Observed) -> String {
    let name = observed.mesh.map_or("the proxy", Mesh::proxy_name);
    format!(
        "the log of {name} with timestamps (`kubectl logs POD -c {name} --timestamps`), for the \
         moment it was ready"
    )
}

fn no_proxy(rule: &Rule, observed: &Observed) -> Option<Conclusion> {
    if observed.proxy().is_some() {
        return None;
    }
    if observed.containers_complete && observed.mesh.is_none() {
        return Some(conclusion(
            rule,
            Status::RuledOut,
            "the pod runs no mesh proxy (no istio-proxy or linkerd-proxy container, no \
             injector's annotation)"
                .into(),
        ));
    }
    let mut cannot = conclusion(
        rule,
        Status::CannotTell,
        match (observed.mesh, observed.containers_complete) {
            (Some(mesh), true) => format!(
                "the pod is injected by {mesh:?} but lists no {} container",
                mesh.proxy_name()
            ),
            (Some(mesh), false) if observed.has_status => format!(
                "the pod is meshed ({mesh:?}), but the data does not list its containers (the \
                 describe text ends before them?)"
            ),
            (Some(mesh), false) => format!(
                "the pod is meshed ({mesh:?}), but no {} container is named in the data",
                mesh.proxy_name()
            ),
            (None, _) => "no proxy container is named in the data".into(),
        },
    );
    cannot
        .missing
        .push("the whole pod (`kubectl get pod POD -o yaml`) or `kubectl describe pod POD`".into());
    Some(cannot)
}

/// ML101: did an app start before its proxy was ready?
fn startup_race(observed: &Observed) -> Conclusion {
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

/// ML201: did a user init container fail for want of network under the mesh's capture?
fn init_without_network(observed: &Observed) -> Conclusion {
    let rule = &catalogue::INIT_CONTAINER_NO_NETWORK;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let inits: Vec<&ContainerTimeline> = observed
        .containers
        .iter()
        .filter(|container| container.role == Role::Init)
        .collect();
    if inits.is_empty() {
        return if observed.has_status {
            conclusion(
                rule,
                Status::RuledOut,
                "the pod has no init container of its own".into(),
            )
        } else {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                "the data names no init container".into(),
            );
            cannot.missing.push("the pod or its describe text".into());
            cannot
        };
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let mut failed_for_network = Vec::new();
    let mut failed_otherwise = Vec::new();
    let mut fine = Vec::new();
    let mut unknown = Vec::new();
    for init in &inits {
        let failures: Vec<&Moment> = init
            .moments
            .iter()
            .filter(|moment| {
                (moment.kind == MomentKind::Terminated
                    && init.exit_code.is_some_and(|code| code != 0))
                    || moment.kind == MomentKind::EarlierRunEnded
            })
            .collect();
        let errors: Vec<&Moment> = init.moments_of(MomentKind::ConnectionError).collect();
        let failed = !failures.is_empty() || init.restarts > 0;
        // Still running or waiting to restart with refused connections counts as failing.
        if !errors.is_empty() && (failed || init.running || init.waiting) {
            failed_for_network.push((init, failures, errors));
        } else if failed {
            failed_otherwise.push(init);
        } else if init.exit_code == Some(0) {
            fine.push(init);
        } else {
            unknown.push(init);
        }
    }
    // A native proxy runs for the init containers after it; those before it run without one.
    let position = |name: &str| {
        observed
            .containers
            .iter()
            .position(|container| container.name == name)
    };
    let before_proxy = |init: &ContainerTimeline| {
        !proxy.native_sidecar || position(&init.name) < position(&proxy.name)
    };
    let behind_native: Vec<&str> = failed_for_network
        .iter()
        .filter(|(init, _, _)| !before_proxy(init))
        .map(|(init, _, _)| init.name.as_str())
        .collect();
    failed_for_network.retain(|(init, _, _)| before_proxy(init));
    if failed_for_network.is_empty() && !behind_native.is_empty() {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} failed with connection errors, but ran after the native {}, which carried \
                 its traffic: another cause",
                behind_native.join(", "),
                proxy.name
            ),
        );
    }
    if proxy.native_sidecar && inits.iter().all(|init| !before_proxy(init)) {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} runs as a native sidecar, started before every init container of the pod's \
                 own",
                proxy.name
            ),
        );
    }
    if !failed_for_network.is_empty() {
        let mut confirmed = conclusion(rule, Status::Confirmed, String::new());
        let mut parts = Vec::new();
        for (init, failures, errors) in &failed_for_network {
            parts.push(format!(
                "{} failed{} with {} connection error(s) in its log, while traffic capture was on \
                 and {} not yet running",
                init.name,
                if init.restarts > 0 {
                    format!(" ({} restarts)", init.restarts)
                } else {
                    String::new()
                },
                errors.len(),
                proxy.name
            ));
            for failure in failures.iter().take(2) {
                confirmed
                    .evidence
                    .push(cite(failure, &format!("{} failed", init.name)));
            }
            for error in errors.iter().take(3) {
                confirmed
                    .evidence
                    .push(cite(error, &format!("{} could not connect", init.name)));
            }
        }
        confirmed.summary = parts.join("; ");
        confirmed.fix = Some(match observed.mesh {
            Some(Mesh::Linkerd) => "run the init container as the proxy's UID (2102), or skip \
                                    its ports with `config.linkerd.io/skip-outbound-ports`; or \
                                    run the proxy as a native sidecar"
                .into(),
            _ => "run the init container as the proxy's UID (1337), or exclude its destinations \
                  with `traffic.sidecar.istio.io/excludeOutboundIPRanges`/`excludeOutboundPorts`; \
                  or use native sidecars"
                .into(),
        });
        return confirmed;
    }
    if unknown.is_empty() && failed_otherwise.is_empty() {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "every init container completed (exit 0): {}",
                fine.iter()
                    .map(|init| init.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let mut cannot = conclusion(rule, Status::CannotTell, String::new());
    let mut reasons = Vec::new();
    for init in &failed_otherwise {
        if init.log {
            reasons.push(format!(
                "{} failed, but its log shows no connection error: another cause",
                init.name
            ));
        } else {
            reasons.push(format!("{} failed and its log was not given", init.name));
            cannot.missing.push(format!(
                "{}'s log (`kubectl logs POD -c {} --previous --timestamps`)",
                init.name, init.name
            ));
        }
    }
    for init in &unknown {
        reasons.push(format!("the data does not say how {} ended", init.name));
    }
    cannot.summary = reasons.join("; ");
    cannot
}

/// ML301: did a Job's app finish while its proxy ran on?
fn job_proxy_runs_on(observed: &Observed) -> Conclusion {
    let rule = &catalogue::JOB_SIDECAR_NEVER_EXITS;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    match observed.batch {
        Some(false) => {
            return conclusion(
                rule,
                Status::RuledOut,
                "not a batch pod (no Job owns it and its restartPolicy is Always)".into(),
            );
        }
        None => {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                "the data does not say whether this is a Job's pod".into(),
            );
            cannot.missing.push(
                "the pod's ownerReferences or restartPolicy (`kubectl get pod -o yaml`)".into(),
            );
            return cannot;
        }
        Some(true) => {}
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    if proxy.native_sidecar {
        return conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} is a native sidecar: the kubelet stops it once the apps have finished",
                proxy.name
            ),
        );
    }
    let apps: Vec<&ContainerTimeline> = observed.apps().collect();
    let unfinished: Vec<&str> = apps
        .iter()
        .filter(|app| app.finished.is_none())
        .map(|app| app.name.as_str())
        .collect();
    if !unfinished.is_empty() {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "{} had not finished when the data was taken",
                unfinished.join(", ")
            ),
        );
        cannot
            .missing
            .push("the pod's status after its app containers finished".into());
        return cannot;
    }
    let done = apps
        .iter()
        .filter_map(|app| app.finished.and_then(|finished| finished.earliest))
        .max();
    let last_app_moments: Vec<&Moment> = apps
        .iter()
        .filter_map(|app| app.moments_of(MomentKind::Terminated).next())
        .collect();
    let Some(done) = done else {
        return conclusion(
            rule,
            Status::CannotTell,
            "the apps finished, but the data does not say when".into(),
        );
    };
    let exited_on_its_own = proxy.moments_of(MomentKind::ProxyExiting).next().cloned();
    if proxy.running {
        let mut confirmed = conclusion(
            rule,
            Status::Confirmed,
            format!(
                "the app finished at {}, and {} was still running when the data was taken: the \
                 Job cannot complete",
                clock::clock(done),
                proxy.name
            ),
        );
        confirmed.evidence.extend(
            last_app_moments
                .iter()
                .map(|moment| cite(moment, "app finished")),
        );
        confirmed.fix = Some(job_fix(observed.mesh));
        return confirmed;
    }
    let Some(proxy_end) = proxy.finished.and_then(|finished| finished.earliest) else {
        return conclusion(
            rule,
            Status::CannotTell,
            format!("the data does not say whether {} ended", proxy.name),
        );
    };
    let ran_on = proxy_end - done;
    let killed =
        proxy.exit_code == Some(137) || proxy.reason.as_deref() == Some("DeadlineExceeded");
    let proxy_end_moment = proxy.moments_of(MomentKind::Terminated).next();
    if killed || (ran_on > 30 * SECOND && exited_on_its_own.is_none()) {
        let mut confirmed = conclusion(
            rule,
            Status::Confirmed,
            format!(
                "the app finished at {}; {} ran on for {} and was then {}",
                clock::clock(done),
                proxy.name,
                clock::span(ran_on),
                if killed {
                    "killed (exit 137 or the Job's deadline)"
                } else {
                    "stopped from outside"
                }
            ),
        );
        confirmed.evidence.extend(
            last_app_moments
                .iter()
                .map(|moment| cite(moment, "app finished")),
        );
        confirmed
            .evidence
            .extend(proxy_end_moment.map(|moment| cite(moment, "proxy ended")));
        confirmed.fix = Some(job_fix(observed.mesh));
        return confirmed;
    }
    let mut ruled_out = conclusion(
        rule,
        Status::RuledOut,
        format!(
            "{} exited {} after the app finished{}: something told it to",
            proxy.name,
            clock::span(ran_on.max(0)),
            proxy
                .exit_code
                .map_or_else(String::new, |code| format!(" (exit {code})"))
        ),
    );
    ruled_out
        .evidence
        .extend(proxy_end_moment.map(|moment| cite(moment, "proxy ended")));
    ruled_out.evidence.extend(
        exited_on_its_own
            .as_ref()
            .map(|moment| cite(moment, "proxy told to exit")),
    );
    ruled_out
}

fn job_fix(mesh: Option<Mesh>) -> String {
    match mesh {
        Some(Mesh::Linkerd) => "wrap the app's command in `linkerd-await --shutdown -- CMD` \
                                (with `config.linkerd.io/proxy-admin-shutdown: enabled`), or run \
                                the proxy as a native sidecar"
            .into(),
        _ => "end the app's command with `curl -fsX POST localhost:15020/quitquitquit`, or use \
              native sidecars (`sidecar.istio.io/nativeSidecar: \"true\"`)"
            .into(),
    }
}

/// The moment SIGTERM reached the proxy: its Killing event, else the pod's deletion.
fn sigterm_of(observed: &Observed, proxy: &ContainerTimeline) -> Option<(Bound, Option<Moment>)> {
    if let Some(moment) = proxy.moments_of(MomentKind::Sigterm).next() {
        return Some((moment.at, Some(moment.clone())));
    }
    observed.deleted.map(|deleted| (deleted, None))
}

/// ML401: was the proxy killed at the grace period while it drained?
fn killed_mid_drain(observed: &Observed) -> Conclusion {
    let rule = &catalogue::DRAIN_EXCEEDS_GRACE;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let draining = proxy.moments_of(MomentKind::ProxyDraining).next().cloned();
    let exiting = proxy.moments_of(MomentKind::ProxyExiting).next().cloned();
    let end = proxy.moments_of(MomentKind::Terminated).next().cloned();
    let sigterm = sigterm_of(observed, proxy);
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
        confirmed.fix = Some(
            "make the drain shorter than the grace period: lower `terminationDrainDuration` in \
             `proxy.istio.io/config`, or raise `terminationGracePeriodSeconds` above it"
                .into(),
        );
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
fn streams_cut(observed: &Observed) -> Conclusion {
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
