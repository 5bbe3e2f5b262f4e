//! A constraint's `spec.match`: kinds, scope, namespaces (with wildcards), excluded namespaces,
//! label and namespace selectors, decided for one object as Gatekeeper decides it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use crate::constraints::fields::{FieldError, KindsDocument, mapping, typed_field};
use crate::constraints::selectors::{Selector, Wildcard};
use crate::inputs::manifests;
use crate::inputs::manifests::ManifestObject;

/// `spec.match`, validated.
#[derive(Clone, Debug, Default)]
pub struct Match {
    pub(super) kinds: Vec<KindsMatcher>,
    pub(super) scope: Scope,
    pub(super) namespaces: Vec<Wildcard>,
    pub(super) excluded_namespaces: Vec<Wildcard>,
    pub(super) label_selector: Option<Selector>,
    pub(super) namespace_selector: Option<Selector>,
    pub(super) name: Option<Wildcard>,
}

#[derive(Clone, Debug)]
pub(super) struct KindsMatcher {
    pub(super) api_groups: Vec<String>,
    pub(super) kinds: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Scope {
    #[default]
    All,
    Cluster,
    Namespaced,
}

impl Match {
    pub(super) fn from_fields(fields: &Map<String, Value>) -> Result<Match, FieldError> {
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

    /// Whether deciding a match needs the object's Namespace labels.
    pub fn has_namespace_selector(&self) -> bool {
        self.namespace_selector.is_some()
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

    pub(super) fn kinds_match(&self, object: &ManifestObject) -> bool {
        if self.kinds.is_empty() {
            return true;
        }
        self.kinds.iter().any(|entry| {
            let kind_matches = entry.kinds.is_empty()
                || entry
                    .kinds
                    .iter()
                    .any(|kind| kind == "*" || *kind == object.identity.kind);
            let group_matches = entry.api_groups.is_empty()
                || entry
                    .api_groups
                    .iter()
                    .any(|group| group == "*" || group == object.group());
            kind_matches && group_matches
        })
    }

    pub(super) fn scope_match(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> bool {
        let has_namespace = !object.identity.namespace.is_empty() || namespace_object.is_some();
        let is_namespace = object.is_namespace();
        match self.scope {
            Scope::All => true,
            Scope::Cluster => is_namespace || !has_namespace,
            Scope::Namespaced => !is_namespace && has_namespace,
        }
    }

    /// The namespace the namespace matchers look at: a Namespace's own name, else the object's
    /// namespace; `None` for cluster-scoped objects, which namespace matchers never exclude.
    pub(super) fn namespace_of<'a>(
        object: &'a ManifestObject,
        namespace_object: Option<&'a Value>,
    ) -> Option<&'a str> {
        if object.is_namespace() {
            return Some(&object.identity.name);
        }
        if let Some(name) = namespace_object
            .and_then(|namespace| namespace.pointer("/metadata/name"))
            .and_then(Value::as_str)
        {
            return Some(name);
        }
        (!object.identity.namespace.is_empty()).then_some(object.identity.namespace.as_str())
    }

    pub(super) fn namespaces_match(
        &self,
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> bool {
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

    pub(super) fn excluded_namespaces_match(
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

    pub(super) fn label_selector_match(&self, object: &ManifestObject) -> bool {
        self.label_selector
            .as_ref()
            .is_none_or(|selector| selector.matches(&object.labels()))
    }

    pub(super) fn namespace_selector_match(
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
            None if object.identity.namespace.is_empty() => Ok(true),
            None => Err(format!(
                "constraint's spec.match.namespaceSelector needs the labels of namespace {:?}, which is not in the input; \
                 add its Namespace manifest to the checked files",
                object.identity.namespace
            )),
        }
    }

    pub(super) fn name_match(&self, object: &ManifestObject) -> bool {
        self.name
            .as_ref()
            .is_none_or(|pattern| pattern.matches(&object.identity.name))
    }
}
