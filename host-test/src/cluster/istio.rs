//! Istio's facts, per revision: the version from istiod's image, `ENABLE_NATIVE_SIDECARS` from
//! its environment, the mesh config istiod mounts (hold, drain), the injector's values (hold
//! forced, CNI), and, from the injector webhooks' selectors evaluated on the live Namespaces,
//! which namespaces inject where no label says so; istio-cni and ambient (ztunnel) too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::snapshot::{self, Snapshot};
use super::{Fact, FactSources, Origin, Source};
use crate::constraints::facts::{ClusterFactArgs, IstioVersion, parse_istio_version};

const DEFAULT_REVISION: &str = "default";
const REVISION_LABEL: &str = "istio.io/rev";
const TAG_LABEL: &str = "istio.io/tag";
const INJECTION_LABEL: &str = "istio-injection";
const DATAPLANE_MODE_LABEL: &str = "istio.io/dataplane-mode";
const DISCOVERY_CONTAINER: &str = "discovery";
/// Namespaces Istio never injects, whatever their labels (rules.md, section 3).
const NEVER_INJECTED: [&str; 2] = ["kube-system", "kube-public"];

/// Istio as installed: one or more revisions, and what they share.
#[derive(Clone, Debug)]
pub struct IstioInstall {
    pub revisions: Vec<IstioRevision>,
    /// The ztunnel DaemonSet, when ambient mode is installed.
    pub ztunnel: Option<Source>,
    /// Namespaces labelled `istio.io/dataplane-mode=ambient`.
    pub ambient_namespaces: Vec<Fact<String>>,
    /// Namespaces an injector webhook injects although no label the rules read says so
    /// (`enableNamespacesByDefault`, a custom selector).
    pub injected_namespaces: Vec<Fact<String>>,
    /// The revision whose webhook injects namespaces labelled `istio-injection=enabled` (the
    /// `default` revision, or the one a `default` tag points to), if any.
    pub injection_label_revision: Option<String>,
}

/// One istiod revision and how it injects.
#[derive(Clone, Debug)]
pub struct IstioRevision {
    /// `default`, `canary`, `1-26-3`.
    pub name: String,
    /// Revision tags pointing at it (`prod`), each a webhook configuration of its own.
    pub tags: Vec<String>,
    pub version: Fact<IstioVersion>,
    /// `ENABLE_NATIVE_SIDECARS` of istiod; `None`: not set, the version's default applies.
    pub native_sidecars: Option<Fact<bool>>,
    /// meshConfig `defaultConfig.holdApplicationUntilProxyStarts`.
    pub hold: Fact<bool>,
    /// Helm `values.global.proxy.holdApplicationUntilProxyStarts`, as the injector reads it.
    pub hold_forced: Fact<bool>,
    /// meshConfig `defaultConfig.terminationDrainDuration`; `None`: not set (5s).
    pub drain: Option<Fact<String>>,
    /// meshConfig `defaultConfig.drainDuration`; `None`: not set (45s).
    pub envoy_drain: Option<Fact<String>>,
    /// Whether the injector leaves traffic capture to istio-cni.
    pub cni: Fact<bool>,
}

/// The settings of a revision that change verdicts, to tell whether revisions differ.
type Settings = (
    u32,
    Option<bool>,
    bool,
    bool,
    Option<String>,
    Option<String>,
    bool,
);

impl IstioRevision {
    fn settings(&self) -> Settings {
        (
            self.version.value.minor,
            self.native_sidecars.as_ref().map(|fact| fact.value),
            self.hold.value,
            self.hold_forced.value,
            self.drain.as_ref().map(|fact| fact.value.clone()),
            self.envoy_drain.as_ref().map(|fact| fact.value.clone()),
            self.cni.value,
        )
    }

