//! Which namespace an object of the input belongs to, and which Namespace manifest describes it.
//!
//! - An object of a namespaced kind without `metadata.namespace` lands where `kubectl apply`
//!   puts it: in `--namespace` (default `default`). Rendered Helm charts are like that.
//! - When several files define the same Namespace differently (kustomize bases and overlays
//!   checked together), an object takes the definition from its own file, else from its own
//!   folder, else from the nearest folder above; the disagreement itself is reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::inputs::manifests::{ManifestObject, ObjectBody, STDIN_NAME};

/// Where `kubectl apply` puts an object that names no namespace.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Cluster-scoped kinds of Kubernetes itself and of the projects meshlife's users run beside
/// it. Any other kind is taken as namespaced, as most custom resources are; a `Cluster*` kind
/// (ClusterRole, ClusterIssuer, ClusterAnalysisTemplate, ...) is taken as cluster-scoped.
const CLUSTER_SCOPED_KINDS: &[&str] = &[
    "APIService",
    "CertificateSigningRequest",
    "ComponentStatus",
    "ConstraintTemplate",
    "CSIDriver",
    "CSINode",
    "CustomResourceDefinition",
    "FlowSchema",
    "GatewayClass",
    "IngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "PersistentVolume",
    "PodSecurityPolicy",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "RuntimeClass",
    "SecurityContextConstraints",
    "StorageClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "VolumeAttachment",
];

/// API groups whose every kind is cluster-scoped (Gatekeeper's constraints and mutators).
const CLUSTER_SCOPED_GROUPS: &[&str] = &[
    "constraints.gatekeeper.sh",
    "mutations.gatekeeper.sh",
    "templates.gatekeeper.sh",
];

pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED_KINDS.contains(&kind)
        || CLUSTER_SCOPED_GROUPS.contains(&group)
        || (kind.starts_with("Cluster") && kind.len() > "Cluster".len())
}

/// When objects were put in `namespace` for naming none while the input defines other
/// Namespaces, the likelier intent: `kubectl apply -n` into one of those.
pub fn default_namespace_note(
    objects: &[ManifestObject],
    moved: usize,
    namespace: &str,
) -> Option<String> {
    if moved == 0 {
        return None;
    }
    // Once each, in the order of the input: a folder often defines the same Namespace in
    // several files.
    let mut defined: Vec<&str> = Vec::new();
    for object in objects {
        if object.identity.kind == "Namespace"
            && object.group().is_empty()
            && !defined.contains(&object.identity.name.as_str())
        {
            defined.push(object.identity.name.as_str());
        }
    }
    if defined.is_empty() || defined.contains(&namespace) {
        return None;
    }
    let objects_word = if moved == 1 {
        "object names"
    } else {
        "objects name"
    };
    let (namespaces, hint) = match defined.as_slice() {
        [only] => (format!("Namespace {only}"), format!("`-n {only}`")),
        several => (
            format!("Namespaces {}", several.join(", ")),
            "`-n NAMESPACE`, one run per namespace".to_string(),
        ),
    };
    Some(format!(
        "{moved} {objects_word} no namespace and {} judged in `{namespace}`, as `kubectl apply` \
         would put them, while the input defines {namespaces}: if they belong there, check with \
         {hint}",
        if moved == 1 { "is" } else { "are" },
    ))
}

/// Puts every namespaced object without a namespace into `namespace`, in the object itself too
/// (the module reads `metadata.namespace`, as it would after `kubectl apply`). AdmissionReviews
/// are left as they are: their request says where the object is. Returns how many moved.
pub fn apply_default_namespace(objects: &mut [ManifestObject], namespace: &str) -> usize {
    let mut moved = 0;
    for object in objects.iter_mut() {
        if !object.identity.namespace.is_empty()
            || object.admission_request.is_some()
            || is_cluster_scoped(object.group(), &object.identity.kind)
        {
            continue;
        }
        let mut value = object.object.value();
        let Some(metadata) = value
            .as_object_mut()
            .map(|fields| {
                fields
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()))
            })
            .and_then(Value::as_object_mut)
        else {
            // `metadata` of the wrong type: the policy reports it, the object stays unplaced.
            continue;
        };
        metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        object.object = ObjectBody::new(&value);
        object.identity.namespace = namespace.to_string();
        moved += 1;
    }
    moved
}

