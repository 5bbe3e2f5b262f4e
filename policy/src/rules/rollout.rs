//! Rollout safety (ML501, ML502): a mesh restarts the whole fleet at every proxy upgrade, so
//! how a workload rolls matters more once it is meshed.

use super::{Context, Finding, counted};
use crate::catalogue::{MISSING_READINESS, ROLLOUT_CAPACITY};
use crate::input::{IntOrString, RollingUpdate};
use crate::violation::Severity;
use crate::workload::WorkloadKind;

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    let kind = context.workload.kind;
    if matches!(kind, WorkloadKind::Deployment | WorkloadKind::Rollout) {
        context.run(&ROLLOUT_CAPACITY, findings, rollout_capacity);
    }
    if matches!(
        kind,
        WorkloadKind::Deployment
            | WorkloadKind::StatefulSet
            | WorkloadKind::DaemonSet
            | WorkloadKind::Rollout
    ) {
        context.run(&MISSING_READINESS, findings, missing_readiness);
    }
}

/// Resolves `maxUnavailable` or `maxSurge` against the replica count, percentages rounded
/// down (unavailable) or up (surge) as the Deployment controller does.
fn resolve(value: Option<&IntOrString>, replicas: i64, round_up: bool) -> Option<i64> {
    match value? {
        IntOrString::Int(number) => Some(*number),
        IntOrString::Str(text) => {
            let percent: i64 = text.strip_suffix('%')?.trim().parse().ok()?;
            let scaled = percent.saturating_mul(replicas);
            Some(if round_up {
                scaled.saturating_add(99) / 100
            } else {
                scaled / 100
            })
        }
    }
}

/// ML501.
fn rollout_capacity(context: &Context, findings: &mut Vec<Finding>) {
    let workload = context.workload;
    let replicas = workload.replicas.unwrap_or(1);
    if replicas == 0 {
        // Scaled to zero on purpose: there is no capacity to protect.
        return;
    }
    let strategy = workload.strategy.clone().unwrap_or_default();
    let kind = if workload.kind == WorkloadKind::Rollout {
        "Rollout"
    } else {
        "Deployment"
    };
    if workload.kind == WorkloadKind::Deployment && strategy.kind.as_deref() == Some("Recreate") {
        let message = format!(
            "{kind} uses the Recreate strategy, so every rollout, including each proxy upgrade, stops all {} before new ones start.",
            replicas_phrase(replicas),
        );
        let fix = "Use spec.strategy.type: RollingUpdate with rollingUpdate.maxUnavailable: 0 and maxSurge: 1.".to_string();
        findings.push(
            context
                .finding(&ROLLOUT_CAPACITY, "spec.strategy.type".into(), message, fix)
                .with_severity(Severity::Info),
        );
        return;
    }
    let (rolling, field) = match workload.kind {
        WorkloadKind::Rollout => {
            if strategy.blue_green {
                // Blue-green brings the new set up before switching: no replica is lost.
                return;
            }
            (
                strategy.canary.clone().unwrap_or_default(),
                "spec.strategy.canary.maxUnavailable",
            )
        }
        _ => (
            strategy.rolling_update.clone().unwrap_or_default(),
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
    };
    let RollingUpdate {
        max_unavailable,
        max_surge,
    } = rolling;
    let default_quarter = IntOrString::Str("25%".into());
    let mut unavailable = resolve(
        Some(max_unavailable.as_ref().unwrap_or(&default_quarter)),
        replicas,
        false,
    )
    .unwrap_or(0);
    let surge = resolve(
        Some(max_surge.as_ref().unwrap_or(&default_quarter)),
        replicas,
        true,
    )
    .unwrap_or(1);
    if unavailable == 0 && surge == 0 {
        // The controller refuses to stall and lets one replica go.
        unavailable = 1;
    }
    let min_available = context.settings.raw.min_available;
    let remaining = replicas.saturating_sub(unavailable);
    if remaining >= min_available {
        return;
    }
    let shown = match &max_unavailable {
        Some(IntOrString::Str(text)) => format!("{text} ({unavailable})"),
        Some(IntOrString::Int(number)) => number.to_string(),
        None => format!("25% by default ({unavailable})"),
    };
    let message = format!(
        "{kind} with {} and maxUnavailable {shown} can drop to {} during a rollout, below minAvailable {min_available}, and every proxy upgrade rolls it.",
        replicas_phrase(replicas),
        replicas_phrase(remaining.max(0)).replacen("replica", "ready replica", 1)
    );
    let fix = format!(
        "Raise spec.replicas to at least {}, or set {field}: 0 with a maxSurge of 1 or more.",
        min_available.saturating_add(unavailable)
    );
    findings.push(context.finding(&ROLLOUT_CAPACITY, field.to_string(), message, fix));
}

fn replicas_phrase(count: i64) -> String {
    if count == 1 {
        "1 replica".into()
    } else {
        format!("{count} replicas")
    }
}

fn is_monitoring_port(name: &str) -> bool {
    name == "metrics" || name.ends_with("-metrics") || name == "http-monitoring"
}

/// ML502.
fn missing_readiness(context: &Context, findings: &mut Vec<Finding>) {
    for (index, container) in context.app_containers() {
        if container.has_readiness_probe {
            continue;
        }
        let serving: Vec<String> = container
            .ports()
            .iter()
            .filter(|port| !is_monitoring_port(port.name.as_deref().unwrap_or("")))
            .map(|port| match (&port.name, &port.container_port) {
                (Some(name), _) => format!("\"{name}\""),
                (None, Some(IntOrString::Int(number))) => number.to_string(),
                (None, Some(IntOrString::Str(text))) => text.to_string(),
                (None, None) => "?".into(),
            })
            .collect();
        if serving.is_empty() {
            continue;
        }
        let name = container.name();
        let message = format!(
            "container \"{name}\" serves {} but has no readinessProbe, so the pod turns Ready as soon as {} is ready and gets traffic before the app can serve it.",
            counted("port", &serving),
            context.proxy_phrase()
        );
        let fix = format!(
            "Add a readinessProbe to container \"{name}\": an httpGet on its health endpoint, or a tcpSocket or exec check for a database or other TCP server."
        );
        findings.push(
            context
                .finding(
                    &MISSING_READINESS,
                    context.workload.container_path(index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}
