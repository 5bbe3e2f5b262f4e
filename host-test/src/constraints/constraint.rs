//! Gatekeeper Constraints (`constraints.gatekeeper.sh/v1beta1`, kind `MeshLifecycle`):
//! parameters, `spec.match` with Gatekeeper's semantics, and the enforcement action.
//!
//! The match semantics follow Gatekeeper's `pkg/mutation/match` (which the admission target
//! shares): all matchers are ANDed, an absent matcher matches everything, namespace matchers
//! do not exclude cluster-scoped objects, and a Namespace is matched by its own name and labels.
//!
//! Parameter *values* are the module's business: it reports unknown keys and wrong types as an
//! `ML000` violation whose path starts with `parameters`. [`Constraint::validate_parameters`]
//! evaluates a harmless probe Pod once with the constraint's parameters and turns such a
//! violation into a constraint error, so a typo stops the run (exit 2) instead of being
//! reported once per object or silently switching a rule off.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::inputs::manifests::{self, ManifestObject};
use crate::module::engine::Engine;

pub const CONSTRAINT_GROUP: &str = "constraints.gatekeeper.sh";
pub const CONSTRAINT_KIND: &str = "MeshLifecycle";
/// Versions Gatekeeper serves for constraints; v1beta1 is the one to write.
const CONSTRAINT_VERSIONS: [&str; 3] = ["v1beta1", "v1", "v1alpha1"];

/// What a finding from this constraint does to the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EnforcementAction {
    /// Fails the run (exit 1) when at or above `--fail-on`.
    Deny,
    /// Reported, never fails the run.
    Warn,
    /// Reported, never fails the run.
    Dryrun,
}

impl EnforcementAction {
    pub fn as_str(self) -> &'static str {
        match self {
            EnforcementAction::Deny => "deny",
            EnforcementAction::Warn => "warn",
            EnforcementAction::Dryrun => "dryrun",
        }
    }
}

/// A constraint that could not be read or is invalid; names the file and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintError {
    pub file: String,
    pub document: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ConstraintError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "constraint {}", self.file)?;
        if let Some(document) = self.document {
            write!(formatter, ": document {}", document + 1)?;
        }
        if let Some(field) = &self.field {
            write!(formatter, ": field `{field}`")?;
        }
        write!(formatter, ": {}", self.message)
    }
}

impl std::error::Error for ConstraintError {}

/// One Gatekeeper constraint, ready to match objects.
#[derive(Clone, Debug)]
pub struct Constraint {
    /// The file it was read from; empty for the built-in default.
    pub file: String,
    pub document: usize,
    /// `metadata.name`; empty for the built-in default.
    pub name: String,
    /// `spec.parameters`, `{}` when absent.
    pub parameters: Value,
    pub matcher: Match,
    pub enforcement_action: EnforcementAction,
}

impl Constraint {
    /// What runs without `--constraint`: parameter defaults, everything matched, findings deny.
    pub fn default_constraint() -> Constraint {
        Constraint {
            file: String::new(),
            document: 0,
            name: String::new(),
            parameters: Value::Object(Map::new()),
            matcher: Match::default(),
            enforcement_action: EnforcementAction::Deny,
        }
    }

    /// The module input for one object: `{"review": ..., "parameters": ...}`, with
    /// `services` (the input's Services that select the object's pods) when there are any.
    pub fn input_for(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
        services: &[&Value],
    ) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Input<'a> {
            review: manifests::Review<'a>,
            parameters: &'a Value,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            services: &'a [&'a Value],
        }
        let input = Input {
            review: object.review(namespace_object),
            parameters: &self.parameters,
            services,
        };
        // Nothing in it fails to serialise: strings, `Value`s and text written from one.
        serde_json::to_vec(&input).unwrap_or_default()
    }

    /// Evaluates a probe Pod with these parameters; an `ML000` about `parameters` (unknown
    /// key, wrong type) becomes a constraint error naming the field.
    pub fn validate_parameters(&self, engine: &Engine) -> Result<(), ConstraintError> {
        let probe = serde_json::json!({
            "review": {
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "name": "meshlife-parameter-probe",
                "operation": "CREATE",
                "object": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "meshlife-parameter-probe"},
                    "spec": {"containers": [{"name": "probe", "image": "probe"}]}
                }
            },
            "parameters": self.parameters,
        });
        let violations = engine
            .evaluate(&serde_json::to_vec(&probe).unwrap_or_default())
            .map_err(|error| {
                self.error(
                    Some("spec.parameters"),
                    format!("the module could not evaluate them: {error:#}"),
                )
            })?;
        // The probe Pod is valid, so every ML000 is the parameters' doing, including those
        // that name no field (parameters nested deeper than the module reads).
        let parameter_problems: Vec<_> = violations
            .iter()
            .filter(|violation| violation.details.rule == "ML000")
            .collect();
        match parameter_problems.first() {
            None => Ok(()),
            Some(first) => {
                let field = match first.details.path.as_str() {
                    path if path.starts_with("parameters") => format!("spec.{path}"),
                    _ => "spec.parameters".to_string(),
                };
                let messages: Vec<&str> = parameter_problems
                    .iter()
                    .map(|violation| violation.msg.as_str())
                    .collect();
                Err(self.error(Some(&field), messages.join("; ")))
            }
        }
    }

    /// Whether this constraint applies to `object`, given its Namespace when the input has it.
    /// An error when the answer needs the Namespace's labels and the input lacks the Namespace.
    pub fn matches(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> Result<bool, String> {
        self.matcher.matches(object, namespace_object)
    }

    fn error(&self, field: Option<&str>, message: String) -> ConstraintError {
        ConstraintError {
            file: self.file.clone(),
            document: Some(self.document),
            field: field.map(str::to_string),
            message,
        }
    }
}

