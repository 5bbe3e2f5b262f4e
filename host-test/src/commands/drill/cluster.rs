//! What the drill asks of the API server: the target and the Service in front of it, the
//! permissions it needs (checked before anything changes), the load pod, the event, and the
//! watches of pods, EndpointSlices and events.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::observe::PodLife;
use crate::cluster::reader::Permission;
use crate::terminal::error_chain;

/// How long one API call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The label on everything the drill creates, so that what a killed drill left is found.
pub const DRILL_LABEL: &str = "app.kubernetes.io/managed-by";
pub const DRILL_LABEL_VALUE: &str = "meshlife-drill";
/// The load pod's container.
pub const CLIENT_CONTAINER: &str = "drill-client";

/// Everything the drill asks of the API server, and nothing more (`meshlife install
/// drill-role` prints it as a Role).
pub const PERMISSIONS: [Permission; 9] = [
    Permission {
        group: "apps",
        resource: "deployments",
        verbs: &["get", "patch"],
        why: "the target, and its restart (the pod template's restartedAt annotation, as kubectl rollout restart)",
    },
    Permission {
        group: "apps",
        resource: "statefulsets",
        verbs: &["get", "patch"],
        why: "a StatefulSet target, and its restart",
    },
    Permission {
        group: "argoproj.io",
        resource: "rollouts",
        verbs: &["get", "patch"],
        why: "an Argo Rollout target, and its restart (spec.restartAt, as kubectl argo rollouts restart)",
    },
    Permission {
        group: "",
        resource: "services",
        verbs: &["list"],
        why: "the Service in front of the target: the address and port the load calls",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["get", "list", "watch", "create", "delete"],
        why: "the target's pods (watched; one deleted with --event delete-pod), and the load pod",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "the load pod's calls, read from its log",
    },
    Permission {
        group: "",
        resource: "pods/eviction",
        verbs: &["create"],
        why: "--event evict (the PodDisruptionBudget is honoured)",
    },
    Permission {
        group: "discovery.k8s.io",
        resource: "endpointslices",
        verbs: &["list", "watch"],
        why: "when each pod leaves the Service's endpoints",
    },
    Permission {
        group: "",
        resource: "events",
        verbs: &["list", "watch"],
        why: "the kubelet's Killing events (when it stops each container)",
    },
];

pub async fn call<T>(
    what: &str,
    call: impl std::future::Future<Output = kube::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => {
            Err(format!("{what}: not found ({})", status.message))
        }
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => Err(format!(
            "{what}: the API server forbids it: {} (`meshlife install drill-role` prints the Role the drill needs)",
            status.message
        )),
        Ok(Err(error)) => Err(format!("{what}: {}", error_chain(&error))),
        Err(_) => Err(format!("{what}: no answer in {} s", CALL_TIMEOUT.as_secs())),
    }
}

/// The kinds a drill restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Deployment,
    StatefulSet,
    /// Argo Rollouts' `Rollout` (argoproj.io/v1alpha1), where the cluster has it.
    Rollout,
}

impl TargetKind {
    pub fn parse(text: &str) -> Result<(TargetKind, String), String> {
        let (kind, name) = text.split_once('/').ok_or_else(|| {
            format!(
                "{text:?}: give the target as deployment/NAME, statefulset/NAME or rollout/NAME"
            )
        })?;
        let kind = match kind.to_ascii_lowercase().as_str() {
            "deployment" | "deployments" | "deploy" => TargetKind::Deployment,
            "statefulset" | "statefulsets" | "sts" => TargetKind::StatefulSet,
            "rollout" | "rollouts" | "ro" => TargetKind::Rollout,
            other => {
                return Err(format!(
                    "{text:?}: a drill restarts a Deployment, a StatefulSet or an Argo Rollout, not a {other}"
                ));
            }
        };
        if name.is_empty() {
            return Err(format!("{text:?}: the target's name is missing"));
        }
        Ok((kind, name.to_string()))
    }