    fn describe(&self) -> String {
        let native = match &self.native_sidecars {
            Some(fact) => format!("ENABLE_NATIVE_SIDECARS={}", fact.value),
            None => "ENABLE_NATIVE_SIDECARS unset".into(),
        };
        format!(
            "revision {} (istio {}, {native}, hold {}, hold forced {}, drain {}, cni {})",
            self.name,
            self.version.value,
            self.hold.value,
            self.hold_forced.value,
            self.drain
                .as_ref()
                .map_or("5s (unset)", |fact| fact.value.as_str()),
            self.cni.value
        )
    }
}

/// Istio's install, if an istiod Deployment is there.
pub(super) fn install(
    snapshot: &Snapshot,
    given_version: Option<&IstioVersion>,
    notes: &mut Vec<String>,
) -> Result<Option<IstioInstall>, String> {
    let istiods: Vec<&Value> = snapshot
        .deployments
        .iter()
        .filter(|deployment| {
            snapshot::labels(deployment).get("app").map(String::as_str) == Some("istiod")
        })
        .collect();
    if istiods.is_empty() {
        return Ok(None);
    }
    let mut revisions: Vec<IstioRevision> = Vec::new();
    for istiod in istiods {
        let read = revision(snapshot, istiod, given_version, notes)?;
        if let Some(same) = revisions.iter().find(|one| one.name == read.name) {
            return Err(format!(
                "{} and {} both serve Istio revision {}: which one injects cannot be told from \
                 here; give the facts as flags",
                same.version.source.object, read.version.source.object, read.name
            ));
        }
        revisions.push(read);
    }
    revisions.sort_by(|a, b| a.name.cmp(&b.name));
    for webhook in &snapshot.mutating_webhooks {
        let labels = snapshot::labels(webhook);
        if let (Some(tag), Some(revision)) = (labels.get(TAG_LABEL), labels.get(REVISION_LABEL)) {
            match revisions.iter_mut().find(|one| &one.name == revision) {
                Some(one) => one.tags.push(tag.clone()),
                None => notes.push(format!(
                    "{}: revision tag {tag} points at revision {revision}, which has no istiod \
                     here: pods of namespaces labelled istio.io/rev={tag} are not injected",
                    snapshot::title(webhook)
                )),
            }
        }
    }
    let ztunnel = snapshot
        .daemon_sets
        .iter()
        .find(|daemon_set| {
            // `app.kubernetes.io/name` in the ztunnel chart of 1.24 on, `app` before.
            let labels = snapshot::labels(daemon_set);
            ["app.kubernetes.io/name", "app"]
                .iter()
                .any(|key| labels.get(*key).map(String::as_str) == Some("ztunnel"))
        })
        .map(|daemon_set| Source::new(snapshot::title(daemon_set), ""));
    let ambient_namespaces = snapshot
        .namespaces
        .iter()
        .filter(|namespace| {
            snapshot::labels(namespace)
                .get(DATAPLANE_MODE_LABEL)
                .map(String::as_str)
                == Some("ambient")
        })
        .map(|namespace| {
            Fact::new(
                snapshot::name(namespace).to_string(),
                Source::new(
                    snapshot::title(namespace),
                    format!("metadata.labels[{DATAPLANE_MODE_LABEL}]"),
                ),
            )
        })
        .collect::<Vec<_>>();
    if ztunnel.is_none() && !ambient_namespaces.is_empty() {
        notes.push(format!(
            "namespaces are labelled {DATAPLANE_MODE_LABEL}=ambient ({}), but no ztunnel \
             DaemonSet runs: their pods get no sidecar and no ambient data plane",
            ambient_namespaces
                .iter()
                .map(|fact| fact.value.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let injected_namespaces = injected_beyond_labels(snapshot, &revisions, notes)?;
    let injection_label_revision = injection_label_revision(snapshot, &revisions, notes)?;
    Ok(Some(IstioInstall {
        revisions,
        ztunnel,
        ambient_namespaces,
        injected_namespaces,
        injection_label_revision,
    }))
}

fn revision(
    snapshot: &Snapshot,
    istiod: &Value,
    given_version: Option<&IstioVersion>,
    notes: &mut Vec<String>,
) -> Result<IstioRevision, String> {
    let object = snapshot::title(istiod);
    let namespace = snapshot::namespace(istiod);
    let name = snapshot::labels(istiod)
        .get(REVISION_LABEL)
        .filter(|name| !name.is_empty())
        .cloned()
        .unwrap_or_else(|| DEFAULT_REVISION.to_string());
    let containers = istiod
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let discovery = containers.iter().enumerate().find(|(_, container)| {
        container.get("name").and_then(Value::as_str) == Some(DISCOVERY_CONTAINER)
    });
    let read_version = match discovery {
        None => Err(format!(
            "{object}: no container named {DISCOVERY_CONTAINER}, so the Istio version cannot be \
             read from its image; pass --istio VERSION"
        )),
        Some((index, container)) => {
            let image = container.get("image").and_then(Value::as_str).unwrap_or("");
            let field = format!("spec.template.spec.containers[{index}].image");
            image_tag(image)
                .and_then(|tag| parse_istio_version(tag).ok())
                .map(|version| {
                    Fact::new(
                        version,
                        Source::new(object.clone(), format!("{field} ({image})")),
                    )
                })
                .ok_or_else(|| {
                    format!(
                        "{object}: {field} is {image:?}, whose tag is no Istio version (a \
                         digest, latest, a custom build): the version decides the \
                         native-sidecar default, so it is not guessed; pass --istio VERSION"
                    )
                })
        }
    };
    // A version the cluster cannot tell may be stated on the command line.
    let version = match (read_version, given_version) {
        (Ok(version), _) => version,
        (Err(_), Some(given)) => Fact::new(
            given.clone(),
            Source::new(
                "--istio",
                format!("(given; {object} does not tell its version)"),
            ),
        ),
        (Err(error), None) => return Err(error),
    };
    let native_sidecars = match discovery {
        Some((index, container)) => native_sidecars(&object, index, container)?,
        None => None,
    };
    let mesh_map = mounted_config_map(snapshot, istiod, "config-volume", || {
        revision_name("istio", &name)
    });
    let mesh_object = format!("ConfigMap {namespace}/{}", mesh_map.0);
    let mesh: Value = match mesh_map.1 {
        Some(config_map) => match config_map.pointer("/data/mesh").and_then(Value::as_str) {
            Some(text) => serde_yaml_ng::from_str(text)
                .map_err(|error| format!("{mesh_object}: data.mesh is not YAML: {error}"))?,
            None => {
                notes.push(format!(
                    "{mesh_object} has no data.mesh: hold and drain are taken as Istio's \
                     defaults (off, 5s)"
                ));
                Value::Null
            }
        },
        None => {
            notes.push(format!(
                "{mesh_object}, revision {name}'s mesh config, was not found: hold and drain \
                 are taken as Istio's defaults (off, 5s)"
            ));
            Value::Null
        }
    };
    // Anything but maps here would read hold and drain as their defaults, silently.
    if !(mesh.is_null() || mesh.is_object())
        || mesh
            .get("defaultConfig")
            .is_some_and(|config| !(config.is_null() || config.is_object()))
    {
        return Err(format!(
            "{mesh_object}: data.mesh is not a mesh config (a map with a defaultConfig map)"
        ));
    }
    let hold_field = "data.mesh defaultConfig.holdApplicationUntilProxyStarts";
    let hold = match mesh.pointer("/defaultConfig/holdApplicationUntilProxyStarts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(value)) => *value,
        Some(other) => {
            return Err(format!(
                "{mesh_object}: {hold_field} is {other}, not true or false"
            ));
        }
    };
    let drain = match mesh.pointer("/defaultConfig/terminationDrainDuration") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(Fact::new(
            text.clone(),
            Source::new(
                mesh_object.clone(),
                "data.mesh defaultConfig.terminationDrainDuration",
            ),
        )),
        Some(other) => {
            return Err(format!(
                "{mesh_object}: data.mesh defaultConfig.terminationDrainDuration is {other}, \
                 not a duration"
            ));
        }
    };

    let envoy_drain = match mesh.pointer("/defaultConfig/drainDuration") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(Fact::new(
            text.clone(),
            Source::new(mesh_object.clone(), "data.mesh defaultConfig.drainDuration"),
        )),
        Some(other) => {
            return Err(format!(
                "{mesh_object}: data.mesh defaultConfig.drainDuration is {other}, not a duration"
            ));
        }
    };

    let injector_map = mounted_config_map(snapshot, istiod, "inject", || {
        revision_name("istio-sidecar-injector", &name)
    });
    let injector_object = format!("ConfigMap {namespace}/{}", injector_map.0);
    let values: Value = match injector_map.1 {
        Some(config_map) => match config_map.pointer("/data/values").and_then(Value::as_str) {
            // JSON is YAML: one reader for the chart's JSON and hand-edited YAML.
            Some(text) => serde_yaml_ng::from_str(text)
                .map_err(|error| format!("{injector_object}: data.values is not JSON: {error}"))?,
            None => {
                notes.push(format!(
                    "{injector_object} has no data.values: hold forced and CNI are taken as off"
                ));
                Value::Null
            }
        },
        None => {
            notes.push(format!(
                "{injector_object}, revision {name}'s injector values, was not found: hold \
                 forced and CNI are taken as off"
            ));
            Value::Null
        }
    };
    if !(values.is_null() || values.is_object()) {
        return Err(format!(
            "{injector_object}: data.values is not a map of values"
        ));
    }
    let values_flag = |path: &str| -> Result<Option<bool>, String> {
        match values.pointer(&format!("/{}", path.replace('.', "/"))) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(other) => Err(format!(
                "{injector_object}: data.values {path} is {other}, not true or false"
            )),
        }
    };
    let hold_forced_path = "global.proxy.holdApplicationUntilProxyStarts";
    let hold_forced = values_flag(hold_forced_path)?.unwrap_or(false);
    // The injection template reads pilot.cni.enabled (Istio 1.21 on) or istio_cni.enabled.
    let (cni_path, cni) = ["pilot.cni.enabled", "istio_cni.enabled"]
        .into_iter()
        .find_map(|path| match values_flag(path) {
            Ok(Some(value)) => Some(Ok((path, value))),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        })
        .transpose()?
        .unwrap_or(("pilot.cni.enabled", false));
    let cni_daemon_set = snapshot.daemon_sets.iter().find(|daemon_set| {
        snapshot::labels(daemon_set)
            .get("k8s-app")
            .map(String::as_str)
            == Some("istio-cni-node")
    });
    match (cni, cni_daemon_set) {
        (true, None) => notes.push(format!(
            "{injector_object} says {cni_path} is true, but no istio-cni-node DaemonSet runs: \
             injected pods get no istio-init and their traffic is not captured until it does"
        )),
        (false, Some(daemon_set)) => notes.push(format!(
            "{} runs, but revision {name}'s injector ({injector_object}) has {cni_path} false: \
             it still adds istio-init, and the constraint says no CNI",
            snapshot::title(daemon_set)
        )),
        _ => {}
    }
    Ok(IstioRevision {
        name,
        tags: Vec::new(),
        version,
        native_sidecars,
        hold: Fact::new(hold, Source::new(mesh_object, hold_field)),
        hold_forced: Fact::new(
            hold_forced,
            Source::new(
                injector_object.clone(),
                format!("data.values {hold_forced_path}"),
            ),
        ),
        drain,
        envoy_drain,
        cni: Fact::new(
            cni,
            Source::new(injector_object, format!("data.values {cni_path}")),
        ),
    })
}

/// `istio` for the default revision, `istio-canary` for `canary`.
fn revision_name(base: &str, revision: &str) -> String {
    if revision == DEFAULT_REVISION {
        base.to_string()
    } else {
        format!("{base}-{revision}")
    }
}

/// The ConfigMap a Deployment mounts as the volume `volume` (its name, and the map if it was
/// read); `fallback` names it when the volume is not there.
fn mounted_config_map<'a>(
    snapshot: &'a Snapshot,
    deployment: &Value,
    volume: &str,
    fallback: impl FnOnce() -> String,
) -> (String, Option<&'a Value>) {
    let mounted = deployment
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .and_then(|volumes| {
            volumes
                .iter()
                .find(|one| one.get("name").and_then(Value::as_str) == Some(volume))
        })
        .and_then(|one| one.pointer("/configMap/name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let name = mounted.unwrap_or_else(fallback);
    let found = snapshot.config_map(snapshot::namespace(deployment), &name);
    (name, found)
}

/// istiod's `ENABLE_NATIVE_SIDECARS`; `None`: unset or `auto`, the version's default.
fn native_sidecars(
    object: &str,
    index: usize,
    container: &Value,
) -> Result<Option<Fact<bool>>, String> {
    let Some((env_index, value)) = environment(container, "ENABLE_NATIVE_SIDECARS") else {
        return Ok(None);
    };
    let field =
        format!("spec.template.spec.containers[{index}].env[{env_index}] ENABLE_NATIVE_SIDECARS");
    let value = match value.as_deref() {
        Some("true") => true,
        Some("false") => false,
        // `auto` (1.27+) is the version's default: decided by the kubelets.
        Some("auto" | "") => return Ok(None),
        Some(other) => {
            return Err(format!(
                "{object}: {field} is {other:?}, not true, false or auto"
            ));
        }
        None => {
            return Err(format!(
                "{object}: {field} is set from valueFrom, which is not read; pass \
                 --istio-native-sidecars true|false"
            ));
        }
    };
    Ok(Some(Fact::new(value, Source::new(object, field))))
}

/// Environment variable `name` of a container, with its index: the last definition, as the
/// kubelet takes it; its value is `None` when it comes from `valueFrom`.
fn environment(container: &Value, name: &str) -> Option<(usize, Option<String>)> {
    container
        .get("env")?
        .as_array()?
        .iter()
        .enumerate()
        .rfind(|(_, variable)| variable.get("name").and_then(Value::as_str) == Some(name))
        .map(|(index, variable)| {
            let value = match (variable.get("value"), variable.get("valueFrom")) {
                (Some(value), _) => Some(value.as_str().unwrap_or("").to_string()),
                (None, Some(_)) => None,
                (None, None) => Some(String::new()),
            };
            (index, value)
        })
}

/// The tag of an image reference: `docker.io/istio/pilot:1.26.3` -> `1.26.3`; none for a
/// digest-only reference or a registry port without a tag.
pub(super) fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next()?;
    let last = without_digest.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    (!tag.is_empty()).then_some(tag)
}

/// The namespaces an injector webhook injects by default (a pod without injection labels), by
/// revision, where the labels the rules read would not say so; what the labels promise and no
/// webhook does is said in a note.
fn injected_beyond_labels(
    snapshot: &Snapshot,
    revisions: &[IstioRevision],
    notes: &mut Vec<String>,
) -> Result<Vec<Fact<String>>, String> {
    let mut selectors = Vec::new();
    for configuration in &snapshot.mutating_webhooks {
        let labels = snapshot::labels(configuration);
        let Some(revision) = labels.get(REVISION_LABEL) else {
            continue;
        };
        if !revisions.iter().any(|one| &one.name == revision) {
            continue;
        }
        for webhook in snapshot::webhook_selectors(configuration)? {
            if !webhook.takes_unlabelled_pods() {
                continue;
            }
            let source = Source::new(
                snapshot::title(configuration),
                format!("{}.namespaceSelector (revision {revision})", webhook.field),
            );
            selectors.push((webhook, source));
        }
    }
    let mut injected = Vec::new();
    let mut promised_only = BTreeSet::new();
    for namespace in &snapshot.namespaces {
        let name = snapshot::name(namespace);
        if NEVER_INJECTED.contains(&name) {
            continue;
        }
        let labels = snapshot::namespace_labels(namespace);
        let by_webhook = selectors
            .iter()
            .find(|(webhook, _)| webhook.selects_namespace(&labels));
        let by_labels = labels_say_injected(&labels);
        match (by_webhook, by_labels) {
            (Some((_, source)), false) => {
                injected.push(Fact::new(name.to_string(), source.clone()))
            }
            (None, true) => {
                promised_only.insert(name.to_string());
            }
            _ => {}
        }
    }
    if !promised_only.is_empty() {
        notes.push(format!(
            "namespaces labelled for Istio injection that no injector webhook of this cluster \
             selects (a removed revision, a tag without its webhook): {}; meshlife judges their \
             workloads as injected, as their labels say, but Istio does not inject them",
            promised_only.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(injected)
}

/// The revision whose injector webhook (its own, or a tag's) takes pods of a namespace labelled
/// `istio-injection=enabled`, as the API server would call it.
fn injection_label_revision(
    snapshot: &Snapshot,
    revisions: &[IstioRevision],
    notes: &mut Vec<String>,
) -> Result<Option<String>, String> {
    let labelled: BTreeMap<String, String> = [
        (INJECTION_LABEL.to_string(), "enabled".to_string()),
        (
            "kubernetes.io/metadata.name".to_string(),
            "any-namespace".to_string(),
        ),
    ]
    .into();
    let mut serving = BTreeSet::new();
    for configuration in &snapshot.mutating_webhooks {
        let Some(revision) = snapshot::labels(configuration).get(REVISION_LABEL).cloned() else {
            continue;
        };
        if !revisions.iter().any(|one| one.name == revision) {
            continue;
        }
        if snapshot::webhook_selectors(configuration)?
            .iter()
            .any(|webhook| webhook.takes_unlabelled_pods() && webhook.selects_namespace(&labelled))
        {
            serving.insert(revision);
        }
    }
    if serving.len() > 1 {
        notes.push(format!(
            "the webhooks of several revisions take namespaces labelled {INJECTION_LABEL}=enabled \
             ({}): Istio calls each of them, so those namespaces are judged under revision {}'s \
             facts",
            serving.iter().cloned().collect::<Vec<_>>().join(", "),
            serving.iter().next().cloned().unwrap_or_default()
        ));
    }
    Ok(serving.into_iter().next())
}

/// What the rules conclude from a Namespace's labels alone (rules.md, section 3).
fn labels_say_injected(labels: &BTreeMap<String, String>) -> bool {
    if labels.get(DATAPLANE_MODE_LABEL).map(String::as_str) == Some("ambient") {
        return false;
    }
    match labels.get(INJECTION_LABEL).map(String::as_str) {
        Some("enabled") => true,
        Some("disabled") => false,
        _ => labels.contains_key(REVISION_LABEL),
    }
}

/// The namespaces one revision's facts apply to, when revisions are configured differently:
/// the constraints of each carry a `namespaceSelector` as Istio's injector webhooks select.
#[derive(Clone, Debug)]
pub struct RevisionScope {
    /// Index into [`IstioInstall::revisions`].
    pub revision: usize,
    /// Added to the constraints' name: `canary`, `default-istio-injection`.
    pub suffix: String,
    /// `spec.match.namespaceSelector`.
    pub namespace_selector: Value,
    /// What the selector means, for the constraint's comment.
    pub comment: String,
}

impl IstioInstall {
    /// Whether every revision injects alike, so one set of facts holds for all.
    pub fn revisions_agree(&self) -> bool {
        let first = self.revisions[0].settings();
        self.revisions
            .iter()
            .all(|revision| revision.settings() == first)
    }

    /// Each revision's namespaces, as its injector webhooks pick them: `istio.io/rev` naming it
    /// or one of its tags, without `istio-injection` (which wins); the revision behind
    /// `istio-injection=enabled` (`default`, or the one the `default` tag points to) takes
    /// every namespace no other revision's label names. Notes say what no revision serves.
    pub(super) fn scopes(&self, notes: &mut Vec<String>) -> Vec<RevisionScope> {
        let labels_of = |revision: &IstioRevision| {
            let mut labels = vec![revision.name.clone()];
            labels.extend(revision.tags.iter().cloned());
            labels
        };
        notes.push(format!(
            "Istio revisions are configured differently ({}): each gets constraints of its \
             own, matched to its namespaces",
            self.revisions
                .iter()
                .map(IstioRevision::describe)
                .collect::<Vec<_>>()
                .join("; ")
        ));
        let default = self.injection_label_revision.as_ref().and_then(|name| {
            self.revisions
                .iter()
                .position(|revision| &revision.name == name)
        });
        let mut scopes = Vec::new();
        let mut others = Vec::new();
        for (index, revision) in self.revisions.iter().enumerate() {
            if Some(index) == default {
                continue;
            }
            let labels = labels_of(revision);
            others.extend(labels.iter().cloned());
            scopes.push(RevisionScope {
                revision: index,
                suffix: revision.name.clone(),
                namespace_selector: serde_json::json!({"matchExpressions": [
                    {"key": REVISION_LABEL, "operator": "In", "values": labels},
                    {"key": INJECTION_LABEL, "operator": "DoesNotExist"},
                ]}),
                comment: format!(
                    "Revision {}'s namespaces: labelled {REVISION_LABEL}={} without \
                     {INJECTION_LABEL}, as its injector webhook selects them.",
                    revision.name,
                    labels.join(" or ")
                ),
            });
        }
        match default {
            Some(index) => {
                let name = &self.revisions[index].name;
                scopes.push(RevisionScope {
                    revision: index,
                    suffix: name.clone(),
                    namespace_selector: serde_json::json!({"matchExpressions": [
                        {"key": REVISION_LABEL, "operator": "NotIn", "values": others},
                    ]}),
                    comment: format!(
                        "Revision {name}'s namespaces: {INJECTION_LABEL}=enabled, \
                         {REVISION_LABEL}={name}, and the unlabelled ones whose pods ask with \
                         sidecar.istio.io/inject: \"true\": every namespace no other revision's \
                         label names."
                    ),
                });
                scopes.push(RevisionScope {
                    revision: index,
                    suffix: format!("{name}-{INJECTION_LABEL}"),
                    namespace_selector: serde_json::json!({"matchExpressions": [
                        {"key": INJECTION_LABEL, "operator": "In", "values": ["enabled"]},
                        {"key": REVISION_LABEL, "operator": "In", "values": others},
                    ]}),
                    comment: format!(
                        "Namespaces labelled {INJECTION_LABEL}=enabled and another revision's \
                         {REVISION_LABEL}: {INJECTION_LABEL} wins, so revision {name} injects \
                         them."
                    ),
                });
            }
            None => notes.push(format!(
                "no revision's webhook takes {INJECTION_LABEL}=enabled namespaces (none is named \
                 default, no default tag): those namespaces, unlabelled ones (Linkerd's \
                 included) and pods asking with sidecar.istio.io/inject match no constraint \
                 here, so they are not judged"
            )),
        }
        scopes
    }

    /// One revision's facts as flags, and what all revisions share.
    pub(super) fn fill(
        &self,
        first: &IstioRevision,
        args: &mut ClusterFactArgs,
        sources: &mut FactSources,
    ) {
        args.istio = Some(first.version.value.clone());
        sources.insert(
            "istio".into(),
            Origin::Cluster(first.version.source.clone()),
        );
        let native_source = match &first.native_sidecars {
            Some(native) => {
                args.istio_native_sidecars = Some(native.value);
                native.source.clone()
            }
            None => Source::new(
                first.version.source.object.clone(),
                "(ENABLE_NATIVE_SIDECARS not set on istiod: the version's default)",
            ),
        };
        sources.insert(
            "istio.nativeSidecars".into(),
            Origin::Cluster(native_source),
        );
        args.istio_hold = first.hold.value;
        sources.insert(
            "istio.holdApplicationUntilProxyStarts".into(),
            Origin::Cluster(first.hold.source.clone()),
        );
        args.istio_hold_forced = first.hold_forced.value;
        sources.insert(
            "istio.holdForced".into(),
            Origin::Cluster(first.hold_forced.source.clone()),
        );
        args.istio_cni = first.cni.value;
        sources.insert(
            "istio.cni".into(),
            Origin::Cluster(first.cni.source.clone()),
        );
        let drain_source = match &first.drain {
            Some(drain) => {
                args.istio_drain = Some(drain.value.clone());
                drain.source.clone()
            }
            None => Source::new(
                first.hold.source.object.clone(),
                "data.mesh (defaultConfig.terminationDrainDuration not set: Istio's 5s)",
            ),
        };
        sources.insert(
            "istio.terminationDrainDuration".into(),
            Origin::Cluster(drain_source),
        );
        if let Some(envoy_drain) = &first.envoy_drain {
            args.istio_drain_duration = Some(envoy_drain.value.clone());
            sources.insert(
                "istio.drainDuration".into(),
                Origin::Cluster(envoy_drain.source.clone()),
            );
        }
        args.istio_injected_namespaces = self
            .injected_namespaces
            .iter()
            .map(|fact| fact.value.clone())
            .collect();
        if let Some(first) = self.injected_namespaces.first() {
            sources.insert(
                "istio.injectedNamespaces".into(),
                Origin::Cluster(first.source.clone()),
            );
        }
        args.istio_ambient_namespaces = self
            .ambient_namespaces
            .iter()
            .map(|fact| fact.value.clone())
            .collect();
        if !self.ambient_namespaces.is_empty() {
            sources.insert(
                "istio.ambientNamespaces".into(),
                Origin::Cluster(Source::new(
                    "the Namespaces",
                    format!("metadata.labels[{DATAPLANE_MODE_LABEL}]"),
                )),
            );
        }
    }

    pub(super) fn summary(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for revision in &self.revisions {
            let tags = if revision.tags.is_empty() {
                String::new()
            } else {
                format!(", tags {}", revision.tags.join(", "))
            };
            lines.push(format!(
                "istio {} (revision {}{tags}): {}",
                revision.version.value, revision.name, revision.version.source
            ));
            match &revision.native_sidecars {
                Some(fact) => {
                    lines.push(format!("  native sidecars {}: {}", fact.value, fact.source))
                }
                None => lines.push(
                    "  native sidecars: the version's default (ENABLE_NATIVE_SIDECARS not set)"
                        .into(),
                ),
            }
            lines.push(format!(
                "  hold {}: {}",
                revision.hold.value, revision.hold.source
            ));
            lines.push(format!(
                "  hold forced {}: {}",
                revision.hold_forced.value, revision.hold_forced.source
            ));
            match &revision.drain {
                Some(fact) => lines.push(format!("  drain {}: {}", fact.value, fact.source)),
                None => lines.push(format!(
                    "  drain 5s (the default): not set in {}",
                    revision.hold.source.object
                )),
            }
            if let Some(fact) = &revision.envoy_drain {
                lines.push(format!("  drainDuration {}: {}", fact.value, fact.source));
            }
            lines.push(format!(
                "  cni {}: {}",
                revision.cni.value, revision.cni.source
            ));
        }
        if let Some(ztunnel) = &self.ztunnel {
            lines.push(format!("  ambient: {ztunnel} runs"));
        }
        for fact in &self.ambient_namespaces {
            lines.push(format!(
                "  ambient namespace {}: {}",
                fact.value, fact.source
            ));
        }
        for fact in &self.injected_namespaces {
            lines.push(format!(
                "  injected namespace {} (no label says so): {}",
                fact.value, fact.source
            ));
        }
        lines
    }
}
