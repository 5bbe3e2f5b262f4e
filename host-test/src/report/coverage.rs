//! What a `meshlife check` run did not judge, and why, so that "0 findings" is never read as
//! "checked and clean" when it was not: files skipped (templates, YAML that is not Kubernetes),
//! objects no constraint matched, workloads judged as not meshed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use meshlife_policy::mesh::NotMeshed;
use meshlife_policy::verdicts::{MisplacedKey, NotJudged};

use crate::inputs::manifests::Skipped;

/// Objects the run did not judge, for one reason.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NotJudgedGroup {
    /// `outside-constraints`, `control-plane`, `not-meshed` or `ambient`.
    pub kind: &'static str,
    pub reason: String,
    /// `file: document N: Kind namespace/name`, as the notes name them.
    pub objects: Vec<String>,
}

/// Lines listed per reason before the rest is only counted.
const LISTED_PER_REASON: usize = 5;

/// Objects put aside, grouped by the reason, each named by its location and identity.
#[derive(Debug, Default)]
pub struct Coverage {
    pub skipped: Vec<Skipped>,
    /// Reason → objects (`file: document N: Kind ns/name`).
    pub unmatched: BTreeMap<String, Vec<String>>,
    /// Reason → workloads judged as not meshed.
    pub not_meshed: BTreeMap<String, Vec<String>>,
    /// Reason → workloads in Istio's ambient mode: meshed, but with no proxy in the pod, so the
    /// sidecar rules do not apply to them.
    pub ambient: BTreeMap<String, Vec<String>>,
    /// Workloads in a mesh's own control-plane namespace, not judged (`check
    /// --include-control-planes` judges them).
    pub control_plane: Vec<String>,
    /// Reason → NetworkPolicies not judged because nothing said whether their namespace is
    /// ambient (ML604 judges only policies over ambient pods). Not workloads: counted apart.
    pub network_policies: BTreeMap<String, Vec<String>>,
}

impl Coverage {
    pub fn not_meshed_count(&self) -> usize {
        self.not_meshed.values().map(Vec::len).sum()
    }

    fn ambient_count(&self) -> usize {
        self.ambient.values().map(Vec::len).sum()
    }

    fn unmatched_count(&self) -> usize {
        self.unmatched.values().map(Vec::len).sum()
    }

    fn network_policy_count(&self) -> usize {
        self.network_policies.values().map(Vec::len).sum()
    }