    pub fn noun(self) -> &'static str {
        match self {
            TargetKind::Deployment => "deployment",
            TargetKind::StatefulSet => "statefulset",
            TargetKind::Rollout => "rollout",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::Deployment => "Deployment",
            TargetKind::StatefulSet => "StatefulSet",
            TargetKind::Rollout => "Rollout",
        }
    }

    /// The API group, version and resource the drill reads and patches.
    fn resource(self) -> ApiResource {
        let (group, version, plural) = match self {
            TargetKind::Deployment => ("apps", "v1", "deployments"),
            TargetKind::StatefulSet => ("apps", "v1", "statefulsets"),
            TargetKind::Rollout => ("argoproj.io", "v1alpha1", "rollouts"),
        };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: self.kind().into(),
            plural: plural.into(),
        }
    }

    fn api(self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource())
    }
}

/// The target as read: its object (JSON, for the prediction), its pod labels and selector.
pub struct TargetObject {
    pub kind: TargetKind,
    pub name: String,
    pub object: Value,
    pub pod_labels: BTreeMap<String, String>,
    /// `key=value,...` of `spec.selector.matchLabels`.
    pub selector: String,
    pub replicas: i32,
}

pub async fn read_target(
    client: &Client,
    namespace: &str,
    kind: TargetKind,
    name: &str,
) -> Result<TargetObject, String> {
    let object = get_object(client, namespace, kind, name).await?;
    let labels_at = |object: &Value, pointer: &str| -> BTreeMap<String, String> {
        object
            .pointer(pointer)
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    if object.pointer("/spec/workloadRef").is_some() {
        return Err(format!(
            "{}/{name} takes its pod template from spec.workloadRef: drill the Rollout of a template it holds itself",
            kind.noun()
        ));
    }
    let match_labels = labels_at(&object, "/spec/selector/matchLabels");
    if match_labels.is_empty() {
        return Err(format!(
            "{}/{name}: its selector has no matchLabels, which the drill watches its pods by",
            kind.noun()
        ));
    }
    let selector = match_labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut object = object;
    // The prediction reads the object as its manifest would be: without the server's status.
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        map.insert("apiVersion".into(), json!(kind.resource().api_version));
        map.insert("kind".into(), json!(kind.kind()));
    }
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1) as i32;
    Ok(TargetObject {
        kind,
        name: name.to_string(),
        pod_labels: labels_at(&object, "/spec/template/metadata/labels"),
        object,
        selector,
        replicas,
    })
}

/// The target's object as the API server has it now, as JSON: the kinds share the fields the
/// drill reads (selector, template, replicas, rollout status).
async fn get_object(
    client: &Client,
    namespace: &str,
    kind: TargetKind,
    name: &str,
) -> Result<Value, String> {
    let what = format!("get {}/{name} in {namespace}", kind.noun());
    let object = match call(&what, kind.api(client, namespace).get(name)).await {
        Err(error) if kind == TargetKind::Rollout && error.contains("not found") => {
            return Err(format!(
                "{error}: a rollout target needs Argo Rollouts' CRD (rollouts.argoproj.io) in the cluster and the Rollout in {namespace}"
            ));
        }
        other => other?,
    };
    serde_json::to_value(object).map_err(|error| format!("{what}: {error}"))
}

/// Where the load goes: a Service's cluster IP and port.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub service: String,
    pub cluster_ip: String,
    pub port: i32,
    pub port_name: Option<String>,
    /// The port of the gRPC streams, with --grpc.
    pub grpc_port: Option<i32>,
}

impl Endpoint {
    pub fn describe(&self) -> String {
        match &self.port_name {
            Some(name) => format!(
                "Service {} port {} \"{name}\" ({}:{})",
                self.service, self.port, self.cluster_ip, self.port
            ),
            None => format!(
                "Service {} port {} ({}:{})",
                self.service, self.port, self.cluster_ip, self.port
            ),
        }
    }
}

