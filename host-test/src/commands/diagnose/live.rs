//! `meshlife diagnose pod/NAME` (`job/NAME`, `deployment/NAME`): the same inputs as the files,
//! read from the API server: each pod, its events, the current and previous log of each
//! container (bounded by `--tail` and a byte limit) and its Namespace, for the prediction.
//! Read-only: get and list on pods, events, namespaces, jobs and deployments, and get on
//! pods/log. A log that cannot be read (a container that never started, a node that cannot be
//! reached) is said, and the rest is diagnosed.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::sources::Sources;
use crate::cluster::reader;
use crate::terminal::error_chain;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pod,
    Job,
    Deployment,
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
            Kind::Job | Kind::Deployment => {
                let selector = selector_of(&client, &name, &namespace, target).await?;
                let mut pods = call(
                    &name,
                    &format!("list pods ({selector})"),
                    pods_api.list(&ListParams::default().labels(&selector)),
                )
                .await?
                .items;
                if pods.is_empty() {
                    return Err(format!(
                        "{name}: {}/{} has no pod (selector {selector})",
                        kind_word(target.kind),
                        target.name
                    ));
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
    }
}

/// The label selector of a Job's or Deployment's pods.
async fn selector_of(
    client: &Client,
    cluster: &str,
    namespace: &str,
    target: &Target,
) -> Result<String, String> {
    let what = format!("get {}/{}", kind_word(target.kind), target.name);
    let selector = match target.kind {
        Kind::Job => {
            let api: Api<Job> = Api::namespaced(client.clone(), namespace);
            call(cluster, &what, api.get(&target.name))
                .await?
                .spec
                .and_then(|spec| spec.selector)
        }
        Kind::Deployment => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            Some(
                call(cluster, &what, api.get(&target.name))
                    .await?
                    .spec
                    .selector,
            )
        }
        Kind::Pod => None,
    };
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
