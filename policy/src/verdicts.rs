//! The host's "not judged" summary: for each pod spec an object holds, whether it is meshed
//! (which mesh, injected or predicted, native or classic) or why not. Native-only API: the wasm
//! module keeps its one entrypoint. The decision is `mesh::decide`'s, never re-derived here.

use serde::Serialize;

use crate::evaluate::{NotReviewed, Read, with_exact_reading};
use crate::input::ObjectMeta;
use crate::mesh::{Decision, NotMeshed, Placement, decide};
use crate::rules::ambient_network_policy::ambient_because;
use crate::workload::{Workload, WorkloadKind, in_exempt_namespace};

/// One pod spec of the object (or, when the object has none to judge, the object itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecVerdict {
    /// Where the pod spec is, e.g. `spec.template.spec`; `None` when the object holds no pod
    /// spec that is judged (`verdict` is then `NotJudged`).
    pub path: Option<String>,
    pub verdict: MeshVerdict,
    /// Mesh labels and annotations on the controller's (or an embedded Job's) metadata rather
    /// than the pod template, where the injector never sees them. Reported with any verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub misplaced: Vec<MisplacedKey>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum MeshVerdict {
    /// `mesh`: `istio` or `linkerd`; `injected`: the proxy is in the spec (else predicted);
    /// `mode`: `native`, `classic`, `classicWithHold` or `brokenInit`.
    Meshed {
        mesh: &'static str,
        injected: bool,
        mode: &'static str,
    },
    /// An Istio gateway: the proxy is the workload; no rule judges it.
    Gateway,
    /// A NetworkPolicy that selects pods in Istio's ambient mode: ML604 judges it. `because`:
    /// why those pods are ambient.
    AmbientNetworkPolicy { because: String },
    /// No proxy, none predicted, and why.
    NotMeshed(NotMeshed),
    /// Not looked at by the rules at all.
    NotJudged(NotJudged),
}

/// Why the rules do not look at an object or pod spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum NotJudged {
    /// Not a kind whose pod specs meshlife reviews (a ConfigMap, another group's Rollout).
    #[serde(rename_all = "camelCase")]
    NotAReviewedKind {
        kind: Option<String>,
        api_version: Option<String>,
    },
    /// A reviewed kind without a pod spec (a Rollout with `workloadRef`, a Pod without `spec`).
    NoPodSpec { kind: String },
    /// `operation` DELETE or CONNECT.
    SkippedOperation { operation: String },
    /// The input is ML000: `path` and `problem` as its message gives them.
    InvalidInput { path: String, problem: String },
    /// The namespace matches `exemptNamespaces`.
    ExemptNamespace { namespace: String },
    /// A NetworkPolicy whose pods are not known to be in Istio's ambient mode, the only mode
    /// whose needs meshlife holds NetworkPolicies to (`namespaceKnown`: the input carried the
    /// Namespace or the facts list ambient namespaces).
    #[serde(rename_all = "camelCase")]
    NetworkPolicyNotAmbient {
        namespace: String,
        namespace_known: bool,
    },
}

/// A mesh key in the wrong metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MisplacedKey {
    pub key: String,
    pub is_label: bool,
    /// e.g. `metadata.labels["sidecar.istio.io/inject"]`.
    pub path: String,
}

/// Labels and annotations that steer a mesh injector.
fn is_mesh_key(key: &str) -> bool {
    matches!(
        key,
        "istio.io/rev" | "istio.io/dataplane-mode" | "linkerd.io/inject"
    ) || [
        "sidecar.istio.io/",
        "traffic.sidecar.istio.io/",
        "proxy.istio.io/",
        "inject.istio.io/",
        "config.linkerd.io/",
        "config.alpha.linkerd.io/",
        "config.beta.linkerd.io/",
    ]
    .iter()
    .any(|prefix| key.starts_with(prefix))
}

