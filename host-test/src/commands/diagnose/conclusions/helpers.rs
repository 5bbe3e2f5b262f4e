//! ML304: a batch pod's app done while a helper (a database proxy, an agent, a log shipper) runs
//! on as a regular container, so the pod stays Running and its Job never completes.

use meshlife_policy::catalogue;

use super::batch::not_a_batch_pod;
use super::{Cited, Conclusion, Status, cite, conclusion};
use crate::commands::diagnose::clock::{self, Bound, Millis};
use crate::commands::diagnose::evidence::Evidence;
use crate::commands::diagnose::observed::{ContainerTimeline, MomentKind, Observed, Role};
use crate::commands::diagnose::pod::STATUS_PRECISION;

/// ML304: did a batch pod's app finish while a helper the rule names ran on?
pub(super) fn job_helper_runs_on(observed: &Observed) -> Conclusion {
    let rule = &catalogue::JOB_HELPER_NEVER_EXITS;
    if !observed.has_status {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "no pod status in the data: which containers ran on is not known".into(),
        );
        cannot
            .missing
            .push("the pod as JSON or YAML (`kubectl get pod POD -o json`)".into());
        return cannot;
    }
    if let Some(conclusion) = not_a_batch_pod(rule, observed) {
        return conclusion;
    }
    // The regular containers, the mesh's proxy left out (ML301's).
    let regular: Vec<&ContainerTimeline> = observed
        .apps()
        .filter(|container| !container.native_sidecar)
        .collect();
    let named = |container: &ContainerTimeline| {
        observed
            .helpers
            .as_ref()
            .is_some_and(|helpers| helpers.contains(&container.name))
    };
    let (helpers, apps): (Vec<&ContainerTimeline>, Vec<&ContainerTimeline>) =
        regular.iter().partition(|container| named(container));
    let phase = observed.phase.as_ref();
    let completed = phase.is_some_and(|(phase, _)| phase == "Succeeded" || phase == "Failed");
    let all_ended = !regular.is_empty()
        && regular
            .iter()
            .all(|container| !container.running && container.finished.is_some());
    if completed || all_ended {
        let mut ruled_out = conclusion(
            rule,
            Status::RuledOut,
            match phase {
                Some((phase, _)) if completed => format!(
                    "the pod completed (phase {phase}): {}",
                    ends(&regular, observed)
                ),
                _ => format!(
                    "every regular container ended: {}{}",
                    ends(&regular, observed),
                    observed.proxy().filter(|proxy| proxy.running).map_or_else(
                        String::new,
                        |proxy| format!(
                            "; {} runs on, which is ML301's (a mesh proxy, no helper)",
                            proxy.name
                        )
                    )
                ),
            },
        );
        ruled_out.evidence.extend(
            regular
                .iter()
                .filter_map(|container| container.moments_of(MomentKind::Terminated).next())
                .map(|moment| cite(moment, "ended")),
        );
        ruled_out.evidence.extend(
            observed
                .containers
                .iter()
                .filter(|container| container.native_sidecar && container.role != Role::Proxy)
                .filter_map(|container| container.moments_of(MomentKind::Terminated).next())
                .map(|moment| cite(moment, "native sidecar stopped by the kubelet")),
        );
        if completed && let Some((phase, evidence)) = phase {
            ruled_out
                .evidence
                .push(field(evidence, None, &format!("the pod {phase}")));
        }
        return ruled_out;
    }
    let Some(rule_helpers) = observed.helpers.as_ref() else {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            "the pod's spec is not in the data: which containers the rule takes for helpers is \
             not known"
                .into(),
        );
        cannot
            .missing
            .push("the pod as JSON or YAML (`kubectl get pod POD -o json`)".into());
        return cannot;
    };
    if rule_helpers.is_empty() || helpers.is_empty() {
        return conclusion(
            rule,
            Status::RuledOut,
            "the pod's spec has no regular container the rule takes for a helper that runs \
             until stopped (no known helper image, none listed in meshlife.io/sidecars, none \
             with restartPolicy Always)"
                .into(),
        );
    }
    let unfinished: Vec<&str> = apps
        .iter()
        .filter(|app| app.finished.is_none() || app.running)
        .map(|app| app.name.as_str())
        .collect();
    if apps.is_empty() || !unfinished.is_empty() {
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            if apps.is_empty() {
                "the pod has no app container besides its helpers".to_string()
            } else {
                format!(
                    "{} had not finished when the data was taken",
                    unfinished.join(", ")
                )
            },
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
    let running: Vec<&&ContainerTimeline> =
        helpers.iter().filter(|helper| helper.running).collect();
    let Some(done) = done else {
        return conclusion(
            rule,
            Status::CannotTell,
            "the apps finished, but the data does not say when".into(),
        );
    };
    if running.is_empty() {
        // A helper ended, but the pod did not complete: something else holds it, or the data
        // was taken between the helper's end and the pod's.
        let mut cannot = conclusion(
            rule,
            Status::CannotTell,
            format!(
                "the apps finished at {} and no helper runs on, but the pod has not completed \
                 ({})",
                clock::clock(done),
                ends(&regular, observed)
            ),
        );
        cannot
            .missing
            .push("the pod's status once it completed (`kubectl get pod POD -o json`)".into());
        return cannot;
    }
    // How long after the app's end the helper was seen running: until the pod was read from
    // the API server, else the data's last moment.
    let seen = match (observed.read_at, observed.last_seen()) {
        (Some(read), _) => Some((
            read,
            Evidence {
                text: Some(format!("read at {}", clock::clock(read))),
                ..Evidence::field(&observed_file(observed), "")
            },
            "when the pod was read from the API server",
        )),
        (None, Some((at, evidence))) => Some((at, evidence, "the data's last moment")),
        (None, None) => None,
    };
    let ran_on = seen
        .as_ref()
        .map(|(at, _, _)| *at - done)
        .filter(|ran_on| *ran_on > 0);
    let exits: Vec<String> = apps
        .iter()
        .map(|app| {
            format!(
                "{} exited {}",
                app.name,
                app.exit_code
                    .map_or_else(|| "(code not given)".to_string(), |code| code.to_string())
            )
        })
        .collect();
    let names: Vec<String> = running
        .iter()
        .map(|helper| format!("\"{}\"", helper.name))
        .collect();
    let mut confirmed = conclusion(
        rule,
        Status::Confirmed,
        format!(
            "{} at {}; {} (a helper the rule says runs until stopped) {} still running {}: \
             the pod stays {} and its Job cannot complete",
            exits.join(", "),
            clock::clock(done),
            names.join(", "),
            if names.len() == 1 { "was" } else { "were" },
            match (&ran_on, &seen) {
                (Some(ran_on), Some((at, _, what))) => format!(
                    "{} after the app's end (at {}, {what})",
                    clock::span(*ran_on),
                    clock::clock(*at)
                ),
                _ => "when the data was taken".into(),
            },
            phase.map_or("Running", |(phase, _)| phase.as_str()),
        ),
    );
    confirmed.evidence.extend(
        apps.iter()
            .filter_map(|app| app.moments_of(MomentKind::Terminated).next())
            .map(|moment| cite(moment, "app finished")),
    );
    for helper in &running {
        match helper.moments_of(MomentKind::Started).next() {
            Some(started) if started.evidence.field.is_some() => confirmed.evidence.push(Cited {
                shows: "helper running (started then, no end)".into(),
                ..cite(started, "")
            }),
            _ => confirmed.evidence.push(Cited {
                evidence: Evidence {
                    text: Some("running".into()),
                    ..Evidence::field(&observed_file(observed), "")
                },
                time: None,
                shows: format!("{} running", helper.name),
            }),
        }
    }
    if let Some((phase, evidence)) = phase {
        confirmed
            .evidence
            .push(field(evidence, None, &format!("the pod still {phase}")));
    }
    if let (Some(_), Some((at, evidence, what))) = (ran_on, seen) {
        confirmed.evidence.push(field(
            &evidence,
            Some(Bound::at(at, STATUS_PRECISION)),
            &if observed.read_at.is_some() {
                format!("helper still running then ({what})")
            } else {
                format!("{what}, with the helper running in the status")
            },
        ));
    }
    confirmed.fix = Some(format!(
        "move {} to initContainers with restartPolicy: Always (a native sidecar, Kubernetes \
         1.29 or newer): the kubelet stops it once the app containers have finished; or have \
         the app tell it to stop (a quit endpoint, an exit flag)",
        names.join(", ")
    ));
    confirmed
}

