//! Linkerd's facts: its version and the proxy settings its install chose, read from the values
//! the install keeps in the `linkerd-config` ConfigMap (the Helm chart and `linkerd install`
//! both write them there), and linkerd-cni.

use serde_json::Value;

use super::snapshot::{self, Snapshot};
use super::{Fact, FactSources, Origin, Source};
use crate::constraints::facts::{ClusterFactArgs, LinkerdVersion, parse_linkerd_version};

const CONFIG_MAP: &str = "linkerd-config";
const VALUES_KEY: &str = "values";
const DEFAULT_PROXY_UID: u32 = 2102;

/// One Linkerd control plane.
#[derive(Clone, Debug)]
pub struct LinkerdInstall {
    /// Its namespace (`linkerd`).
    pub namespace: String,
    pub version: Fact<LinkerdVersion>,
    /// `proxy.nativeSidecar`; `None`: not set, the version's default applies.
    pub native_sidecars: Option<Fact<bool>>,
    /// `proxy.await`; `None`: not set, the version's default applies.
    pub proxy_await: Option<Fact<bool>>,
    /// `cniEnabled`: linkerd-cni captures traffic instead of linkerd-init.
    pub cni: Fact<bool>,
    /// `proxy.enableShutdownEndpoint`.
    pub shutdown_endpoint: Fact<bool>,
    /// `proxy.waitBeforeExitSeconds`, when set and not 0.
    pub wait_before_exit: Option<Fact<u64>>,
    /// `proxy.uid`, when not the default 2102.
    pub proxy_uid: Option<Fact<u32>>,
}

