//! Pods the API server refused to create because a native sidecar lost its `restartPolicy`.
//!
//! A controller records its failure to create a pod as a Warning event `FailedCreate` about
//! itself (the ReplicaSet, Job, StatefulSet controllers), its message the API server's error:
//! `Error creating: Pod "web-7d9c5f8b4-x7k2p" is invalid: [spec.initContainers[1].startupProbe:
//! Forbidden: may not be set for init containers without restartPolicy=Always, ...]` (the
//! ReplicaSet and Job controllers; a StatefulSet's `create Pod web-0 in StatefulSet web failed
//! error: Pod "web-0" is invalid: ...`; after ten alike, the event recorder's `(combined from
//! similar events): ` before it). The API server writes that error
//! (k8s.io/kubernetes `pkg/apis/core/validation`, `validateInitContainers`, 1.28 on) for an init
//! container that holds a probe or a lifecycle, which only a native sidecar may, without
//! `restartPolicy: Always`: a native sidecar that lost the field between the template and the
//! API server's validation, in the mutating admission chain. No pod exists, so nothing else
//! about the pods can be read: these are diagnosed apart from the pods, per workload.
//!
//! Reading is kept apart from meaning here too: this reads the messages and gathers what the
//! data says about the workload (its pod template, its namespace, the cluster's webhooks);
//! `conclusions/native_unsupported.rs` says what it means.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use super::clock::Bound;
use super::events::{About, EventRecord};
use super::evidence::Evidence;
use super::observed::Mesh;
use super::pod::STATUS_PRECISION;
use super::sources::Sources;
use super::workload::WorkloadRecord;
use crate::cluster::webhooks::{self, Injector, LaterWebhook};

/// `spec.initContainers[1].startupProbe: Forbidden: may not be set for init containers without
/// restartPolicy=Always`, each field the API server refused.
static REFUSED_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"spec\.initContainers\[(\d+)\]\.([A-Za-z]+): Forbidden: {}",
        regex::escape(webhooks::REFUSAL_MESSAGE)
    ))
    .expect("a valid pattern")
});

/// The pod the API server named: `Pod "web-7d9c5f8b4-x7k2p" is invalid` (validation),
/// `pods "web-7d9c5f8b4-x7k2p" is forbidden` (admission).
static REFUSED_POD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:Pod|pods) "([^"]+)" is (?:invalid|forbidden)"#).expect("a valid pattern")
});

/// One init container the API server refused, by its index in `spec.initContainers`, with the
/// fields it may not hold without `restartPolicy: Always`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusedInit {
    pub index: usize,
    /// `startupProbe`, `readinessProbe`, `livenessProbe`, `lifecycle`, in the message's order.
    pub fields: Vec<String>,
}

/// What one refusal's message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The pod the API server named (its generated name), when the message names it.
    pub pod: Option<String>,
    pub inits: Vec<RefusedInit>,
}

/// The refusal in `message`, if it is the API server's refusal of a native sidecar without its
/// `restartPolicy`; `None` for any other message (a quota, another validation error).
pub fn refusal_of(message: &str) -> Option<Refusal> {
    let mut inits: Vec<RefusedInit> = Vec::new();
    for found in REFUSED_FIELD.captures_iter(message) {
        let Ok(index) = found[1].parse::<usize>() else {
            continue;
        };
        let field = found[2].to_string();
        match inits.iter_mut().find(|init| init.index == index) {
            Some(init) if !init.fields.contains(&field) => init.fields.push(field),
            Some(_) => {}
            None => inits.push(RefusedInit {
                index,
                fields: vec![field],
            }),
        }
    }
    if inits.is_empty() {
        return None;
    }
    Some(Refusal {
        pod: REFUSED_POD
            .captures(message)
            .map(|found| found[1].to_string()),
        inits,
    })
}

