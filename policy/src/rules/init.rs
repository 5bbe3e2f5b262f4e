//! Init containers and traffic capture (ML201, ML202): capture that is on before any proxy
//! runs leaves init containers without a network.

use super::{Context, Finding};
use crate::catalogue::{INIT_CONTAINER_AFTER_REDIRECT, INIT_CONTAINER_NO_NETWORK};
use crate::mesh::Mesh;
use crate::violation::Severity;

const ISTIO_EXCLUSIONS: [&str; 3] = [
    "traffic.sidecar.istio.io/excludeOutboundPorts",
    "traffic.sidecar.istio.io/excludeOutboundIPRanges",
    "traffic.sidecar.istio.io/includeOutboundIPRanges",
];
const LINKERD_EXCLUSIONS: [&str; 2] = [
    "config.linkerd.io/skip-outbound-ports",
    "config.linkerd.io/skip-subnets",
];

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    if !context.decision.is_classic() {
        return;
    }
    context.run(
        &INIT_CONTAINER_NO_NETWORK,
        findings,
        init_container_no_network,
    );
    context.run(
        &INIT_CONTAINER_AFTER_REDIRECT,
        findings,
        init_container_after_redirect,
    );
}

fn bypass_advice(context: &Context) -> (i64, &'static str, &'static str) {
    let uid = context.mesh().proxy_uid(context.settings);
    match context.mesh() {
        Mesh::Istio => (
            uid,
            "traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts",
            "sidecar.istio.io/nativeSidecar: \"true\"",
        ),
        Mesh::Linkerd => (
            uid,
            "config.linkerd.io/skip-outbound-ports or skip-subnets",
            "config.linkerd.io/proxy-enable-native-sidecar: \"true\"",
        ),
    }
}

/// ML201: with CNI, capture starts with the pod; a classic proxy starts after the init
/// containers, so their connections go nowhere unless they run as the proxy's UID.
fn init_container_no_network(context: &Context, findings: &mut Vec<Finding>) {
    if !context.decision.cni {
        return;
    }
    let (proxy_uid, exclusion, native) = bypass_advice(context);
    let exclusions: &[&str] = match context.mesh() {
        Mesh::Istio => &ISTIO_EXCLUSIONS,
        Mesh::Linkerd => &LINKERD_EXCLUSIONS,
    };
    // An empty value excludes nothing, and so does includeOutboundIPRanges "*" (capture all).
    let excluded = exclusions.iter().any(|key| {
        context.workload.annotation(key).is_some_and(|value| {
            let value = value.trim();
            let captures_all = value == "*" && key.ends_with("includeOutboundIPRanges");
            !value.is_empty() && !captures_all
        })
    });
    let pod_uid = pod_run_as_user(context);
    for (index, container) in context.user_init_containers() {
        if container.run_as_user().or(pod_uid) == Some(proxy_uid) {
            continue;
        }
        let name = container.name();
        let mut message = format!(
            "init container \"{name}\" runs while CNI traffic capture is already on but before {} starts, so its outbound connections fail",
            context.proxy_phrase()
        );
        if excluded {
            message.push_str(", unless the pod's capture exclusions cover its destinations.");
        } else {
            message.push('.');
        }
        let fix = format!(
            "Run initContainers[{index}] (\"{name}\") as the proxy UID (securityContext.runAsUser: {proxy_uid}), exclude its destinations with {exclusion}, or use native sidecars ({native})."
        );
        let finding = context
            .finding(
                &INIT_CONTAINER_NO_NETWORK,
                context.workload.init_container_path(index),
                message,
                fix,
            )
            .about_container(name);
        findings.push(if excluded {
            finding.with_severity(Severity::Info)
        } else {
            finding
        });
    }
}

fn pod_run_as_user(context: &Context) -> Option<i64> {
    context.workload.spec.security_context.as_ref()?.run_as_user
}

/// ML202: an init container placed after the redirect step (often by a later webhook).
fn init_container_after_redirect(context: &Context, findings: &mut Vec<Finding>) {
    let Some(redirect_index) = context.decision.redirect_init_index else {
        return;
    };
    let redirect = context.workload.spec.init_containers()[redirect_index].name();
    let (proxy_uid, _, native) = bypass_advice(context);
    let pod_uid = pod_run_as_user(context);
    // The redirect rules let the proxy's UID through, so such an init container keeps its network.
    for (index, container) in context.user_init_containers().filter(|(index, container)| {
        *index > redirect_index && container.run_as_user().or(pod_uid) != Some(proxy_uid)
    }) {
        let name = container.name();
        let message = format!(
            "init container \"{name}\" runs after \"{redirect}\" has redirected the pod's traffic but before any proxy exists, so its network connections fail."
        );
        let fix = format!(
            "Move initContainers[{index}] (\"{name}\") before \"{redirect}\" (or order the webhooks so the mesh injects last), run it as UID {proxy_uid}, or use native sidecars ({native})."
        );
        findings.push(
            context
                .finding(
                    &INIT_CONTAINER_AFTER_REDIRECT,
                    context.workload.init_container_path(index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}