/// Linkerd's install, if `linkerd-config` is there.
pub(super) fn install(
    snapshot: &Snapshot,
    given_version: Option<&LinkerdVersion>,
    notes: &mut Vec<String>,
) -> Result<Option<LinkerdInstall>, String> {
    let mut config_maps = snapshot
        .config_maps
        .iter()
        .filter(|map| snapshot::name(map) == CONFIG_MAP);
    let Some(config_map) = config_maps.next() else {
        return Ok(None);
    };
    if let Some(other) = config_maps.next() {
        return Err(format!(
            "{} and {}: two Linkerd control planes; which one injects cannot be told from here, \
             so give the Linkerd facts as flags",
            snapshot::title(config_map),
            snapshot::title(other)
        ));
    }
    let object = snapshot::title(config_map);
    let at = |field: &str| Source::new(object.clone(), format!("data.{VALUES_KEY} {field}"));
    let Some(text) = config_map
        .pointer(&format!("/data/{VALUES_KEY}"))
        .and_then(Value::as_str)
    else {
        return Err(format!(
            "{object}: no data.{VALUES_KEY}, where Linkerd keeps its install's values (Linkerd \
             older than 2.10 is not read); pass the Linkerd facts as flags instead"
        ));
    };
    let values: Value = serde_yaml_ng::from_str(text)
        .map_err(|error| format!("{object}: data.{VALUES_KEY} is not YAML: {error}"))?;
    // Anything but maps here would read every setting as its default, silently.
    if !values.is_object() {
        return Err(format!(
            "{object}: data.{VALUES_KEY} is not a map of values"
        ));
    }
    if values.get("proxy").is_some_and(|proxy| !proxy.is_object()) {
        return Err(format!("{object}: data.{VALUES_KEY} proxy is not a map"));
    }
    let number = |path: &str| -> Result<Option<u64>, String> {
        match values.pointer(&pointer(path)) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                format!("{object}: data.{VALUES_KEY} {path} is {value}, not a whole number")
            }),
        }
    };
    let flag = |path: &str| -> Result<Option<bool>, String> {
        match values.pointer(&pointer(path)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(other) => Err(format!(
                "{object}: data.{VALUES_KEY} {path} is {other}, not true or false"
            )),
        }
    };
    let version_text = match values.get("linkerdVersion") {
        Some(Value::String(text)) => Some((text.clone(), at("linkerdVersion"))),
        None | Some(Value::Null) => injector_image_tag(snapshot),
        Some(other) => {
            return Err(format!(
                "{object}: data.{VALUES_KEY} linkerdVersion is {other}, not a version"
            ));
        }
    };
    let read_version = match version_text {
        None => Err(format!(
            "{object}: no linkerdVersion in data.{VALUES_KEY}, and no proxy injector image \
             with a version tag: the Linkerd version is unknown; pass --linkerd VERSION"
        )),
        Some((text, source)) => parse_linkerd_version(&text)
            .map(|version| Fact::new(version, source.clone()))
            .map_err(|error| {
                format!(
                    "{source}: {text:?} is not a Linkerd version meshlife knows ({error}); pass \
                     --linkerd VERSION"
                )
            }),
    };
    // A version the cluster cannot tell may be stated on the command line.
    let version = match (read_version, given_version) {
        (Ok(version), _) => version,
        (Err(_), Some(given)) => Fact::new(
            given.clone(),
            Source::new(
                "--linkerd",
                format!("(given; {object} does not tell the version)"),
            ),
        ),
        (Err(error), None) => return Err(error),
    };
    let cni_value = flag("cniEnabled")?.unwrap_or(false);
    let cni_daemon_set = snapshot.daemon_sets.iter().find(|daemon_set| {
        snapshot::labels(daemon_set)
            .get("k8s-app")
            .map(String::as_str)
            == Some("linkerd-cni")
    });
    if let (false, Some(daemon_set)) = (cni_value, cni_daemon_set) {
        notes.push(format!(
            "{} runs, but {object} says cniEnabled is false: the injector adds linkerd-init, \
             and the constraint says no CNI",
            snapshot::title(daemon_set)
        ));
    }
    injector_reach(snapshot, notes)?;
    let wait_before_exit = number("proxy.waitBeforeExitSeconds")?.filter(|seconds| *seconds > 0);
    if let Some(seconds) = wait_before_exit {
        notes.push(format!(
            "{object}: proxy.waitBeforeExitSeconds is {seconds}: every injected proxy waits \
             {seconds}s before exiting, but meshlife's ML403 reads only each pod's \
             config.alpha.linkerd.io/proxy-wait-before-exit-seconds annotation"
        ));
    }
    let proxy_uid = match number("proxy.uid")? {
        Some(uid) => Some(u32::try_from(uid).map_err(|_| {
            format!("{object}: data.{VALUES_KEY} proxy.uid is {uid}, not a user id")
        })?),
        None => None,
    }
    .filter(|uid| *uid != DEFAULT_PROXY_UID);
    Ok(Some(LinkerdInstall {
        namespace: snapshot::namespace(config_map).to_string(),
        version,
        native_sidecars: flag("proxy.nativeSidecar")?
            .map(|value| Fact::new(value, at("proxy.nativeSidecar"))),
        proxy_await: flag("proxy.await")?.map(|value| Fact::new(value, at("proxy.await"))),
        cni: Fact::new(cni_value, at("cniEnabled")),
        shutdown_endpoint: Fact::new(
            flag("proxy.enableShutdownEndpoint")?.unwrap_or(false),
            at("proxy.enableShutdownEndpoint"),
        ),
        wait_before_exit: wait_before_exit
            .map(|seconds| Fact::new(seconds, at("proxy.waitBeforeExitSeconds"))),
        proxy_uid: proxy_uid.map(|uid| Fact::new(uid, at("proxy.uid"))),
    }))
}

/// What the proxy injector's webhook cannot reach: namespaces annotated for injection that
/// its namespace selector leaves out (`config.linkerd.io/admission-webhooks: disabled`,
/// kube-system), or every namespace when no injector webhook is there. The rules follow the
/// annotation, so the difference is said.
fn injector_reach(snapshot: &Snapshot, notes: &mut Vec<String>) -> Result<(), String> {
    let injector = snapshot.mutating_webhooks.iter().find(|configuration| {
        snapshot::labels(configuration)
            .get("linkerd.io/control-plane-component")
            .map(String::as_str)
            == Some("proxy-injector")
    });
    let annotated: Vec<&Value> = snapshot
        .namespaces
        .iter()
        .filter(|namespace| {
            snapshot::string_map(namespace, "annotations")
                .get("linkerd.io/inject")
                .map(String::as_str)
                == Some("enabled")
        })
        .collect();
    let Some(injector) = injector else {
        notes.push(
            "no MutatingWebhookConfiguration of Linkerd's proxy injector \
             (linkerd.io/control-plane-component=proxy-injector): nothing is injected until it \
             is there"
                .into(),
        );
        return Ok(());
    };
    let webhooks = snapshot::webhook_selectors(injector)?;
    let unreached: Vec<&str> = annotated
        .iter()
        .filter(|namespace| {
            let labels = snapshot::namespace_labels(namespace);
            !webhooks
                .iter()
                .any(|webhook| webhook.selects_namespace(&labels))
        })
        .map(|namespace| snapshot::name(namespace))
        .collect();
    if !unreached.is_empty() {
        notes.push(format!(
            "namespaces annotated linkerd.io/inject: enabled that {}'s namespaceSelector leaves \
             out: {}; Linkerd does not inject them, but meshlife judges their workloads as \
             injected, as the annotation says",
            snapshot::title(injector),
            unreached.join(", ")
        ));
    }
    Ok(())
}