/// Reads every MeshLifecycle constraint in `path` (a regular file of at most `limit`).
/// ConstraintTemplates in the same file are skipped (a template and its constraint often share
/// a file); anything else is an error.
pub fn load_constraints(
    path: &Path,
    limit: crate::inputs::files::ReadLimit,
) -> Result<Vec<Constraint>, ConstraintError> {
    let file = path.display().to_string();
    let file_error = |message: String| ConstraintError {
        file: file.clone(),
        document: None,
        field: None,
        message,
    };
    let text = crate::inputs::files::read_text(path, limit)
        .map_err(|error| file_error(error.to_string()))?;
    parse_constraints_text(&file, &text)
}

/// Every constraint in `paths`, each file read within `limit` and each constraint's parameters
/// checked by `engine`; names must not repeat across the files.
pub fn load_constraint_files(
    paths: &[std::path::PathBuf],
    limit: crate::inputs::files::ReadLimit,
    engine: &Engine,
) -> Result<Vec<Constraint>, String> {
    Ok(read_constraint_files(paths, limit, engine)?
        .into_iter()
        .flat_map(|file| file.constraints)
        .collect())
}

/// A constraint file as read, its text kept for those that pass it on (`meshlife install`
/// mounts it into the server unchanged).
pub struct ConstraintFile {
    pub path: std::path::PathBuf,
    pub text: String,
    pub constraints: Vec<Constraint>,
}

/// [`load_constraint_files`], keeping each file's text.
pub fn read_constraint_files(
    paths: &[std::path::PathBuf],
    limit: crate::inputs::files::ReadLimit,
    engine: &Engine,
) -> Result<Vec<ConstraintFile>, String> {
    let mut files = Vec::new();
    let mut loaded = Vec::new();
    for path in paths {
        let name = path.display().to_string();
        let text = crate::inputs::files::read_text(path, limit)
            .map_err(|error| format!("constraint {name}: {error}"))?;
        let constraints =
            parse_constraints_text(&name, &text).map_err(|error| error.to_string())?;
        for constraint in &constraints {
            constraint
                .validate_parameters(engine)
                .map_err(|error| error.to_string())?;
        }
        loaded.extend(constraints.iter().cloned());
        // Two of one name: the second `kubectl apply`d would silently replace the first.
        refuse_duplicate_names(&loaded).map_err(|error| error.to_string())?;
        files.push(ConstraintFile {
            path: path.clone(),
            text,
            constraints,
        });
    }
    Ok(files)
}

/// [`load_constraints`] for a text already in memory, `file` naming it in errors.
pub fn parse_constraints_text(file: &str, text: &str) -> Result<Vec<Constraint>, ConstraintError> {
    let file_error = |message: String| ConstraintError {
        file: file.to_string(),
        document: None,
        field: None,
        message,
    };
    let file = file.to_string();
    let mut constraints = Vec::new();
    for document in manifests::parse_documents(&file, text) {
        let (index, _line, value) = document.map_err(|error| ConstraintError {
            file: file.clone(),
            document: error.document,
            field: error.field.clone(),
            message: match error.line {
                Some(line) => format!("{} (line {line})", error.message),
                None => error.message.clone(),
            },
        })?;
        if let Some(constraint) = parse_constraint(&file, index, value)? {
            constraints.push(constraint);
        }
    }
    if constraints.is_empty() {
        return Err(file_error(format!(
            "holds no {CONSTRAINT_KIND} constraint ({CONSTRAINT_GROUP}/v1beta1)"
        )));
    }
    Ok(constraints)
}