    /// The counts, for the summary line: `; not judged: 1 file skipped, ...`; empty when the
    /// run judged everything.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.skipped.is_empty() {
            parts.push(plural(self.skipped.len(), "input", "inputs") + " skipped");
        }
        if self.unmatched_count() > 0 {
            parts.push(
                plural(self.unmatched_count(), "object", "objects") + " outside every constraint",
            );
        }
        if !self.control_plane.is_empty() {
            parts.push(
                plural(self.control_plane.len(), "workload", "workloads")
                    + " in mesh control planes",
            );
        }
        if self.not_meshed_count() > 0 {
            parts.push(
                plural(self.not_meshed_count(), "workload", "workloads") + " judged as not meshed",
            );
        }
        if self.ambient_count() > 0 {
            parts.push(
                plural(self.ambient_count(), "workload", "workloads")
                    + " in ambient mode (no sidecar rule applies)",
            );
        }
        if self.network_policy_count() > 0 {
            parts.push(
                plural(
                    self.network_policy_count(),
                    "NetworkPolicy",
                    "NetworkPolicies",
                ) + " whose namespace's mode is unknown",
            );
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("; {} (see the notes above)", parts.join(", "))
        }
    }

    /// What was not judged, for machines: each group's kind, reason and every object named
    /// (`-o json`'s `notJudged`).
    pub fn groups(&self) -> Vec<NotJudgedGroup> {
        let mut groups = Vec::new();
        for (reason, objects) in &self.unmatched {
            groups.push(NotJudgedGroup {
                kind: "outside-constraints",
                reason: reason.clone(),
                objects: objects.clone(),
            });
        }
        if !self.control_plane.is_empty() {
            groups.push(NotJudgedGroup {
                kind: "control-plane",
                reason: "in a mesh's control-plane namespace (--include-control-planes judges \
                         them)"
                    .into(),
                objects: self.control_plane.clone(),
            });
        }
        for (reason, objects) in &self.not_meshed {
            groups.push(NotJudgedGroup {
                kind: "not-meshed",
                reason: reason.clone(),
                objects: objects.clone(),
            });
        }
        for (reason, objects) in &self.ambient {
            groups.push(NotJudgedGroup {
                kind: "ambient",
                reason: reason.clone(),
                objects: objects.clone(),
            });
        }
        for (reason, objects) in &self.network_policies {
            groups.push(NotJudgedGroup {
                kind: "network-policy-mode-unknown",
                reason: reason.clone(),
                objects: objects.clone(),
            });
        }
        groups
    }

    /// One note per skipped input and per reason, with a few of the objects named.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .skipped
            .iter()
            .map(|skipped| format!("skipped {skipped} (--strict makes this an error)"))
            .collect();
        let mut grouped = |heading: &str, groups: &BTreeMap<String, Vec<String>>| {
            for (reason, objects) in groups {
                let mut note = format!(
                    "{} {heading}: {reason}: ",
                    plural(objects.len(), "object", "objects")
                );
                let listed: Vec<&str> = objects
                    .iter()
                    .take(LISTED_PER_REASON)
                    .map(String::as_str)
                    .collect();
                note.push_str(&listed.join("; "));
                if objects.len() > LISTED_PER_REASON {
                    let _ = write!(note, "; and {} more", objects.len() - LISTED_PER_REASON);
                }
                notes.push(note);
            }
        };
        grouped(
            "not checked, outside every constraint's match",
            &self.unmatched,
        );
        if !self.control_plane.is_empty() {
            let mut reason = BTreeMap::new();
            reason.insert(
                "their lifecycle is the mesh's own, as the generated constraints leave them out \
                 (--include-control-planes judges them)"
                    .to_string(),
                self.control_plane.clone(),
            );
            grouped("not judged, in a mesh's control-plane namespace", &reason);
        }
        grouped(
            "judged as not meshed, so no mesh rule applies",
            &self.not_meshed,
        );
        grouped(
            "in Istio's ambient mode, so no sidecar rule applies (ztunnel captures the pod's \
             traffic before its first container starts, init containers included)",
            &self.ambient,
        );
        grouped("not judged", &self.network_policies);
        notes
    }
}

/// What the run knew of a workload's Namespace, to say why its injection is unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct NamespaceFacts {
    /// A Namespace manifest of the input applied to the workload.
    pub in_input: bool,
    /// The input defines the Namespace, but differently in several places, none of them in the
    /// workload's file or folders.
    pub defined_elsewhere: bool,
}

impl NamespaceFacts {
    fn why_unknown(&self) -> &'static str {
        if self.defined_elsewhere {
            "its Namespace is defined differently in several files, none in this object's file \
             or folders, and it is not in the facts"
        } else {
            "its Namespace is not in the input and not in the facts"
        }
    }
}

