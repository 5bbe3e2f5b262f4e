//! ML402: a classic proxy exited while an app still ran.
//!
//! The kubelet stops a pod's regular containers all at once (k8s.io/kubernetes v1.35.4,
//! pkg/kubelet/kuberuntime: killContainersWithSyncResult, one goroutine per container): each
//! runs its preStop hook, then gets SIGTERM. A classic istio-proxy has no preStop of its own: it
//! drains at once for `terminationDrainDuration` (5 s by default) and exits, while an app may
//! still be in its preStop delay, or shutting down after it. The redirect stays, so every
//! connection the app makes after that is refused. A native sidecar is stopped only after the
//! app containers have ended.
//!
//! The containers' ends (`finishedAt`, to the second, the kubelet's one clock) decide; the
//! app's connection errors after the proxy's end show what it cost.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, cite, conclusion, no_proxy};
use crate::commands::diagnose::clock::{self, Bound, SECOND};
use crate::commands::diagnose::observed::{ContainerTimeline, Mesh, Moment, MomentKind, Observed};
use crate::commands::diagnose::patterns::DrainDetail;
use crate::commands::diagnose::pod::STATUS_PRECISION;

/// One app's part of the conclusion.
enum Judged {
    Confirmed { part: String, evidence: Vec<Cited> },
    RuledOut { part: String, evidence: Vec<Cited> },
    CannotTell { part: String, missing: Vec<String> },
}