/// Refuses two constraints with the same `metadata.name` (from repeated `--constraint` files or
/// one file): Gatekeeper keeps one constraint per kind and name, so a cluster would run only the
/// one applied last while the CLI checked both.
pub fn refuse_duplicate_names(constraints: &[Constraint]) -> Result<(), ConstraintError> {
    for (index, constraint) in constraints.iter().enumerate() {
        if let Some(first) = constraints[..index]
            .iter()
            .find(|earlier| earlier.name == constraint.name)
        {
            return Err(constraint.error(
                Some("metadata.name"),
                format!(
                    "`{}` is also the name of the constraint in {} (document {}): Gatekeeper keeps \
                     one {CONSTRAINT_KIND} per name, so only the one applied last would run; \
                     rename one of them",
                    constraint.name,
                    first.file,
                    first.document + 1
                ),
            ));
        }
    }
    Ok(())
}

/// Keys Gatekeeper's CRD defines. Unknown keys are errors: a misspelt `excludedNamespaces`
/// must not silently widen what the constraint covers.
const SPEC_KEYS: [&str; 4] = [
    "match",
    "parameters",
    "enforcementAction",
    "scopedEnforcementActions",
];
const MATCH_KEYS: [&str; 8] = [
    "kinds",
    "scope",
    "namespaces",
    "excludedNamespaces",
    "labelSelector",
    "namespaceSelector",
    "name",
    "source",
];

/// `spec.scopedEnforcementActions[]` entries.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScopedEnforcementAction {
    action: String,
    #[serde(default)]
    enforcement_points: Vec<EnforcementPoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnforcementPoint {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KindsDocument {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
}

type FieldError = (String, String);

/// Deserialises `fields[key]` (absent or null: `None`), naming `parent.key` on a type error.
fn typed_field<T: serde::de::DeserializeOwned>(
    fields: &Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<Option<T>, FieldError> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|error| (format!("{parent}.{key}"), error.to_string())),
    }
}

/// The mapping at `value`, with every key in `allowed`; `None` when absent or null.
fn mapping<'a>(
    value: Option<&'a Value>,
    field: &str,
    allowed: &[&str],
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(fields)) => {
            if let Some(unknown) = fields.keys().find(|key| !allowed.contains(&key.as_str())) {
                return Err((
                    format!("{field}.{unknown}"),
                    format!("unknown field; expected one of {}", allowed.join(", ")),
                ));
            }
            Ok(Some(fields))
        }
        Some(other) => Err((
            field.to_string(),
            format!(
                "must be a mapping, got {}",
                manifests::json_type_name(other)
            ),
        )),
    }
}

fn parse_constraint(
    file: &str,
    document: usize,
    value: Value,
) -> Result<Option<Constraint>, ConstraintError> {
    let error = |field: &str, message: String| ConstraintError {
        file: file.into(),
        document: Some(document),
        field: Some(field.into()),
        message,
    };
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = manifests::split_api_version(api_version);
    if kind == "ConstraintTemplate" && group == "templates.gatekeeper.sh" {
        return Ok(None);
    }
    if group != CONSTRAINT_GROUP {
        if kind == CONSTRAINT_KIND {
            return Err(error(
                "apiVersion",
                format!("is {api_version:?}; expected {CONSTRAINT_GROUP}/v1beta1"),
            ));
        }
        return Err(error(
            "kind",
            format!(
                "{kind:?} ({api_version:?}) is not a Gatekeeper constraint; expected {CONSTRAINT_GROUP}/v1beta1 {CONSTRAINT_KIND}"
            ),
        ));
    }
    if !CONSTRAINT_VERSIONS.contains(&version) {
        return Err(error(
            "apiVersion",
            format!("version {version:?} is not served; use {CONSTRAINT_GROUP}/v1beta1"),
        ));
    }
    if kind != CONSTRAINT_KIND {
        return Err(error(
            "kind",
            format!("is {kind:?}; meshlife evaluates only {CONSTRAINT_KIND} constraints"),
        ));
    }

    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let field_error = |(field, message): FieldError| error(&field, message);
    let spec = mapping(value.get("spec"), "spec", &SPEC_KEYS)
        .map_err(field_error)?
        .cloned()
        .unwrap_or_default();
    let parameters = match spec.get("parameters") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(parameters)) => Value::Object(parameters.clone()),
        Some(other) => {
            return Err(error(
                "spec.parameters",
                format!(
                    "must be a mapping, got {}",
                    manifests::json_type_name(other)
                ),
            ));
        }
    };
    let action: Option<String> =
        typed_field(&spec, "spec", "enforcementAction").map_err(field_error)?;
    let scoped: Option<Vec<ScopedEnforcementAction>> =
        typed_field(&spec, "spec", "scopedEnforcementActions").map_err(field_error)?;
    let enforcement_action = enforcement_action(action.as_deref(), scoped.as_deref())
        .map_err(|(field, message)| error(field, message))?;
    let matcher =
        match mapping(spec.get("match"), "spec.match", &MATCH_KEYS).map_err(field_error)? {
            Some(fields) => Match::from_fields(fields).map_err(field_error)?,
            None => Match::default(),
        };
    Ok(Some(Constraint {
        file: file.into(),
        document,
        name,
        parameters,
        matcher,
        enforcement_action,
    }))
}

