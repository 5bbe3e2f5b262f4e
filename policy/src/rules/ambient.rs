//! The rules of Istio's ambient mode. ML602: a pod that asks for both of Istio's data planes.
//! The injector adds the sidecar, and ztunnel then leaves the pod out of ambient (it skips pods
//! with an injected sidecar), so the pod runs as a sidecar pod whatever its namespace says.
//! ML404 for ambient pods: ztunnel carries their streams, and cuts them at its own rollouts.
//! ML603: a waypoint (the Envoy Deployment istiod renders for a Gateway of class
//! `istio-waypoint`) whose grace period ends before its drain. ML605: a waypoint of one pod.

use super::shutdown::stream_marker;
use super::{Context, Finding, image_is_exempt};
use crate::catalogue::{
    AMBIENT_WITH_SIDECAR, LONG_LIVED_STREAMS, WAYPOINT_SHORT_GRACE, WAYPOINT_SINGLE_REPLICA,
};
use crate::duration::format_ms;
use crate::mesh::{ISTIO_INJECT, ISTIO_PROXY_CONFIG, Mesh, in_list};
use crate::params::Settings;
use crate::proxy_config::parse_proxy_config;
use crate::workload::{Workload, WorkloadKind};

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

/// The pod label istiod gives the pods of a Gateway API gateway, with the class's name.
const GATEWAY_CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";

/// Whether an Istio gateway pod spec is a waypoint's: its class label, or the proxy's
/// `proxy waypoint` arguments (istio `manifests/charts/istio-control/istio-discovery/files/
/// waypoint.yaml`).
fn is_waypoint(workload: &Workload) -> bool {
    workload.pod_meta.label(GATEWAY_CLASS_LABEL) == Some("istio-waypoint")
        || workload.spec.containers().iter().any(|container| {
            container.name() == "istio-proxy" && {
                let args = container.args();
                args.first().is_some_and(|arg| arg.as_str() == "proxy")
                    && args.get(1).is_some_and(|arg| arg.as_str() == "waypoint")
            }
        })
}

/// ML605. istiod renders a waypoint's Deployment without `replicas`, so that an HPA can own
/// them (istio `files/waypoint.yaml`): unscaled, it runs one pod, and every eviction, node
/// drain or reschedule leaves the namespace's or services' L7 traffic without a waypoint until
/// the next pod is ready (ztunnel sends that traffic to the waypoint and has nowhere else to
/// send it). A PodDisruptionBudget cannot protect one pod without blocking node drains.
pub fn waypoint_single_replica(
    workload: &Workload,
    settings: &Settings,
    findings: &mut Vec<Finding>,
) {
    if !settings.selects(&WAYPOINT_SINGLE_REPLICA)
        || workload.kind != WorkloadKind::Deployment
        || !is_waypoint(workload)
    {
        return;
    }
    let replicas = workload.replicas.unwrap_or(1);
    if replicas != 1 {
        return;
    }
    let name = waypoint_name(workload);
    let (path, count) = match workload.replicas {
        Some(_) => ("spec.replicas".to_string(), "replicas: 1".to_string()),
        None => (
            "spec".to_string(),
            "no replicas, so one pod (istiod renders none, leaving them to an autoscaler)"
                .to_string(),
        ),
    };
    let message = format!(
        "the Istio waypoint \"{name}\" has {count}: while that pod is evicted by a node drain, rescheduled or restarted, the L7 traffic of its namespace or services has no waypoint, and ztunnel's connections to it fail until a new pod is ready; a PodDisruptionBudget cannot keep a single pod up without blocking node drains."
    );
    let fix = "Run two or more waypoint pods: a HorizontalPodAutoscaler with minReplicas: 2 that targets this Deployment (istiod leaves its replicas to the autoscaler), or spec.replicas: 2 in the ConfigMap the Gateway names in spec.infrastructure.parametersRef; then a PodDisruptionBudget with maxUnavailable: 1 for its pods.".to_string();
    findings.push(Finding {
        rule: &WAYPOINT_SINGLE_REPLICA,
        severity: WAYPOINT_SINGLE_REPLICA.severity,
        path,
        message,
        fix,
        mesh: Some(Mesh::Istio),
        container: None,
    });
}

/// The Gateway's name for a waypoint's pods, else the Deployment's.
fn waypoint_name<'w>(workload: &'w Workload) -> &'w str {
    workload
        .pod_meta
        .label("gateway.networking.k8s.io/gateway-name")
        .or(workload.object_meta.name.as_ref().map(|name| name.as_str()))
        .unwrap_or("waypoint")
}

/// How long a gateway's pilot-agent drains after SIGTERM before it exits: the pod's
/// `terminationDrainDuration`, else the mesh's; and whether the pod's annotation set it.
pub(crate) fn gateway_drain_ms(workload: &Workload, settings: &Settings) -> (u64, bool) {
    match workload
        .annotation(ISTIO_PROXY_CONFIG)
        .and_then(|text| parse_proxy_config(text).0.termination_drain_ms)
    {
        Some(ms) => (ms, true),
        None => (settings.istio_drain_ms, false),
    }
}

/// ML603. A waypoint is an Envoy run by pilot-agent, which drains for terminationDrainDuration
/// after SIGTERM, as a classic sidecar does (ML401): a grace period shorter than that drain is
/// cut by SIGKILL. istiod rendered every waypoint with terminationGracePeriodSeconds: 2 until
/// Istio 1.28 (istio/istio PR #55799), so the drain of 5s was always cut at 2s.
pub fn waypoint_short_grace(workload: &Workload, settings: &Settings, findings: &mut Vec<Finding>) {
    if !settings.selects(&WAYPOINT_SHORT_GRACE) || !is_waypoint(workload) {
        return;
    }
    let (drain_ms, from_annotation) = gateway_drain_ms(workload, settings);
    let grace = workload.spec.grace_period_seconds();
    let grace_ms = u64::try_from(grace).unwrap_or(0).saturating_mul(1000);
    if grace_ms >= drain_ms {
        return;
    }
    let drain = format_ms(drain_ms);
    let source = if from_annotation {
        "its proxy.istio.io/config"
    } else {
        "the mesh's terminationDrainDuration"
    };
    let name = waypoint_name(workload);
    // The 2s is Istio's own rendering before 1.28; another value was set by someone.
    let origin = if grace == 2 {
        " (Istio before 1.28 rendered every waypoint with 2s, PR #55799)"
    } else {
        ""
    };
    let message = format!(
        "the Istio waypoint \"{name}\" (the Envoy that carries the L7 traffic of its namespace or services) has terminationGracePeriodSeconds {grace}, shorter than its drain of {drain} ({source}): at every waypoint rollout, eviction or node drain the kubelet kills it {grace}s after SIGTERM, and requests and streams still in flight through it are cut{origin}."
    );
    let fix = format!(
        "Upgrade Istio to 1.28 or later, whose waypoints keep the default grace period of 30s, or give the waypoint a terminationGracePeriodSeconds longer than {drain} through the ConfigMap its Gateway names in spec.infrastructure.parametersRef."
    );
    findings.push(Finding {
        rule: &WAYPOINT_SHORT_GRACE,
        severity: WAYPOINT_SHORT_GRACE.severity,
        path: workload.field_path("terminationGracePeriodSeconds"),
        message,
        fix,
        mesh: Some(Mesh::Istio),
        container: Some("istio-proxy".to_string()),
    });
}