/// The Service whose selector selects the target's pods (or the one named), and its port (the
/// one named or numbered, else its first TCP port); with --grpc, its gRPC port too (the one
/// named or numbered, else the one whose appProtocol is grpc, else one named grpc or grpc-*).
pub async fn find_service(
    client: &Client,
    namespace: &str,
    target: &TargetObject,
    args: &super::DrillArgs,
) -> Result<Endpoint, String> {
    let service = args.service.as_deref();
    let port = args.port.as_deref();
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let services = call(
        &format!("list services in {namespace}"),
        api.list(&ListParams::default()),
    )
    .await?
    .items;
    let selects = |candidate: &Service| {
        candidate
            .spec
            .as_ref()
            .and_then(|spec| spec.selector.as_ref())
            .is_some_and(|selector| {
                !selector.is_empty()
                    && selector
                        .iter()
                        .all(|(key, value)| target.pod_labels.get(key) == Some(value))
            })
    };
    let chosen: Vec<&Service> = match service {
        Some(name) => services
            .iter()
            .filter(|candidate| candidate.metadata.name.as_deref() == Some(name))
            .collect(),
        None => services
            .iter()
            .filter(|candidate| selects(candidate))
            .collect(),
    };
    let found = match (chosen.as_slice(), service) {
        ([one], _) => *one,
        ([], Some(name)) => {
            return Err(format!("no Service {name} in namespace {namespace}"));
        }
        ([], None) => {
            return Err(format!(
                "no Service in namespace {namespace} selects the pods of {}/{}: the drill calls the target through its Service, as its clients do (give --service if it selects them otherwise)",
                target.kind.noun(),
                target.name
            ));
        }
        (several, _) => {
            let names: Vec<&str> = several
                .iter()
                .filter_map(|candidate| candidate.metadata.name.as_deref())
                .collect();
            return Err(format!(
                "several Services select the pods of {}/{}: {}; choose one with --service",
                target.kind.noun(),
                target.name,
                names.join(", ")
            ));
        }
    };
    let name = found.metadata.name.clone().unwrap_or_default();
    let spec = found.spec.clone().unwrap_or_default();
    let cluster_ip = spec
        .cluster_ip
        .clone()
        .filter(|ip| !ip.is_empty() && ip != "None")
        .ok_or_else(|| {
            format!(
                "Service {name} has no cluster IP (a headless Service): the drill calls a Service's cluster IP, as the mesh routes it"
            )
        })?;
    let ports = spec.ports.unwrap_or_default();
    let tcp = |candidate: &&ServicePort| candidate.protocol.as_deref().unwrap_or("TCP") == "TCP";
    let named = |wanted: &str| {
        ports.iter().find(|candidate| {
            candidate.name.as_deref() == Some(wanted) || candidate.port.to_string() == wanted
        })
    };
    let grpc_port = match (&args.grpc, args.grpc_port.as_deref()) {
        (None, _) => None,
        (Some(_), Some(wanted)) => Some(
            named(wanted)
                .ok_or_else(|| format!("Service {name} has no port {wanted} (--grpc-port)"))?
                .port,
        ),
        (Some(_), None) => Some(
            ports
                .iter()
                .filter(tcp)
                .find(|candidate| candidate.app_protocol.as_deref() == Some("grpc"))
                .or_else(|| {
                    ports.iter().filter(tcp).find(|candidate| {
                        candidate
                            .name
                            .as_deref()
                            .is_some_and(|name| name == "grpc" || name.starts_with("grpc-"))
                    })
                })
                .ok_or_else(|| {
                    format!(
                        "Service {name} has no gRPC port (appProtocol grpc, or a name grpc or grpc-*): give --grpc-port"
                    )
                })?
                .port,
        ),
    };
    let chosen_port = match port {
        Some(wanted) => named(wanted),
        None => ports.iter().find(tcp),
    }
    .ok_or_else(|| match port {
        Some(wanted) => format!("Service {name} has no port {wanted}"),
        None => format!("Service {name} has no TCP port"),
    })?;
    Ok(Endpoint {
        service: name,
        cluster_ip,
        port: chosen_port.port,
        port_name: chosen_port.name.clone(),
        grpc_port,
    })
}

