//! ML301: a Job's app done while its proxy runs on.

use meshlife_policy::catalogue::{self, Rule};

use super::{Conclusion, Status, cite, conclusion, no_proxy};
use crate::commands::diagnose::clock::{self, SECOND};
use crate::commands::diagnose::observed::{ContainerTimeline, Mesh, Moment, MomentKind, Observed};

/// ML301: did a Job's app finish while its proxy ran on?
pub(super) fn job_proxy_runs_on(observed: &Observed) -> Conclusion {
    let rule = &catalogue::JOB_SIDECAR_NEVER_EXITS;
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    if let Some(conclusion) = not_a_batch_pod(rule, observed) {
        return conclusion;
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

/// The answer for a pod that is not a Job's, or of which the data does not say: the batch rules
/// (ML301, ML304) judge only a Job's pods.
pub(super) fn not_a_batch_pod(rule: &'static Rule, observed: &Observed) -> Option<Conclusion> {
    match observed.batch {
        Some(true) => None,
        Some(false) => Some(conclusion(
            rule,
            Status::RuledOut,
            "not a batch pod (no Job owns it and its restartPolicy is Always)".into(),
        )),
        None => {
            let mut cannot = conclusion(
                rule,
                Status::CannotTell,
                "the data does not say whether this is a Job's pod".into(),
            );
            cannot.missing.push(
                "the pod's ownerReferences or restartPolicy (`kubectl get pod -o yaml`)".into(),
            );
            Some(cannot)
        }
    }
}