/// `deny` (also when absent or empty), `warn`, `dryrun`, or `scoped`: the strongest action
/// whose enforcement points include gator's (the CLI plays gator's role) or `*`.
fn enforcement_action(
    action: Option<&str>,
    scoped: Option<&[ScopedEnforcementAction]>,
) -> Result<EnforcementAction, (&'static str, String)> {
    let parse = |text: &str, field: &'static str| match text {
        "" | "deny" => Ok(EnforcementAction::Deny),
        "warn" => Ok(EnforcementAction::Warn),
        "dryrun" => Ok(EnforcementAction::Dryrun),
        other => Err((
            field,
            format!("{other:?} is not one of deny, warn, dryrun, scoped"),
        )),
    };
    match action.unwrap_or("") {
        "scoped" => {
            let mut chosen: Option<EnforcementAction> = None;
            for entry in scoped.unwrap_or_default() {
                let action = parse(&entry.action, "spec.scopedEnforcementActions.action")?;
                let applies = entry
                    .enforcement_points
                    .iter()
                    .any(|point| point.name == "*" || point.name == "gator.gatekeeper.sh");
                if applies {
                    chosen = Some(chosen.map_or(action, |previous| previous.min(action)));
                }
            }
            // No action for gator: the findings are shown but never fail the run.
            Ok(chosen.unwrap_or(EnforcementAction::Dryrun))
        }
        other => parse(other, "spec.enforcementAction"),
    }
}

/// `spec.match`, validated.
#[derive(Clone, Debug, Default)]
pub struct Match {
    kinds: Vec<KindsMatcher>,
    scope: Scope,
    namespaces: Vec<Wildcard>,
    excluded_namespaces: Vec<Wildcard>,
    label_selector: Option<Selector>,
    namespace_selector: Option<Selector>,
    name: Option<Wildcard>,
}

#[derive(Clone, Debug)]
struct KindsMatcher {
    api_groups: Vec<String>,
    kinds: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Scope {
    #[default]
    All,
    Cluster,
    Namespaced,
}

impl Match {
    fn from_fields(fields: &Map<String, Value>) -> Result<Match, FieldError> {
        const PARENT: &str = "spec.match";
        let scope_text: Option<String> = typed_field(fields, PARENT, "scope")?;
        let scope = match scope_text.as_deref() {
            None | Some("" | "*") => Scope::All,
            Some("Cluster") => Scope::Cluster,
            Some("Namespaced") => Scope::Namespaced,
            // Gatekeeper treats a typo as `*`; an error is kinder than a silently wider match.
            Some(other) => {
                return Err((
                    "spec.match.scope".into(),
                    format!("{other:?} is not one of *, Cluster, Namespaced"),
                ));
            }
        };
        // Only meaningful for expanded resources, which the CLI does not generate.
        let source: Option<String> = typed_field(fields, PARENT, "source")?;
        if let Some(source) = source.as_deref()
            && !matches!(source, "" | "All" | "Original" | "Generated")
        {
            return Err((
                "spec.match.source".into(),
                format!("{source:?} is not one of All, Original, Generated"),
            ));
        }
        let selector = |key: &str| -> Result<Option<Selector>, FieldError> {
            let field = format!("{PARENT}.{key}");
            mapping(
                fields.get(key),
                &field,
                &["matchLabels", "matchExpressions"],
            )?;
            typed_field::<LabelSelector>(fields, PARENT, key)?
                .map(|selector| Selector::new(selector, &field))
                .transpose()
        };
        let kinds: Vec<KindsDocument> = typed_field(fields, PARENT, "kinds")?.unwrap_or_default();
        let namespaces: Vec<String> =
            typed_field(fields, PARENT, "namespaces")?.unwrap_or_default();
        let excluded_namespaces: Vec<String> =
            typed_field(fields, PARENT, "excludedNamespaces")?.unwrap_or_default();
        let name: Option<String> = typed_field(fields, PARENT, "name")?;
        for (key, patterns) in [
            ("namespaces", &namespaces),
            ("excludedNamespaces", &excluded_namespaces),
        ] {
            for (index, pattern) in patterns.iter().enumerate() {
                Wildcard::check(pattern, &format!("{PARENT}.{key}[{index}]"))?;
            }
        }
        if let Some(name) = name.as_deref().filter(|name| !name.is_empty()) {
            Wildcard::check(name, &format!("{PARENT}.name"))?;
        }
        Ok(Match {
            kinds: kinds
                .into_iter()
                .map(|kinds| KindsMatcher {
                    api_groups: kinds.api_groups,
                    kinds: kinds.kinds,
                })
                .collect(),
            scope,
            namespaces: namespaces.into_iter().map(Wildcard).collect(),
            excluded_namespaces: excluded_namespaces.into_iter().map(Wildcard).collect(),
            label_selector: selector("labelSelector")?,
            namespace_selector: selector("namespaceSelector")?,
            name: name.filter(|name| !name.is_empty()).map(Wildcard),
        })
    }

