//! `meshlife diagnose pod/NAME` (`job/NAME`, `deployment/NAME`, `replicaset/NAME`): the same
//! inputs as the files, read from the API server: each pod, its events, the current and previous
//! log of each container (bounded by `--tail` and a byte limit) and its Namespace, for the
//! prediction. For a workload, also the `FailedCreate` events of what creates its pods (the Job,
//! the Deployment's newest ReplicaSet, the ReplicaSet) with that object's pod template: they
//! say why pods were never created, which no pod can. When they do, the MutatingWebhookConfigurations
//! and the API server's version are read too, to name the webhooks that run after the mesh's
//! injector. Read-only: get and list on pods, events, namespaces, jobs, deployments and
//! replicasets, get on pods/log, list on mutatingwebhookconfigurations. A log that cannot be read
//! (a container that never started, a node that cannot be reached), or a permission the
//! webhooks need, is said, and the rest is diagnosed.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::evidence::Evidence;
use super::refused::ClusterWebhooks;
use super::sources::Sources;
use super::workload::WorkloadRecord;
use crate::cluster::reader;
use crate::terminal::error_chain;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pod,
    Job,
    Deployment,
    ReplicaSet,
}

#[derive(Clone, Debug)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
}

/// How long one API call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// The most bytes of one container's log read.
const LOG_BYTES: i64 = 8 * 1024 * 1024;
/// The most pods of a Job or Deployment diagnosed (the newest).
const MOST_PODS: usize = 10;

/// The event reason of a controller that could not create a pod (the ReplicaSet, Job and
/// StatefulSet controllers' `FailedCreatePodReason`).
const FAILED_CREATE: &str = "FailedCreate";

/// The annotation the Deployment controller numbers its ReplicaSets' revisions with.
const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

pub fn read_blocking(
    cluster: &reader::Target,
    namespace: Option<&str>,
    targets: &[Target],
    tail: i64,
) -> Result<Sources, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the Kubernetes client: {error}"))?
        .block_on(read(cluster, namespace, targets, tail))
}

async fn call<T>(
    cluster: &str,
    what: &str,
    call: impl std::future::Future<Output = kube::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        // The API server's own message says what was not found (the pod, or the node its
        // log is read through).
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => {
            Err(format!("{cluster}: {what}: not found ({})", status.message))
        }
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => Err(format!(
            "{cluster}: the API server forbids {what}: {}",
            status.message
        )),
        Ok(Err(error)) => Err(format!("{cluster}: {what}: {}", error_chain(&error))),
        Err(_) => Err(format!(
            "{cluster}: {what}: no answer in {} s",
            CALL_TIMEOUT.as_secs()
        )),
    }
}