/// One event of refusals: the controller's `FailedCreate`, as often as it was recorded.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedEvent {
    #[serde(flatten)]
    pub evidence: Evidence,
    /// From its first to its last occurrence; `None` for a table's (ages, not times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<Bound>,
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub init_containers: Vec<RefusedInit>,
}

/// Where the pods were asked to be injected by a mesh: the template's label or annotation, or
/// its Namespace's.
#[derive(Clone, Debug)]
pub struct InjectionAsked {
    pub mesh: Mesh,
    pub evidence: Evidence,
    /// `the pod template's annotation sidecar.istio.io/inject: "true"`.
    pub what: String,
}

/// The cluster's MutatingWebhookConfigurations, as read with the workload.
#[derive(Clone, Debug, Default)]
pub struct ClusterWebhooks {
    /// `context kind-dev (https://127.0.0.1:6443)`, where they were read.
    pub cluster: String,
    pub configurations: Vec<Value>,
}

/// The pods one workload could not create, and what the data says about them.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedPods {
    /// `ReplicaSet shop/web-7d9c5f8b4`; `the workload` when no input names it.
    pub workload: String,
    pub events: Vec<RefusedEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    #[serde(skip)]
    pub injection: Option<InjectionAsked>,
    #[serde(skip)]
    pub template: Option<WorkloadRecord>,
    /// The webhooks that run after the mesh's injector and take Pod CREATE: `None` when the
    /// cluster's configurations were not read.
    #[serde(skip)]
    pub webhooks: Option<Vec<LaterWebhook>>,
    /// Where the webhooks were read.
    #[serde(skip)]
    pub webhooks_read_from: String,
    /// The API server's version (`v1.31.4`) and where it was read.
    #[serde(skip)]
    pub api_server: Option<(String, Evidence)>,
}

impl RefusedPods {
    /// The init containers refused, each once, by index.
    pub fn refused_inits(&self) -> Vec<RefusedInit> {
        let mut all: Vec<RefusedInit> = Vec::new();
        for init in self.events.iter().flat_map(|event| &event.init_containers) {
            match all.iter_mut().find(|known| known.index == init.index) {
                Some(known) => {
                    for field in &init.fields {
                        if !known.fields.contains(field) {
                            known.fields.push(field.clone());
                        }
                    }
                }
                None => all.push(init.clone()),
            }
        }
        all.sort_by_key(|init| init.index);
        all
    }

    /// How many refusals the events count.
    pub fn refusals(&self) -> u64 {
        self.events.iter().map(|event| event.count).sum()
    }
}

