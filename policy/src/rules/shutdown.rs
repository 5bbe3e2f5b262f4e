//! Shutdown order (ML401 to ML405): the proxy must outlive the app's last request, and the
//! whole sequence must fit in the grace period.

use super::{Context, Finding, prestop_delay_seconds};
use crate::catalogue::{
    DRAIN_EXCEEDS_GRACE, LINKERD_APP_SHUTDOWN_UNPROTECTED, LISTENERS_CLOSE_BEFORE_APP,
    LONG_LIVED_STREAMS, PRESTOP_EXCEEDS_GRACE, PROXY_EXITS_BEFORE_APP,
};
use crate::duration::format_ms;
use crate::input::{Container, IntOrString};
use crate::mesh::{LINKERD_WAIT_BEFORE_EXIT, Mesh};
use crate::violation::Severity;
use crate::workload::Workload;

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    let classic = context.decision.is_classic();
    match context.mesh() {
        Mesh::Istio if classic => {
            context.run(&DRAIN_EXCEEDS_GRACE, findings, drain_exceeds_grace);
            context.run(&PROXY_EXITS_BEFORE_APP, findings, proxy_exits_before_app);
            context.run(
                &LISTENERS_CLOSE_BEFORE_APP,
                findings,
                listeners_close_before_app,
            );
        }
        Mesh::Linkerd if classic => context.run(
            &LINKERD_APP_SHUTDOWN_UNPROTECTED,
            findings,
            linkerd_app_shutdown_unprotected,
        ),
        _ => {}
    }
    if !context.workload.is_batch() {
        context.run(&LONG_LIVED_STREAMS, findings, long_lived_streams);
    }
    context.run(&PRESTOP_EXCEEDS_GRACE, findings, prestop_exceeds_grace);
}

fn grace_seconds(context: &Context) -> i64 {
    context.workload.spec.grace_period_seconds()
}

fn grace_path(context: &Context) -> String {
    context.workload.field_path("terminationGracePeriodSeconds")
}

/// ML401. The kubelet sends SIGTERM to the classic proxy when the pod starts terminating (it has
/// no preStop) and SIGKILL to every container at the grace deadline, which counts from the same
/// moment; pilot-agent drains for terminationDrainDuration after SIGTERM and then exits. A drain
/// longer than the grace period is always cut (error). At equality the drain's end and the
/// SIGKILL race, with no margin for anything that delays the proxy (warning).
fn drain_exceeds_grace(context: &Context, findings: &mut Vec<Finding>) {
    let decision = context.decision;
    let grace = grace_seconds(context);
    let grace_ms = (grace.max(0) as u64).saturating_mul(1000);
    if decision.drain_ms >= grace_ms {
        let proxy = context.proxy_phrase();
        let drain = format_ms(decision.drain_ms);
        let source = if decision.drain_from_annotation {
            "proxy.istio.io/config"
        } else {
            "the mesh default"
        };
        let equal = decision.drain_ms == grace_ms;
        let message = if equal {
            format!(
                "{proxy} drains for terminationDrainDuration {drain} (from {source}), exactly terminationGracePeriodSeconds {grace}, so there is no margin: the proxy's drain ends exactly when the kubelet kills the pod, so any delay cuts the last connections."
            )
        } else {
            format!(
                "{proxy} drains for terminationDrainDuration {drain} (from {source}), longer than terminationGracePeriodSeconds {grace}, so the kubelet kills the pod before the drain ends and in-flight requests are cut."
            )
        };
        let needed = decision.drain_ms.div_ceil(1000);
        let fix = if grace > 0 {
            format!(
                "Raise terminationGracePeriodSeconds above {needed} (leaving time for the app's own shutdown), or lower terminationDrainDuration in the proxy.istio.io/config annotation below {grace}s."
            )
        } else {
            format!(
                "Raise terminationGracePeriodSeconds from 0 to more than {needed} so the proxy can drain (0 kills the pod at once); exempt the workload if an immediate kill is intended."
            )
        };
        let finding = context.finding(&DRAIN_EXCEEDS_GRACE, grace_path(context), message, fix);
        findings.push(if equal {
            finding.with_severity(Severity::Warning)
        } else {
            finding
        });
    }
    if decision.exit_on_zero_active_connections && decision.minimum_drain_ms >= grace_ms {
        let proxy = context.proxy_phrase();
        let minimum = format_ms(decision.minimum_drain_ms);
        let equal = decision.minimum_drain_ms == grace_ms;
        let message = if equal {
            format!(
                "{proxy} waits MINIMUM_DRAIN_DURATION {minimum} (EXIT_ON_ZERO_ACTIVE_CONNECTIONS is on), exactly terminationGracePeriodSeconds {grace}, so there is no margin: the proxy's minimum drain ends exactly when the kubelet kills the pod, so any delay cuts the last connections."
            )
        } else {
            format!(
                "{proxy} waits MINIMUM_DRAIN_DURATION {minimum} (EXIT_ON_ZERO_ACTIVE_CONNECTIONS is on), longer than terminationGracePeriodSeconds {grace}, so the kubelet kills the pod before the proxy can drain."
            )
        };
        let needed = decision.minimum_drain_ms.div_ceil(1000);
        let fix = if grace > 0 {
            format!(
                "Lower proxyMetadata.MINIMUM_DRAIN_DURATION in proxy.istio.io/config below {grace}s, or raise terminationGracePeriodSeconds above {needed}."
            )
        } else {
            format!(
                "Raise terminationGracePeriodSeconds from 0 to more than {needed} so the proxy can drain."
            )
        };
        let finding = context.finding(&DRAIN_EXCEEDS_GRACE, grace_path(context), message, fix);
        findings.push(if equal {
            finding.with_severity(Severity::Warning)
        } else {
            finding
        });
    }
}