/// Asks the API server whether the drill may do all it will, before it changes anything.
pub async fn check_permissions(
    client: &Client,
    namespace: &str,
    kind: TargetKind,
) -> Result<(), String> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut refused = Vec::new();
    // Of the workload kinds, only the target's.
    let other_kinds: Vec<String> = [
        TargetKind::Deployment,
        TargetKind::StatefulSet,
        TargetKind::Rollout,
    ]
    .into_iter()
    .filter(|other| *other != kind)
    .map(|other| other.resource().plural)
    .collect();
    for permission in PERMISSIONS.iter().filter(|permission| {
        !other_kinds
            .iter()
            .any(|plural| plural == permission.resource)
    }) {
        for verb in permission.verbs {
            let (resource, subresource) = match permission.resource.split_once('/') {
                Some((resource, sub)) => (resource, Some(sub.to_string())),
                None => (permission.resource, None),
            };
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        namespace: Some(namespace.to_string()),
                        group: Some(permission.group.to_string()),
                        resource: Some(resource.to_string()),
                        subresource,
                        verb: Some((*verb).to_string()),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let answer = call(
                "create selfsubjectaccessreviews (may I?)",
                api.create(&PostParams::default(), &review),
            )
            .await?;
            if !answer.status.is_some_and(|status| status.allowed) {
                refused.push(format!(
                    "{verb} {}{}",
                    permission.resource,
                    if permission.group.is_empty() {
                        String::new()
                    } else {
                        format!(".{}", permission.group)
                    }
                ));
            }
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "in namespace {namespace} the drill may not {}; nothing was changed (`meshlife install drill-role -n {namespace}` prints the Role it needs)",
            refused.join(", ")
        ))
    }
}

/// The load pod: `meshlife drill-client` calling the endpoint, meshed as any client of the
/// namespace is (the injectors see an ordinary pod).
pub fn load_pod(
    name: &str,
    args: &super::DrillArgs,
    endpoint: &Endpoint,
    namespace: &str,
    duration: Duration,
) -> Pod {
    let mut client_args = vec![
        "drill-client".to_string(),
        "--target".into(),
        format!(
            "http://{}:{}{}",
            endpoint.cluster_ip, endpoint.port, args.path
        ),
        "--host".into(),
        format!("{}.{namespace}.svc:{}", endpoint.service, endpoint.port),
        "--rate".into(),
        args.rate.to_string(),
        "--duration".into(),
        format!("{}s", duration.as_secs().max(1)),
        "--timeout".into(),
        format!("{}ms", args.timeout.as_millis()),
    ];
    if let Some(path) = &args.websocket {
        client_args.extend([
            "--websocket".into(),
            path.clone(),
            "--streams".into(),
            args.streams.to_string(),
        ]);
    }
    if let (Some(method), Some(port)) = (&args.grpc, endpoint.grpc_port) {
        client_args.extend([
            "--grpc".into(),
            format!("http://{}:{port}{method}", endpoint.cluster_ip),
            "--grpc-authority".into(),
            format!("{}.{namespace}.svc:{port}", endpoint.service),
            "--streams".into(),
            args.streams.to_string(),
        ]);
    }
    let value = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {DRILL_LABEL: DRILL_LABEL_VALUE, "app.kubernetes.io/name": "meshlife-drill"},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 10,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": CLIENT_CONTAINER,
                "image": args.image,
                "imagePullPolicy": args.image_pull_policy,
                "args": client_args,
                "resources": {
                    "requests": {"cpu": "100m", "memory": "32Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "runAsUser": 65532,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        },
    });
    serde_json::from_value(value).unwrap_or_default()
}

/// What the drill does to the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Event {
    /// `kubectl rollout restart`: a new pod-template annotation, so every pod is replaced.
    Restart,
    /// Delete one pod (the oldest ready one) with its own grace period.
    DeletePod,
    /// Evict one pod through the Eviction API, which honours PodDisruptionBudgets.
    Evict,
    /// One replica fewer (the controller chooses the pod); the replicas are set back after.
    ScaleDown,
}