/// Takes the refusals out of `sources.events` (what is left is the pods' own), gathered per
/// workload with its template, its namespace's injection and the cluster's webhooks where the
/// sources hold them.
pub fn gather(sources: &mut Sources) -> Vec<RefusedPods> {
    let mut gathered: Vec<(Option<About>, RefusedPods)> = Vec::new();
    let mut kept = Vec::new();
    for event in std::mem::take(&mut sources.events) {
        let Some(refusal) = refusal_of(&event.message) else {
            kept.push(event);
            continue;
        };
        let refused = refused_event(&event, refusal);
        let about = event.about.clone().filter(|about| about.kind != "Pod");
        let group = gathered
            .iter_mut()
            .find(|(known, _)| match (known, &about) {
                (Some(known), Some(about)) => known.same_as(about),
                (None, None) => true,
                _ => false,
            });
        match group {
            Some((_, pods)) => pods.events.push(refused),
            None => gathered.push((
                about.clone(),
                RefusedPods {
                    workload: about
                        .as_ref()
                        .map_or_else(|| "the workload".to_string(), About::title),
                    events: vec![refused],
                    mesh: None,
                    injection: None,
                    template: None,
                    webhooks: None,
                    webhooks_read_from: String::new(),
                    api_server: None,
                },
            )),
        }
    }
    sources.events = kept;
    gathered
        .into_iter()
        .map(|(about, mut pods)| {
            // A workload given as describe text and as its events is one: its dated events are
            // kept, and describe's undated rows (the same refusals, by age) left out.
            if pods.events.iter().any(|event| event.time.is_some()) {
                let undated: Vec<String> = pods
                    .events
                    .iter()
                    .filter(|event| event.time.is_none())
                    .map(|event| event.evidence.place())
                    .collect();
                if !undated.is_empty() {
                    sources.notes.push(format!(
                        "{}: the refusals without a time ({}) are left out: the dated events of \
                         the same workload were given too",
                        pods.workload,
                        undated.join(", ")
                    ));
                    pods.events.retain(|event| event.time.is_some());
                }
            }
            // Events that name no workload (rows pasted alone) are the only workload's given.
            pods.template = match &about {
                Some(about) => sources
                    .workloads
                    .iter()
                    .find(|workload| about.same_as(&workload.about))
                    .cloned(),
                None => match sources.workloads.as_slice() {
                    [only] => Some(only.clone()),
                    _ => None,
                },
            };
            // The describe's kind and namespace are the fuller name, when the events lack them.
            if let Some(template) = &pods.template
                && about
                    .as_ref()
                    .is_none_or(|about| about.namespace.is_empty() || about.kind == About::ANY_KIND)
            {
                pods.workload = template.about.title();
            }
            let namespace = about
                .as_ref()
                .map(|about| about.namespace.clone())
                .filter(|namespace| !namespace.is_empty())
                .or_else(|| {
                    pods.template
                        .as_ref()
                        .map(|template| template.about.namespace.clone())
                });
            pods.injection = injection_asked(
                pods.template.as_ref(),
                namespace.as_deref(),
                &sources.namespaces,
            );
            pods.mesh = pods.injection.as_ref().map(|asked| asked.mesh);
            if let Some(read) = &sources.webhooks {
                let injectors = match pods.mesh {
                    Some(Mesh::Istio) => vec![Injector::Istio {
                        revisions: Vec::new(),
                    }],
                    Some(Mesh::Linkerd) => vec![Injector::Linkerd],
                    None => vec![
                        Injector::Istio {
                            revisions: Vec::new(),
                        },
                        Injector::Linkerd,
                    ],
                };
                pods.webhooks = Some(
                    injectors
                        .iter()
                        .flat_map(|injector| {
                            webhooks::webhooks_after(&read.configurations, injector)
                        })
                        .collect(),
                );
                pods.webhooks_read_from = read.cluster.clone();
            }
            pods.api_server = sources.api_server.clone();
            pods
        })
        .collect()
}

fn refused_event(event: &EventRecord, refusal: Refusal) -> RefusedEvent {
    RefusedEvent {
        evidence: event.evidence.clone(),
        // From the first to the last refusal, each to the second (an event's times are).
        time: event.first.map(|first| match event.last {
            Some(last) if last > first => Bound::between(Some(first), Some(last)),
            _ => Bound::at(first, STATUS_PRECISION),
        }),
        count: event.count,
        pod: refusal.pod,
        init_containers: refusal.inits,
    }
}

