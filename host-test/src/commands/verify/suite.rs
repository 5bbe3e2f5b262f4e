//! The gator Suite format (`test.gatekeeper.sh/v1alpha1`) and reading suites from files and
//! folders, with the files a suite names (template, constraints, objects, inventories).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::outcome::Problem;
use super::{SUITE_GROUP, SUITE_KIND, TEMPLATE_GROUP, TEMPLATE_NAME};
use crate::constraints::constraint::CONSTRAINT_KIND;
use crate::inputs::files::ReadLimit;
use crate::inputs::manifests::ManifestObject;
use crate::inputs::{files, manifests};

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SuiteDocument {
    #[allow(dead_code)]
    pub(super) api_version: String,
    #[allow(dead_code)]
    pub(super) kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    pub(super) metadata: Option<Value>,
    #[serde(default)]
    pub(super) skip: bool,
    #[serde(default)]
    pub(super) tests: Vec<TestDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TestDocument {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) template: String,
    #[serde(default)]
    pub(super) constraint: String,
    #[serde(default)]
    pub(super) expansion: Option<String>,
    #[serde(default)]
    pub(super) invalid: bool,
    #[serde(default)]
    pub(super) skip: bool,
    #[serde(default)]
    pub(super) cases: Vec<CaseDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CaseDocument {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) object: String,
    #[serde(default)]
    pub(super) inventory: Vec<String>,
    #[serde(default)]
    pub(super) skip: bool,
    #[serde(default)]
    pub(super) assertions: Vec<AssertionDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct AssertionDocument {
    #[serde(default)]
    pub(super) violations: Option<Value>,
    #[serde(default)]
    pub(super) message: Option<String>,
}

/// One suite read from a file.
#[derive(Debug)]
pub(super) struct Suite {
    /// The file, as named on the command line or found under a named folder.
    pub(super) path: PathBuf,
    pub(super) document: SuiteDocument,
}

#[derive(Default)]
pub(super) struct FoundSuites {
    pub(super) suites: Vec<Suite>,
    /// Paths or suite files that cannot be read.
    pub(super) errors: Vec<String>,
}

/// Reads the suites under `paths`: named files must hold a Suite; in folders (walked
/// recursively, sorted, hidden folders skipped) `.yaml`/`.yml` files without one are ignored,
/// but a folder must hold at least one.
pub(super) fn find_suites(paths: &[PathBuf], limit: ReadLimit) -> FoundSuites {
    let mut found = FoundSuites::default();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                let (suites_before, errors_before) = (found.suites.len(), found.errors.len());
                let mut files = Vec::new();
                walk(path, &mut files, &mut found.errors);
                for file in files {
                    read_suite_file(&file, false, limit, &mut found);
                }
                // A folder without suites is a wrong path, not a pass with nothing to run.
                if found.suites.len() == suites_before && found.errors.len() == errors_before {
                    found.errors.push(format!(
                        "{}: no {SUITE_GROUP} Suite found (searched recursively for .yaml and \
                         .yml files with apiVersion: {SUITE_GROUP}/v1alpha1, kind: {SUITE_KIND})",
                        path.display()
                    ));
                }
            }
            Ok(_) => read_suite_file(path, true, limit, &mut found),
            Err(error) => found
                .errors
                .push(format!("{}: cannot read: {error}", path.display())),
        }
    }
    found
}

pub(super) fn walk(folder: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<String>) {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) => {
            errors.push(format!("{}: cannot read folder: {error}", folder.display()));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    paths.sort();
    for path in paths {
        let hidden = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'));
        let yaml = path
            .extension()
            .and_then(|extension| extension.to_str())
            .is_some_and(|extension| {
                matches!(extension.to_ascii_lowercase().as_str(), "yaml" | "yml")
            });
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_dir() => {
                if !hidden {
                    walk(&path, files, errors);
                }
            }
            // Regular files only: a FIFO would block the run, a device never end. Neither can
            // be known to hold no suite, so each is an error, not a silent skip.
            Ok(metadata) if yaml => match files::irregular_kind(&metadata) {
                None => files.push(path),
                Some(kind) => errors.push(format!(
                    "{}: not a regular file but {kind}: not read",
                    files::escaped_path(&path)
                )),
            },
            Ok(_) => {}
            // A dangling symlink (or a loop of them) named as a suite could have held one.
            Err(error) if yaml => errors.push(format!(
                "{}: cannot read: {error}",
                files::escaped_path(&path)
            )),
            Err(_) => {}
        }
    }
}

pub(super) fn is_suite(value: &Value) -> bool {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    manifests::split_api_version(api_version).0 == SUITE_GROUP && kind == SUITE_KIND
}