impl Event {
    pub fn describe(self) -> &'static str {
        match self {
            Event::Restart => "a rollout restart",
            Event::DeletePod => "deleting one pod",
            Event::Evict => "evicting one pod",
            Event::ScaleDown => "scaling down by one replica",
        }
    }
}

/// What the drill did: its description for the report, and which old pods must be gone for
/// the event to be over.
pub struct Done {
    pub what: String,
    pub leaving: Leaving,
}

/// The old pods the event removes.
#[derive(Debug, PartialEq, Eq)]
pub enum Leaving {
    /// A restart replaces them all.
    All,
    /// The one deleted or evicted.
    Pod(String),
    /// One, of the controller's choosing (a scale-down).
    AnyOne,
}

impl Leaving {
    /// How many old pods still have to go, of those watched.
    pub fn left(&self, pods: &[&PodLife]) -> usize {
        let old = pods.iter().filter(|life| life.old);
        match self {
            Leaving::All => old.filter(|life| life.gone_ms.is_none()).count(),
            Leaving::Pod(name) => old
                .filter(|life| life.gone_ms.is_none() && life.name == *name)
                .count(),
            Leaving::AnyOne => usize::from(!old.clone().any(|life| life.gone_ms.is_some())),
        }
    }
}

/// Sets the target's replicas (the scale-down, and setting them back).
pub async fn scale(
    client: &Client,
    namespace: &str,
    target: &TargetObject,
    replicas: i64,
) -> Result<(), String> {
    let patch = json!({"spec": {"replicas": replicas}});
    patch_target(
        client,
        namespace,
        target,
        &format!("replicas {replicas}"),
        &patch,
    )
    .await
}

/// A merge patch of the target (`why` names it in an error).
async fn patch_target(
    client: &Client,
    namespace: &str,
    target: &TargetObject,
    why: &str,
    patch: &Value,
) -> Result<(), String> {
    let what = format!("patch {}/{} ({why})", target.kind.noun(), target.name);
    let api = target.kind.api(client, namespace);
    call(
        &what,
        api.patch(&target.name, &PatchParams::default(), &Patch::Merge(patch)),
    )
    .await?;
    Ok(())
}

/// Does `event` to the target.
pub async fn act(
    client: &Client,
    namespace: &str,
    target: &TargetObject,
    event: Event,
    pods: &[Pod],
) -> Result<Done, String> {
    match event {
        Event::Restart => {
            let now = time::OffsetDateTime::now_utc();
            let now = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                now.year(),
                u8::from(now.month()),
                now.day(),
                now.hour(),
                now.minute(),
                now.second()
            );
            // As kubectl (a pod-template annotation) and kubectl-argo-rollouts (spec.restartAt,
            // which replaces the pods without a new ReplicaSet) restart them.
            let patch = match target.kind {
                TargetKind::Rollout => json!({"spec": {"restartAt": now}}),
                _ => json!({"spec": {"template": {"metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": now}}}}}),
            };
            patch_target(client, namespace, target, "restart", &patch).await?;
            Ok(Done {
                what: format!(
                    "restarted {}/{} ({} {now})",
                    target.kind.noun(),
                    target.name,
                    match target.kind {
                        TargetKind::Rollout => "spec.restartAt",
                        _ => "kubectl.kubernetes.io/restartedAt",
                    }
                ),
                leaving: Leaving::All,
            })
        }
        Event::ScaleDown => {
            let replicas = i64::from(target.replicas);
            if replicas < 2 {
                return Err(format!(
                    "{}/{} has {replicas} replica: a scale-down would leave nothing to call",
                    target.kind.noun(),
                    target.name
                ));
            }
            scale(client, namespace, target, replicas - 1).await?;
            Ok(Done {
                what: format!(
                    "scaled {}/{} from {replicas} to {} replicas (set back to {replicas} after the drill)",
                    target.kind.noun(),
                    target.name,
                    replicas - 1
                ),
                leaving: Leaving::AnyOne,
            })
        }
        Event::DeletePod | Event::Evict => {
            let victim = oldest_ready(pods).ok_or_else(|| {
                format!(
                    "{}/{} has no ready pod to {}",
                    target.kind.noun(),
                    target.name,
                    if event == Event::Evict {
                        "evict"
                    } else {
                        "delete"
                    }
                )
            })?;
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            if event == Event::DeletePod {
                call(
                    &format!("delete pod/{victim}"),
                    api.delete(&victim, &DeleteParams::default()),
                )
                .await?;
                return Ok(Done {
                    what: format!("deleted pod/{victim} with its own grace period"),
                    leaving: Leaving::Pod(victim),
                });
            }
            let what = format!("evict pod/{victim}");
            match tokio::time::timeout(CALL_TIMEOUT, api.evict(&victim, &EvictParams::default()))
                .await
            {
                Ok(Ok(_)) => Ok(Done {
                    what: format!("evicted pod/{victim}"),
                    leaving: Leaving::Pod(victim),
                }),
                Ok(Err(kube::Error::Api(status))) if status.code == 429 => Err(format!(
                    "{what}: a PodDisruptionBudget refuses it now ({}); the drill does not force it",
                    status.message
                )),
                Ok(Err(error)) => Err(format!("{what}: {}", error_chain(&error))),
                Err(_) => Err(format!("{what}: no answer in {} s", CALL_TIMEOUT.as_secs())),
            }
        }
    }
}

