//! ML201 and ML202: a user init container without network under the mesh's capture. The two
//! fail alike (connections refused, no proxy yet); they differ in where the capture came from,
//! and so in which init containers they are about: ML201 the CNI's, installed with the pod's
//! network before any init container; ML202 an `istio-init` / `linkerd-init` that ran before
//! the user's init container (placed there by a webhook after the mesh's, as the reality stage
//! of compat/cluster runs it). An init container that runs before the redirect container, with
//! no CNI, runs without capture: neither rule's.

use meshlife_policy::catalogue::{self, Rule};

use super::{Conclusion, Status, cite, conclusion, no_proxy};
use crate::commands::diagnose::observed::{
    ContainerTimeline, Mesh, Moment, MomentKind, Observed, Role,
};

/// The mesh's init containers that install the redirect themselves; the validators
/// (`istio-validation`, `linkerd-network-validator`) only check the CNI's.
const REDIRECT_INIT: [&str; 2] = ["istio-init", "linkerd-init"];

/// ML201: did a user init container fail for want of network under the CNI's capture?
pub(super) fn init_without_network(observed: &Observed) -> Conclusion {
    init_network(&catalogue::INIT_CONTAINER_NO_NETWORK, observed)
}

/// ML202: did a user init container that ran after the mesh's redirect fail for want of network?
pub(super) fn init_after_redirect(observed: &Observed) -> Conclusion {
    init_network(&catalogue::INIT_CONTAINER_AFTER_REDIRECT, observed)
}

/// Where the pod's capture came from, by the order of its init containers.
enum Capture {
    /// An init container installs the redirect, at this position among the pod's containers.
    RedirectInit(usize, String),
    /// No init container installs it: the CNI does, before every init container.
    Cni,
}

fn init_network(rule: &Rule, observed: &Observed) -> Conclusion {
    if let Some(conclusion) = no_proxy(rule, observed) {
        return conclusion;
    }
    let position = |name: &str| {
        observed
            .containers
            .iter()
            .position(|container| container.name == name)
    };
    let capture = observed
        .containers
        .iter()
        .enumerate()
        .find(|(_, container)| {
            container.role == Role::MeshInit && REDIRECT_INIT.contains(&container.name.as_str())
        })
        .map_or(Capture::Cni, |(at, container)| {
            Capture::RedirectInit(at, container.name.clone())
        });
    let after_redirect_rule = rule.id == catalogue::INIT_CONTAINER_AFTER_REDIRECT.id;
    // The pod's own init containers this rule is about.
    let all_inits: Vec<&ContainerTimeline> = observed
        .containers
        .iter()
        .filter(|container| container.role == Role::Init)
        .collect();
    let inits: Vec<&ContainerTimeline> = all_inits
        .iter()
        .copied()
        .filter(|init| match &capture {
            Capture::RedirectInit(at, _) => {
                after_redirect_rule == position(&init.name).is_some_and(|own| own > *at)
            }
            Capture::Cni => !after_redirect_rule,
        })
        .collect();
    if inits.is_empty() && !all_inits.is_empty() {
        let summary = match &capture {
            Capture::RedirectInit(_, redirect) if after_redirect_rule => format!(
                "every init container of the pod's own ran before {redirect} installed the redirect (the injector's order): {}",
                names(&all_inits)
            ),
            Capture::RedirectInit(_, redirect) => format!(
                "{redirect} installs the redirect, not the CNI: {} ran after it (ML202's bug class) or before it, without capture",
                names(&all_inits)
            ),
            Capture::Cni => "no init container installs the redirect (the CNI does, before every init container): ML201's bug class, not this one"
                .into(),
        };
        return conclusion(rule, Status::RuledOut, summary);
    }
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
                 ({}) and {} not yet running",
                init.name,
                if init.restarts > 0 {
                    format!(" ({} restarts)", init.restarts)
                } else {
                    String::new()
                },
                errors.len(),
                match &capture {
                    Capture::RedirectInit(_, redirect) =>
                        format!("installed by {redirect} before it"),
                    Capture::Cni => "the CNI's, from the pod's start".to_string(),
                },
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
            _ if after_redirect_rule => "move the init container before the mesh's (the \
                                         injector's order): make the webhook that adds it run \
                                         before the mesh's, or add it in the manifest; or run \
                                         it as the proxy's UID, or use native sidecars"
                .into(),
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

fn names(inits: &[&ContainerTimeline]) -> String {
    inits
        .iter()
        .map(|init| init.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