/// ML402: did the proxy exit while an app was still running?
pub(super) fn proxy_exits_before_app(observed: &Observed) -> Conclusion {
    let rule = &catalogue::PROXY_EXITS_BEFORE_APP;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    if proxy.native_sidecar {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            format!(
                "{} is a native sidecar (an init container): the kubelet stops it only after the \
                 app containers have ended",
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
    // The pod's own native sidecars (cloud-sql-proxy, vault-agent) are stopped by the kubelet
    // only after every regular container, a classic proxy included: ending after it is their
    // order, not an app outliving its proxy.
    let apps: Vec<&ContainerTimeline> = observed.apps().filter(|app| !app.native_sidecar).collect();
    let Some(proxy_end) = proxy.finished.filter(|_| !proxy.running) else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            if proxy.running {
                format!(
                    "{} had not stopped when the data was taken: no shutdown to judge",
                    proxy.name
                )
            } else {
                format!("the data does not say when {} ended", proxy.name)
            },
        );
        cannot.missing.push(ends_hint(proxy));
        return cannot;
    };
    if apps.is_empty() {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "the data names no app container".into(),
        );
        cannot.missing.push(
            "the pod's object (`kubectl get pod POD -o json`) or `kubectl describe pod POD`".into(),
        );
        return cannot;
    }
    let proxy_ended = proxy.moments_of(MomentKind::Terminated).next();
    if let Some(ruled_out) = killed_at_grace(observed, proxy, proxy_end, proxy_ended) {
        return ruled_out;
    }
    let judged: Vec<Judged> = apps
        .iter()
        .map(|app| judge(observed, proxy, proxy_end, proxy_ended, app))
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
    if status == Status::Confirmed {
        // pilot-agent's drain: when it began, and the length it planned.
        let draining: Vec<&Moment> = proxy.moments_of(MomentKind::ProxyDraining).collect();
        let planned = draining.iter().find_map(|moment| match moment.drain {
            Some(DrainDetail::Planned(length)) => Some((*moment, length)),
            _ => None,
        });
        if let Some(began) = draining
            .iter()
            .copied()
            .find(|moment| moment.drain.is_none())
            .or(planned.map(|(moment, _)| moment))
        {
            concluded
                .evidence
                .push(cite(began, &format!("{} began to drain", proxy.name)));
        }
        if let Some((moment, length)) = planned {
            parts.push(format!(
                "pilot-agent planned a drain of {} {}",
                clock::span(length),
                moment.at.phrase()
            ));
            concluded.evidence.push(cite(
                moment,
                &format!("pilot-agent planned a drain of {}", clock::span(length)),
            ));
        }
        let delay = apps
            .iter()
            .filter_map(|app| app.pre_stop_delay)
            .max()
            .map_or_else(String::new, |delay| format!(" ({delay} s)"));
        concluded.fix = Some(match observed.mesh {
            Some(Mesh::Linkerd) => format!(
                "keep linkerd-proxy until the apps have stopped: \
                 `config.alpha.linkerd.io/proxy-wait-before-exit-seconds` above the apps' preStop \
                 delay{delay} (and below terminationGracePeriodSeconds), or run it as a native \
                 sidecar (stopped after the apps)"
            ),
            _ => format!(
                "set terminationDrainDuration in `proxy.istio.io/config` above the apps' preStop \
                 delay{delay} and their own shutdown (and below terminationGracePeriodSeconds), or \
                 `proxyMetadata.EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"` so the proxy stays \
                 until connections close, or run it as a native sidecar (stopped after the apps)"
            ),
        });
    }
    concluded.summary = parts.join("; ");
    concluded.missing.dedup();
    concluded
}

fn judge(
    observed: &Observed,
    proxy: &ContainerTimeline,
    proxy_end: Bound,
    proxy_ended: Option<&Moment>,
    app: &ContainerTimeline,
) -> Judged {
    let Some(app_end) = app.finished.filter(|_| !app.running) else {
        return Judged::CannotTell {
            part: if app.running {
                format!(
                    "{} ended {}, but {} had not stopped when the data was taken",
                    proxy.name,
                    proxy_end.phrase(),
                    app.name
                )
            } else {
                format!(
                    "{} ended {}, but the data does not say when {} ended",
                    proxy.name,
                    proxy_end.phrase(),
                    app.name
                )
            },
            missing: vec![ends_hint(app)],
        };
    };
    let app_ended = app.moments_of(MomentKind::Terminated).next();
    let mut evidence: Vec<Cited> = proxy_ended
        .map(|moment| cite(moment, &format!("{} {}", proxy.name, moment.what)))
        .into_iter()
        .chain(app_ended.map(|moment| cite(moment, &format!("{} {}", app.name, moment.what))))
        .collect();
    let ends = format!(
        "{} ended {}{}, {} ended {}",
        proxy.name,
        proxy_end.phrase(),
        proxy
            .exit_code
            .map_or_else(String::new, |code| format!(" (exit {code})")),
        app.name,
        app_end.phrase()
    );
    // Both are the kubelet's status times, to the second: ordered only a second apart or more.
    if proxy_end.before(&app_end, STATUS_PRECISION) {
        // Still running then: started before the proxy's end.
        if app
            .started
            .and_then(|started| started.earliest)
            .zip(proxy_end.earliest)
            .is_some_and(|(started, ended)| started > ended)
        {
            return Judged::RuledOut {
                part: format!(
                    "{ends}, but {} started after {} had ended: it never ran beside it",
                    app.name, proxy.name
                ),
                evidence,
            };
        }
        let gap = match (proxy_end.earliest, app_end.earliest) {
            (Some(proxy), Some(app)) => format!("{} before", clock::span(app - proxy)),
            _ => "before".into(),
        };
        let mut part = format!(
            "{} ended{} {}, {gap} {}, which still ran (it ended {})",
            proxy.name,
            proxy
                .exit_code
                .map_or_else(String::new, |code| format!(" (exit {code})")),
            proxy_end.phrase(),
            app.name,
            app_end.phrase()
        );
        if let Some(hook) = &app.pre_stop {
            let command = hook.evidence.text.as_deref().unwrap_or("preStop");
            part.push_str(&format!(
                "; {}'s preStop (`{command}`{}) held its SIGTERM back",
                app.name,
                app.pre_stop_delay
                    .map_or_else(String::new, |delay| format!(", {delay} s"))
            ));
            evidence.push(Cited {
                evidence: hook.evidence.clone(),
                time: None,
                shows: format!("{}'s preStop hook: SIGTERM only after it", app.name),
            });
        }
        if let Some(killing) = app.moments_of(MomentKind::Sigterm).next() {
            evidence.push(cite(
                killing,
                &format!(
                    "the kubelet began to stop {} (its preStop, then SIGTERM)",
                    app.name
                ),
            ));
        }
        // The app's log runs on its own clock: its errors count only past the proxy's second
        // and the skew seen between the two.
        let after = proxy_end
            .latest
            .map(|latest| latest.saturating_add(observed.clock_skew_ms));
        let errors: Vec<&Moment> = app
            .moments_of(MomentKind::ConnectionError)
            .filter(|moment| {
                matches!((moment.at.earliest, after), (Some(at), Some(after)) if at > after)
            })
            .collect();
        match errors.first() {
            Some(first) => part.push_str(&format!(
                "; {} connection error(s) in {}'s log after {} ended, the first {}",
                errors.len(),
                app.name,
                proxy.name,
                first.at.phrase()
            )),
            None if app.log => part.push_str(&format!(
                "; no failed call is seen in {}'s log after {} ended (it may have made none)",
                app.name, proxy.name
            )),
            None => part.push_str(&format!(
                "; without {}'s log, whether its calls failed then is not seen",
                app.name
            )),
        }
        for error in errors.iter().take(3) {
            evidence.push(cite(
                error,
                &format!("{} failed to connect after {} ended", app.name, proxy.name),
            ));
        }
        return Judged::Confirmed { part, evidence };
    }
    if proxy_end.earliest >= app_end.earliest {
        return Judged::RuledOut {
            part: format!("{ends}: the proxy outlived it"),
            evidence,
        };
    }
    Judged::CannotTell {
        part: format!(
            "{ends}: a second apart, too close to say {} still ran once the proxy was gone",
            app.name
        ),
        missing: vec![if app.log && proxy.log {
            format!(
                "the moments {} and {} exited, closer than their status's second",
                app.name, proxy.name
            )
        } else {
            format!(
                "{}'s and {}'s logs with timestamps, for their last lines",
                app.name, proxy.name
            )
        }],
    }
}

/// A proxy killed (exit 137) at the grace period after its SIGTERM did not exit on its own
/// after its drain: the kubelet killed it as it kills every container then (ML401 judges a drain
/// cut so; an app ending after it within the kubelet's 2 s after a preStop that used up the
/// grace period is ML405's).
fn killed_at_grace(
    observed: &Observed,
    proxy: &ContainerTimeline,
    proxy_end: Bound,
    proxy_ended: Option<&Moment>,
) -> Option<Conclusion> {
    if proxy.exit_code != Some(137) || proxy.reason.as_deref() == Some("OOMKilled") {
        return None;
    }
    let grace = observed.grace_seconds? * SECOND;
    let killing = proxy.moments_of(MomentKind::Sigterm).next()?;
    let since = proxy_end.earliest? - killing.at.earliest?;
    // Both are the kubelet's seconds; the kill comes at the grace period, give or take them.
    if since + 2 * SECOND < grace {
        return None;
    }
    let mut ruled_out = conclusion(
        &catalogue::PROXY_EXITS_BEFORE_APP,
        Status::RuledOut,
        format!(
            "{} was killed (exit 137) {}, {} after the kubelet began to stop it ({}), at the \
             grace period ({}): not an exit of its own after its drain, but the kubelet's kill of \
             every container at the grace period (ML401 judges a drain cut so, ML405 an app's \
             preStop that used it up){}",
            proxy.name,
            proxy_end.phrase(),
            clock::span(since),
            killing.at.phrase(),
            clock::span(grace),
            observed
                .apps()
                .filter_map(|app| app.finished.map(|end| format!(
                    "; {} ended {}",
                    app.name,
                    end.phrase()
                )))
                .collect::<String>()
        ),
    );
    ruled_out.evidence.push(cite(
        killing,
        &format!("the kubelet began to stop {}", proxy.name),
    ));
    ruled_out
        .evidence
        .extend(proxy_ended.map(|moment| cite(moment, &format!("{} {}", proxy.name, moment.what))));
    ruled_out
        .evidence
        .extend(observed.grace_evidence.as_ref().map(|evidence| Cited {
            evidence: evidence.clone(),
            time: None,
            shows: format!("the grace period: {}", clock::span(grace)),
        }));
    Some(ruled_out)
}

/// How to see when a container ended.
fn ends_hint(container: &ContainerTimeline) -> String {
    format!(
        "the pod's status once its containers have stopped (`kubectl get pod POD -o json`, or \
         `kubectl describe pod POD`: the Finished time of {})",
        container.name
    )
}