async fn read(
    cluster: &reader::Target,
    namespace: Option<&str>,
    targets: &[Target],
    tail: i64,
) -> Result<Sources, String> {
    let (config, name) = reader::configuration(cluster).await?;
    let namespace = namespace
        .map(str::to_string)
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config)
        .map_err(|error| format!("{name}: cannot make a client: {}", error_chain(&error)))?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut sources = Sources::default();
    sources
        .notes
        .push(format!("read from {name}, namespace {namespace}"));
    for target in targets {
        let pods: Vec<Pod> = match target.kind {
            Kind::Pod => vec![
                call(
                    &name,
                    &format!("get pod/{}", target.name),
                    pods_api.get(&target.name),
                )
                .await?,
            ],
            Kind::Job | Kind::Deployment | Kind::ReplicaSet => {
                let workload = workload_of(&client, &name, &namespace, target).await?;
                let selector = &workload.selector;
                let mut pods = call(
                    &name,
                    &format!("list pods ({selector})"),
                    pods_api.list(&ListParams::default().labels(selector)),
                )
                .await?
                .items;
                let refusals =
                    failed_creates(&client, &name, &namespace, &workload, &mut sources).await;
                if pods.is_empty() {
                    match refusals {
                        Ok(0) => {
                            return Err(format!(
                                "{name}: {}/{} has no pod (selector {selector}), and {} records \
                                 no {FAILED_CREATE} event saying why",
                                kind_word(target.kind),
                                target.name,
                                workload.creator_title()
                            ));
                        }
                        Ok(_) => sources.notes.push(format!(
                            "{}/{}: no pod (selector {selector}): {}'s {FAILED_CREATE} events say \
                             why",
                            kind_word(target.kind),
                            target.name,
                            workload.creator_title()
                        )),
                        Err(error) => {
                            return Err(format!(
                                "{name}: {}/{} has no pod (selector {selector}), and why cannot \
                                 be read: {error}",
                                kind_word(target.kind),
                                target.name
                            ));
                        }
                    }
                } else if let Err(error) = refusals {
                    sources
                        .notes
                        .push(format!("{error}: pods it could not create are not seen"));
                }
                pods.sort_by(|left, right| {
                    right
                        .metadata
                        .creation_timestamp
                        .cmp(&left.metadata.creation_timestamp)
                });
                if pods.len() > MOST_PODS {
                    sources.notes.push(format!(
                        "{}/{}: {} pods; the newest {MOST_PODS} are diagnosed",
                        kind_word(target.kind),
                        target.name,
                        pods.len()
                    ));
                    pods.truncate(MOST_PODS);
                }
                pods
            }
        };
        for pod in pods {
            read_pod(&client, &name, &namespace, pod, tail, &mut sources).await;
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match call(
        &name,
        &format!("get namespace/{namespace}"),
        namespaces.get(&namespace),
    )
    .await
    {
        Ok(object) => match serde_json::to_value(object) {
            Ok(value) => sources.namespaces.push(value),
            Err(error) => sources
                .notes
                .push(format!("namespace/{namespace}: {error}")),
        },
        Err(error) => sources.notes.push(format!(
            "{error}: the prediction does not see the Namespace's labels"
        )),
    }
    Ok(sources)
}

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Pod => "pod",
        Kind::Job => "job",
        Kind::Deployment => "deployment",
        Kind::ReplicaSet => "replicaset",
    }
}

/// A Job's, Deployment's or ReplicaSet's pods, and the object that creates them: the Job, the
/// Deployment's newest ReplicaSet (a rollout's new pods are its), the ReplicaSet. Its events say
/// why pods were not created.
struct Workload {
    /// The label selector of its pods: `app=web`.
    selector: String,
    /// The creating object as JSON (with its `kind`), when there is one.
    creator: Option<Value>,
}

impl Workload {
    /// `replicaset/web-7d9c5f8b4`, `job/migrate`.
    fn creator_title(&self) -> String {
        match &self.creator {
            Some(creator) => format!(
                "{}/{}",
                creator
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("object")
                    .to_ascii_lowercase(),
                creator
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            None => "no ReplicaSet".into(),
        }
    }
}

/// `matchLabels` as a label selector: `app=web,tier=front`.
fn selector_text(
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    cluster: &str,
    what: &str,
) -> Result<String, String> {
    let labels = selector
        .and_then(|selector| selector.match_labels)
        .filter(|labels| !labels.is_empty())
        .ok_or_else(|| format!("{cluster}: {what}: no matchLabels to find its pods by"))?;
    Ok(labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(","))
}

fn json_of(object: &impl serde::Serialize, what: &str) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|error| format!("{what}: {error}"))
}