/// Reads the Suites of one file. A file found in a folder that is not YAML, or holds no Suite,
/// is ignored (unless it mentions the suite group: then a syntax error is reported).
pub(super) fn read_suite_file(path: &Path, named: bool, limit: ReadLimit, found: &mut FoundSuites) {
    let display = path.display().to_string();
    let text = match files::read_text(path, limit) {
        Ok(text) => text,
        Err(files::ReadError::NotUtf8(_)) if !named => return,
        Err(error) => {
            found.errors.push(format!("{display}: {error}"));
            return;
        }
    };
    let mut suites = 0;
    for document in manifests::parse_documents(&display, &text) {
        match document {
            Ok((index, _line, value)) if is_suite(&value) => {
                match serde_json::from_value::<SuiteDocument>(value) {
                    Ok(document) => {
                        suites += 1;
                        found.suites.push(Suite {
                            path: path.to_path_buf(),
                            document,
                        });
                    }
                    Err(error) => {
                        suites += 1;
                        found.errors.push(format!(
                            "{display}: document {}: not a valid Suite: {error}",
                            index + 1
                        ));
                    }
                }
            }
            Ok(_) => {}
            Err(error) if named || text.contains(SUITE_GROUP) => {
                suites += 1;
                found.errors.push(error.to_string());
            }
            Err(_) => {}
        }
    }
    if named && suites == 0 {
        found.errors.push(format!(
            "{display}: holds no Suite (apiVersion: {SUITE_GROUP}/v1alpha1, kind: {SUITE_KIND})"
        ));
    }
}

/// `suite_dir/relative`; absolute paths and empty fields are refused, as gator does.
pub(super) fn resolve(suite_dir: &Path, field: &str, relative: &str) -> Result<PathBuf, Problem> {
    if relative.is_empty() {
        return Err(Problem::Broken(format!("missing {field}")));
    }
    if Path::new(relative).is_absolute() {
        return Err(Problem::Broken(format!(
            "{field} path {relative:?} is absolute; paths in a suite are relative to the suite file"
        )));
    }
    Ok(suite_dir.join(relative))
}

/// The template must be meshlife's: the module stands in for exactly that template's Rego.
pub(super) fn check_template(path: &Path, limit: ReadLimit) -> Result<(), Problem> {
    let display = path.display().to_string();
    let text = files::read_text(path, limit)
        .map_err(|error| Problem::Broken(format!("reading template {display}: {error}")))?;
    let mut templates = Vec::new();
    for document in manifests::parse_documents(&display, &text) {
        let (_, _, value) =
            document.map_err(|error| Problem::Broken(format!("reading template {error}")))?;
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "ConstraintTemplate"
            && manifests::split_api_version(api_version).0 == TEMPLATE_GROUP
        {
            templates.push(value);
        }
    }
    let [template] = templates.as_slice() else {
        return Err(Problem::Broken(format!(
            "template {display} must hold exactly one ConstraintTemplate ({TEMPLATE_GROUP}/v1), found {}",
            templates.len()
        )));
    };
    let crd_kind = template
        .pointer("/spec/crd/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if crd_kind != CONSTRAINT_KIND {
        return Err(Problem::Broken(format!(
            "template {display} defines kind {crd_kind:?}; meshlife verify runs only the meshlife ConstraintTemplate \
             (kind {CONSTRAINT_KIND}), whose Rego the meshlife module stands in for"
        )));
    }
    let name = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != TEMPLATE_NAME {
        return Err(Problem::Broken(format!(
            "template {display}: metadata.name is {name:?}; Gatekeeper requires the lowercase kind, {TEMPLATE_NAME:?}"
        )));
    }
    Ok(())
}

/// Every object of a file, or a Broken problem naming the file.
pub(super) fn read_objects(
    path: &Path,
    what: &str,
    limit: ReadLimit,
) -> Result<Vec<ManifestObject>, Problem> {
    let display = path.display().to_string();
    let options = manifests::LoadOptions {
        limit,
        ..manifests::LoadOptions::default()
    };
    let loaded =
        manifests::load_with_progress(std::slice::from_ref(&display), &options, &|_| {}, &|| {});
    if let Some(error) = loaded.errors.first() {
        return Err(Problem::Broken(format!("reading {what} {error}")));
    }
    if loaded.objects.is_empty() {
        return Err(Problem::Broken(format!(
            "{what} {display} defines no objects"
        )));
    }
    Ok(loaded.objects)
}

/// The object under review, and the Namespaces that came with it in the same file.
pub(super) fn read_case_object(
    path: &Path,
    limit: ReadLimit,
) -> Result<(ManifestObject, BTreeMap<String, Value>), Problem> {
    let objects = read_objects(path, "object", limit)?;
    if objects.len() == 1 {
        let object = objects.into_iter().next().expect("one object");
        return Ok((object, BTreeMap::new()));
    }
    let total = objects.len();
    let (namespaces, mut others): (Vec<ManifestObject>, Vec<ManifestObject>) =
        objects.into_iter().partition(ManifestObject::is_namespace);
    if others.len() != 1 {
        return Err(Problem::Broken(format!(
            "object {} defines {total} objects; a case reviews exactly one (Namespaces may accompany it)",
            path.display()
        )));
    }
    Ok((others.remove(0), namespace_map(namespaces)))
}

/// The Namespace objects of an inventory file, by name (other objects are not used).
pub(super) fn read_namespaces(
    path: &Path,
    limit: ReadLimit,
) -> Result<BTreeMap<String, Value>, Problem> {
    Ok(namespace_map(
        read_objects(path, "inventory", limit)?
            .into_iter()
            .filter(ManifestObject::is_namespace)
            .collect(),
    ))
}

pub(super) fn namespace_map(objects: Vec<ManifestObject>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .filter(|object| !object.identity.name.is_empty())
        .map(|object| (object.identity.name, object.object.value()))
        .collect()
}