/// One Namespace manifest of the input.
#[derive(Clone, Debug)]
struct Definition {
    file: String,
    /// 0-based document index within the file.
    document: usize,
    /// The file's folder; `None` for stdin.
    folder: Option<PathBuf>,
    object: Value,
}

impl Definition {
    /// The parts of a Namespace that steer injection: two definitions that agree on these are
    /// the same fact.
    fn facts(&self) -> (Option<&Value>, Option<&Value>) {
        (
            self.object.pointer("/metadata/labels"),
            self.object.pointer("/metadata/annotations"),
        )
    }
}

/// A Namespace defined differently in several files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub namespace: String,
    /// Each definition's file with what it says (`labels {...}, annotations {...}`).
    pub definitions: Vec<(String, String)>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let listed: Vec<String> = self
            .definitions
            .iter()
            .map(|(file, says)| format!("{file} ({says})"))
            .collect();
        write!(
            formatter,
            "Namespace {} is defined differently in {}; each object takes the definition from its \
             own file, else its own folder, else the nearest folder above (none, when the \
             definitions are all elsewhere)",
            self.namespace,
            listed.join(" and ")
        )
    }
}

/// The Namespace manifests of the input, by name, and those of the cluster read (`check
/// --kubeconfig`), which apply where the input has none for an object.
#[derive(Debug, Default)]
pub struct NamespaceDefinitions {
    by_name: BTreeMap<String, Vec<Definition>>,
    cluster: BTreeMap<String, Value>,
    /// How the cluster is named in messages.
    cluster_name: String,
}

impl NamespaceDefinitions {
    pub fn from_objects(objects: &[ManifestObject]) -> NamespaceDefinitions {
        let mut by_name: BTreeMap<String, Vec<Definition>> = BTreeMap::new();
        for object in objects
            .iter()
            .filter(|object| object.is_namespace() && !object.identity.name.is_empty())
        {
            by_name
                .entry(object.identity.name.clone())
                .or_default()
                .push(Definition {
                    file: object.identity.file.clone(),
                    document: object.identity.document,
                    folder: folder_of(&object.identity.file),
                    object: object.object.value(),
                });
        }
        NamespaceDefinitions {
            by_name,
            ..NamespaceDefinitions::default()
        }
    }

    /// The Namespaces of a cluster (`namespaceObject`s), for objects whose Namespace the input
    /// does not define.
    pub fn add_cluster(&mut self, cluster: &str, namespaces: &[Value]) {
        self.cluster_name = cluster.to_string();
        self.cluster = namespaces
            .iter()
            .filter_map(|namespace| {
                let name = namespace.pointer("/metadata/name")?.as_str()?;
                Some((name.to_string(), namespace.clone()))
            })
            .collect();
    }

    /// Whether the input defines this namespace at all.
    pub fn defines(&self, namespace: &str) -> bool {
        self.by_name.contains_key(namespace)
    }

    /// The Namespace manifest `object` belongs to, if the input holds one that applies, else
    /// the cluster's Namespace of that name.
    pub fn for_object(&self, object: &ManifestObject) -> Option<&Value> {
        if object.is_namespace() || object.identity.namespace.is_empty() {
            return None;
        }
        self.in_input(object)
            .or_else(|| self.cluster.get(&object.identity.namespace))
    }

    fn in_input(&self, object: &ManifestObject) -> Option<&Value> {
        let definitions = self.by_name.get(&object.identity.namespace)?;
        if agree(definitions) {
            return definitions.first().map(|definition| &definition.object);
        }
        // A file applied with `kubectl apply -f` ends with its last definition; so does a folder.
        let in_file: Vec<&Definition> = definitions
            .iter()
            .filter(|definition| definition.file == object.identity.file)
            .collect();
        if !in_file.is_empty() {
            return in_file.last().map(|definition| &definition.object);
        }
        let mut folder = folder_of(&object.identity.file);
        while let Some(current) = folder {
            let in_folder: Vec<&Definition> = definitions
                .iter()
                .filter(|definition| definition.folder.as_deref() == Some(current.as_path()))
                .collect();
            if !in_folder.is_empty() {
                return in_folder.last().map(|definition| &definition.object);
            }
            folder = current.parent().map(Path::to_path_buf);
        }
        None
    }