    /// Gatekeeper's top-level matchers, ANDed, in Gatekeeper's order.
    pub fn matches(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> Result<bool, String> {
        Ok(self.kinds_match(object)
            && self.scope_match(object, namespace_object)
            && self.namespaces_match(object, namespace_object)
            && self.excluded_namespaces_match(object, namespace_object)
            && self.label_selector_match(object)
            && self.namespace_selector_match(object, namespace_object)?
            && self.name_match(object))
    }

    fn kinds_match(&self, object: &ManifestObject) -> bool {
        if self.kinds.is_empty() {
            return true;
        }
        self.kinds.iter().any(|entry| {
            let kind_matches = entry.kinds.is_empty()
                || entry
                    .kinds
                    .iter()
                    .any(|kind| kind == "*" || *kind == object.kind);
            let group_matches = entry.api_groups.is_empty()
                || entry
                    .api_groups
                    .iter()
                    .any(|group| group == "*" || group == object.group());
            kind_matches && group_matches
        })
    }

    fn scope_match(&self, object: &ManifestObject, namespace_object: Option<&Value>) -> bool {
        let has_namespace = !object.namespace.is_empty() || namespace_object.is_some();
        let is_namespace = object.is_namespace();
        match self.scope {
            Scope::All => true,
            Scope::Cluster => is_namespace || !has_namespace,
            Scope::Namespaced => !is_namespace && has_namespace,
        }
    }

    /// The namespace the namespace matchers look at: a Namespace's own name, else the object's
    /// namespace; `None` for cluster-scoped objects, which namespace matchers never exclude.
    fn namespace_of<'a>(
        object: &'a ManifestObject,
        namespace_object: Option<&'a Value>,
    ) -> Option<&'a str> {
        if object.is_namespace() {
            return Some(&object.name);
        }
        if let Some(name) = namespace_object
            .and_then(|namespace| namespace.pointer("/metadata/name"))
            .and_then(Value::as_str)
        {
            return Some(name);
        }
        (!object.namespace.is_empty()).then_some(object.namespace.as_str())
    }

    fn namespaces_match(&self, object: &ManifestObject, namespace_object: Option<&Value>) -> bool {
        if self.namespaces.is_empty() {
            return true;
        }
        match Match::namespace_of(object, namespace_object) {
            Some(namespace) => self
                .namespaces
                .iter()
                .any(|pattern| pattern.matches(namespace)),
            None => true,
        }
    }

