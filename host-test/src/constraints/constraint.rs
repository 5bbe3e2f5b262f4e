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

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::constraints::fields::{FieldError, mapping, typed_field};
use crate::constraints::matching::Match;
use crate::inputs::manifests::{self, ManifestObject};
use crate::module::engine::Engine;

pub const CONSTRAINT_GROUP: &str = "constraints.gatekeeper.sh";
pub const CONSTRAINT_KIND: &str = "MeshLifecycle";
/// Versions Gatekeeper serves for constraints; v1beta1 is the one to write.
pub(super) const CONSTRAINT_VERSIONS: [&str; 3] = ["v1beta1", "v1", "v1alpha1"];

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

/// The `file` of a constraint made of command-line facts: how its findings name their source.
pub const FACTS_SOURCE: &str = "(command-line facts)";

impl Constraint {
    /// Its name and where it came from, for sentences about it.
    pub fn title(&self) -> String {
        if self.file.is_empty() || self.file == FACTS_SOURCE {
            format!("{} (from the command-line facts)", self.name)
        } else {
            format!("{} ({})", self.name, self.file)
        }
    }

    /// The built-in constraint: parameter defaults, everything matched, findings deny. `serve`
    /// judges under it when no constraint is configured; `check` gives it today's parameters.
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

    pub(super) fn error(&self, field: Option<&str>, message: String) -> ConstraintError {
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
pub(super) const SPEC_KEYS: [&str; 4] = [
    "match",
    "parameters",
    "enforcementAction",
    "scopedEnforcementActions",
];
pub(super) const MATCH_KEYS: [&str; 8] = [
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
pub(super) struct ScopedEnforcementAction {
    pub(super) action: String,
    #[serde(default)]
    pub(super) enforcement_points: Vec<EnforcementPoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnforcementPoint {
    pub(super) name: String,
}

pub(super) fn parse_constraint(
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
pub(super) fn enforcement_action(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraints::selectors::Wildcard;
    use crate::inputs::manifests::ObjectIdentity;

    fn object(
        kind: &str,
        api_version: &str,
        namespace: &str,
        name: &str,
        labels: Value,
    ) -> ManifestObject {
        ManifestObject {
            identity: ObjectIdentity {
                file: "f.yaml".into(),
                document: 0,
                item: None,
                inner_items: Vec::new(),
                line: 1,
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: namespace.into(),
                name: name.into(),
            },
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