fn misplaced_in(
    meta: &ObjectMeta,
    meta_path: &str,
    pod: &ObjectMeta,
    found: &mut Vec<MisplacedKey>,
) {
    for (is_label, map, pod_map, field) in [
        (true, &meta.labels, &pod.labels, "labels"),
        (false, &meta.annotations, &pod.annotations, "annotations"),
    ] {
        for key in map.iter().flat_map(|map| map.keys()) {
            let on_pod = pod_map
                .as_ref()
                .is_some_and(|pod| pod.contains_key(key.as_str()));
            if is_mesh_key(key) && !on_pod {
                found.push(MisplacedKey {
                    key: key.to_string(),
                    is_label,
                    path: format!("{meta_path}.{field}[\"{key}\"]"),
                });
            }
        }
    }
}

fn misplaced_keys(workload: &Workload) -> Vec<MisplacedKey> {
    let mut found = Vec::new();
    if workload.kind != WorkloadKind::Pod {
        misplaced_in(
            &workload.object_meta,
            "metadata",
            &workload.pod_meta,
            &mut found,
        );
    }
    if let Some((path, meta)) = &workload.job_meta {
        misplaced_in(meta, path, &workload.pod_meta, &mut found);
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

fn verdict_of(workload: &Workload, settings: &crate::params::Settings) -> MeshVerdict {
    if workload.in_exempt_namespace(settings) {
        return MeshVerdict::NotJudged(NotJudged::ExemptNamespace {
            namespace: workload.namespace.as_deref().unwrap_or("").to_string(),
        });
    }
    match decide(workload, settings) {
        Decision::Gateway => MeshVerdict::Gateway,
        Decision::NotMeshed(reason) => MeshVerdict::NotMeshed(reason),
        Decision::Meshed(decision) => MeshVerdict::Meshed {
            mesh: decision.mesh.as_str(),
            injected: decision.injected,
            mode: match decision.placement {
                Placement::Native => "native",
                Placement::Classic { hold: true } => "classicWithHold",
                Placement::Classic { hold: false } => "classic",
                Placement::BrokenInit => "brokenInit",
            },
        },
    }
}

fn object_level(verdict: NotJudged) -> Vec<PodSpecVerdict> {
    vec![PodSpecVerdict {
        path: None,
        verdict: MeshVerdict::NotJudged(verdict),
        misplaced: Vec::new(),
    }]
}

/// For each pod spec of the object in a Gatekeeper-shaped input (the bytes `evaluate` takes),
/// its mesh verdict; a single entry without `path` when the object holds none that is judged.
pub fn mesh_verdicts(input: &[u8]) -> Vec<PodSpecVerdict> {
    with_exact_reading(input, |reading| match reading {
        Err(error) => object_level(NotJudged::InvalidInput {
            path: error.path,
            problem: error.problem,
        }),
        Ok(Read::NotReviewed(NotReviewed::SkippedOperation(operation))) => {
            object_level(NotJudged::SkippedOperation { operation })
        }
        Ok(Read::NotReviewed(NotReviewed::Kind { kind, api_version })) => {
            object_level(NotJudged::NotAReviewedKind { kind, api_version })
        }
        Ok(Read::NotReviewed(NotReviewed::NoPodSpec { kind })) => {
            object_level(NotJudged::NoPodSpec { kind })
        }
        Ok(Read::NetworkPolicy(policy, settings)) => {
            let namespace = policy.namespace.as_deref().unwrap_or("").to_string();
            let verdict = if in_exempt_namespace(&settings, &namespace) {
                MeshVerdict::NotJudged(NotJudged::ExemptNamespace { namespace })
            } else {
                match ambient_because(&policy, &settings) {
                    Some(because) => MeshVerdict::AmbientNetworkPolicy { because },
                    None => MeshVerdict::NotJudged(NotJudged::NetworkPolicyNotAmbient {
                        namespace,
                        namespace_known: policy.namespace_meta.is_some()
                            || !settings.raw.istio.ambient_namespaces.is_empty(),
                    }),
                }
            };
            vec![PodSpecVerdict {
                path: None,
                verdict,
                misplaced: Vec::new(),
            }]
        }
        Ok(Read::Workloads(workloads, settings)) => workloads
            .iter()
            .map(|workload| PodSpecVerdict {
                path: Some(workload.spec_path().to_string()),
                verdict: verdict_of(workload, &settings),
                misplaced: misplaced_keys(workload),
            })
            .collect(),
    })
}
