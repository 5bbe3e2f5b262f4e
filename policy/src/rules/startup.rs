//! Startup order: the app must not run before its proxy can carry traffic (ML101 to ML104).

use super::{Context, Finding, counted};
use crate::catalogue::{
    NATIVE_SIDECAR_NO_STARTUP_GATE, NATIVE_SIDECAR_UNSUPPORTED, STARTUP_HOLD_NOT_FIRST,
    STARTUP_NO_HOLD,
};
use crate::mesh::{Mesh, Placement};

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    context.run(
        &NATIVE_SIDECAR_UNSUPPORTED,
        findings,
        native_sidecar_unsupported,
    );
    match context.decision.placement {
        Placement::Classic { hold: false } if context.decision.hold_hook_misplaced => {
            context.run(&STARTUP_HOLD_NOT_FIRST, findings, startup_hold_not_first)
        }
        Placement::Classic { hold: false } => {
            context.run(&STARTUP_NO_HOLD, findings, startup_no_hold)
        }
        Placement::Native => context.run(
            &NATIVE_SIDECAR_NO_STARTUP_GATE,
            findings,
            native_sidecar_no_startup_gate,
        ),
        Placement::Classic { hold: true } | Placement::BrokenInit => {}
    }
}

fn hold_fix(mesh: Mesh) -> String {
    match mesh {
        Mesh::Istio => "Add the pod annotation proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}' (or set meshConfig.defaultConfig.holdApplicationUntilProxyStarts: true), or use native sidecars with sidecar.istio.io/nativeSidecar: \"true\" on Kubernetes 1.29 or later.".into(),
        Mesh::Linkerd => "Set the pod annotation config.linkerd.io/proxy-await: \"enabled\", or use native sidecars with config.linkerd.io/proxy-enable-native-sidecar: \"true\" on Kubernetes 1.29 or later.".into(),
    }
}

/// ML101: a classic proxy the app does not wait for.
fn startup_no_hold(context: &Context, findings: &mut Vec<Finding>) {
    if context.app_containers().next().is_none() {
        return;
    }
    let message = format!(
        "{} can start before {} is ready, so first outbound calls fail (connection refused or 503) until the proxy has its configuration.",
        context.app_containers_phrase(),
        context.proxy_phrase()
    );
    findings.push(context.finding(
        &STARTUP_NO_HOLD,
        context.proxy_or_spec_path(),
        message,
        hold_fix(context.mesh()),
    ));
}

/// ML102: the hold hook is there, but containers before the proxy start unguarded.
fn startup_hold_not_first(context: &Context, findings: &mut Vec<Finding>) {
    let Some(index) = context.decision.proxy_index else {
        return;
    };
    let before: Vec<String> = context
        .app_containers()
        .filter(|(position, _)| *position < index)
        .map(|(_, container)| format!("\"{}\"", container.name()))
        .collect();
    if before.is_empty() {
        return;
    }
    let proxy = context.proxy_name();
    let message = format!(
        "container \"{proxy}\" has the hold hook but is containers[{index}], not containers[0], so {} before it can start unguarded and call out before the proxy is ready.",
        counted("container", &before)
    );
    let fix = format!(
        "Move \"{proxy}\" to containers[0] (re-inject with the mesh's hold setting rather than editing hooks by hand), so its postStart wait gates every app container."
    );
    findings.push(
        context
            .finding(
                &STARTUP_HOLD_NOT_FIRST,
                context.workload.container_path(index),
                message,
                fix,
            )
            .about_container(proxy),
    );
}

/// ML103: a native proxy counts as started as soon as it runs unless something gates it.
fn native_sidecar_no_startup_gate(context: &Context, findings: &mut Vec<Finding>) {
    if !context.decision.injected {
        return;
    }
    let Some(proxy) = context.decision.proxy(context.workload) else {
        return;
    };
    if proxy.has_startup_probe || proxy.post_start().is_some() {
        return;
    }
    let name = proxy.name();
    let message = format!(
        "native sidecar \"{name}\" has neither a startupProbe nor a postStart hook, so Kubernetes starts the app containers as soon as the proxy process runs, before it is ready to carry traffic."
    );
    let fix = match context.mesh() {
        Mesh::Istio => "Keep the injected startupProbe on istio-proxy (Helm values.global.proxy.startupProbe.enabled: true); do not strip it from the pod spec.".to_string(),
        Mesh::Linkerd => "Set config.linkerd.io/proxy-await: \"enabled\" so the injector gives linkerd-proxy a startupProbe on :4191/ready.".to_string(),
    };
    let path = context.proxy_or_spec_path();
    findings.push(
        context
            .finding(&NATIVE_SIDECAR_NO_STARTUP_GATE, path, message, fix)
            .about_container(name),
    );
}

/// ML104: native sidecars the cluster cannot run, or a proxy init container that blocks.
fn native_sidecar_unsupported(context: &Context, findings: &mut Vec<Finding>) {
    let decision = context.decision;
    let proxy = context.proxy_name();
    if decision.placement == Placement::BrokenInit {
        let Some(index) = decision.proxy_index else {
            return;
        };
        let message = format!(
            "init container \"{proxy}\" has no restartPolicy: Always, so Kubernetes waits for the proxy to exit before starting the app and the pod never starts."
        );
        let fix = format!(
            "Set restartPolicy: Always on initContainers[{index}] (\"{proxy}\") on Kubernetes 1.29 or later, or re-inject the pod with native sidecars switched off."
        );
        findings.push(
            context
                .finding(
                    &NATIVE_SIDECAR_UNSUPPORTED,
                    context.workload.init_container_path(index),
                    message,
                    fix,
                )
                .about_container(proxy),
        );
        return;
    }
    let Some(reason) = &decision.native_unsupported else {
        return;
    };
    let minor = context.settings.raw.kubernetes_minor_version;
    let message = format!(
        "{reason}: Kubernetes 1.{minor} does not run init containers with restartPolicy: Always as sidecars, so the API server rejects the pod or the proxy blocks its startup."
    );
    let (annotation, parameter) = match context.mesh() {
        Mesh::Istio => (
            "sidecar.istio.io/nativeSidecar: \"false\"",
            "istio.nativeSidecars",
        ),
        Mesh::Linkerd => (
            "config.linkerd.io/proxy-enable-native-sidecar: \"false\"",
            "linkerd.nativeSidecars",
        ),
    };
    let fix = format!(
        "Set {annotation} (or turn the mesh's native sidecar default and the {parameter} parameter off) until every kubelet runs Kubernetes 1.29 or later."
    );
    findings.push(context.finding(
        &NATIVE_SIDECAR_UNSUPPORTED,
        context.proxy_or_spec_path(),
        message,
        fix,
    ));
}