/// `app ended at 11:10:49 (exit 0), helper at 11:10:51 (exit 0, 2 s after the app)`.
fn ends(containers: &[&ContainerTimeline], observed: &Observed) -> String {
    let first_end: Option<Millis> = containers
        .iter()
        .filter(|container| {
            !observed
                .helpers
                .as_ref()
                .is_some_and(|h| h.contains(&container.name))
        })
        .filter_map(|container| container.finished.and_then(|finished| finished.earliest))
        .max();
    let mut said: Vec<String> = containers
        .iter()
        .map(
            |container| match container.finished.and_then(|f| f.earliest) {
                Some(end) => format!(
                    "{} ended at {} (exit {}{})",
                    container.name,
                    clock::clock(end),
                    container
                        .exit_code
                        .map_or_else(|| "code not given".to_string(), |code| code.to_string()),
                    match first_end {
                        Some(first) if end > first => {
                            format!(", {} after the app", clock::span(end - first))
                        }
                        _ => String::new(),
                    }
                ),
                None if container.running => format!("{} running", container.name),
                None => format!("{} not started or its end not given", container.name),
            },
        )
        .collect();
    // Native sidecars (helpers moved out of the regular containers) ended too.
    said.extend(
        observed
            .containers
            .iter()
            .filter(|container| container.native_sidecar && container.role != Role::Proxy)
            .filter_map(|container| {
                let end = container.finished.and_then(|f| f.earliest)?;
                Some(format!(
                    "native sidecar {} stopped at {}{}",
                    container.name,
                    clock::clock(end),
                    match first_end {
                        Some(first) if end > first =>
                            format!(", {} after the app", clock::span(end - first)),
                        _ => String::new(),
                    }
                ))
            }),
    );
    said.join(", ")
}

fn field(evidence: &Evidence, time: Option<Bound>, shows: &str) -> Cited {
    Cited {
        evidence: evidence.clone(),
        time,
        shows: shows.to_string(),
    }
}

fn observed_file(observed: &Observed) -> String {
    observed.phase.as_ref().map_or_else(
        || observed.pod.clone(),
        |(_, evidence)| evidence.file.clone(),
    )
}