    fn excluded_namespaces_match(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> bool {
        match Match::namespace_of(object, namespace_object) {
            Some(namespace) => !self
                .excluded_namespaces
                .iter()
                .any(|pattern| pattern.matches(namespace)),
            None => true,
        }
    }

    fn label_selector_match(&self, object: &ManifestObject) -> bool {
        self.label_selector
            .as_ref()
            .is_none_or(|selector| selector.matches(&object.labels()))
    }

    fn namespace_selector_match(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> Result<bool, String> {
        let Some(selector) = &self.namespace_selector else {
            return Ok(true);
        };
        if object.is_namespace() {
            return Ok(selector.matches(&object.labels()));
        }
        match namespace_object {
            Some(namespace) => Ok(selector.matches(&manifests::string_map(
                namespace.pointer("/metadata/labels"),
            ))),
            // Cluster-scoped objects are not selected away by a namespace selector.
            None if object.namespace.is_empty() => Ok(true),
            None => Err(format!(
                "constraint's spec.match.namespaceSelector needs the labels of namespace {:?}, which is not in the input; \
                 add its Namespace manifest to the checked files",
                object.namespace
            )),
        }
    }

    fn name_match(&self, object: &ManifestObject) -> bool {
        self.name
            .as_ref()
            .is_none_or(|pattern| pattern.matches(&object.name))
    }
}

/// Gatekeeper's glob: `kube-*` (prefix), `*-system` (suffix), `*mesh*` (contains), or exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wildcard(pub String);

impl Wildcard {
    /// Gatekeeper's CRD refuses other patterns (`pkg/wildcard`'s kubebuilder validation
    /// `^(\*|\*-)?[a-z0-9]([-:a-z0-9]*[a-z0-9])?(\*|-\*)?$`), so the API server would never
    /// store a constraint holding one: here it is an error, not a pattern that matches nothing.
    fn check(pattern: &str, field: &str) -> Result<(), FieldError> {
        static PATTERN: OnceLock<Regex> = OnceLock::new();
        let valid = PATTERN.get_or_init(|| {
            Regex::new(r"^(\*|\*-)?[a-z0-9]([-:a-z0-9]*[a-z0-9])?(\*|-\*)?$").expect("valid regex")
        });
        if valid.is_match(pattern) {
            return Ok(());
        }
        Err((
            field.to_string(),
            format!(
                "{pattern:?} is not a namespace or name pattern Gatekeeper accepts: lower-case \
                 letters, digits, '-' and ':', starting and ending with a letter or digit, with \
                 an optional '*' or '*-' in front and '*' or '-*' at the end"
            ),
        ))
    }

    pub fn matches(&self, candidate: &str) -> bool {
        let pattern = self.0.as_str();
        match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
            (Some(after_star), Some(_)) => {
                candidate.contains(after_star.strip_suffix('*').unwrap_or(after_star))
            }
            (Some(suffix), None) => candidate.ends_with(suffix),
            (None, Some(prefix)) => candidate.starts_with(prefix),
            (None, None) => pattern == candidate,
        }
    }
}

/// A validated Kubernetes label selector (k8s-openapi's type, checked like the API server's
/// `LabelSelectorAsSelector`: In/NotIn need values, Exists/DoesNotExist must have none).
#[derive(Clone, Debug)]
pub struct Selector {
    match_labels: BTreeMap<String, String>,
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    pub fn new(selector: LabelSelector, field: &str) -> Result<Selector, (String, String)> {
        let mut requirements = Vec::new();
        for (index, expression) in selector
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let at = |name: &str| format!("{field}.matchExpressions[{index}].{name}");
            let values = expression.values.unwrap_or_default();
            let key = expression.key;
            label_key_problem(&key).map_or(Ok(()), |problem| Err((at("key"), problem)))?;
            for (value_index, value) in values.iter().enumerate() {
                if let Some(problem) = label_value_problem(value) {
                    return Err((format!("{}[{value_index}]", at("values")), problem));
                }
            }
            let requirement = match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err((
                        at("values"),
                        format!("must not be empty for operator {}", expression.operator),
                    ));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err((
                        at("values"),
                        format!("must be empty for operator {}", expression.operator),
                    ));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err((
                        at("operator"),
                        format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                    ));
                }
            };
            requirements.push(requirement);
        }
        let match_labels = selector.match_labels.unwrap_or_default();
        for (key, value) in &match_labels {
            let at = format!("{field}.matchLabels.{key}");
            if let Some(problem) = label_key_problem(key) {
                return Err((at, format!("the key {problem}")));
            }
            if let Some(problem) = label_value_problem(value) {
                return Err((at, problem));
            }
        }
        Ok(Selector {
            match_labels,
            requirements,
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self
                .requirements
                .iter()
                .all(|requirement| match requirement {
                    Requirement::In(key, values) => {
                        labels.get(key).is_some_and(|value| values.contains(value))
                    }
                    // As in Kubernetes: an absent key satisfies NotIn.
                    Requirement::NotIn(key, values) => {
                        labels.get(key).is_none_or(|value| !values.contains(value))
                    }
                    Requirement::Exists(key) => labels.contains_key(key),
                    Requirement::DoesNotExist(key) => !labels.contains_key(key),
                })
    }
}

/// Why `key` is not a label key, as apimachinery's `IsQualifiedName` judges it (Gatekeeper
/// turns selectors into label selectors with `LabelSelectorAsSelector`, which refuses such keys).
fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        static SUBDOMAIN: OnceLock<Regex> = OnceLock::new();
        let subdomain = SUBDOMAIN.get_or_init(|| {
            Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
                .expect("valid regex")
        });
        if prefix.len() > 253 || !subdomain.is_match(prefix) {
            return Some(format!(
                "{key:?} is not a label key: its prefix {prefix:?} must be a DNS subdomain \
                 (lower-case letters, digits, '-' and '.', at most 253 characters)"
            ));
        }
    }
    if name.is_empty() || label_value_problem(name).is_some() {
        return Some(format!(
            "{key:?} is not a label key: the name part must be 1 to 63 characters of letters, \
             digits, '-', '_' and '.', starting and ending with a letter or digit, after an \
             optional DNS-subdomain prefix and '/'"
        ));
    }
    None
}

