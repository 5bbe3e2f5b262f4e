//! ML602: a pod that asks for both of Istio's data planes. The injector adds the sidecar, and
//! ztunnel then leaves the pod out of ambient (it skips pods with an injected sidecar), so the
//! pod runs as a sidecar pod whatever its namespace says.

use super::{Context, Finding};
use crate::catalogue::AMBIENT_WITH_SIDECAR;
use crate::mesh::{ISTIO_INJECT, Mesh, in_list};

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
