//! Reading a cluster's facts from its API server. Every call is a read that [`PERMISSIONS`]
//! grants (the ClusterRole `meshlife install facts-reader` prints); a refusal names the verb
//! and the resource, an unreachable server its address.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Snapshot;
use super::snapshot;
use crate::terminal::error_chain;

/// Which cluster to read: a kubeconfig file and context, or (neither given) `KUBECONFIG`,
/// `~/.kube/config` or the in-cluster service account, as kubectl finds them.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// One permission the reader uses: API group, resource, verbs.
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// What it is read for.
    pub why: &'static str,
}

/// Everything the reader asks of the API server, and nothing more.
pub const PERMISSIONS: [Permission; 6] = [
    Permission {
        group: "",
        resource: "nodes",
        verbs: &["list"],
        why: "the lowest kubelet version",
    },
    Permission {
        group: "",
        resource: "namespaces",
        verbs: &["list"],
        why: "the labels and annotations that turn injection and ambient mode on",
    },
    Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "list"],
        why: "Istio's mesh config and injector values, linkerd-config",
    },
    Permission {
        group: "apps",
        resource: "deployments",
        verbs: &["list"],
        why: "istiod (version, ENABLE_NATIVE_SIDECARS), Linkerd's proxy injector",
    },
    Permission {
        group: "apps",
        resource: "daemonsets",
        verbs: &["list"],
        why: "istio-cni, ztunnel, linkerd-cni",
    },
    Permission {
        group: "admissionregistration.k8s.io",
        resource: "mutatingwebhookconfigurations",
        verbs: &["list"],
        why: "the injectors' namespace and object selectors, Istio's revision tags, and the \
              webhooks that run after the injectors",
    },
];

/// How long one API call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// What to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Everything the facts are made of.
    Facts,
    /// The Namespaces alone (`--constraint` files state the facts).
    Namespaces,
}

/// Reads `target`'s objects; blocks until done (the CLI's commands are not async).
pub fn read_blocking(target: &Target, reading: Reading) -> Result<Snapshot, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the Kubernetes client: {error}"))?
        .block_on(read(target, reading))
}

/// Reads what the facts are made of from `target`.
pub async fn read(target: &Target, reading: Reading) -> Result<Snapshot, String> {
    let (config, cluster) = configuration(target).await?;
    let client = Client::try_from(config)
        .map_err(|error| format!("{cluster}: cannot make a client: {}", error_chain(&error)))?;
    let reader = Reader {
        client,
        cluster: cluster.clone(),
    };
    if reading == Reading::Namespaces {
        return Ok(Snapshot {
            namespaces: reader.list::<Namespace>("", "namespaces", None).await?,
            cluster,
            ..Snapshot::default()
        });
    }
    let server_version = reader
        .call(
            "get",
            "the API server's /version",
            reader.client.apiserver_version(),
        )
        .await?
        .git_version;
    let nodes = reader.list::<Node>("", "nodes", None).await?;
    let namespaces = reader.list::<Namespace>("", "namespaces", None).await?;
    let mut deployments = reader
        .list::<Deployment>("apps", "deployments", Some("app=istiod"))
        .await?;
    deployments.extend(
        reader
            .list::<Deployment>(
                "apps",
                "deployments",
                Some("linkerd.io/control-plane-component=proxy-injector"),
            )
            .await?,
    );
    // Few per cluster; filtered by their labels, which differ between chart versions.
    let daemon_sets = reader.list::<DaemonSet>("apps", "daemonsets", None).await?;
    let mutating_webhooks = reader
        .list::<MutatingWebhookConfiguration>(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            None,
        )
        .await?;
    let mut config_maps = reader.linkerd_config().await?;
    for istiod in &deployments {
        if snapshot::labels(istiod).get("app").map(String::as_str) != Some("istiod") {
            continue;
        }
        for name in mounted_config_maps(istiod) {
            if let Some(map) = reader
                .config_map(snapshot::namespace(istiod), &name)
                .await?
            {
                config_maps.push(map);
            }
        }
    }
    Ok(Snapshot {
        cluster,
        server_version: Some(server_version),
        nodes,
        namespaces,
        deployments,
        daemon_sets,
        config_maps,
        mutating_webhooks,
    })
}