/// Why `value` is not a label value (apimachinery's `IsValidLabelValue`).
fn label_value_problem(value: &str) -> Option<String> {
    static VALUE: OnceLock<Regex> = OnceLock::new();
    let valid = VALUE.get_or_init(|| {
        Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("valid regex")
    });
    if value.len() <= 63 && valid.is_match(value) {
        return None;
    }
    Some(format!(
        "{value:?} is not a label value: at most 63 characters of letters, digits, '-', '_' and \
         '.', starting and ending with a letter or digit (or empty)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        kind: &str,
        api_version: &str,
        namespace: &str,
        name: &str,
        labels: Value,
    ) -> ManifestObject {
        ManifestObject {
            file: "f.yaml".into(),
            document: 0,
            item: None,
            inner_items: Vec::new(),
            line: 1,
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            object: manifests::ObjectBody::new(
                &serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": labels}}),
            ),
            admission_request: None,
        }
    }

    fn constraint(yaml: &str) -> Result<Constraint, ConstraintError> {
        let value: Value = serde_yaml_ng::from_str(yaml).unwrap();
        parse_constraint("c.yaml", 0, value).map(Option::unwrap)
    }

    const HEADER: &str =
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: c}\n";

    #[test]
    fn wildcards_follow_gatekeeper() {
        let matches = |pattern: &str, candidate: &str| Wildcard(pattern.into()).matches(candidate);
        assert!(matches("kube-*", "kube-system"));
        assert!(!matches("kube-*", "my-kube"));
        assert!(matches("*-system", "kube-system"));
        assert!(matches("*mesh*", "a-mesh-b"));
        assert!(matches("*", "anything"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }

    #[test]
    fn kinds_namespaces_and_labels_are_anded() {
        let constraint = constraint(&format!(
            "{HEADER}spec:\n  match:\n    kinds: [{{apiGroups: [apps], kinds: [Deployment]}}]\n    excludedNamespaces: [kube-*]\n    labelSelector:\n      matchExpressions: [{{key: tier, operator: NotIn, values: [test]}}]\n"
        ))
        .unwrap();
        let deployment = |namespace: &str, labels: Value| {
            object("Deployment", "apps/v1", namespace, "web", labels)
        };
        assert!(
            constraint
                .matches(&deployment("shop", serde_json::json!({})), None)
                .unwrap()
        );
        assert!(
            !constraint
                .matches(&deployment("kube-system", serde_json::json!({})), None)
                .unwrap()
        );
        assert!(
            !constraint
                .matches(
                    &deployment("shop", serde_json::json!({"tier": "test"})),
                    None
                )
                .unwrap()
        );
        assert!(
            !constraint
                .matches(
                    &object(
                        "Deployment",
                        "extensions/v1beta1",
                        "shop",
                        "web",
                        Value::Null
                    ),
                    None
                )
                .unwrap()
        );
        assert!(
            !constraint
                .matches(&object("Pod", "v1", "shop", "web", Value::Null), None)
                .unwrap()
        );
    }

    #[test]
    fn namespace_selector_reads_the_namespace_object_or_the_namespace_itself() {
        let constraint = constraint(&format!(
            "{HEADER}spec:\n  match:\n    namespaceSelector: {{matchLabels: {{istio-injection: enabled}}}}\n"
        ))
        .unwrap();
        let pod = object("Pod", "v1", "shop", "p", Value::Null);
        let meshed = serde_json::json!({"metadata": {"name": "shop", "labels": {"istio-injection": "enabled"}}});
        let plain = serde_json::json!({"metadata": {"name": "shop"}});
        assert!(constraint.matches(&pod, Some(&meshed)).unwrap());
        assert!(!constraint.matches(&pod, Some(&plain)).unwrap());
        assert!(constraint.matches(&pod, None).is_err());
        let namespace = object(
            "Namespace",
            "v1",
            "",
            "shop",
            serde_json::json!({"istio-injection": "enabled"}),
        );
        assert!(constraint.matches(&namespace, None).unwrap());
        assert!(
            constraint
                .matches(
                    &object(
                        "ClusterRole",
                        "rbac.authorization.k8s.io/v1",
                        "",
                        "r",
                        Value::Null
                    ),
                    None
                )
                .unwrap()
        );
    }

    #[test]
    fn scope_and_name() {
        let namespaced = constraint(&format!(
            "{HEADER}spec:\n  match:\n    scope: Namespaced\n    name: web-*\n"
        ))
        .unwrap();
        assert!(
            namespaced
                .matches(&object("Pod", "v1", "a", "web-1", Value::Null), None)
                .unwrap()
        );
        assert!(
            !namespaced
                .matches(&object("Pod", "v1", "a", "api", Value::Null), None)
                .unwrap()
        );
        assert!(
            !namespaced
                .matches(&object("Pod", "v1", "", "web-1", Value::Null), None)
                .unwrap()
        );
        let namespaces = constraint(&format!(
            "{HEADER}spec:\n  match:\n    namespaces: [shop]\n"
        ))
        .unwrap();
        // Namespace matchers do not exclude cluster-scoped objects (Gatekeeper's caveat).
        assert!(
            namespaces
                .matches(
                    &object(
                        "ClusterRole",
                        "rbac.authorization.k8s.io/v1",
                        "",
                        "r",
                        Value::Null
                    ),
                    None
                )
                .unwrap()
        );
        assert!(
            !namespaces
                .matches(&object("Pod", "v1", "other", "p", Value::Null), None)
                .unwrap()
        );
    }

    #[test]
    fn malformed_constraints_name_the_field() {
        let field = |yaml: &str| constraint(yaml).unwrap_err().field.unwrap();
        assert_eq!(
            field(&format!(
                "{HEADER}spec:\n  match:\n    excludeNamespaces: [a]\n"
            )),
            "spec.match.excludeNamespaces"
        );
        assert_eq!(
            field(&format!(
                "{HEADER}spec:\n  match:\n    kinds: {{apiGroups: []}}\n"
            )),
            "spec.match.kinds"
        );
        assert_eq!(
            field(&format!("{HEADER}spec:\n  enforcementAction: block\n")),
            "spec.enforcementAction"
        );
        assert_eq!(
            field(&format!("{HEADER}spec:\n  parameters: [1]\n")),
            "spec.parameters"
        );
        assert_eq!(
            field(&format!(
                "{HEADER}spec:\n  match:\n    labelSelector: {{matchExpressions: [{{key: a, operator: In}}]}}\n"
            )),
            "spec.match.labelSelector.matchExpressions[0].values"
        );
        assert_eq!(
            field("apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sRequiredLabels\n"),
            "kind"
        );
        assert_eq!(field("apiVersion: v1\nkind: MeshLifecycle\n"), "apiVersion");
    }

    /// Gatekeeper would refuse these constraints (its CRD's wildcard pattern, and
    /// `LabelSelectorAsSelector` for selectors); accepting them would match nothing, silently.
    #[test]
    fn invalid_selectors_and_namespace_patterns_are_refused_naming_the_field() {
        let field = |spec_match: &str| {
            constraint(&format!("{HEADER}spec:\n  match:\n{spec_match}"))
                .unwrap_err()
                .field
                .unwrap()
        };
        let cases = [
            (
                "    labelSelector: {matchLabels: {'bad key!!': x}}\n",
                "spec.match.labelSelector.matchLabels.bad key!!",
            ),
            (
                "    labelSelector: {matchLabels: {app: 'two words'}}\n",
                "spec.match.labelSelector.matchLabels.app",
            ),
            (
                "    namespaceSelector: {matchLabels: {'Example.com/x': y}}\n",
                "spec.match.namespaceSelector.matchLabels.Example.com/x",
            ),
            (
                "    namespaceSelector: {matchExpressions: [{key: 'a b', operator: Exists}]}\n",
                "spec.match.namespaceSelector.matchExpressions[0].key",
            ),
            (
                "    labelSelector: {matchExpressions: [{key: tier, operator: In, values: [ok, 'not ok']}]}\n",
                "spec.match.labelSelector.matchExpressions[0].values[1]",
            ),
            (
                "    namespaces: [shop, Shop_Prod]\n",
                "spec.match.namespaces[1]",
            ),
            (
                "    excludedNamespaces: ['kube-*', '*']\n",
                "spec.match.excludedNamespaces[1]",
            ),
            ("    name: 'web server'\n", "spec.match.name"),
        ];
        for (spec_match, expected) in cases {
            assert_eq!(field(spec_match), expected, "{spec_match}");
        }
        let valid = "    namespaces: ['kube-*', '*-system', shop]\n    labelSelector: {matchLabels: {app.kubernetes.io/name: web, tier: ''}}\n    name: 'web-*'\n";
        constraint(&format!("{HEADER}spec:\n  match:\n{valid}")).expect("valid match");
    }

    #[test]
    fn enforcement_actions() {
        let action = |spec: &str| {
            constraint(&format!("{HEADER}spec:\n{spec}"))
                .unwrap()
                .enforcement_action
        };
        assert_eq!(
            action("  enforcementAction: warn\n"),
            EnforcementAction::Warn
        );
        assert_eq!(
            action("  enforcementAction: dryrun\n"),
            EnforcementAction::Dryrun
        );
        assert_eq!(action("  parameters: {}\n"), EnforcementAction::Deny);
        assert_eq!(
            action(
                "  enforcementAction: scoped\n  scopedEnforcementActions:\n  - action: warn\n    enforcementPoints: [{name: '*'}]\n"
            ),
            EnforcementAction::Warn
        );
    }
}