    /// Where the definition [`for_object`](Self::for_object) picked is, for messages:
    /// `ns.yaml (document 2)`.
    pub fn location_of(&self, object: &ManifestObject) -> Option<String> {
        let Some(chosen) = self.in_input(object) else {
            return self
                .for_object(object)
                .map(|_| format!("its Namespace in {}", self.cluster_name));
        };
        self.by_name
            .get(&object.identity.namespace)?
            .iter()
            .find(|definition| std::ptr::eq(&definition.object, chosen))
            .map(|definition| format!("{} (document {})", definition.file, definition.document + 1))
    }

    /// Namespaces defined differently in several places, in name order.
    pub fn conflicts(&self) -> Vec<Conflict> {
        self.by_name
            .iter()
            .filter(|(_, definitions)| !agree(definitions))
            .map(|(namespace, definitions)| Conflict {
                namespace: namespace.clone(),
                definitions: definitions
                    .iter()
                    .map(|definition| (definition.file.clone(), describe(definition)))
                    .collect(),
            })
            .collect()
    }
}

fn agree(definitions: &[Definition]) -> bool {
    definitions
        .windows(2)
        .all(|pair| pair[0].facts() == pair[1].facts())
}

fn describe(definition: &Definition) -> String {
    let render = |value: Option<&Value>| match value {
        Some(Value::Object(fields)) if !fields.is_empty() => value.map(Value::to_string),
        _ => None,
    };
    let (labels, annotations) = definition.facts();
    match (render(labels), render(annotations)) {
        (None, None) => "no labels or annotations".into(),
        (Some(labels), None) => format!("labels {labels}"),
        (None, Some(annotations)) => format!("annotations {annotations}"),
        (Some(labels), Some(annotations)) => {
            format!("labels {labels}, annotations {annotations}")
        }
    }
}

/// The folder of a file as named in reports; `None` for stdin. A bare file name is in `.`.
fn folder_of(file: &str) -> Option<PathBuf> {
    if file == STDIN_NAME {
        return None;
    }
    let parent = Path::new(file).parent()?;
    Some(if parent.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        parent.to_path_buf()
    })
}

/// A Namespace manifest that leaves injection off while the constraint's facts list its
/// namespace as injected: the facts win (they describe the cluster; the manifest may be a bare
/// stub), and the run says so, once per mesh ([`facts_win_notices`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FactsDisagreement {
    /// `Istio` or `Linkerd`.
    pub mesh: &'static str,
    pub namespace: String,
    /// `ns.yaml (document 1)`.
    pub manifest: String,
    /// What the manifest says instead: `no istio-injection or istio.io/rev label`.
    pub says: String,
    /// The facts name every namespace (`"*"`), not this one by name.
    pub by_wildcard: bool,
}

/// Where the constraint's facts list `namespace` as injected while its Namespace manifest does
/// not turn injection on. `parameters` is the constraint's `spec.parameters`.
pub fn facts_disagreement(
    parameters: &Value,
    namespace: &str,
    namespace_object: &Value,
    manifest_file: &str,
) -> Vec<FactsDisagreement> {
    // (by its name, by "*")
    let listed = |mesh: &str| {
        let entries: Vec<&str> = parameters
            .pointer(&format!("/{mesh}/injectedNamespaces"))
            .and_then(Value::as_array)
            .map(|entries| entries.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        (entries.contains(&namespace), entries.contains(&"*"))
    };
    let label = |key: &str| {
        namespace_object
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
    };
    let annotation = |key: &str| {
        namespace_object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(key))
            .and_then(Value::as_str)
    };
    let disagreement = |mesh: &'static str, says: String, by_name: bool| FactsDisagreement {
        mesh,
        namespace: namespace.to_string(),
        manifest: manifest_file.to_string(),
        says,
        by_wildcard: !by_name,
    };
    let mut disagreements = Vec::new();
    let istio_on = label("istio-injection") == Some("enabled")
        || (label("istio-injection").is_none() && label("istio.io/rev").is_some());
    // Against a "*", a Namespace's explicit opt-out wins (policy/src/mesh.rs): nothing to say.
    let (by_name, by_wildcard) = listed("istio");
    if (by_name || (by_wildcard && label("istio-injection") != Some("disabled"))) && !istio_on {
        let says = match label("istio-injection") {
            Some(value) => format!("istio-injection: {value}"),
            None => "no istio-injection or istio.io/rev label".into(),
        };
        disagreements.push(disagreement("Istio", says, by_name));
    }
    let (by_name, by_wildcard) = listed("linkerd");
    let linkerd_opt_out = annotation("linkerd.io/inject") == Some("disabled");
    if (by_name || (by_wildcard && !linkerd_opt_out))
        && !matches!(annotation("linkerd.io/inject"), Some("enabled" | "ingress"))
    {
        let says = match annotation("linkerd.io/inject") {
            Some(value) => format!("linkerd.io/inject: {value}"),
            None => "no linkerd.io/inject annotation".into(),
        };
        disagreements.push(disagreement("Linkerd", says, by_name));
    }
    disagreements
}