/// Whether the pods ask to be injected, and by which mesh, as the injectors' webhooks pick pods:
/// the template's own `sidecar.istio.io/inject` (a label, or the older annotation) and
/// `linkerd.io/inject` first, since a pod's own choice wins over its namespace's; else its
/// Namespace's `istio-injection` or `istio.io/rev` label or `linkerd.io/inject` annotation. A
/// revision's custom selector is not read; `None` when nothing in the data asks.
fn injection_asked(
    template: Option<&WorkloadRecord>,
    namespace: Option<&str>,
    namespaces: &[Value],
) -> Option<InjectionAsked> {
    let mut istio_off = false;
    let mut linkerd_off = false;
    if let Some(template) = template {
        let istio = [
            ("label", &template.labels),
            ("annotation", &template.annotations),
        ]
        .into_iter()
        .find_map(|(what, entries)| Some((what, entries.get("sidecar.istio.io/inject")?)));
        if let Some((what, entry)) = istio {
            match entry.value.trim_matches('"') {
                "true" => {
                    return Some(InjectionAsked {
                        mesh: Mesh::Istio,
                        evidence: entry.evidence.clone(),
                        what: format!(
                            "the pod template's {what} sidecar.istio.io/inject: \"true\""
                        ),
                    });
                }
                _ => istio_off = true,
            }
        }
        if let Some(entry) = template.annotations.get("linkerd.io/inject") {
            match entry.value.trim_matches('"') {
                "enabled" | "ingress" => {
                    return Some(InjectionAsked {
                        mesh: Mesh::Linkerd,
                        evidence: entry.evidence.clone(),
                        what: format!(
                            "the pod template's annotation linkerd.io/inject: {}",
                            entry.value
                        ),
                    });
                }
                _ => linkerd_off = true,
            }
        }
    }
    let name = namespace?;
    let namespace_object = namespaces
        .iter()
        .find(|object| object.pointer("/metadata/name").and_then(Value::as_str) == Some(name))?;
    let file = format!("namespace/{name}");
    let entry = |field: &str, key: &str| {
        namespace_object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .and_then(|map| map.get(key))
            .and_then(Value::as_str)
    };
    let cited = |field: &str, key: &str, value: &str| Evidence {
        text: Some(format!("{key}: {value}")),
        ..Evidence::field(&file, &format!("metadata.{field}[{key}]"))
    };
    let injection = entry("labels", "istio-injection");
    if !istio_off {
        if injection == Some("enabled") {
            return Some(InjectionAsked {
                mesh: Mesh::Istio,
                evidence: cited("labels", "istio-injection", "enabled"),
                what: format!("namespace {name}'s label istio-injection=enabled"),
            });
        }
        if let Some(revision) = entry("labels", "istio.io/rev")
            && injection != Some("disabled")
        {
            return Some(InjectionAsked {
                mesh: Mesh::Istio,
                evidence: cited("labels", "istio.io/rev", revision),
                what: format!("namespace {name}'s label istio.io/rev={revision}"),
            });
        }
    }
    if !linkerd_off && entry("annotations", "linkerd.io/inject") == Some("enabled") {
        return Some(InjectionAsked {
            mesh: Mesh::Linkerd,
            evidence: cited("annotations", "linkerd.io/inject", "enabled"),
            what: format!("namespace {name}'s annotation linkerd.io/inject: enabled"),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_refusal_is_read_from_the_controllers_message() {
        // istio/istio#52245, as the Job controller recorded it.
        let refusal = refusal_of(
            "(combined from similar events): Error creating: Pod \"example-job-zj7pd\" is \
             invalid: [spec.initContainers[1].lifecycle: Forbidden: may not be set for init \
             containers without restartPolicy=Always, spec.initContainers[1].readinessProbe: \
             Forbidden: may not be set for init containers without restartPolicy=Always, \
             spec.initContainers[1].startupProbe: Forbidden: may not be set for init containers \
             without restartPolicy=Always]",
        )
        .unwrap();
        assert_eq!(refusal.pod.as_deref(), Some("example-job-zj7pd"));
        assert_eq!(
            refusal.inits,
            [RefusedInit {
                index: 1,
                fields: vec![
                    "lifecycle".into(),
                    "readinessProbe".into(),
                    "startupProbe".into()
                ],
            }]
        );
        // Other refusals are not this one.
        assert!(
            refusal_of(
                "Error creating: pods \"web-7d9c5f8b4-x7k2p\" is forbidden: exceeded quota: \
                 compute, requested: limits.cpu=2, used: limits.cpu=8, limited: limits.cpu=8"
            )
            .is_none()
        );
        assert!(
            refusal_of(
                "Error creating: Pod \"web-1\" is invalid: spec.initContainers[0].image: \
                 Required value"
            )
            .is_none()
        );
    }
}
