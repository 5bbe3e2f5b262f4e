//! What the observed timeline confirms or rules out, rule by rule: each conclusion names the
//! rule whose bug class it is about, says `confirmed`, `ruled-out` or `cannot-tell`, and rests
//! on evidence (file, line or field, time). Where the data cannot decide, it says what is
//! missing, never a guess. One file per rule family, as the policy's own rules: `startup`
//! (ML101, ML102, ML103), `init` (ML201, ML202), `batch` (ML301), `helpers` (ML304), `shutdown`
//! (ML401, ML404, ML603), `proxy_exit` (ML402), `prestop` (ML405), `listeners` (ML406), `restarts`
//! (ML407), `readiness` (ML502); and, for pods the API server refused to create (no pod to
//! observe), `native_unsupported` (ML104).

mod batch;
mod helpers;
mod init;
mod listeners;
mod native_unsupported;
mod prestop;
mod proxy_exit;
mod readiness;
mod restarts;
mod shutdown;
mod startup;

use meshlife_policy::catalogue::Rule;
use serde::Serialize;

use super::clock::Bound;
use super::evidence::Evidence;
use super::observed::{Mesh, Moment, Observed};

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

pub(super) fn conclusion(rule: &Rule, status: Status, summary: String) -> Conclusion {
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

pub(super) fn cite(moment: &Moment, shows: &str) -> Cited {
    Cited {
        evidence: moment.evidence.clone(),
        time: moment.at.point().is_some().then_some(moment.at),
        shows: shows.to_string(),
    }
}

/// Every rule's conclusion about `observed`.
pub fn conclude(observed: &Observed) -> Vec<Conclusion> {
    vec![
        startup::startup_race(observed),
        startup::hold_not_first(observed),
        startup::native_without_gate(observed),
        init::init_without_network(observed),
        init::init_after_redirect(observed),
        batch::job_proxy_runs_on(observed),
        helpers::job_helper_runs_on(observed),
        shutdown::killed_mid_drain(observed),
        shutdown::waypoint_killed_mid_drain(observed),
        proxy_exit::proxy_exits_before_app(observed),
        shutdown::streams_cut(observed),
        prestop::prestop_past_grace(observed),
        listeners::listeners_close_before_app(observed),
        restarts::in_place_restart_kills_proxy(observed),
        readiness::ready_before_serving(observed),
    ]
}

/// What the refusals of a workload's pods confirm: only ML104 is about pods that were never
/// created, and it is concluded only where the refusals are in the data.
pub fn conclude_refused(refused: &super::refused::RefusedPods) -> Vec<Conclusion> {
    vec![native_unsupported::proxy_lost_restart_policy(refused)]
}

/// How to see the proxy's own moments.
pub(super) fn proxy_log_hint(observed: &Observed) -> String {
    let name = observed.mesh.map_or("the proxy", Mesh::proxy_name);
    format!(
        "the log of {name} with timestamps (`kubectl logs POD -c {name} --timestamps`), for the \
         moment it was ready"
    )
}

pub(super) fn no_proxy(rule: &Rule, observed: &Observed) -> Option<Conclusion> {
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