/// The app containers whose preStop delay is known, with that delay in seconds.
fn known_prestop_delays<'c>(
    context: &'c Context,
) -> impl Iterator<Item = (usize, &'c Container<'c>, i64)> {
    context.app_containers().filter_map(|(index, container)| {
        let delay = prestop_delay_seconds(container.pre_stop()?)?;
        Some((index, container, delay))
    })
}

fn prestop_path(context: &Context, index: usize) -> String {
    format!(
        "{}.lifecycle.preStop",
        context.workload.container_path(index)
    )
}

/// ML402.
fn proxy_exits_before_app(context: &Context, findings: &mut Vec<Finding>) {
    let decision = context.decision;
    if decision.exit_on_zero_active_connections {
        return;
    }
    // A custom preStop on the proxy itself (injected, or declared for the injector to merge)
    // already keeps it alive longer.
    if decision
        .declared_proxy(context.workload)
        .is_some_and(|proxy| proxy.pre_stop().is_some())
    {
        return;
    }
    let drain = format_ms(decision.drain_ms);
    for (index, container, delay) in known_prestop_delays(context) {
        if (delay.max(0) as u64).saturating_mul(1000) < decision.drain_ms {
            continue;
        }
        let name = container.name();
        let message = format!(
            "container \"{name}\" waits {delay}s in preStop but {} drains for only {drain} and then exits, so requests the app still makes or serves after that fail.",
            context.proxy_phrase()
        );
        let fix = format!(
            "Set terminationDrainDuration in proxy.istio.io/config above {delay}s (and below terminationGracePeriodSeconds), or set proxyMetadata.EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\" so the proxy stays until connections close."
        );
        findings.push(
            context
                .finding(
                    &PROXY_EXITS_BEFORE_APP,
                    prestop_path(context, index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}

/// Whether the native istio-proxy drains at the pod's deletion: Istio's native template gives it
/// the preStop `pilot-agent request POST drain`; an injected proxy without it (an older
/// template, a custom one) drains only at its SIGTERM, after the apps. For the timeline.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn native_proxy_drains_at_deletion(context: &Context) -> bool {
    let drains = |hook: &crate::input::Handler| {
        hook.exec_command()
            .iter()
            .any(|word| word.contains("drain"))
    };
    match context.decision.proxy(context.workload) {
        Some(proxy) => proxy.pre_stop().is_some_and(drains),
        // A declared placeholder's own preStop replaces the template's.
        None => context
            .decision
            .declared_proxy(context.workload)
            .and_then(|placeholder| placeholder.pre_stop())
            .is_none_or(drains),
    }
}

/// When a classic Istio proxy's inbound listeners close: pilot-agent answers SIGTERM with
/// Envoy's `drain_listeners?inboundonly&graceful` (no `skip_exit`), so Envoy stops them after
/// `--drain-time-s` = drainDuration, while the agent keeps Envoy for terminationDrainDuration.
/// `None` when the proxy leaves first, or waits for connections (EXIT_ON_ZERO_ACTIVE_CONNECTIONS),
/// or has a preStop of its own. Native proxies drain with `skip_exit` and never close them.
pub(crate) fn classic_listeners_close_ms(context: &Context) -> Option<u64> {
    let decision = context.decision;
    if !decision.is_classic() || decision.exit_on_zero_active_connections {
        return None;
    }
    if decision
        .declared_proxy(context.workload)
        .is_some_and(|proxy| proxy.pre_stop().is_some())
    {
        return None;
    }
    let grace_ms = (grace_seconds(context).max(0) as u64).saturating_mul(1000);
    (decision.envoy_drain_ms < decision.drain_ms.min(grace_ms)).then_some(decision.envoy_drain_ms)
}

/// ML406. Seen on the real node: drainDuration 4s under terminationDrainDuration 12s refused
/// every new connection from 4.3 s until the proxy left at 12 s, while the app slept in its
/// preStop.
fn listeners_close_before_app(context: &Context, findings: &mut Vec<Finding>) {
    let Some(close_ms) = classic_listeners_close_ms(context) else {
        return;
    };
    let decision = context.decision;
    let grace_ms = (grace_seconds(context).max(0) as u64).saturating_mul(1000);
    let proxy_exit_ms = decision.drain_ms.min(grace_ms);
    let drain = format_ms(close_ms);
    let termination = format_ms(decision.drain_ms);
    let source = if decision.envoy_drain_from_annotation {
        "from proxy.istio.io/config"
    } else if context.settings.istio_envoy_drain_ms == crate::mesh::ISTIO_DRAIN_DURATION_MS {
        "Istio's default"
    } else {
        "the mesh's drainDuration"
    };
    for (index, container, delay) in known_prestop_delays(context) {
        let delay_ms = (delay.max(0) as u64).saturating_mul(1000);
        if delay_ms <= close_ms {
            continue;
        }
        let name = container.name();
        let refused_until = format_ms(delay_ms.min(proxy_exit_ms));
        let message = format!(
            "container \"{name}\" waits {delay}s in preStop, but {} closes its inbound listeners after drainDuration {drain} ({source}) while terminationDrainDuration {termination} keeps it running, so from {drain} to {refused_until} new connections to the app are refused although it still serves.",
            context.proxy_phrase()
        );
        let fix = format!(
            "Set drainDuration in proxy.istio.io/config to at least terminationDrainDuration ({termination}), or use native sidecars, whose drain keeps the listeners open until the proxy exits."
        );
        findings.push(
            context
                .finding(
                    &LISTENERS_CLOSE_BEFORE_APP,
                    prestop_path(context, index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}

/// ML403.
fn linkerd_app_shutdown_unprotected(context: &Context, findings: &mut Vec<Finding>) {
    let grace = grace_seconds(context);
    // An unreadable value is reported by ML601; the proxy then ignores it, as if unset. Linkerd
    // reads config annotations from the namespace when the pod has none.
    let workload = context.workload;
    let (wait_text, path, source) = match workload.annotation(LINKERD_WAIT_BEFORE_EXIT) {
        Some(value) => (
            Some(value),
            workload.annotation_path(LINKERD_WAIT_BEFORE_EXIT),
            "annotation",
        ),
        None => (
            workload.namespace_annotation(LINKERD_WAIT_BEFORE_EXIT),
            format!("namespaceObject.metadata.annotations[\"{LINKERD_WAIT_BEFORE_EXIT}\"]"),
            "Namespace annotation",
        ),
    };
    let wait = wait_text
        .and_then(|value| value.parse::<i64>().ok())
        .unwrap_or(0);
    if wait > 0 && wait >= grace {
        let message = format!(
            "{source} {LINKERD_WAIT_BEFORE_EXIT} is {wait}, not shorter than terminationGracePeriodSeconds {grace}, so the kubelet kills the pod before the proxy's preStop wait ends and the app's shutdown is cut."
        );
        let fix = format!(
            "Lower {LINKERD_WAIT_BEFORE_EXIT} below {grace}, or raise terminationGracePeriodSeconds above {wait}."
        );
        findings.push(
            context
                .finding(&LINKERD_APP_SHUTDOWN_UNPROTECTED, path, message, fix)
                .with_severity(Severity::Error),
        );
        return;
    }
    if wait > 0 {
        return;
    }
    for (index, container) in context
        .app_containers()
        .filter(|(_, c)| c.pre_stop().is_some())
    {
        let name = container.name();
        let message = format!(
            "container \"{name}\" has a preStop hook, but on SIGTERM {} refuses new connections at once, so requests the app makes while shutting down fail.",
            context.proxy_phrase()
        );
        let fix = format!(
            "Set the pod annotation {LINKERD_WAIT_BEFORE_EXIT} to the app's shutdown time in seconds (below terminationGracePeriodSeconds {grace}), or use native sidecars (config.linkerd.io/proxy-enable-native-sidecar: \"true\")."
        );
        findings.push(
            context
                .finding(
                    &LINKERD_APP_SHUTDOWN_UNPROTECTED,
                    prestop_path(context, index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}

/// A port that carries long-lived streams, by Istio's port naming or appProtocol.
fn stream_protocol(name: &str, app_protocol: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let app_protocol = app_protocol.to_ascii_lowercase();
    let app_protocol = app_protocol.trim_start_matches("kubernetes.io/");
    for (prefix, protocol) in [
        ("grpc", "gRPC"),
        ("http2", "HTTP/2"),
        ("h2c", "HTTP/2"),
        ("websocket", "WebSocket"),
        ("ws", "WebSocket"),
    ] {
        if name.starts_with(prefix) || app_protocol.starts_with(prefix) {
            return Some(protocol);
        }
    }
    None
}

/// What marks a container as a stream server, for the message: `port "grpc"`, `Service "api"
/// port "grpc" (targetPort 9000)`, `readinessProbe.grpc`.
pub(super) fn stream_marker(
    workload: &Workload,
    container: &Container,
    app_count: usize,
) -> Option<(String, &'static str)> {
    if let Some(marked) = container.ports().iter().find_map(|port| {
        let name = port.name.as_deref().unwrap_or("");
        let protocol = stream_protocol(name, port.app_protocol.as_deref().unwrap_or(""))?;
        Some((format!("port \"{name}\""), protocol))
    }) {
        return Some(marked);
    }
    if let Some(marked) = service_marker(workload, container, app_count) {
        return Some(marked);
    }
    let probe = container.grpc_probes.first()?;
    Some((probe.to_string(), "gRPC"))
}

/// A stream port of a Service that selects the pod, whose target is this container.
/// `app_count` is counted once by the caller: counted here, per container, it made a pod spec
/// of many containers quadratic (150,000 empty containers took minutes).
fn service_marker(
    workload: &Workload,
    container: &Container,
    app_count: usize,
) -> Option<(String, &'static str)> {
    let namespace = workload.namespace.as_deref();
    for service in &workload.services {
        if service.namespace.is_some() && service.namespace.as_deref() != namespace {
            continue;
        }
        if !service.selects(workload.pod_meta.labels.as_ref()) {
            continue;
        }
        for port in service.ports() {
            let name = port.name.as_deref().unwrap_or("");
            let app_protocol = port.app_protocol.as_deref().unwrap_or("");
            let Some(protocol) = stream_protocol(name, app_protocol) else {
                continue;
            };
            let target = match &port.target_port {
                Some(IntOrString::Str(name)) => Target::Name(name.as_str()),
                Some(IntOrString::Int(number)) => Target::Number(*number),
                None => match port.port {
                    Some(number) => Target::Number(number),
                    None => continue,
                },
            };
            let declares = |c: &Container| {
                c.ports().iter().any(|p| match target {
                    Target::Name(name) => p.name.as_deref() == Some(name),
                    Target::Number(number) => p.container_port == Some(IntOrString::Int(number)),
                })
            };
            // A number no container declares still reaches the pod: with one app container, it
            // is that one's.
            let targets_this = declares(container)
                || (matches!(target, Target::Number(_))
                    && app_count == 1
                    && !workload.spec.containers().iter().any(declares));
            if !targets_this {
                continue;
            }
            let service_name = service.name.as_deref().unwrap_or("");
            let port_text = match (&port.name, port.port) {
                (Some(name), _) => format!("\"{name}\""),
                (None, Some(number)) => number.to_string(),
                (None, None) => "\"\"".to_string(),
            };
            let mut notes = Vec::new();
            if !app_protocol.is_empty() && stream_protocol("", app_protocol).is_some() {
                notes.push(format!("appProtocol {app_protocol}"));
            }
            match &port.target_port {
                Some(IntOrString::Str(name)) => notes.push(format!("targetPort {name}")),
                Some(IntOrString::Int(number)) => notes.push(format!("targetPort {number}")),
                None => {}
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            };
            return Some((
                format!("Service \"{service_name}\" port {port_text}{notes}"),
                protocol,
            ));
        }
    }
    None
}

#[derive(Clone, Copy)]
enum Target<'t> {
    Name(&'t str),
    Number(i64),
}

/// ML404.
fn long_lived_streams(context: &Context, findings: &mut Vec<Finding>) {
    let grace = grace_seconds(context);
    let app_count = context.app_containers().count();
    for (index, container) in context.app_containers() {
        let Some((marker, protocol)) = stream_marker(context.workload, container, app_count) else {
            continue;
        };
        let has_prestop = container.pre_stop().is_some();
        if grace >= 30 && has_prestop {
            continue;
        }
        let name = container.name();
        let why = match (grace < 30, has_prestop) {
            (true, false) => {
                format!("the grace period is only {grace}s and the container has no preStop")
            }
            (true, true) => format!("the grace period is only {grace}s"),
            _ => "the container has no preStop".to_string(),
        };
        let message = format!(
            "container \"{name}\" serves {protocol} streams ({marker}) and {why}, so open streams are cut at every rollout and clients see resets unless they reconnect."
        );
        let fix = format!(
            "Give \"{name}\" a preStop delay and terminationGracePeriodSeconds of at least 30 so the server can send GOAWAY and drain, and make sure clients retry and reconnect."
        );
        findings.push(
            context
                .finding(
                    &LONG_LIVED_STREAMS,
                    context.workload.container_path(index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}

/// ML405.
fn prestop_exceeds_grace(context: &Context, findings: &mut Vec<Finding>) {
    let grace = grace_seconds(context);
    for (index, container, delay) in known_prestop_delays(context) {
        if delay < grace {
            continue;
        }
        let name = container.name();
        let message = format!(
            "container \"{name}\" waits {delay}s in preStop, not less than terminationGracePeriodSeconds {grace}, so the kubelet abandons the hook at the grace period and leaves the app 2s between SIGTERM and SIGKILL: an app that needs longer is killed mid-shutdown."
        );
        let fix = if grace > 0 {
            format!(
                "Raise terminationGracePeriodSeconds above {delay} (leaving time for the app and the proxy to stop), or shorten the preStop delay of \"{name}\" below {grace}s."
            )
        } else {
            format!(
                "Raise terminationGracePeriodSeconds from 0 to more than {delay} (leaving time for the app and the proxy to stop); with 0 no preStop hook can run."
            )
        };
        findings.push(
            context
                .finding(
                    &PRESTOP_EXCEEDS_GRACE,
                    prestop_path(context, index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}