/// The client configuration of `target`, and how the cluster is named in reports.
pub async fn configuration(target: &Target) -> Result<(Config, String), String> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..KubeConfigOptions::default()
    };
    if let Some(path) = &target.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path)
            .map_err(|error| format!("--kubeconfig {}: {}", path.display(), error_chain(&error)))?;
        let context = context_name(&kubeconfig, target);
        let config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|error| {
                format!(
                    "--kubeconfig {}: context {context}: {}",
                    path.display(),
                    error_chain(&error)
                )
            })?;
        let cluster = format!("context {context} ({})", config.cluster_url);
        return Ok((config, cluster));
    }
    if target.context.is_some() {
        let kubeconfig = Kubeconfig::read().map_err(|error| {
            format!(
                "the kubeconfig (KUBECONFIG or ~/.kube/config): {}",
                error_chain(&error)
            )
        })?;
        let context = context_name(&kubeconfig, target);
        let config = Config::from_kubeconfig(&options)
            .await
            .map_err(|error| format!("context {context}: {}", error_chain(&error)))?;
        let cluster = format!("context {context} ({})", config.cluster_url);
        return Ok((config, cluster));
    }
    let context = Kubeconfig::read()
        .ok()
        .and_then(|kubeconfig| kubeconfig.current_context);
    let config = Config::infer().await.map_err(|error| {
        format!(
            "no Kubernetes configuration to read the cluster from (--kubeconfig, KUBECONFIG, \
             ~/.kube/config or an in-cluster service account): {}",
            error_chain(&error)
        )
    })?;
    let cluster = match context {
        Some(context) => format!("context {context} ({})", config.cluster_url),
        None => format!("the in-cluster API server ({})", config.cluster_url),
    };
    Ok((config, cluster))
}

fn context_name(kubeconfig: &Kubeconfig, target: &Target) -> String {
    target
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .unwrap_or_else(|| "(none)".into())
}

/// The ConfigMaps istiod mounts: its mesh config and its injector's values.
fn mounted_config_maps(istiod: &Value) -> Vec<String> {
    let revision = snapshot::labels(istiod)
        .get("istio.io/rev")
        .filter(|revision| !revision.is_empty() && revision.as_str() != "default")
        .map(|revision| format!("-{revision}"))
        .unwrap_or_default();
    let volumes = istiod
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mounted = |volume: &str| {
        volumes
            .iter()
            .find(|one| one.get("name").and_then(Value::as_str) == Some(volume))
            .and_then(|one| one.pointer("/configMap/name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    vec![
        mounted("config-volume").unwrap_or_else(|| format!("istio{revision}")),
        mounted("inject").unwrap_or_else(|| format!("istio-sidecar-injector{revision}")),
    ]
}

struct Reader {
    client: Client,
    cluster: String,
}

impl Reader {
    /// Every object of a kind in every namespace (or those with `labels`), as JSON.
    async fn list<K>(
        &self,
        group: &str,
        resource: &str,
        labels: Option<&str>,
    ) -> Result<Vec<Value>, String>
    where
        K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let mut params = ListParams::default();
        if let Some(labels) = labels {
            params = params.labels(labels);
        }
        let what = match labels {
            Some(labels) => format!("{} ({labels})", qualified(group, resource)),
            None => qualified(group, resource),
        };
        let list = self.call("list", &what, api.list(&params)).await?;
        list.items
            .into_iter()
            .map(|item| serde_json::to_value(item).map_err(|error| error.to_string()))
            .collect()
    }

    /// `linkerd-config`, in whichever namespace Linkerd runs.
    async fn linkerd_config(&self) -> Result<Vec<Value>, String> {
        let api: Api<ConfigMap> = Api::all(self.client.clone());
        let params = ListParams::default().fields("metadata.name=linkerd-config");
        let list = self
            .call(
                "list",
                "configmaps (metadata.name=linkerd-config)",
                api.list(&params),
            )
            .await?;
        list.items
            .into_iter()
            .map(|item| serde_json::to_value(item).map_err(|error| error.to_string()))
            .collect()
    }

    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let found = self
            .call(
                "get",
                &format!("configmaps {namespace}/{name}"),
                api.get_opt(name),
            )
            .await?;
        found
            .map(|map| serde_json::to_value(map).map_err(|error| error.to_string()))
            .transpose()
    }

    /// One API call, bounded in time, its failure said as what was asked and why it failed.
    async fn call<T>(
        &self,
        verb: &str,
        what: &str,
        call: impl std::future::Future<Output = kube::Result<T>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(kube::Error::Api(status))) if status.code == 403 => Err(format!(
                "{}: the API server forbids {verb} on {what}: {}. `meshlife install \
                 facts-reader` prints the ClusterRole the reader needs",
                self.cluster, status.message
            )),
            Ok(Err(kube::Error::Api(status))) if status.code == 401 => Err(format!(
                "{}: the API server refuses the credentials ({verb} {what}): {}",
                self.cluster, status.message
            )),
            Ok(Err(error @ (kube::Error::Service(_) | kube::Error::HyperError(_)))) => {
                Err(format!(
                    "{}: the API server cannot be reached ({verb} {what}): {}",
                    self.cluster,
                    error_chain(&error)
                ))
            }
            Ok(Err(error)) => Err(format!(
                "{}: {verb} {what} failed: {}",
                self.cluster,
                error_chain(&error)
            )),
            Err(_) => Err(format!(
                "{}: no answer to {verb} {what} within {CALL_TIMEOUT:?}: is the API server \
                 reachable from here?",
                self.cluster
            )),
        }
    }
}

/// `deployments.apps`, `nodes`.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