/// The workload `target` names: its pods' selector and what creates them.
async fn workload_of(
    client: &Client,
    cluster: &str,
    namespace: &str,
    target: &Target,
) -> Result<Workload, String> {
    let what = format!("get {}/{}", kind_word(target.kind), target.name);
    match target.kind {
        Kind::Job => {
            let api: Api<Job> = Api::namespaced(client.clone(), namespace);
            let job = call(cluster, &what, api.get(&target.name)).await?;
            let creator = json_of(&job, &what)?;
            Ok(Workload {
                selector: selector_text(job.spec.and_then(|spec| spec.selector), cluster, &what)?,
                creator: Some(creator),
            })
        }
        Kind::ReplicaSet => {
            let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
            let replica_set = call(cluster, &what, api.get(&target.name)).await?;
            let creator = json_of(&replica_set, &what)?;
            Ok(Workload {
                selector: selector_text(Some(replica_set.spec.selector), cluster, &what)?,
                creator: Some(creator),
            })
        }
        Kind::Deployment => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            let deployment = call(cluster, &what, api.get(&target.name)).await?;
            let uid = deployment.metadata.uid.clone();
            let selector = selector_text(Some(deployment.spec.selector), cluster, &what)?;
            let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
            let owned = call(
                cluster,
                &format!("list replicasets ({selector})"),
                replica_sets.list(&ListParams::default().labels(&selector)),
            )
            .await?
            .items
            .into_iter()
            .filter(|replica_set| {
                replica_set
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|owner| Some(&owner.uid) == uid.as_ref())
            });
            // The newest: the highest revision the Deployment controller gave it.
            let revision = |replica_set: &ReplicaSet| {
                replica_set
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|annotations| annotations.get(REVISION_ANNOTATION))
                    .and_then(|revision| revision.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let newest = owned.max_by(|left, right| {
                revision(left).cmp(&revision(right)).then_with(|| {
                    left.metadata
                        .creation_timestamp
                        .cmp(&right.metadata.creation_timestamp)
                })
            });
            Ok(Workload {
                selector,
                creator: newest
                    .map(|replica_set| json_of(&replica_set, "the newest ReplicaSet"))
                    .transpose()?,
            })
        }
        Kind::Pod => Err(format!("{cluster}: {what}: a pod is no workload")),
    }
}

/// Reads the `FailedCreate` events of what creates `workload`'s pods into `sources`, with its
/// pod template, and then the cluster's webhooks and version (once); how many there were.
async fn failed_creates(
    client: &Client,
    cluster: &str,
    namespace: &str,
    workload: &Workload,
    sources: &mut Sources,
) -> Result<usize, String> {
    let Some(creator) = &workload.creator else {
        return Ok(0);
    };
    let kind = creator.get("kind").and_then(Value::as_str).unwrap_or("");
    let creator_name = creator
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!("involvedObject.kind={kind},involvedObject.name={creator_name}");
    let list = call(
        cluster,
        &format!("list events ({selector})"),
        events.list(&ListParams::default().fields(&selector)),
    )
    .await?;
    let failed: Vec<Value> = list
        .items
        .iter()
        .filter(|event| event.reason.as_deref() == Some(FAILED_CREATE))
        .filter_map(|event| serde_json::to_value(event).ok())
        .collect();
    if failed.is_empty() {
        return Ok(0);
    }
    let file = workload.creator_title();
    if let Some(record) = WorkloadRecord::of_object(creator, &format!("{file} (API server)")) {
        sources.workloads.push(record);
    }
    let count = failed.len();
    let list = json!({"apiVersion": "v1", "kind": "EventList", "items": failed});
    sources.add_value(&format!("{FAILED_CREATE} events of {file}"), &list);
    if sources.webhooks.is_none() {
        read_webhooks(client, cluster, sources).await;
    }
    Ok(count)
}