/// Why the policy judged a pod spec as not meshed, in words, with what to do where it helps.
pub fn not_meshed_reason(reason: &NotMeshed, namespace_facts: &NamespaceFacts) -> String {
    let namespace_name = |namespace: &Option<String>| match namespace {
        Some(namespace) if !namespace.is_empty() => format!("namespace {namespace}"),
        _ => "its namespace".to_string(),
    };
    match reason {
        NotMeshed::NoMeshSignal {
            namespace,
            namespace_unknown: true,
            ..
        } => format!(
            "no mesh signal, and whether {} injects is unknown: {} (add the Namespace manifest, \
             or --istio-injected-namespaces / --linkerd-injected-namespaces)",
            namespace_name(namespace),
            namespace_facts.why_unknown()
        ),
        NotMeshed::AnnotationOnlyInjectRequest { namespace } if !namespace_facts.in_input => {
            format!(
                "only the annotation sidecar.istio.io/inject: \"true\", which Istio reads only \
                 once its webhook is called for the pod, and whether {} injects is unknown: {} \
                 (if it does, the pod is meshed: add the Namespace manifest or \
                 --istio-injected-namespaces; or make the annotation a pod template label)",
                namespace_name(namespace),
                namespace_facts.why_unknown()
            )
        }
        NotMeshed::NoMeshSignal { namespace, .. } => format!(
            "no mesh signal (no proxy, no injection request, and {} has no injection on)",
            namespace_name(namespace)
        ),
        NotMeshed::OptedOut {
            key,
            is_label,
            value,
            ..
        } => format!(
            "opted out with the {} {key}: {value:?}",
            if *is_label { "label" } else { "annotation" }
        ),
        NotMeshed::NamespaceInjectionDisabled { namespace, key } => {
            format!("{} has {key}: disabled", namespace_name(namespace))
        }
        NotMeshed::HostNetwork => "hostNetwork: true (no injector touches such a pod)".into(),
        NotMeshed::SystemNamespace { namespace } => {
            format!("in {namespace}, which the injectors leave alone")
        }
        NotMeshed::Ambient { by_pod_label: true } => {
            "its istio.io/dataplane-mode: ambient label".into()
        }
        NotMeshed::Ambient {
            by_pod_label: false,
        } => "in an ambient namespace, without a sidecar request".into(),
        NotMeshed::CustomTemplate { templates } => format!(
            "inject.istio.io/templates: {templates:?} names no sidecar template, so the proxy \
             cannot be predicted"
        ),
        NotMeshed::AnnotationOnlyInjectRequest { namespace } => format!(
            "only the annotation sidecar.istio.io/inject: \"true\", and {} has no injection on: \
             Istio's webhooks select pods by namespace label or pod label, so the annotation is \
             never read (make it a pod template label)",
            namespace_name(namespace)
        ),
    }
}

/// Why the policy did not look at an object it was given, when that is worth a note: a kind
/// it does not review is not (it is most of any input).
pub fn not_judged_reason(reason: &NotJudged) -> Option<String> {
    match reason {
        NotJudged::NoPodSpec { kind } => Some(format!(
            "a {kind} without a pod spec (a Rollout with workloadRef is judged through the \
             workload it names)"
        )),
        NotJudged::ExemptNamespace { namespace } => Some(format!(
            "namespace {namespace} is in the constraint's exemptNamespaces"
        )),
        NotJudged::NotAReviewedKind { .. }
        | NotJudged::NetworkPolicyNotAmbient { .. }
        | NotJudged::SkippedOperation { .. }
        | NotJudged::InvalidInput { .. } => None,
    }
}

/// Why a NetworkPolicy was not judged: ML604 holds only policies over ambient pods, and
/// nothing said whether its namespace is ambient.
pub fn network_policy_reason(namespace: &str) -> String {
    format!(
        "NetworkPolicies in namespace {namespace:?}, whose Namespace is not in the input and \
         whose ambient mode is not in the facts: ML604 judges a NetworkPolicy only over ambient \
         pods (give the Namespace manifest, or --istio-ambient-namespaces)"
    )
}

/// A mesh label or annotation on the controller's metadata, where the injector never reads it:
/// the same hint a misplaced exemption gets.
pub fn misplaced_notice(object: &str, misplaced: &MisplacedKey) -> String {
    format!(
        "{object}: {} is on the controller's metadata, where the injector does not read it: \
         move it to the pod template",
        misplaced.path
    )
}

fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_judged_everything_says_nothing_more() {
        let coverage = Coverage::default();
        assert_eq!(coverage.summary(), "");
        assert!(coverage.notes().is_empty());
    }

    #[test]
    fn reasons_are_counted_and_the_first_objects_named() {
        let mut coverage = Coverage::default();
        let objects: Vec<String> = (1..=7).map(|n| format!("a.yaml: document {n}")).collect();
        coverage.not_meshed.insert("no mesh signal".into(), objects);
        assert_eq!(
            coverage.summary(),
            "; 7 workloads judged as not meshed (see the notes above)"
        );
        let notes = coverage.notes();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with(
            "7 objects judged as not meshed, so no mesh rule applies: no mesh signal: a.yaml: document 1;"
        ));
        assert!(notes[0].ends_with("; and 2 more"), "{}", notes[0]);
    }
}