/// One line per mesh for the run's disagreements (two when the facts name some namespaces and
/// also hold `"*"`): a `"*"` in the facts can disagree with every Namespace manifest of a
/// folder, and a line each buries the rest of the output.
pub fn facts_win_notices(
    disagreements: &std::collections::BTreeSet<FactsDisagreement>,
) -> Vec<String> {
    let mut notices = Vec::new();
    for mesh in ["Istio", "Linkerd"] {
        let parameter = format!("{}.injectedNamespaces", mesh.to_ascii_lowercase());
        for by_wildcard in [false, true] {
            let theirs: Vec<&FactsDisagreement> = disagreements
                .iter()
                .filter(|d| d.mesh == mesh && d.by_wildcard == by_wildcard)
                .collect();
            if theirs.is_empty() {
                continue;
            }
            notices.push(if by_wildcard {
                wildcard_notice(mesh, &parameter, &theirs)
            } else {
                by_name_notice(mesh, &parameter, &theirs)
            });
        }
    }
    notices
}

fn by_name_notice(mesh: &str, parameter: &str, theirs: &[&FactsDisagreement]) -> String {
    match theirs {
        [one] => format!(
            "the facts list namespace {} as {mesh}-injected ({parameter}), its Namespace \
             manifest in {} says otherwise ({}); the facts win",
            one.namespace, one.manifest, one.says
        ),
        several => {
            let names: Vec<&str> = several.iter().map(|d| d.namespace.as_str()).collect();
            format!(
                "the facts list {} namespaces as {mesh}-injected ({parameter}): {}; their \
                 Namespace manifests say otherwise ({}); the facts win",
                several.len(),
                names.join(", "),
                manifest_sayings(several)
            )
        }
    }
}

/// `"*"` names no namespace: the notice says so, and what a namespace opts out with.
fn wildcard_notice(mesh: &str, parameter: &str, theirs: &[&FactsDisagreement]) -> String {
    let opt_out = match mesh {
        "Istio" => "the label istio-injection: disabled",
        _ => "the annotation linkerd.io/inject: disabled",
    };
    let head = format!("the facts take every namespace as {mesh}-injected ({parameter}: \"*\")");
    match theirs {
        [one] => format!(
            "{head}: namespace {} is judged as injected, though its manifest in {} does not turn \
             injection on ({}); a \"*\" gives way only to {opt_out}",
            one.namespace, one.manifest, one.says
        ),
        several => {
            let names: Vec<&str> = several.iter().map(|d| d.namespace.as_str()).collect();
            format!(
                "{head}: {} namespaces are judged as injected ({}), though their manifests do \
                 not turn injection on ({}); a \"*\" gives way only to {opt_out}",
                several.len(),
                names.join(", "),
                manifest_sayings(several)
            )
        }
    }
}