/// The cluster's MutatingWebhookConfigurations and the API server's version, for pods a
/// workload could not create; what cannot be read is said and the rest diagnosed.
async fn read_webhooks(client: &Client, cluster: &str, sources: &mut Sources) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    match call(
        cluster,
        "list mutatingwebhookconfigurations",
        api.list(&ListParams::default()),
    )
    .await
    {
        Ok(list) => {
            let configurations = list
                .items
                .iter()
                .filter_map(|configuration| serde_json::to_value(configuration).ok())
                .collect();
            sources.webhooks = Some(ClusterWebhooks {
                cluster: cluster.to_string(),
                configurations,
            });
        }
        Err(error) => sources.notes.push(format!(
            "{error}: the webhooks that run after the mesh's injector are not named"
        )),
    }
    match call(
        cluster,
        "get the API server's /version",
        client.apiserver_version(),
    )
    .await
    {
        Ok(version) => {
            sources.api_server = Some((
                version.git_version.clone(),
                Evidence {
                    text: Some(version.git_version),
                    ..Evidence::field(&format!("{cluster} /version"), "gitVersion")
                },
            ))
        }
        Err(error) => sources.notes.push(format!("{error}: not used")),
    }
}

async fn read_pod(
    client: &Client,
    cluster: &str,
    namespace: &str,
    pod: Pod,
    tail: i64,
    sources: &mut Sources,
) {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let file = format!("pod/{pod_name}");
    let value = match serde_json::to_value(&pod) {
        Ok(value) => value,
        Err(error) => {
            sources.errors.push(format!("{file}: {error}"));
            return;
        }
    };
    sources.add_value(&file, &value);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!("involvedObject.kind=Pod,involvedObject.name={pod_name}");
    match call(
        cluster,
        &format!("list events ({selector})"),
        events.list(&ListParams::default().fields(&selector)),
    )
    .await
    {
        Ok(list) => {
            let items: Vec<Value> = list
                .items
                .iter()
                .filter_map(|event| serde_json::to_value(event).ok())
                .collect();
            let list = json!({"apiVersion": "v1", "kind": "EventList", "items": items});
            sources.add_value(&format!("events of {file}"), &list);
        }
        Err(error) => sources.notes.push(format!("{error}: no events")),
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let statuses = pod.status.as_ref();
    let restarts = |name: &str| {
        statuses
            .into_iter()
            .flat_map(|status| {
                status
                    .container_statuses
                    .iter()
                    .flatten()
                    .chain(status.init_container_statuses.iter().flatten())
            })
            .find(|status| status.name == name)
            .map_or(0, |status| status.restart_count)
    };
    let spec = pod.spec.as_ref();
    let containers: Vec<String> = spec
        .into_iter()
        .flat_map(|spec| {
            spec.init_containers
                .iter()
                .flatten()
                .chain(spec.containers.iter())
                .map(|container| container.name.clone())
        })
        .collect();
    for container in containers {
        let mut runs = vec![false];
        if restarts(&container) > 0 {
            runs.insert(0, true);
        }
        for previous in runs {
            let params = LogParams {
                container: Some(container.clone()),
                timestamps: true,
                tail_lines: Some(tail),
                limit_bytes: Some(LOG_BYTES),
                previous,
                ..LogParams::default()
            };
            let run = if previous {
                "previous run"
            } else {
                "current run"
            };
            let what = format!("get the log of {file} container {container} ({run})");
            match call(cluster, &what, pods.logs(&pod_name, &params)).await {
                Ok(text) if text.trim().is_empty() => {}
                // The kubelet's answer once it has removed the container (a deleted pod's, one
                // killed for an in-place restart): its error, in the body of a 200 (it wrote the
                // response's first byte before it asked the runtime). No line of the container.
                Ok(text)
                    if text
                        .trim()
                        .starts_with("unable to retrieve container logs for")
                        && text.trim().lines().count() == 1 =>
                {
                    sources.notes.push(format!(
                        "{what}: the kubelet no longer has it ({}): not used",
                        text.trim()
                    ));
                }
                Ok(text) => {
                    let log_file = if previous {
                        format!("{file} {container} (previous)")
                    } else {
                        format!("{file} {container}")
                    };
                    sources.add_text(&log_file, &text, Some(&container));
                }
                Err(error) => sources.notes.push(format!("{error}: not used")),
            }
        }
    }
}