/// `proxy.await` -> `/proxy/await`.
fn pointer(path: &str) -> String {
    format!("/{}", path.replace('.', "/"))
}

/// The version tag of the proxy injector's image (`cr.l5d.io/linkerd/controller:edge-25.4.4`).
fn injector_image_tag(snapshot: &Snapshot) -> Option<(String, Source)> {
    snapshot.deployments.iter().find_map(|deployment| {
        let component = snapshot::labels(deployment)
            .get("linkerd.io/control-plane-component")
            .cloned()?;
        if component != "proxy-injector" {
            return None;
        }
        let containers = deployment
            .pointer("/spec/template/spec/containers")?
            .as_array()?;
        containers
            .iter()
            .enumerate()
            .find_map(|(index, container)| {
                let image = container.get("image")?.as_str()?;
                let tag = super::istio::image_tag(image)?;
                Some((
                    tag.to_string(),
                    Source::new(
                        snapshot::title(deployment),
                        format!("spec.template.spec.containers[{index}].image"),
                    ),
                ))
            })
    })
}

impl LinkerdInstall {
    pub(super) fn fill(&self, args: &mut ClusterFactArgs, sources: &mut FactSources) {
        args.linkerd = Some(self.version.value.clone());
        sources.insert(
            "linkerd".into(),
            Origin::Cluster(self.version.source.clone()),
        );
        let unset = |field: &str| {
            Source::new(
                format!("ConfigMap {}/{CONFIG_MAP}", self.namespace),
                format!("data.{VALUES_KEY} ({field} not set: the version's default)"),
            )
        };
        let native_source = match &self.native_sidecars {
            Some(native) => {
                args.linkerd_native_sidecars = Some(native.value);
                native.source.clone()
            }
            None => unset("proxy.nativeSidecar"),
        };
        sources.insert(
            "linkerd.nativeSidecars".into(),
            Origin::Cluster(native_source),
        );
        let await_source = match &self.proxy_await {
            Some(proxy_await) => {
                args.linkerd_await = Some(proxy_await.value);
                proxy_await.source.clone()
            }
            None => unset("proxy.await"),
        };
        sources.insert("linkerd.proxyAwait".into(), Origin::Cluster(await_source));
        args.linkerd_cni = self.cni.value;
        sources.insert(
            "linkerd.cni".into(),
            Origin::Cluster(self.cni.source.clone()),
        );
        args.linkerd_shutdown_endpoint = self.shutdown_endpoint.value;
        sources.insert(
            "linkerd.shutdownEndpoint".into(),
            Origin::Cluster(self.shutdown_endpoint.source.clone()),
        );
        if let Some(uid) = &self.proxy_uid {
            args.linkerd_proxy_uid = Some(uid.value);
            sources.insert(
                "linkerd.proxyUID".into(),
                Origin::Cluster(uid.source.clone()),
            );
        }
    }

    pub(super) fn summary(&self) -> Vec<String> {
        let line = |name: &str, value: &dyn std::fmt::Display, source: &Source| {
            format!("  {name} {value}: {source}")
        };
        let mut lines = vec![format!(
            "linkerd {}: {}",
            self.version.value, self.version.source
        )];
        lines.push(match &self.native_sidecars {
            Some(fact) => line("native sidecars", &fact.value, &fact.source),
            None => format!(
                "  native sidecars {}: the version's default (proxy.nativeSidecar not set)",
                self.version.value.native_by_default()
            ),
        });
        lines.push(match &self.proxy_await {
            Some(fact) => line("proxy await", &fact.value, &fact.source),
            None => format!(
                "  proxy await {}: the version's default (proxy.await not set)",
                self.version.value.has_await()
            ),
        });
        lines.push(line("cni", &self.cni.value, &self.cni.source));
        lines.push(line(
            "shutdown endpoint",
            &self.shutdown_endpoint.value,
            &self.shutdown_endpoint.source,
        ));
        lines
    }
}
