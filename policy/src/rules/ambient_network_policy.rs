//! ML604: a NetworkPolicy over pods in Istio's ambient mode that blocks what ambient needs
//! (istio.io `docs/ambient/usage/networkpolicy`). NetworkPolicy is enforced on the node,
//! outside the pod, so it sees the wire as ambient shapes it: every meshed connection to the pod
//! arrives on port 15008 (HBONE), whatever port the client dialled, and istio-cni rewrites the
//! source of the kubelet's health probes to 169.254.7.127 so that ztunnel can let them through
//! unauthenticated. A policy written for the pod before it joined ambient admits neither.

use core::net::Ipv4Addr;

use super::Finding;
use crate::catalogue::AMBIENT_NETWORK_POLICY;
use crate::input::IntOrString;
use crate::mesh::{DATAPLANE_MODE, Mesh, namespace_is_ambient};
use crate::network_policy::{IngressRule, NetworkPolicy};
use crate::params::Settings;

/// ztunnel's inbound HBONE port inside every ambient pod.
pub const HBONE_PORT: i64 = 15008;
/// The source address istio-cni gives the kubelet's probes to ambient pods.
pub const PROBE_SOURCE: Ipv4Addr = Ipv4Addr::new(169, 254, 7, 127);

const DOCS: &str = "istio.io/latest/docs/ambient/usage/networkpolicy";

/// Why the policy's pods are ambient, or `None` when they are not (or not known to be).
pub fn ambient_because(policy: &NetworkPolicy, settings: &Settings) -> Option<String> {
    match policy.pod_label(DATAPLANE_MODE) {
        Some("ambient") => {
            return Some(format!(
                "its podSelector selects {DATAPLANE_MODE}=ambient pods"
            ));
        }
        // A selector for pods that opted out (`none`), or for another value, selects no
        // ambient pod.
        Some(_) => return None,
        None => {}
    }
    let namespace = policy.namespace.as_deref().unwrap_or("");
    if !namespace_is_ambient(policy.namespace_meta.as_ref(), namespace, settings) {
        return None;
    }
    Some(match policy.namespace_meta {
        Some(_) => format!("namespace \"{namespace}\" is labelled {DATAPLANE_MODE}=ambient"),
        None => format!("namespace \"{namespace}\" is in the facts' istio.ambientNamespaces"),
    })
}

pub fn check(policy: &NetworkPolicy, settings: &Settings, findings: &mut Vec<Finding>) {
    if !settings.selects(&AMBIENT_NETWORK_POLICY) || !policy.restricts_ingress() {
        return;
    }
    // A policy without ingress rules denies all ingress on purpose (a namespace's default
    // deny); the policies that allow traffic beside it are the ones to hold to ambient's needs.
    let rules = match policy.ingress.as_deref() {
        Some(rules) if !rules.is_empty() => rules,
        _ => return,
    };
    let Some(because) = ambient_because(policy, settings) else {
        return;
    };
    let name = policy.meta.name.as_deref().unwrap_or("");
    if !rules.iter().any(|rule| rule.admits_tcp_port(HBONE_PORT)) {
        let ports = admitted_ports(rules);
        findings.push(finding(
            format!(
                "NetworkPolicy \"{name}\" selects pods in Istio's ambient mode ({because}) and admits ingress only on {ports}: ztunnel carries every meshed connection to these pods on port {HBONE_PORT} (HBONE), whatever port the client dialled, and no ingress rule admits it, so the mesh's traffic to them is dropped and only clients outside the mesh get through."
            ),
            format!(
                "Add {{port: {HBONE_PORT}, protocol: TCP}} to the ports of the ingress rules whose sources are in the mesh, beside the app's own ports ({DOCS})."
            ),
        ));
    }
    if !rules.iter().any(|rule| rule.admits_source(PROBE_SOURCE)) {
        findings.push(finding(
            format!(
                "NetworkPolicy \"{name}\" selects pods in Istio's ambient mode ({because}) and admits ingress only from the pods, namespaces or address blocks it names: istio-cni gives the kubelet's HTTP, TCP and gRPC probes the source address {PROBE_SOURCE}, which no ingress rule admits, so the probes time out, the pods never become Ready, and a liveness probe restarts them."
            ),
            format!(
                "Add an ingress rule with from: [{{ipBlock: {{cidr: {PROBE_SOURCE}/32}}}}] (on the probes' ports, or on all ports) to this policy or to another that selects the same pods ({DOCS})."
            ),
        ));
    }
}

fn finding(message: String, fix: String) -> Finding {
    Finding {
        rule: &AMBIENT_NETWORK_POLICY,
        severity: AMBIENT_NETWORK_POLICY.severity,
        path: "spec.ingress".into(),
        message,
        fix,
        mesh: Some(Mesh::Istio),
        container: None,
    }
}

/// The ports the rules admit, for the message: `port 8080/TCP and port 9090/TCP`.
fn admitted_ports(rules: &[IngressRule]) -> String {
    let mut ports: Vec<String> = Vec::new();
    for rule in rules {
        for port in rule.ports.iter().flatten() {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let text = match (&port.port, port.end_port) {
                (Some(IntOrString::Int(first)), Some(last)) => {
                    format!("ports {first}-{last}/{protocol}")
                }
                (Some(IntOrString::Int(number)), None) => format!("port {number}/{protocol}"),
                (Some(IntOrString::Str(name)), _) => format!("port \"{name}\"/{protocol}"),
                (None, _) => format!("every {protocol} port"),
            };
            if !ports.contains(&text) {
                ports.push(text);
            }
        }
    }
    match ports.as_slice() {
        [] => "no port".into(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
