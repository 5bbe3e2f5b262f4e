//! In-place restarts of the whole pod (ML407): a container restart rule with the action
//! `RestartAllContainers` (KEP-5532, beta and on by default from Kubernetes 1.36) kills every
//! container of the pod, the proxy included, with no preStop hooks and no grace period, and
//! runs the init containers again in the same sandbox and network namespace.

use super::{Context, Finding};
use crate::catalogue::IN_PLACE_RESTART_SKIPS_DRAIN;
use crate::input::Container;
use crate::mesh::{Mesh, Placement};
use crate::violation::Severity;

/// The first Kubernetes minor with the action on by default (beta); 1.35 had it as alpha.
const RESTART_ALL_ON_BY_DEFAULT: u32 = 36;
const RESTART_ALL_ALPHA: u32 = 35;
/// istio-iptables reconciles rules it finds in place from Istio 1.24 (istio/istio #50328).
const ISTIO_IDEMPOTENT_INIT: (u32, u32) = (1, 24);

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    let minor = context.settings.raw.kubernetes_minor_version;
    if minor < RESTART_ALL_ALPHA {
        // The API server drops the rules where the ContainerRestartRules gate is off.
        return;
    }
    let proxy = context.proxy_name();
    let spec = &context.workload.spec;
    let regular = spec
        .containers()
        .iter()
        .enumerate()
        .map(|(index, container)| (context.workload.container_path(index), container));
    let init = spec
        .init_containers()
        .iter()
        .enumerate()
        .map(|(index, container)| (context.workload.init_container_path(index), container));
    for (path, container) in regular.chain(init) {
        if container.name() == proxy {
            continue;
        }
        for (index, rule) in container.restart_rules.iter().flatten().enumerate() {
            if rule.action.as_deref() != Some("RestartAllContainers") {
                continue;
            }
            findings.push(finding(
                context,
                container,
                format!("{path}.restartPolicyRules[{index}]"),
                &rule.condition(),
            ));
        }
    }
}

/// Whether the pod runs the mesh's redirect init container, and the Istio version its image
/// names when it is injected (`proxyv2:1.23.2`).
enum RedirectInit {
    /// CNI capture, or a native Linkerd proxy: nothing that fails when run twice is known.
    None,
    Istio {
        version: Option<(u32, u32)>,
    },
    Linkerd,
}

fn redirect_init(context: &Context) -> RedirectInit {
    if context.decision.cni {
        return RedirectInit::None;
    }
    match context.mesh() {
        Mesh::Istio => {
            let version = context
                .decision
                .redirect_init_index
                .and_then(|index| context.workload.spec.init_containers().get(index))
                .and_then(|init| image_version(init.image.as_deref().unwrap_or("")));
            RedirectInit::Istio { version }
        }
        Mesh::Linkerd => RedirectInit::Linkerd,
    }
}

/// `docker.io/istio/proxyv2:1.23.2-distroless` → (1, 23).
fn image_version(image: &str) -> Option<(u32, u32)> {
    let tag = image.split('@').next()?.rsplit_once(':')?.1;
    let mut parts = tag.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn finding(context: &Context, container: &Container, path: String, condition: &str) -> Finding {
    let name = container.name();
    let proxy = context.proxy_phrase();
    let minor = context.settings.raw.kubernetes_minor_version;
    let drains = match (context.mesh(), &context.decision.placement) {
        (_, Placement::Native) | (Mesh::Istio, _) => "is killed 2s into its drain",
        (Mesh::Linkerd, _) => "never waits out its preStop",
    };
    let mut message = format!(
        "container \"{name}\" restarts every container of the pod in place when it {condition} (restartPolicyRules, action RestartAllContainers): the kubelet kills them all, {proxy} included, without preStop hooks and with 2s from SIGTERM to SIGKILL instead of the grace period, so the proxy {drains} and requests through it are cut, and the init containers run again in the same network namespace."
    );
    let mut severity = Severity::Warning;
    let mut fix = "Use the action Restart (this container alone) where the init containers need not run again; where the whole pod must start over, exit and let its controller replace the pod (a Job's backoffLimit or podFailurePolicy), which runs preStop hooks and drains the proxy.".to_string();
    match redirect_init(context) {
        RedirectInit::Istio {
            version: Some(version),
        } if version < ISTIO_IDEMPOTENT_INIT => {
            severity = Severity::Error;
            message.push_str(&format!(
                " istio-init of Istio {}.{} is not idempotent: run again over its own iptables chains it fails (istio/istio #32145), so the pod never runs again.",
                version.0, version.1
            ));
            fix.push_str(" Upgrade Istio to 1.24 or newer, or capture with istio-cni.");
        }
        RedirectInit::Istio { version: None } => {
            message.push_str(
                " On Istio before 1.24 istio-init fails when run again over its own iptables chains (istio/istio #32145), and the pod never runs again.",
            );
            fix.push_str(
                " Run Istio 1.24 or newer (istio-init reconciles its rules), or istio-cni.",
            );
        }
        RedirectInit::Istio { .. } | RedirectInit::Linkerd | RedirectInit::None => {}
    }
    if minor < RESTART_ALL_ON_BY_DEFAULT {
        severity = Severity::Info;
        message.push_str(&format!(
            " On Kubernetes 1.{minor} this happens only where the alpha feature gate RestartAllContainersOnContainerExits is on (beta and on by default from 1.36)."
        ));
    }
    context
        .finding(&IN_PLACE_RESTART_SKIPS_DRAIN, path, message, fix)
        .with_severity(severity)
        .about_container(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_istio_version_of_an_image_tag() {
        assert_eq!(
            image_version("docker.io/istio/proxyv2:1.23.2"),
            Some((1, 23))
        );
        assert_eq!(
            image_version("gcr.io/istio-release/proxyv2:1.24.0-distroless"),
            Some((1, 24))
        );
        assert_eq!(image_version("registry:5000/proxyv2:1.9.1"), Some((1, 9)));
        assert_eq!(image_version("proxyv2"), None);
        assert_eq!(image_version("proxyv2:latest"), None);
        assert_eq!(image_version("proxyv2@sha256:abc"), None);
    }
}
