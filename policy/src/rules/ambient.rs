//! The rules of Istio's ambient mode. ML602: a pod that asks for both of Istio's data planes.
//! The injector adds the sidecar, and ztunnel then leaves the pod out of ambient (it skips pods
//! with an injected sidecar), so the pod runs as a sidecar pod whatever its namespace says.
//! ML404 for ambient pods: ztunnel carries their streams, and cuts them at its own rollouts.

use super::shutdown::stream_marker;
use super::{Context, Finding, image_is_exempt};
use crate::catalogue::{AMBIENT_WITH_SIDECAR, LONG_LIVED_STREAMS};
use crate::mesh::{ISTIO_INJECT, Mesh, in_list};
use crate::params::Settings;
use crate::workload::Workload;

/// The chart's terminationGracePeriodSeconds for ztunnel; it drains for one second less.
const ZTUNNEL_DRAIN_SECONDS: i64 = 29;

/// ML404 for a pod in ambient mode (istio `architecture/ambient/ztunnel-cni-lifecycle.md`): at a
/// ztunnel rollout the old ztunnel drains for its grace period minus one second and then closes
/// what is still open; an L4 proxy cannot tell the app to reconnect. On the pod's own deletion
/// ztunnel learns of it only after every container exited, so no GOAWAY reaches HBONE peers
/// (ztunnel#1191): only the app can end its streams cleanly, with a preStop and the grace.
pub fn streams_through_ztunnel(
    workload: &Workload,
    settings: &Settings,
    findings: &mut Vec<Finding>,
) {
    // A batch pod's streams end with its work, as ML404 says for sidecar pods.
    if !settings.selects(&LONG_LIVED_STREAMS) || workload.is_batch() {
        return;
    }
    let apps: Vec<(usize, &crate::input::Container)> = workload
        .spec
        .containers()
        .iter()
        .enumerate()
        .filter(|(_, container)| !image_is_exempt(settings, container))
        .collect();
    let grace = workload.spec.grace_period_seconds();
    for &(index, container) in &apps {
        let Some((marker, protocol)) = stream_marker(workload, container, apps.len()) else {
            continue;
        };
        let name = container.name();
        let own_rollouts = match (grace < 30, container.pre_stop().is_some()) {
            (false, true) => String::new(),
            (true, false) => format!(
                "; its own rollouts cut them as well, since the grace period is only {grace}s and the container has no preStop"
            ),
            (true, true) => format!(
                "; its own rollouts cut them as well, since the grace period is only {grace}s"
            ),
            (false, false) => {
                "; its own rollouts cut them as well, since the container has no preStop".into()
            }
        };
        let own_fix = if own_rollouts.is_empty() {
            String::new()
        } else {
            format!(
                " Give \"{name}\" a preStop delay and terminationGracePeriodSeconds of at least 30, so that at its own rollouts it can send GOAWAY and drain."
            )
        };
        let message = format!(
            "container \"{name}\" serves {protocol} streams ({marker}) in Istio's ambient mode, where ztunnel carries them: at every ztunnel rollout on the pod's node (an Istio upgrade, a ztunnel restart) the old ztunnel drains for its grace period minus 1s ({ZTUNNEL_DRAIN_SECONDS}s with the chart's default) and then closes the streams still open, and it cannot tell the app or its clients to reconnect{own_rollouts}."
        );
        let fix = format!(
            "Make the clients of \"{name}\" reconnect with backoff when a stream is cut (gRPC: keepalive and retry on UNAVAILABLE; WebSocket: reconnect), keep each stream shorter than ztunnel's drain (a server-side maximum connection age, such as gRPC MaxConnectionAge 25s), and roll ztunnel one node at a time.{own_fix}"
        );
        findings.push(Finding {
            rule: &LONG_LIVED_STREAMS,
            severity: LONG_LIVED_STREAMS.severity,
            path: workload.container_path(index),
            message,
            fix,
            mesh: Some(Mesh::Istio),
            container: Some(name.to_string()),
        });
    }
}

const DATAPLANE_MODE: &str = "istio.io/dataplane-mode";

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    if context.mesh() != Mesh::Istio {
        return;
    }
    let workload = context.workload;
    let pod_mode = workload.pod_meta.label(DATAPLANE_MODE);
    if pod_mode == Some("none") {
        // The pod's own way to say "not ambient": the sidecar is chosen on purpose.
        return;
    }
    let namespace = workload.namespace.as_deref().unwrap_or("");
    let namespace_ambient = match &workload.namespace_meta {
        Some(_) => workload.namespace_label(DATAPLANE_MODE) == Some("ambient"),
        None => in_list(&context.settings.raw.istio.ambient_namespaces, namespace),
    };
    let by_pod = pod_mode == Some("ambient");
    if !by_pod && !namespace_ambient {
        return;
    }
    let (request, request_path) = if context.decision.injected {
        ("an injected istio-proxy".to_string(), None)
    } else if let Some(value) = workload.pod_meta.label(ISTIO_INJECT) {
        (
            format!("the label {ISTIO_INJECT}: \"{value}\""),
            Some(workload.label_path(ISTIO_INJECT)),
        )
    } else if let Some(revision) = workload.pod_meta.label("istio.io/rev") {
        (
            format!("the label istio.io/rev: \"{revision}\""),
            Some(workload.label_path("istio.io/rev")),
        )
    } else {
        ("a sidecar request".to_string(), None)
    };
    let (ambient, path) = if by_pod {
        (
            format!(
                "the pod template asks for both Istio ambient (label {DATAPLANE_MODE}: ambient) and a sidecar ({request})"
            ),
            workload.label_path(DATAPLANE_MODE),
        )
    } else {
        (
            format!(
                "namespace {namespace} is in Istio ambient mode, but the pod asks for a sidecar ({request})"
            ),
            request_path.unwrap_or_else(|| workload.spec_path().to_string()),
        )
    };
    let message = format!(
        "{ambient}: the sidecar wins, and ztunnel leaves a pod with an injected sidecar out of ambient, so the pod runs as a sidecar pod and the namespace's ambient policies and waypoints do not apply to it."
    );
    let fix = format!(
        "Drop {request} to run the pod in ambient mode, or label the pod template {DATAPLANE_MODE}: none to keep the sidecar on purpose."
    );
    findings.push(context.finding(&AMBIENT_WITH_SIDECAR, path, message, fix));
}