fn manifest_sayings(several: &[&FactsDisagreement]) -> String {
    several
        .iter()
        .map(|d| format!("{} in {}: {}", d.namespace, d.manifest, d.says))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(
        file: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        labels: Value,
    ) -> ManifestObject {
        let mut metadata = json!({"name": name, "labels": labels});
        if !namespace.is_empty() {
            metadata["namespace"] = json!(namespace);
        }
        ManifestObject::for_test(
            file,
            kind,
            namespace,
            json!({"kind": kind, "metadata": metadata}),
        )
    }

    fn injection_label(definition: Option<&Value>) -> Option<&str> {
        definition?
            .pointer("/metadata/labels/istio-injection")?
            .as_str()
    }

    #[test]
    fn namespaced_kinds_without_a_namespace_go_to_the_default() {
        let mut objects = vec![
            object("a.yaml", "Deployment", "", "web", json!({})),
            object("a.yaml", "Deployment", "shop", "cart", json!({})),
            object("a.yaml", "Namespace", "", "shop", json!({})),
            object("a.yaml", "ClusterRole", "", "reader", json!({})),
        ];
        assert_eq!(apply_default_namespace(&mut objects, "team"), 1);
        assert_eq!(objects[0].identity.namespace, "team");
        assert_eq!(objects[0].object.value()["metadata"]["namespace"], "team");
        assert_eq!(objects[1].identity.namespace, "shop");
        assert_eq!(objects[2].identity.namespace, "");
        assert_eq!(objects[3].identity.namespace, "");
    }

    #[test]
    fn cluster_scoped_kinds_are_known() {
        assert!(is_cluster_scoped("", "Namespace"));
        assert!(is_cluster_scoped("argoproj.io", "ClusterAnalysisTemplate"));
        assert!(is_cluster_scoped(
            "constraints.gatekeeper.sh",
            "MeshLifecycle"
        ));
        assert!(!is_cluster_scoped("argoproj.io", "AnalysisTemplate"));
        assert!(!is_cluster_scoped("apps", "Deployment"));
    }

    #[test]
    fn an_object_takes_its_own_file_then_folder_then_the_nearest_folder_above() {
        let enabled = json!({"istio-injection": "enabled"});
        let disabled = json!({"istio-injection": "disabled"});
        let objects = vec![
            object("base/ns.yaml", "Namespace", "", "shop", json!({})),
            object(
                "overlays/prod/ns.yaml",
                "Namespace",
                "",
                "shop",
                enabled.clone(),
            ),
            object("overlays/dev/all.yaml", "Namespace", "", "shop", disabled),
            object(
                "overlays/dev/all.yaml",
                "Deployment",
                "shop",
                "web",
                json!({}),
            ),
            object(
                "overlays/prod/web.yaml",
                "Deployment",
                "shop",
                "web",
                json!({}),
            ),
            object(
                "overlays/prod/eu/web.yaml",
                "Deployment",
                "shop",
                "web",
                json!({}),
            ),
            object("base/web.yaml", "Deployment", "shop", "web", json!({})),
            object("other/web.yaml", "Deployment", "shop", "web", json!({})),
        ];
        let definitions = NamespaceDefinitions::from_objects(&objects);
        let label = |index: usize| injection_label(definitions.for_object(&objects[index]));
        assert_eq!(label(3), Some("disabled"), "own file");
        assert_eq!(label(4), Some("enabled"), "own folder");
        assert_eq!(label(5), Some("enabled"), "nearest folder above");
        assert!(
            definitions.for_object(&objects[6]).is_some(),
            "base's own stub"
        );
        assert_eq!(label(6), None);
        assert!(
            definitions.for_object(&objects[7]).is_none(),
            "no definition applies from unrelated folders"
        );
        let conflicts = definitions.conflicts();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].namespace, "shop");
        assert_eq!(conflicts[0].definitions.len(), 3);
        assert!(
            conflicts[0]
                .to_string()
                .contains("overlays/prod/ns.yaml (labels")
        );
    }

    #[test]
    fn definitions_that_agree_apply_everywhere_and_are_no_conflict() {
        let enabled = json!({"istio-injection": "enabled"});
        let objects = vec![
            object("a/ns.yaml", "Namespace", "", "shop", enabled.clone()),
            object("b/ns.yaml", "Namespace", "", "shop", enabled),
            object("c/web.yaml", "Deployment", "shop", "web", json!({})),
        ];
        let definitions = NamespaceDefinitions::from_objects(&objects);
        assert_eq!(
            injection_label(definitions.for_object(&objects[2])),
            Some("enabled")
        );
        assert!(definitions.conflicts().is_empty());
    }

    #[test]
    fn facts_that_list_a_namespace_the_manifest_leaves_uninjected_are_reported() {
        let stub = json!({"metadata": {"name": "shop"}});
        let on = json!({"metadata": {"name": "shop", "labels": {"istio-injection": "enabled"}}});
        let parameters = json!({"istio": {"injectedNamespaces": ["*"]}});
        let said = facts_disagreement(&parameters, "shop", &stub, "ns.yaml (document 1)");
        assert_eq!(said.len(), 1);
        assert_eq!(said[0].says, "no istio-injection or istio.io/rev label");
        assert!(facts_disagreement(&parameters, "shop", &on, "ns.yaml").is_empty());
        assert!(facts_disagreement(&json!({}), "shop", &stub, "ns.yaml").is_empty());
        let linkerd = json!({"linkerd": {"injectedNamespaces": ["shop"]}});
        assert_eq!(
            facts_disagreement(&linkerd, "shop", &stub, "ns.yaml").len(),
            1
        );
    }

    /// A folder defining Namespace shop in several files named it once per file, and suggested
    /// `-n` with the first of several namespaces.
    #[test]
    fn the_default_namespace_note_names_each_namespace_once() {
        let objects = vec![
            object("a/ns.yaml", "Namespace", "", "shop", json!({})),
            object("b/ns.yaml", "Namespace", "", "shop", json!({})),
            object("c/job.yaml", "Job", "", "migrate", json!({})),
        ];
        let note = default_namespace_note(&objects, 1, "default").unwrap();
        assert!(
            note.ends_with(
                "while the input defines Namespace shop: if they belong there, check with `-n shop`"
            ),
            "{note}"
        );
        let mut objects = objects;
        objects.push(object("d/ns.yaml", "Namespace", "", "reports", json!({})));
        let note = default_namespace_note(&objects, 1, "default").unwrap();
        assert!(
            note.ends_with("defines Namespaces shop, reports: if they belong there, check with `-n NAMESPACE`, one run per namespace"),
            "{note}"
        );
    }

    /// With `"*"` facts, a folder of Namespace stubs gave one "the facts win" line each.
    #[test]
    fn disagreements_are_one_line_per_mesh() {
        let stub = |name: &str| json!({"metadata": {"name": name}});
        let parameters = json!({"istio": {"injectedNamespaces": ["*"]}});
        let all: std::collections::BTreeSet<FactsDisagreement> = ["shop", "reports", "ledger"]
            .into_iter()
            .flat_map(|name| {
                facts_disagreement(&parameters, name, &stub(name), &format!("{name}.yaml"))
            })
            .collect();
        let notices = facts_win_notices(&all);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].starts_with(
                "the facts take every namespace as Istio-injected (istio.injectedNamespaces: \
                 \"*\"): 3 namespaces are judged as injected (ledger, reports, shop), though \
                 their manifests do not turn injection on (ledger in ledger.yaml: no \
                 istio-injection or istio.io/rev label; reports in"
            ),
            "{notices:?}"
        );
        assert!(
            notices[0].ends_with("a \"*\" gives way only to the label istio-injection: disabled"),
            "{notices:?}"
        );
        let by_name = json!({"istio": {"injectedNamespaces": ["shop"]}});
        let one: std::collections::BTreeSet<FactsDisagreement> =
            facts_disagreement(&by_name, "shop", &stub("shop"), "shop.yaml")
                .into_iter()
                .collect();
        assert_eq!(
            facts_win_notices(&one),
            [
                "the facts list namespace shop as Istio-injected (istio.injectedNamespaces), its \
              Namespace manifest in shop.yaml says otherwise (no istio-injection or istio.io/rev \
              label); the facts win"
            ]
        );
    }

    /// With only `"*"` in the facts, the notice said the facts list the namespace by name.
    #[test]
    fn a_wildcard_is_not_said_to_name_the_namespace() {
        let stub = json!({"metadata": {"name": "shop"}});
        let both = json!({
            "istio": {"injectedNamespaces": ["*"]},
            "linkerd": {"injectedNamespaces": ["*", "shop"]}
        });
        let said: std::collections::BTreeSet<FactsDisagreement> =
            facts_disagreement(&both, "shop", &stub, "shop.yaml")
                .into_iter()
                .collect();
        let notices = facts_win_notices(&said);
        assert_eq!(
            notices,
            [
                "the facts take every namespace as Istio-injected (istio.injectedNamespaces: \
                 \"*\"): namespace shop is judged as injected, though its manifest in shop.yaml \
                 does not turn injection on (no istio-injection or istio.io/rev label); a \"*\" \
                 gives way only to the label istio-injection: disabled",
                "the facts list namespace shop as Linkerd-injected (linkerd.injectedNamespaces), \
                 its Namespace manifest in shop.yaml says otherwise (no linkerd.io/inject \
                 annotation); the facts win"
            ]
        );
    }
}