fn oldest_ready(pods: &[Pod]) -> Option<String> {
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.status
                .as_ref()
                .and_then(|status| status.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|condition| condition.type_ == "Ready" && condition.status == "True")
                })
        })
        .min_by_key(|pod| pod.metadata.creation_timestamp.clone().map(|time| time.0))
        .and_then(|pod| pod.metadata.name.clone())
}

/// Whether the target's rollout is complete: every replica updated and available, no old pod
/// left (and, for one deleted or evicted pod, its replacement ready).
pub async fn settled(
    client: &Client,
    namespace: &str,
    target: &TargetObject,
    old_pods_left: usize,
) -> Result<bool, String> {
    if old_pods_left > 0 {
        return Ok(false);
    }
    let object = get_object(client, namespace, target.kind, &target.name).await?;
    // Argo Rollouts writes status.observedGeneration as a string.
    let number = |pointer: &str, absent: i64| {
        object
            .pointer(pointer)
            .and_then(|value| {
                value
                    .as_i64()
                    .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
            })
            .unwrap_or(absent)
    };
    let generation = number("/metadata/generation", 0);
    let observed = number("/status/observedGeneration", 0);
    let replicas = number("/spec/replicas", 1);
    let updated = number("/status/updatedReplicas", 0);
    let available = number("/status/availableReplicas", 0);
    let total = number("/status/replicas", 0);
    Ok(observed >= generation && updated >= replicas && available >= replicas && total == replicas)
}

#[cfg(test)]
mod leaving_tests {
    use super::*;

    fn pod(name: &str, old: bool, gone: bool) -> PodLife {
        PodLife {
            name: name.into(),
            old,
            gone_ms: gone.then_some(1),
            ..PodLife::default()
        }
    }

    #[test]
    fn the_event_is_over_when_the_pods_it_removes_are_gone() {
        let pods = [
            pod("a", true, false),
            pod("b", true, true),
            pod("c", false, false),
        ];
        let pods: Vec<&PodLife> = pods.iter().collect();
        assert_eq!(Leaving::All.left(&pods), 1);
        assert_eq!(Leaving::Pod("b".into()).left(&pods), 0);
        assert_eq!(Leaving::Pod("a".into()).left(&pods), 1);
        // A scale-down is over once any old pod is gone, whichever the controller chose.
        assert_eq!(Leaving::AnyOne.left(&pods), 0);
        assert_eq!(Leaving::AnyOne.left(&pods[..1]), 1);
    }
}
