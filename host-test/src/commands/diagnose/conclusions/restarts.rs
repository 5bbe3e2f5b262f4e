//! ML407: a container's `restartPolicyRules` entry with the action `RestartAllContainers`
//! (KEP-5532) restarts every container of a meshed pod in place when it fires: the kubelet kills
//! the proxy with the app, without its preStop or drain, and runs the init containers again.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, cite, conclusion, no_proxy};
use crate::commands::diagnose::clock::{self, Bound, Millis, SECOND};
use crate::commands::diagnose::evidence::Evidence;
use crate::commands::diagnose::observed::{ContainerTimeline, Moment, MomentKind, Observed, Role};
use crate::commands::diagnose::pod::{RestartRule, STATUS_PRECISION};

/// The action that restarts the whole pod in place.
const RESTART_ALL: &str = "RestartAllContainers";

/// The pod condition the kubelet sets while it restarts every container (True), and clears
/// once they run again (False).
const RESTARTING: &str = "AllContainersRestarting";

/// How close the proxy's end must be to the app's for the two to be one restart: status times
/// are whole seconds, and the kubelet kills the other containers at once (or within their
/// short grace).
const TOGETHER: Millis = 5 * SECOND;

/// ML407: did the app's exit under a `RestartAllContainers` rule restart the proxy with it?
pub(super) fn in_place_restart_kills_proxy(observed: &Observed) -> Conclusion {
    let rule = &catalogue::IN_PLACE_RESTART_SKIPS_DRAIN;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let proxy = observed.proxy().expect("checked by no_proxy");
    let condition = observed.conditions.get(RESTARTING);
    let restart_all: Vec<(&ContainerTimeline, &RestartRule)> = observed
        .containers
        .iter()
        .flat_map(|container| {
            container
                .restart_rules
                .iter()
                .filter(|rule| rule.action == RESTART_ALL)
                .map(move |rule| (container, rule))
        })
        .collect();
    if !observed.has_spec && condition.is_none() {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "the pod's spec (its containers' restartPolicyRules) is not in the data".into(),
        );
        cannot
            .missing
            .push("the pod as JSON or YAML (`kubectl get pod POD -o json`)".into());
        return cannot;
    }
    let apps: Vec<&ContainerTimeline> = observed.apps().collect();
    let restarted_apps: Vec<&&ContainerTimeline> =
        apps.iter().filter(|app| app.restarts > 0).collect();
    if restart_all.is_empty() && condition.is_none() {
        let other_rules: Vec<(&ContainerTimeline, &RestartRule)> = observed
            .containers
            .iter()
            .flat_map(|container| {
                container
                    .restart_rules
                    .iter()
                    .map(move |rule| (container, rule))
            })
            .collect();
        let mut summary =
            format!("no container has a restartPolicyRules entry with the action {RESTART_ALL}");
        let mut ruled_out_evidence = Vec::new();
        if !restarted_apps.is_empty() && proxy.restarts == 0 {
            let restarted: Vec<String> = restarted_apps
                .iter()
                .map(|app| {
                    let own = other_rules
                        .iter()
                        .find(|(container, _)| container.name == app.name)
                        .map(|(_, rule)| format!(", its rule's action {}", rule.action))
                        .unwrap_or_default();
                    format!("{} (restartCount {}{own})", app.name, app.restarts)
                })
                .collect();
            summary.push_str(&format!(
                "; {} restarted alone, and {} ran on (restartCount 0, running since {})",
                restarted.join(", "),
                proxy.name,
                proxy
                    .started
                    .and_then(|started| started.earliest)
                    .map_or_else(|| "a time not given".to_string(), clock::clock)
            ));
            ruled_out_evidence.extend(restarted_apps.iter().filter_map(|app| restart_count(app)));
            ruled_out_evidence.extend(restart_count(proxy));
        }
        ruled_out_evidence.extend(
            other_rules
                .iter()
                .map(|(_, rule)| field(&rule.evidence, None, "its restart rule")),
        );
        let mut ruled_out = conclusion(rule, Status::RuledOut, summary);
        ruled_out.evidence = ruled_out_evidence;
        return ruled_out;
    }
    // The containers whose exit restarts the pod: those with the rule (all apps when only the
    // condition says it happened).
    let triggers: Vec<&ContainerTimeline> = if restart_all.is_empty() {
        apps.clone()
    } else {
        restart_all
            .iter()
            .map(|(container, _)| *container)
            .collect()
    };
    let triggered: Vec<&ContainerTimeline> = triggers
        .iter()
        .copied()
        .filter(|container| container.restarts > 0)
        .collect();
    let rules_cited: Vec<Cited> = restart_all
        .iter()
        .map(|(container, rule)| {
            field(
                &rule.evidence,
                None,
                &format!("{}'s rule restarts every container", container.name),
            )
        })
        .collect();
    let rule_words = restart_all
        .first()
        .map(|(container, rule)| {
            if rule.exit_codes.is_empty() {
                format!("{}'s {RESTART_ALL} rule", container.name)
            } else {
                format!(
                    "{}'s {RESTART_ALL} rule (exit codes {})",
                    container.name, rule.exit_codes
                )
            }
        })
        .unwrap_or_else(|| format!("the pod's {RESTART_ALL} restart"));
    if proxy.restarts == 0 {
        let mut verdict = if triggered.is_empty() {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                format!(
                    "the pod has {rule_words}, but no container has restarted yet: the rule has \
                     not fired in the data"
                ),
            );
            cannot
                .missing
                .push("the pod's status after the app exited with a code the rule matches".into());
            cannot
        } else {
            conclusion(
                rule,
                Status::RuledOut,
                format!(
                    "{} restarted (restartCount {}), but {} did not restart with it \
                     (restartCount 0): {rule_words} did not restart the pod's containers here",
                    names(&triggered),
                    triggered[0].restarts,
                    proxy.name
                ),
            )
        };
        verdict
            .evidence
            .extend(triggered.iter().filter_map(|app| restart_count(app)));
        verdict.evidence.extend(restart_count(proxy));
        verdict.evidence.extend(rules_cited);
        return verdict;
    }
    // The proxy restarted: with the app, in the rule's restart?
    let app_end = triggered
        .iter()
        .filter_map(|app| earlier_end(app))
        .max_by_key(|moment| moment.at.point());
    let proxy_end = earlier_end(proxy);
    let ends_together = match (app_end, proxy_end) {
        (Some(app), Some(proxy)) => match (app.at.point(), proxy.at.point()) {
            (Some(app), Some(proxy)) => (proxy - app).abs() <= TOGETHER,
            _ => false,
        },
        _ => false,
    };
    let inits_again: Vec<&ContainerTimeline> = observed
        .containers
        .iter()
        .filter(|container| {
            matches!(container.role, Role::MeshInit | Role::Init) && container.restarts > 0
        })
        .collect();
    let same_count = triggered.iter().any(|app| app.restarts == proxy.restarts);
    let tied = ends_together || condition.is_some() || !inits_again.is_empty();
    if triggered.is_empty() || !tied {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            if triggered.is_empty() {
                format!(
                    "{} restarted (restartCount {}), but {} did not: not the restart of {rule_words}",
                    proxy.name,
                    proxy.restarts,
                    names(&triggers)
                )
            } else {
                format!(
                    "{} and {} both restarted, but the data does not show they restarted together",
                    names(&triggered),
                    proxy.name
                )
            },
        );
        cannot.missing.push(format!(
            "the pod's status right after the restart (`lastState.terminated` of {} and the \
             app, the {RESTARTING} condition)",
            proxy.name
        ));
        cannot.evidence.extend(restart_count(proxy));
        return cannot;
    }
    let mut said = vec![format!(
        "{rule_words} restarted every container in place: {} restarted with {} (restartCount {}{})",
        proxy.name,
        names(&triggered),
        proxy.restarts,
        if same_count {
            " each".to_string()
        } else {
            format!(
                " against {}",
                triggered
                    .iter()
                    .map(|app| app.restarts.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )];
    if let (Some(app), Some(proxy_moment)) = (app_end, proxy_end)
        && let (Some(app_at), Some(proxy_at)) = (app.at.point(), proxy_moment.at.point())
    {
        said.push(format!(
            "its earlier run ended at {} ({}), {} after the app's at {}",
            clock::clock(proxy_at),
            proxy
                .moments_of(MomentKind::EarlierRunEnded)
                .find(|moment| is_last_state(moment))
                .map_or("no exit code", |moment| moment
                    .what
                    .trim_start_matches("an earlier run ended: ")),
            clock::span(proxy_at - app_at),
            clock::clock(app_at)
        ));
    }
    if !inits_again.is_empty() {
        said.push(format!(
            "{} ran again (restartCount {})",
            names(&inits_again),
            inits_again
                .iter()
                .map(|init| init.restarts.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some((status, changed)) = condition {
        said.push(match changed {
            Some((at, _)) => format!(
                "the pod's {RESTARTING} condition is {status}, last changed at {}",
                clock::clock(*at)
            ),
            None => format!("the pod's {RESTARTING} condition is {status}"),
        });
    }
    let kills: Vec<&Moment> = if observed.deleted.is_none() {
        proxy.moments_of(MomentKind::Sigterm).collect()
    } else {
        Vec::new()
    };
    if let Some(kill) = kills.first()
        && let Some(at) = kill.at.earliest
    {
        said.push(format!(
            "the kubelet killed {} at {}",
            proxy.name,
            clock::clock(at)
        ));
    }
    let mut confirmed = conclusion(
        rule,
        Status::Confirmed,
        format!(
            "{}: the proxy was killed with the app, without its preStop or drain, and its \
             connections cut",
            said.join("; ")
        ),
    );
    confirmed.evidence.extend(rules_cited);
    confirmed
        .evidence
        .extend(triggered.iter().filter_map(|app| restart_count(app)));
    confirmed.evidence.extend(restart_count(proxy));
    confirmed
        .evidence
        .extend(app_end.map(|moment| cite(moment, "the app's earlier run ended")));
    confirmed
        .evidence
        .extend(proxy_end.map(|moment| cite(moment, "the proxy's earlier run ended")));
    confirmed.evidence.extend(
        inits_again
            .iter()
            .filter_map(|init| restart_count(init))
            .map(|cited| Cited {
                shows: "init container run again".into(),
                ..cited
            }),
    );
    if let Some((status, changed)) = condition {
        confirmed.evidence.push(match changed {
            Some((at, evidence)) => field(
                &Evidence {
                    text: Some(format!("{RESTARTING} {status}")),
                    ..evidence.clone()
                },
                Some(Bound::at(*at, STATUS_PRECISION)),
                "the kubelet restarted every container",
            ),
            None => field(
                &Evidence {
                    text: Some(format!("{RESTARTING} {status}")),
                    ..Evidence::default()
                },
                None,
                "the kubelet restarted every container",
            ),
        });
    }
    confirmed
        .evidence
        .extend(kills.iter().map(|kill| cite(kill, "the proxy killed")));
    confirmed.fix = Some(
        "use the action Restart (that container alone) where the init containers need not run \
         again; where the whole pod must start over, exit and let its controller replace the \
         pod, which runs preStop hooks and drains the proxy"
            .into(),
    );
    confirmed
}

/// A container's earlier run's end, from its status's `lastState` (not a `BackOff` event).
fn earlier_end(container: &ContainerTimeline) -> Option<&Moment> {
    container
        .moments_of(MomentKind::EarlierRunEnded)
        .find(|moment| is_last_state(moment) && moment.at.point().is_some())
}

fn is_last_state(moment: &Moment) -> bool {
    moment
        .evidence
        .field
        .as_deref()
        .is_some_and(|field| field.contains("lastState"))
}

/// The container's restartCount, cited at its field.
fn restart_count(container: &ContainerTimeline) -> Option<Cited> {
    let evidence = container.restarts_evidence.as_ref()?;
    Some(field(
        evidence,
        None,
        &format!("{} restartCount {}", container.name, container.restarts),
    ))
}

fn names(containers: &[&ContainerTimeline]) -> String {
    containers
        .iter()
        .map(|container| container.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn field(evidence: &Evidence, time: Option<Bound>, shows: &str) -> Cited {
    Cited {
        evidence: evidence.clone(),
        time,
        shows: shows.to_string(),
    }
}
