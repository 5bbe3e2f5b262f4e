//! Reading Kubernetes manifests: files, folders, stdin; multi-document YAML, JSON, Lists and
//! AdmissionReviews, into objects that each know where they came from.
//!
//! Nothing is lost: a document that cannot be read becomes an [`InputError`] naming the file,
//! the document and (where the parser knows it) the line or field, and every other document and
//! file is still read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rayon::prelude::*;
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

mod body;
mod nesting;
pub mod render;
mod values;

pub use body::ObjectBody;

use crate::inputs::files::{self, ReadLimit};

/// Documents of one stream parsed in parallel before their results are merged.
const DOCUMENTS_PARSED_TOGETHER: usize = 4096;

/// What `-` on the command line reads, and how it is named in reports.
pub const STDIN_NAME: &str = "<stdin>";

/// One Kubernetes object from the input, with its origin.
#[derive(Clone, Debug)]
pub struct ManifestObject {
    /// The file as named on the command line (or found under a named folder), or `<stdin>`.
    pub file: String,
    /// 0-based document index within the file (reports show it 1-based: `document 1`).
    pub document: usize,
    /// 0-based index in the `items` of a List, when the object came from one (shown 1-based).
    pub item: Option<usize>,
    /// 0-based indexes in the Lists nested inside that item, outermost first (`document 1,
    /// item 2, item 1`); empty for an object of a List that is not nested.
    pub inner_items: Vec<usize>,
    /// 1-based line of the first key of the object's document (not its `---`), for reports
    /// that point at lines; for a List item, the List's.
    pub line: usize,
    pub api_version: String,
    pub kind: String,
    /// `metadata.namespace`, empty when the object does not name one.
    pub namespace: String,
    /// `metadata.name` (or `generateName` when there is no name), empty when neither is set.
    pub name: String,
    pub object: ObjectBody,
    /// The `request` of an AdmissionReview, used as the review instead of a synthesised one.
    pub admission_request: Option<ObjectBody>,
}

impl ManifestObject {
    /// The API group: `apps` for `apps/v1`, empty for the core group (`v1`).
    pub fn group(&self) -> &str {
        split_api_version(&self.api_version).0
    }

    pub fn version(&self) -> &str {
        split_api_version(&self.api_version).1
    }

    /// Whether the policy reviews this kind's pod specs (its own definition, not a copy).
    pub fn is_reviewed_kind(&self) -> bool {
        meshlife_policy::workload::WorkloadKind::of(&self.kind, Some(&self.api_version)).is_some()
    }

    pub fn is_namespace(&self) -> bool {
        self.kind == "Namespace" && self.group().is_empty()
    }

    /// `metadata.labels`, ignoring values that are not strings (the policy reports those).
    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.object.pointer("/metadata/labels").as_ref())
    }

    /// `Kind namespace/name`, or `Kind name` for objects without a namespace.
    pub fn display_name(&self) -> String {
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        if self.namespace.is_empty() {
            format!("{} {name}", self.kind)
        } else {
            format!("{} {}/{name}", self.kind, self.namespace)
        }
    }

    /// `document 2` or `document 2, item 5` (`, item 1` more per nested List), counted from 1
    /// as people count.
    pub fn location(&self) -> String {
        format!(
            "document {}{}",
            self.document + 1,
            item_text(self.item, &self.inner_items)
        )
    }

    /// `file: document N: Kind ns/name`, for notes that list objects.
    pub fn listing(&self) -> String {
        format!(
            "{}: {}: {}",
            self.file,
            self.location(),
            self.display_name()
        )
    }

    /// An error about this object, placed at its document (and `field`, when one is to blame).
    pub fn error(&self, field: Option<&str>, message: String) -> InputError {
        InputError {
            file: self.file.clone(),
            document: Some(self.document),
            item: self.item,
            inner_items: self.inner_items.clone(),
            line: Some(self.line),
            field: field.map(str::to_string),
            message: format!("{}: {message}", self.display_name()),
        }
    }

    /// An object as the reader would make it from `value`, for unit tests of what reads objects.
    #[cfg(test)]
    pub(crate) fn for_test(
        file: &str,
        kind: &str,
        namespace: &str,
        value: Value,
    ) -> ManifestObject {
        let api_version = match kind {
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps/v1",
            _ => "v1",
        };
        let (_, name) = namespace_and_name(&value);
        ManifestObject {
            file: file.into(),
            document: 0,
            item: None,
            inner_items: Vec::new(),
            line: 1,
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name,
            object: ObjectBody::new(&value),
            admission_request: None,
        }
    }

    /// The Gatekeeper-shaped review for this object (`input.review`), with `namespaceObject`
    /// when the input holds the object's Namespace.
    pub fn review<'a>(&'a self, namespace_object: Option<&'a Value>) -> Review<'a> {
        if let Some(request) = &self.admission_request {
            let Some(namespace) = namespace_object else {
                return Review::Sent(request);
            };
            let mut review = request.value();
            if let Some(fields) = review.as_object_mut() {
                fields
                    .entry("namespaceObject")
                    .or_insert_with(|| namespace.clone());
            }
            return Review::SentWithNamespace(review);
        }
        Review::Made(MadeReview {
            kind: ReviewKind {
                group: self.group(),
                version: self.version(),
                kind: &self.kind,
            },
            name: &self.name,
            namespace: &self.namespace,
            operation: "CREATE",
            object: &self.object,
            namespace_object,
        })
    }
}

/// `input.review`: an AdmissionReview's request, or one made for a manifest. Serialised
/// straight into the module's input, the object's text spliced in unparsed.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Review<'a> {
    Sent(&'a ObjectBody),
    SentWithNamespace(Value),
    Made(MadeReview<'a>),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MadeReview<'a> {
    kind: ReviewKind<'a>,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    operation: &'a str,
    object: &'a ObjectBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_object: Option<&'a Value>,
}

#[derive(Debug, Serialize)]
struct ReviewKind<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

/// A document or file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub document: Option<usize>,
    pub item: Option<usize>,
    /// Indexes in nested Lists, as [`ManifestObject::inner_items`].
    pub inner_items: Vec<usize>,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// The offending field (`kind`, `items`, `request`, ...), when the problem is one field.
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn file(file: &str, message: impl Into<String>) -> InputError {
        InputError {
            file: file.into(),
            document: None,
            item: None,
            inner_items: Vec::new(),
            line: None,
            field: None,
            message: message.into(),
        }
    }

    fn document(
        file: &str,
        document: usize,
        line: usize,
        message: impl Into<String>,
    ) -> InputError {
        InputError {
            file: file.into(),
            document: Some(document),
            item: None,
            inner_items: Vec::new(),
            line: Some(line),
            field: None,
            message: message.into(),
        }
    }

    fn with_field(mut self, field: impl Into<String>) -> InputError {
        self.field = Some(field.into());
        self
    }

    fn with_item(mut self, item: Option<usize>) -> InputError {
        self.item = item;
        self
    }

    fn with_items(mut self, items: &[usize]) -> InputError {
        if let Some((&item, inner)) = items.split_first() {
            self.item = Some(item);
            self.inner_items = inner.to_vec();
        }
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.file)?;
        // Indexes are 0-based, the numbers people read 1-based.
        if let Some(document) = self.document {
            write!(formatter, ": document {}", document + 1)?;
        }
        write!(formatter, "{}", item_text(self.item, &self.inner_items))?;
        if let Some(line) = self.line {
            write!(formatter, " (line {line})")?;
        }
        if let Some(field) = &self.field {
            write!(formatter, ": field `{field}`")?;
        }
        write!(formatter, ": {}", self.message)
    }
}

/// `, item 2, item 1` for an object of a List (and of the Lists nested in it), counted from 1.
pub fn item_text(item: Option<usize>, inner_items: &[usize]) -> String {
    item.iter()
        .chain(inner_items)
        .map(|index| format!(", item {}", index + 1))
        .collect()
}

/// Why stdin was skipped when nothing at all came through the pipe.
pub const EMPTY_STDIN: &str = "no document on stdin (did the command before the pipe fail?)";

/// A file or document that was read but holds nothing to judge: a template to render first,
/// or YAML that is not a Kubernetes object (`values.yaml`, a compose file). Listed, never
/// silent; `--strict` makes each an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    /// `None` when the whole file is skipped.
    pub document: Option<usize>,
    pub line: Option<usize>,
    pub reason: String,
}

impl Skipped {
    pub fn into_error(self) -> InputError {
        InputError {
            file: self.file,
            document: self.document,
            item: None,
            inner_items: Vec::new(),
            line: self.line,
            field: None,
            message: self.reason,
        }
    }
}

/// Said the way an input error is, so a skipped input and its `--strict` error read alike.
impl fmt::Display for Skipped {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.clone().into_error().fmt(formatter)
    }
}

/// What the walk leaves out, beyond hidden files and non-manifest extensions, and how much
/// one file may hold.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// `--exclude` globs, gitignore syntax, relative to each folder named on the command line.
    pub exclude: Vec<String>,
    /// The cap on each file and on stdin (`--max-file-size`).
    pub limit: ReadLimit,
}

/// The file, in any walked folder or the folders above it, whose gitignore-style lines name
/// what `meshlife check` never reads there.
pub const IGNORE_FILE: &str = ".meshlifeignore";

/// Everything read from the command line's paths.
#[derive(Debug, Default)]
pub struct LoadedInputs {
    pub objects: Vec<ManifestObject>,
    pub errors: Vec<InputError>,
    pub skipped: Vec<Skipped>,
    /// Files read, in order (stdin counts as one).
    pub files: Vec<String>,
    /// Folders that held no manifest file at all, so the caller can say so.
    pub empty_folders: Vec<String>,
    /// What a walk did not follow although nothing of a manifest was lost (a symlink back to a
    /// folder being read, a dangling symlink whose name is not a manifest's), for `note:` lines.
    pub notes: Vec<String>,
}

impl LoadedInputs {
    /// Namespace objects of the input by name: the `namespaceObject` of objects in them.
    pub fn namespaces(&self) -> BTreeMap<String, Value> {
        self.objects
            .iter()
            .filter(|object| object.is_namespace() && !object.name.is_empty())
            .map(|object| (object.name.clone(), object.object.value()))
            .collect()
    }
}

/// One file's worth of results, so files can be parsed in parallel and merged in order.
#[derive(Default)]
struct FileContents {
    objects: Vec<ManifestObject>,
    errors: Vec<InputError>,
    skipped: Vec<Skipped>,
    /// What was done to read it (a folder rendered by kustomize), for `note:` lines.
    notes: Vec<String>,
}

/// A file to read; `Stdin` for `-`; a folder to render first (Kustomize, a Helm chart).
enum InputFile {
    Path(PathBuf),
    Stdin,
    Render(PathBuf, render::Source),
}

/// Reads every path: `-` is stdin, folders are walked recursively for `.yaml`, `.yml` and
/// `.json` files (hidden folders such as `.git` and `.github` are skipped), files named
/// explicitly are read whatever their extension. Files are parsed in parallel.
pub fn load(paths: &[String]) -> LoadedInputs {
    load_with_progress(paths, &LoadOptions::default(), &|_| {}, &|| {})
}

/// [`load`] with options and progress hooks: `on_files` gets the number of files once they
/// are known, `on_file_done` runs after each file is parsed.
pub fn load_with_progress(
    paths: &[String],
    options: &LoadOptions,
    on_files: &dyn Fn(usize),
    on_file_done: &(dyn Fn() + Sync),
) -> LoadedInputs {
    let mut loaded = LoadedInputs::default();
    let mut files = Vec::new();
    let mut stdin_seen = false;
    for path in paths {
        if path == "-" {
            if !stdin_seen {
                files.push(InputFile::Stdin);
                stdin_seen = true;
            }
            continue;
        }
        let path_buf = PathBuf::from(path);
        match std::fs::metadata(&path_buf) {
            Ok(metadata) if metadata.is_dir() && render::Source::of(&path_buf).is_some() => {
                let source = render::Source::of(&path_buf).expect("asked just above");
                files.push(InputFile::Render(path_buf, source));
            }
            Ok(metadata) if metadata.is_dir() => {
                let before = (files.len(), loaded.errors.len(), loaded.skipped.len());
                walk_folder(&path_buf, &options.exclude, &mut files, &mut loaded);
                // Only a folder where nothing was found at all: an unreadable or skipped entry
                // has been said already, and "no files found" would contradict it.
                if (files.len(), loaded.errors.len(), loaded.skipped.len()) == before {
                    loaded.empty_folders.push(path.clone());
                }
            }
            Ok(_) => files.push(InputFile::Path(path_buf)),
            Err(error) => loaded
                .errors
                .push(InputError::file(path, format!("cannot read: {error}"))),
        }
    }
    on_files(files.len());

    let contents: Vec<(String, FileContents)> = files
        .par_iter()
        .map(|file| {
            let parsed = match file {
                InputFile::Stdin => {
                    let text = files::read_stdin(options.limit).and_then(|bytes| {
                        String::from_utf8(bytes).map_err(files::ReadError::NotUtf8)
                    });
                    let contents = match text {
                        Ok(text) => parse_text(STDIN_NAME, &text, false),
                        Err(error) => FileContents {
                            errors: vec![InputError::file(STDIN_NAME, error.to_string())],
                            ..FileContents::default()
                        },
                    };
                    (STDIN_NAME.to_string(), contents)
                }
                InputFile::Path(path) => {
                    let name = path.display().to_string();
                    let contents = read_file(path, &name, options.limit);
                    (name, contents)
                }
                InputFile::Render(folder, source) => render_folder(folder, *source, options.limit),
            };
            on_file_done();
            parsed
        })
        .collect();
    for (name, mut contents) in contents {
        if contents.objects.is_empty() && contents.errors.is_empty() && contents.skipped.is_empty()
        {
            contents.skipped.push(Skipped {
                reason: if name == STDIN_NAME {
                    EMPTY_STDIN.into()
                } else {
                    "no document in the file (empty, or only comments and `---`)".into()
                },
                file: name.clone(),
                document: None,
                line: None,
            });
        }
        loaded.files.push(name);
        // One long stream is the case that counts: its objects are taken, not copied.
        if loaded.objects.is_empty() {
            loaded.objects = contents.objects;
        } else {
            loaded.objects.extend(contents.objects);
        }
        loaded.errors.extend(contents.errors);
        loaded.skipped.extend(contents.skipped);
        loaded.notes.extend(contents.notes);
    }
    loaded
}

/// A Kustomize folder or Helm chart: its rendering, parsed as a stream named by the command, or
/// the folder skipped (no renderer on the PATH, or it refused the folder alone: a chart that
/// needs values), or an error (the renderer could not run, ran too long, printed too much).
fn render_folder(
    folder: &Path,
    source: render::Source,
    limit: ReadLimit,
) -> (String, FileContents) {
    let name = folder.display().to_string();
    match render::render(source, &name, limit.max.bytes()) {
        render::Outcome::Rendered(rendered) => {
            let mut contents = parse_text(&rendered.name, &rendered.text, false);
            contents.notes.push(rendered.note);
            (rendered.name, contents)
        }
        outcome @ (render::Outcome::NoTool | render::Outcome::Refused(_)) => {
            let reason = match outcome {
                render::Outcome::Refused(said) => said,
                _ => source.skip_reason(&name),
            };
            let contents = FileContents {
                skipped: vec![Skipped {
                    file: name.clone(),
                    document: None,
                    line: None,
                    reason,
                }],
                ..FileContents::default()
            };
            (name, contents)
        }
        render::Outcome::Failed(error) => {
            let contents = FileContents {
                errors: vec![InputError::file(&name, error)],
                ..FileContents::default()
            };
            (name, contents)
        }
    }
}

/// Walks `folder` for manifest files, in sorted order: hidden files and folders (`.git`,
/// `.github`) are skipped, symlinked folders are followed (each real folder once),
/// `.meshlifeignore` files in the folder, below it and above it apply, and so do `exclude`.
/// Only regular files (or symlinks to one) are yielded; every entry with a manifest's name that
/// is not read is said: a FIFO or device is skipped, a dangling symlink, a loop of symlinks or
/// a name that is not UTF-8 is an error.
fn walk_folder(
    folder: &Path,
    exclude: &[String],
    files: &mut Vec<InputFile>,
    loaded: &mut LoadedInputs,
) {
    let errors = &mut loaded.errors;
    let mut overrides = ignore::overrides::OverrideBuilder::new(folder);
    for glob in exclude {
        // An override glob selects; its negation excludes, leaving every other file alone.
        if let Err(error) = overrides.add(&format!("!{glob}")) {
            errors.push(InputError::file(
                &folder.display().to_string(),
                format!("--exclude {glob:?} is not a valid glob: {error}"),
            ));
            return;
        }
    }
    let overrides = match overrides.build() {
        Ok(overrides) => overrides,
        Err(error) => {
            errors.push(InputError::file(
                &folder.display().to_string(),
                format!("--exclude: {error}"),
            ));
            return;
        }
    };
    // Kustomize folders and Helm charts below are rendered, not walked: their files are not
    // what gets applied.
    let to_render: std::sync::Arc<std::sync::Mutex<Vec<(PathBuf, render::Source)>>> =
        Default::default();
    let found = std::sync::Arc::clone(&to_render);
    let walker = ignore::WalkBuilder::new(folder)
        .standard_filters(false)
        .hidden(true)
        .parents(true)
        .add_custom_ignore_filename(IGNORE_FILE)
        .follow_links(true)
        .overrides(overrides)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
            match render::Source::of(entry.path()).filter(|_| is_dir && entry.depth() > 0) {
                Some(source) => {
                    if let Ok(mut found) = found.lock() {
                        found.push((entry.path().to_path_buf(), source));
                    }
                    false
                }
                None => true,
            }
        })
        .build();
    for entry in walker {
        match entry {
            Ok(entry) => {
                let path = entry.path();
                let Some(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() || !has_manifest_extension(path) {
                    continue;
                }
                if path.to_str().is_none() {
                    // Reports name files as UTF-8 strings (JSON, SARIF, CI annotations); a name
                    // shown escaped would point at no file, so the file is not read but said.
                    loaded.errors.push(InputError::file(
                        &files::escaped_path(path),
                        "not read: the file's path is not UTF-8 (shown with \\x escapes), so \
                         reports could not name it; rename it",
                    ));
                } else if kind.is_file() {
                    files.push(InputFile::Path(path.to_path_buf()));
                } else {
                    // A FIFO would block the run, a device such as /dev/zero never ends.
                    let what = entry
                        .metadata()
                        .ok()
                        .and_then(|metadata| files::irregular_kind(&metadata))
                        .unwrap_or("not a file");
                    loaded.skipped.push(Skipped {
                        file: path.display().to_string(),
                        document: None,
                        line: None,
                        reason: format!(
                            "not a regular file but {what}: a folder's files are read only when \
                             they are regular files (or symlinks to one)"
                        ),
                    });
                }
            }
            // A symlink back up the tree: that folder is already being read, nothing is lost.
            Err(error) if is_loop(&error) => {
                let path = loop_link(&error).unwrap_or(folder);
                loaded.notes.push(format!(
                    "{}: not followed: a symlink to a folder above it, which is read already",
                    files::escaped_path(path)
                ));
            }
            Err(error) => match error_path(&error).and_then(unfollowable_symlink) {
                Some((path, why)) if has_manifest_extension(path) => loaded
                    .errors
                    .push(InputError::file(&files::escaped_path(path), why)),
                // Not a manifest's name: it may have been a folder, or a README; said, since
                // its target cannot be told.
                Some((path, why)) => loaded
                    .notes
                    .push(format!("{}: {why}", files::escaped_path(path))),
                None => {
                    let path = error_path(&error).unwrap_or(folder);
                    loaded.errors.push(InputError::file(
                        &files::escaped_path(path),
                        format!("cannot read: {}", error_text(&error)),
                    ));
                }
            },
        }
    }
    let mut to_render = to_render
        .lock()
        .map(|found| found.clone())
        .unwrap_or_default();
    to_render.sort();
    files.extend(
        to_render
            .into_iter()
            .map(|(path, source)| InputFile::Render(path, source)),
    );
}

/// For a symlink that cannot be followed (it points at nothing, or at itself through other
/// links), the path and why in words; `None` for every other unreadable entry.
fn unfollowable_symlink(path: &Path) -> Option<(&Path, String)> {
    if !std::fs::symlink_metadata(path)
        .ok()?
        .file_type()
        .is_symlink()
    {
        return None;
    }
    let target = std::fs::read_link(path)
        .map(|target| files::escaped_path(&target))
        .unwrap_or_default();
    let why = match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            format!("not read: a symlink to {target}, which does not exist")
        }
        Err(error) => format!("not read: a symlink that cannot be followed ({error})"),
        // Followable now: it changed during the walk; the walker's error stands.
        Ok(_) => return None,
    };
    Some((path, why))
}

fn is_loop(error: &ignore::Error) -> bool {
    match error {
        ignore::Error::Loop { .. } => true,
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => is_loop(err),
        _ => false,
    }
}

/// The symlink of a loop (the walker's `child`), not the folder it leads back to.
fn loop_link(error: &ignore::Error) -> Option<&Path> {
    match error {
        ignore::Error::Loop { child, .. } => Some(child),
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => {
            loop_link(err)
        }
        _ => None,
    }
}

fn error_path(error: &ignore::Error) -> Option<&Path> {
    match error {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } => error_path(err),
        _ => None,
    }
}

/// The walker's message without the path it prefixes (the report names the path).
fn error_text(error: &ignore::Error) -> String {
    match error {
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => {
            error_text(err)
        }
        other => other.to_string(),
    }
}

/// `.yaml`, `.yml` and `.json` files only: an allow-list, so templates (`.j2`, `.tmpl`),
/// switched-off copies (`.disabled`, `.bak`), examples (`.example`) and generated files such
/// as Istio's `hello.yaml.injected` are never read from a folder. Named on the command line,
/// any file is read.
fn has_manifest_extension(path: &Path) -> bool {
    // Asked of the name's bytes, so a name that is not UTF-8 is still known as a manifest's
    // (and said, not skipped in silence).
    let Some(name) = path.file_name() else {
        return false;
    };
    // Hidden files, like hidden folders, are not manifests.
    if name.as_encoded_bytes().starts_with(b".") {
        return false;
    }
    Path::new(name)
        .extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| {
            ["yaml", "yml", "json"]
                .iter()
                .any(|allowed| extension.eq_ignore_ascii_case(allowed))
        })
}

#[cfg(test)]
mod manifest_extension_tests {
    use super::has_manifest_extension;
    use std::path::Path;

    #[test]
    fn reads_yaml_and_json_files_only() {
        for name in ["a.yaml", "a.YML", "a.json", "values.prod.yaml"] {
            assert!(has_manifest_extension(Path::new(name)), "{name}");
        }
        for name in [
            "a.txt",
            "README.md",
            "deploy.yaml.bak",
            "yaml",
            "a.json.orig",
            ".yaml",
            "hello.yaml.injected",
            "deploy.yaml.j2",
            "deploy.yaml.tmpl",
            "deploy.yaml.disabled",
            "deploy.yaml.example",
        ] {
            assert!(!has_manifest_extension(Path::new(name)), "{name}");
        }
    }
}

fn read_file(path: &Path, name: &str, limit: ReadLimit) -> FileContents {
    // Regular files only, capped: a FIFO or /dev/zero named on the command line is refused.
    let text = match files::read_text(path, limit) {
        Ok(text) => text,
        Err(error) => {
            return FileContents {
                errors: vec![InputError::file(name, error.to_string())],
                ..Default::default()
            };
        }
    };
    let is_json = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"));
    parse_text(name, &text, is_json)
}

/// Parses a whole file (or stdin). JSON files may hold several concatenated values.
fn parse_text(file: &str, text: &str, is_json: bool) -> FileContents {
    let mut contents = FileContents::default();
    // A UTF-8 byte order mark is legal in both formats but neither parser skips it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_json {
        parse_json_stream(file, text, &mut contents);
    } else {
        // Documents are parsed in parallel: one rendered stream on stdin (a whole Helm
        // release) would otherwise keep every core but one idle. A chunk at a time, merged in
        // document order: each document's results, held for all of a long stream before the
        // merge, were most of the reader's memory.
        let documents = split_yaml_documents(text);
        // Mostly one object per document: room for them all at once, not by doubling, which
        // held up to three times the objects' size while the array moved.
        contents.objects.reserve_exact(documents.len());
        for chunk in documents.chunks(DOCUMENTS_PARSED_TOGETHER) {
            let parsed: Vec<FileContents> = chunk
                .par_iter()
                .map(|document| {
                    let mut parsed = FileContents::default();
                    match parse_yaml_document(document) {
                        // A document that parses is a chart's template only when a one-line
                        // string holds a Helm expression (`name: "{{ .Release.Name }}-x"`);
                        // Argo's quoted `"{{inputs.parameters.x}}"` is a value.
                        Ok(Some(value))
                            if document.text.contains("{{") && holds_helm_expression(&value) =>
                        {
                            let line = document
                                .text
                                .lines()
                                .position(has_helm_expression)
                                .map_or(document.first_line, |index| {
                                    document.text_first_line + index
                                });
                            parsed
                                .skipped
                                .push(template_skip(file, Some(document.index), line));
                        }
                        Ok(Some(value)) => add_document(
                            file,
                            document.index,
                            document.first_line,
                            value,
                            &mut parsed,
                        ),
                        Ok(None) => {}
                        // A template rarely parses (`image: {{ .Values.image }}`, `{{- if }}`
                        // lines): that document is skipped, the others of the file judged.
                        Err(error) => match template_directive_line(&document.text)
                            .or_else(|| template_expression_line(&document.text))
                        {
                            Some(index) => parsed.skipped.push(template_skip(
                                file,
                                Some(document.index),
                                document.text_first_line + index - 1,
                            )),
                            None => parsed.errors.push(document_error(file, document, &error)),
                        },
                    }
                    parsed
                })
                .collect();
            for document in parsed {
                contents.objects.extend(document.objects);
                contents.errors.extend(document.errors);
                contents.skipped.extend(document.skipped);
            }
        }
        contents.objects.shrink_to_fit();
    }
    contents
}

fn template_skip(file: &str, document: Option<usize>, line: usize) -> Skipped {
    Skipped {
        file: file.into(),
        document,
        line: Some(line),
        reason: "a Helm or Jinja template, not a manifest: render it first (`helm template \
                 CHART | meshlife check -`, or your templating tool's output)"
            .into(),
    }
}

/// Helm's own objects and functions inside `{{ }}`: an expression using one is a chart's, not a
/// value a manifest carries (alerting rules' `{{ $labels.x }}`, Argo's `{{inputs.parameters.x}}`).
const HELM_MARKERS: [&str; 8] = [
    ".Values",
    ".Release.",
    ".Chart.",
    ".Capabilities.",
    ".Files.",
    "include \"",
    "toYaml",
    "template \"",
];

fn has_helm_expression(text: &str) -> bool {
    text.split("{{").skip(1).any(|expression| {
        let expression = expression.split("}}").next().unwrap_or("");
        HELM_MARKERS
            .iter()
            .any(|marker| expression.contains(marker))
    })
}

/// A document that parsed but still is a chart's template: a one-line string of it holds a Helm
/// expression (`name: "{{ .Release.Name }}-migrate"`). Multi-line strings are data (an
/// IstioOperator's or a ConfigMap's own templates) and are left alone.
fn holds_helm_expression(value: &Value) -> bool {
    match value {
        Value::String(text) => !text.contains('\n') && has_helm_expression(text),
        Value::Array(items) => items.iter().any(holds_helm_expression),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| has_helm_expression(key) || holds_helm_expression(value)),
        _ => false,
    }
}

/// The first line that is a template directive on its own (`{{- if .Values.x }}`, `{% for %}`),
/// asked only of files that do not parse (inside a block scalar such a line is data).
fn template_directive_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.starts_with("{{") || line.starts_with("{%") || line.starts_with("{#")
        })
        .map(|index| index + 1)
}

/// The first line with a template expression outside quotes; asked only of documents that do
/// not parse, since valid manifests carry `{{ }}` in quoted strings too (alerting rules, Argo
/// workflows' `"{{inputs.parameters.x}}"`).
fn template_expression_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = unquoted(line.trim_start());
            !line.starts_with('#')
                && ((line.contains("{{") && line.contains("}}"))
                    || (line.contains("{%") && line.contains("%}")))
        })
        .map(|index| index + 1)
}

/// A line with its single- and double-quoted strings removed.
fn unquoted(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for character in line.chars() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if character == '\\' => escaped = true,
            Some(open) if character == open => quote = None,
            Some(_) => {}
            None if character == '"' || character == '\'' => quote = Some(character),
            None => out.push(character),
        }
    }
    out
}

fn parse_json_stream(file: &str, text: &str, contents: &mut FileContents) {
    // Nothing left from another file read on this thread.
    values::take_problem();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<values::Checked>();
    let mut index = 0;
    // Lines are counted from the previous document on, so a long stream stays linear.
    let mut counted = LineCounter::default();
    loop {
        let start = stream.byte_offset();
        let first_line = counted.line_at(text, first_key(text, skip_whitespace(text, start)));
        match stream.next() {
            None => break,
            Some(Ok(values::Checked(value))) => {
                add_document(file, index, first_line, value, contents)
            }
            Some(Err(error)) => {
                // After an error the rest of the stream cannot be resynchronised.
                let error = match values::take_problem() {
                    Some(problem) => InputError {
                        line: Some(error.line()),
                        ..InputError::document(file, index, first_line, problem.message)
                    }
                    .with_field(problem.field),
                    None => InputError {
                        line: Some(error.line()),
                        ..InputError::document(
                            file,
                            index,
                            first_line,
                            format!("invalid JSON: {error}"),
                        )
                    },
                };
                contents.errors.push(error);
                break;
            }
        }
        index += 1;
    }
}

/// Where the first key of the JSON object at `offset` is (the `{` itself when it has none,
/// `offset` when it is not an object), so that reports point at the object's first key.
fn first_key(text: &str, offset: usize) -> usize {
    if !text[offset..].starts_with('{') {
        return offset;
    }
    let key = skip_whitespace(text, offset + 1);
    if text[key..].starts_with('"') {
        key
    } else {
        offset
    }
}

fn skip_whitespace(text: &str, offset: usize) -> usize {
    text[offset..]
        .find(|character: char| !character.is_whitespace())
        .map_or(text.len(), |skip| offset + skip)
}

/// 1-based line numbers of increasing offsets, counting each newline once.
#[derive(Default)]
struct LineCounter {
    offset: usize,
    newlines: usize,
}

impl LineCounter {
    fn line_at(&mut self, text: &str, offset: usize) -> usize {
        let offset = offset.min(text.len());
        if offset >= self.offset {
            self.newlines += text.as_bytes()[self.offset..offset]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.offset = offset;
            self.newlines + 1
        } else {
            line_of_offset(text, offset)
        }
    }
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count()
        + 1
}

/// One YAML document's text and where it sits in the file.
struct YamlDocument<'a> {
    index: usize,
    /// 1-based line of the document's first key: its first line that is not blank, a comment
    /// or a directive (the `---` line itself when the content starts on it, `--- kind: Pod`);
    /// the `---` line for an empty document.
    first_line: usize,
    /// 1-based file line of `text`'s first line, to translate parser line numbers.
    text_first_line: usize,
    text: std::borrow::Cow<'a, str>,
}

/// Splits a YAML stream at its document markers, so that one broken document does not hide
/// the others (a YAML parser gives up on the rest of the stream after a syntax error).
/// `---` and `...` at column 0 are always markers: the YAML spec forbids them inside scalars.
/// Document numbering matches a YAML parser's: explicit documents count even when empty, the
/// implicit document before the first `---` counts only when it holds content.
fn split_yaml_documents<'a>(text: &'a str) -> Vec<YamlDocument<'a>> {
    struct Pending {
        start_line: usize,
        start_offset: usize,
        end_offset: usize,
        /// Text after `--- ` on the marker line, which belongs to the document.
        inline_head: Option<String>,
        explicit: bool,
    }
    let mut documents = Vec::new();
    let finish = |pending: Pending, documents: &mut Vec<YamlDocument<'a>>| {
        let body = &text[pending.start_offset..pending.end_offset];
        let (text, text_first_line): (std::borrow::Cow<'a, str>, usize) = match pending.inline_head
        {
            Some(head) => (format!("{head}\n{body}").into(), pending.start_line),
            None if pending.explicit => (body.into(), pending.start_line + 1),
            None => (body.into(), pending.start_line),
        };
        if pending.explicit || has_yaml_content(&text) {
            let index = documents.len();
            let first_line = text
                .lines()
                .position(is_content_line)
                .map_or(pending.start_line, |position| text_first_line + position);
            documents.push(YamlDocument {
                index,
                first_line,
                text_first_line,
                text,
            });
        }
    };

    let mut pending = Pending {
        start_line: 1,
        start_offset: 0,
        end_offset: 0,
        inline_head: None,
        explicit: false,
    };
    // Directives (`%YAML`) and comments before `---` belong to the next document, not a new one.
    let mut offset = 0;
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        let line_number = line_index + 1;
        let content = line.trim_end_matches(['\n', '\r']);
        let is_start_marker =
            content == "---" || content.starts_with("--- ") || content.starts_with("---\t");
        let is_end_marker =
            content == "..." || content.starts_with("... ") || content.starts_with("...\t");
        if is_start_marker {
            pending.end_offset = offset;
            let previous = std::mem::replace(
                &mut pending,
                Pending {
                    start_line: line_number,
                    start_offset: offset + line.len(),
                    end_offset: offset + line.len(),
                    inline_head: None,
                    explicit: true,
                },
            );
            let previous_is_only_directives = !previous.explicit
                && text[previous.start_offset..previous.end_offset]
                    .lines()
                    .all(|line| {
                        line.trim().is_empty()
                            || line.trim_start().starts_with('#')
                            || line.starts_with('%')
                    });
            if !previous_is_only_directives {
                finish(previous, &mut documents);
            }
            let head = content[3..].trim();
            if !head.is_empty() && !head.starts_with('#') {
                pending.inline_head = Some(head.to_string());
            }
        } else if is_end_marker {
            pending.end_offset = offset;
            let previous = std::mem::replace(
                &mut pending,
                Pending {
                    start_line: line_number + 1,
                    start_offset: offset + line.len(),
                    end_offset: offset + line.len(),
                    inline_head: None,
                    explicit: false,
                },
            );
            finish(previous, &mut documents);
        }
        offset += line.len();
    }
    pending.end_offset = text.len();
    finish(pending, &mut documents);
    documents
}

/// Whether a document holds anything but blank lines, comments and directives.
fn has_yaml_content(text: &str) -> bool {
    text.lines().any(is_content_line)
}

/// A line that is not blank, a comment or a directive.
fn is_content_line(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty() && !trimmed.starts_with('#') && !line.starts_with('%')
}

/// Why a YAML document could not be read.
enum DocumentError {
    /// Refused before parsing: nested deeper than the parsers are given.
    TooDeep(nesting::TooDeep),
    /// The parser's error, with the value problem behind it when it was one of ours.
    Yaml(serde_yaml_ng::Error, Option<values::ValueProblem>),
}

/// `Ok(None)` for an empty document (only comments, or `null`).
fn parse_yaml_document(document: &YamlDocument<'_>) -> Result<Option<Value>, DocumentError> {
    if !has_yaml_content(&document.text) {
        return Ok(None);
    }
    nesting::check(&document.text).map_err(DocumentError::TooDeep)?;
    // Every document is read directly first, so duplicate keys, `.inf` and the like are found
    // (with their line) the same way whatever else the document holds. Merge keys (`<<:
    // *defaults`) are resolved by `apply_merge` on the YAML value model only, so a document
    // that has one is read again that way.
    let direct = values::read(serde_yaml_ng::Deserializer::from_str(&document.text))
        .map_err(|(error, problem)| DocumentError::Yaml(error, problem))?;
    let value = if document.text.contains("<<") && holds_merge_key(&direct) {
        let mut yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&document.text)
            .map_err(|error| DocumentError::Yaml(error, None))?;
        yaml.apply_merge()
            .map_err(|error| DocumentError::Yaml(error, None))?;
        values::read(yaml).map_err(|(error, problem)| DocumentError::Yaml(error, problem))?
    } else {
        direct
    };
    Ok(if value.is_null() { None } else { Some(value) })
}

/// Whether a mapping of `value` has a `<<` key (the value is at most `values::KEPT_DEPTH` deep).
fn holds_merge_key(value: &Value) -> bool {
    match value {
        Value::Object(fields) => fields.contains_key("<<") || fields.values().any(holds_merge_key),
        Value::Array(items) => items.iter().any(holds_merge_key),
        _ => false,
    }
}

/// A document's reading error, named by file, document, line and (for a value) field.
fn document_error(file: &str, document: &YamlDocument<'_>, error: &DocumentError) -> InputError {
    match error {
        DocumentError::TooDeep(too_deep) => InputError {
            line: Some(document.text_first_line + too_deep.line),
            ..InputError::document(
                file,
                document.index,
                document.first_line,
                format!("refused before parsing: {}", too_deep.message),
            )
        },
        DocumentError::Yaml(error, None) => yaml_error(file, document, error),
        DocumentError::Yaml(error, Some(problem)) => {
            let located = yaml_error(file, document, error);
            let error = InputError {
                line: located.line,
                ..InputError::document(
                    file,
                    document.index,
                    document.first_line,
                    problem.message.clone(),
                )
            };
            if problem.field.is_empty() {
                error
            } else {
                error.with_field(problem.field.clone())
            }
        }
    }
}

/// A YAML error with its line moved from the document's numbering to the file's.
fn yaml_error(file: &str, document: &YamlDocument<'_>, error: &serde_yaml_ng::Error) -> InputError {
    static LOCATION: OnceLock<Regex> = OnceLock::new();
    let location =
        LOCATION.get_or_init(|| Regex::new(r" at line (\d+) column (\d+)").expect("valid regex"));
    let lines_before = document.text_first_line - 1;
    let file_line = error
        .location()
        .map(|location| location.line() + lines_before);
    let message = error.to_string();
    let message = match file_line {
        // The message may name several positions ("... while parsing a flow sequence at line 4").
        Some(_) => location
            .replace_all(&message, |captures: &regex::Captures<'_>| {
                let line = captures[1]
                    .parse::<usize>()
                    .map_or(0, |line| line + lines_before);
                format!(" at line {line} column {}", &captures[2])
            })
            .into_owned(),
        None => message,
    };
    InputError {
        line: file_line.or(Some(document.first_line)),
        ..InputError::document(
            file,
            document.index,
            document.first_line,
            format!("invalid YAML: {message}"),
        )
    }
}

/// Turns one parsed document into objects: a List is expanded, an AdmissionReview contributes
/// its request, anything that is not a Kubernetes object is an error naming the field.
fn add_document(
    file: &str,
    document: usize,
    first_line: usize,
    value: Value,
    contents: &mut FileContents,
) {
    if value.is_null() {
        return;
    }
    if !looks_like_a_kubernetes_object(&value) {
        contents.skipped.push(Skipped {
            file: file.into(),
            document: Some(document),
            line: Some(first_line),
            reason: format!(
                "not a Kubernetes object ({})",
                match &value {
                    Value::Object(_) => "no apiVersion or kind".to_string(),
                    other => format!("{}, not a mapping", json_type_name(other)),
                }
            ),
        });
        return;
    }
    match object_identity(&value) {
        Err(error) => contents
            .errors
            .push(error.at(file, document, first_line, None)),
        Ok((_, kind)) if is_list(&kind, &value) => expand_list(
            file,
            document,
            first_line,
            &kind,
            value,
            &mut Vec::new(),
            contents,
        ),
        Ok((api_version, kind)) => {
            match build_object(file, document, None, first_line, api_version, kind, value) {
                Ok(object) => contents.objects.push(object),
                Err(error) => contents.errors.push(error),
            }
        }
    }
}

/// Lists inside Lists expanded, at most: `kubectl get -o yaml` writes one, a tool wrapping its
/// output in another List two. The bound keeps an item's own fields far from
/// `values::KEPT_DEPTH` (each List adds two levels, `items` and the index), so an object in
/// Lists is judged as it would be alone; deeper Lists are an error, never skipped.
const MAX_LIST_NESTING: usize = 3;

/// Turns each item of a List (and of the Lists among its items) into an object; `items` holds
/// the indexes of the Lists around this one.
fn expand_list(
    file: &str,
    document: usize,
    first_line: usize,
    kind: &str,
    value: Value,
    items: &mut Vec<usize>,
    contents: &mut FileContents,
) {
    let error = |message: String, items: &[usize]| {
        InputError::document(file, document, first_line, message)
            .with_field("items")
            .with_items(items)
    };
    if items.len() >= MAX_LIST_NESTING {
        contents.errors.push(error(
            format!(
                "a {kind} nested in {} Lists: more than {MAX_LIST_NESTING} levels of Lists are \
                 not read",
                items.len()
            ),
            &items[..],
        ));
        return;
    }
    let Value::Object(mut fields) = value else {
        return;
    };
    let Some(Value::Array(list_items)) = fields.remove("items") else {
        contents.errors.push(error(
            format!("a {kind} needs `items` to be a list"),
            &items[..],
        ));
        return;
    };
    for (item_index, item) in list_items.into_iter().enumerate() {
        if item.is_null() {
            continue;
        }
        items.push(item_index);
        match object_identity(&item) {
            Err(problem) => contents.errors.push(
                problem
                    .at(file, document, first_line, None)
                    .with_items(items),
            ),
            Ok((_, item_kind)) if is_list(&item_kind, &item) => expand_list(
                file, document, first_line, &item_kind, item, items, contents,
            ),
            Ok((item_api_version, item_kind)) => match build_object(
                file,
                document,
                Some(items[0]),
                first_line,
                item_api_version,
                item_kind,
                item,
            ) {
                Ok(mut object) => {
                    object.inner_items = items[1..].to_vec();
                    contents.objects.push(object)
                }
                Err(error) => contents.errors.push(error.with_items(items)),
            },
        }
        items.pop();
    }
}

/// Whether a document is meant as a Kubernetes object: a mapping with `kind`, or with
/// `apiVersion` and `metadata`. One that is meant so but lacks a field, or has the wrong type,
/// is a broken object (an error); `values.yaml`, compose files, `package.json` and Helm's
/// `Chart.yaml` (an `apiVersion`, no `kind` or `metadata`) are not manifests at all.
fn looks_like_a_kubernetes_object(value: &Value) -> bool {
    value.as_object().is_some_and(|fields| {
        fields.contains_key("kind")
            || (fields.contains_key("apiVersion") && fields.contains_key("metadata"))
    })
}

/// `kind: List`, or another `*List` kind, carrying `items` (a CRD kind that merely ends in
/// "List", such as `AllowList`, has no `items` and is an ordinary object).
fn is_list(kind: &str, value: &Value) -> bool {
    kind == "List" || (kind.ends_with("List") && value.get("items").is_some())
}

/// A problem with one field, before the file and document are attached.
struct FieldProblem {
    /// `None` when the whole document is wrong (not a mapping).
    field: Option<&'static str>,
    message: String,
}

impl FieldProblem {
    fn at(self, file: &str, document: usize, first_line: usize, item: Option<usize>) -> InputError {
        let error = InputError::document(file, document, first_line, self.message).with_item(item);
        match self.field {
            Some(field) => error.with_field(field),
            None => error,
        }
    }
}

fn object_identity(value: &Value) -> Result<(String, String), FieldProblem> {
    let Some(fields) = value.as_object() else {
        return Err(FieldProblem {
            field: None,
            message: format!(
                "expected a Kubernetes object (a mapping), got {}",
                json_type_name(value)
            ),
        });
    };
    let string_field = |field: &'static str| match fields.get(field) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        Some(Value::String(_)) => Err(FieldProblem {
            field: Some(field),
            message: "is empty".into(),
        }),
        Some(other) => Err(FieldProblem {
            field: Some(field),
            message: format!("must be a string, got {}", json_type_name(other)),
        }),
        None => Err(FieldProblem {
            field: Some(field),
            message: "is missing: not a Kubernetes object".into(),
        }),
    };
    let api_version = string_field("apiVersion")?;
    let kind = string_field("kind")?;
    Ok((api_version, kind))
}

// One error per unreadable document, on a path that is not hot: boxing it would buy nothing.
#[allow(clippy::result_large_err)]
fn build_object(
    file: &str,
    document: usize,
    item: Option<usize>,
    first_line: usize,
    api_version: String,
    kind: String,
    value: Value,
) -> Result<ManifestObject, InputError> {
    if kind == "AdmissionReview" && api_version.starts_with("admission.k8s.io/") {
        return admission_review_object(file, document, item, first_line, value);
    }
    let (namespace, name) = namespace_and_name(&value);
    Ok(ManifestObject {
        file: file.into(),
        document,
        item,
        inner_items: Vec::new(),
        line: first_line,
        api_version,
        kind,
        namespace,
        name,
        object: ObjectBody::new(&value),
        admission_request: None,
    })
}

/// The object of an AdmissionReview a webhook received, read as `meshlife check` reads one
/// from a file (`meshlife serve`'s `POST /admission`).
#[allow(clippy::result_large_err)]
pub fn object_of_admission_review(review: Value) -> Result<ManifestObject, InputError> {
    admission_review_object("AdmissionReview", 0, None, 1, review)
}

/// An AdmissionReview is checked as its `request`, exactly as the webhook would see it.
// One error per unreadable document, on a path that is not hot: boxing it would buy nothing.
#[allow(clippy::result_large_err)]
fn admission_review_object(
    file: &str,
    document: usize,
    item: Option<usize>,
    first_line: usize,
    mut value: Value,
) -> Result<ManifestObject, InputError> {
    let error = |field: &str, message: String| {
        InputError::document(file, document, first_line, message)
            .with_field(field)
            .with_item(item)
    };
    let request = match value.get_mut("request").map(Value::take) {
        Some(Value::Object(request)) => request,
        Some(other) => {
            return Err(error(
                "request",
                format!("must be an object, got {}", json_type_name(&other)),
            ));
        }
        None => {
            return Err(error(
                "request",
                "is missing: an AdmissionReview to check needs its request".into(),
            ));
        }
    };
    let mut request = Value::Object(request);
    // Gatekeeper reviews the old object on DELETE; it copies it into `object` likewise. Any
    // other request reaches the module as sent: a CREATE or UPDATE with only `oldObject` is
    // judged on it there, with the module's ML000 warning that says so.
    let object_is_missing = request.get("object").is_none_or(Value::is_null);
    let is_delete = request.get("operation").and_then(Value::as_str) == Some("DELETE");
    if object_is_missing
        && is_delete
        && let Some(old_object) = request.get("oldObject").cloned()
    {
        request["object"] = old_object;
    }
    let object = match request.get("object").filter(|object| !object.is_null()) {
        Some(object) => object.clone(),
        None => request.get("oldObject").cloned().unwrap_or(Value::Null),
    };
    let kind_field = |key: &str| {
        request
            .pointer(&format!("/kind/{key}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (api_version, kind) = match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some(api_version), Some(kind)) => (api_version.to_string(), kind.to_string()),
        _ => {
            let group = kind_field("group").unwrap_or_default();
            let version = kind_field("version").unwrap_or_default();
            let Some(kind) = kind_field("kind") else {
                return Err(error(
                    "request.kind",
                    "is missing and the request has no object to take it from".into(),
                ));
            };
            let api_version = if group.is_empty() {
                version
            } else {
                format!("{group}/{version}")
            };
            (api_version, kind)
        }
    };
    let (object_namespace, object_name) = namespace_and_name(&object);
    let namespace = request
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or(object_namespace);
    let name = request
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .unwrap_or(object_name);
    Ok(ManifestObject {
        file: file.into(),
        document,
        item,
        inner_items: Vec::new(),
        line: first_line,
        api_version,
        kind,
        namespace,
        name,
        object: ObjectBody::new(&object),
        admission_request: Some(ObjectBody::new(&request)),
    })
}

/// Read leniently: wrong types here are the policy's to report (as ML000), not the reader's.
fn namespace_and_name(value: &Value) -> (String, String) {
    let metadata_string = |key: &str| {
        value
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let name = match metadata_string("name") {
        "" => metadata_string("generateName"),
        name => name,
    };
    (metadata_string("namespace").to_string(), name.to_string())
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// A `map[string]string` field such as labels; entries with non-string values are dropped.
pub fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|fields| {
            fields
                .iter()
                .filter_map(|(key, value)| {
                    value.as_str().map(|text| (key.clone(), text.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Parses a YAML/JSON text into documents for callers other than `load` (the constraint
/// reader): each document's index and value, or the error naming file and document.
pub fn parse_documents(file: &str, text: &str) -> Vec<Result<(usize, usize, Value), InputError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    split_yaml_documents(text)
        .into_iter()
        .filter_map(|document| match parse_yaml_document(&document) {
            Ok(Some(value)) => Some(Ok((document.index, document.first_line, value))),
            Ok(None) => None,
            Err(error) => Some(Err(document_error(file, &document, &error))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents(text: &str) -> Vec<(usize, usize, String)> {
        split_yaml_documents(text)
            .into_iter()
            .map(|document| {
                (
                    document.index,
                    document.first_line,
                    document.text.trim().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn splitting_numbers_documents_like_a_yaml_parser() {
        assert_eq!(
            documents("a: 1\n---\nb: 2\n"),
            vec![(0, 1, "a: 1".into()), (1, 3, "b: 2".into())]
        );
        // A leading marker does not create an empty first document; an empty explicit one counts.
        // The line is the first key's, past comments and blanks; an empty document's is its `---`.
        assert_eq!(
            documents("# header\n---\na: 1\n---\n---\n# b\n\nb: 2"),
            vec![
                (0, 3, "a: 1".into()),
                (1, 4, "".into()),
                (2, 8, "# b\n\nb: 2".into())
            ]
        );
        assert_eq!(
            documents("%YAML 1.2\n---\na: 1\n...\n"),
            vec![(0, 3, "a: 1".into())]
        );
        assert_eq!(
            documents("# c\n\na: 1\n"),
            vec![(0, 3, "# c\n\na: 1".into())]
        );
        assert_eq!(documents("--- {a: 1}\n"), vec![(0, 1, "{a: 1}".into())]);
        assert!(documents("").is_empty());
    }

    #[test]
    fn a_broken_document_does_not_hide_the_next_one() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: [unclosed\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        let contents = parse_text("f.yaml", text, false);
        assert_eq!(contents.objects.len(), 2);
        assert_eq!(contents.objects[1].document, 2);
        assert_eq!(contents.errors.len(), 1);
        let error = &contents.errors[0];
        assert_eq!(error.document, Some(1));
        assert_eq!(error.line, Some(6), "{error}");
        // Every position in the message is a file line, including the parser's context.
        let positions: Vec<usize> = error
            .message
            .split(" at line ")
            .skip(1)
            .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(
            positions.len() >= 2 && positions.iter().all(|&line| line >= 5),
            "{error}"
        );
    }

    #[test]
    fn lists_and_admission_reviews_become_objects() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"}},null,{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"}}]}
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"batch","version":"v1","kind":"Job"},"name":"j","namespace":"x","operation":"CREATE","object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"}}}}"#;
        let contents = parse_text("f.json", text, true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        let names: Vec<_> = contents
            .objects
            .iter()
            .map(|o| (o.document, o.item, o.display_name()))
            .collect();
        assert_eq!(
            names,
            vec![
                (0, Some(0), "Pod n/a".to_string()),
                (0, Some(2), "Deployment b".to_string()),
                (1, None, "Job x/j".to_string())
            ]
        );
        assert_eq!(contents.objects[1].group(), "apps");
        assert!(contents.objects[2].admission_request.is_some());
    }

    #[test]
    fn documents_that_are_not_objects_name_the_field() {
        let contents = parse_text(
            "f.yaml",
            "- a\n---\nkind: Pod\n---\napiVersion: v1\nkind: 3\n",
            false,
        );
        let fields: Vec<_> = contents
            .errors
            .iter()
            .map(|e| e.field.clone().unwrap_or_default())
            .collect();
        assert_eq!(fields, vec!["apiVersion", "kind"]);
        // A list is not meant as a Kubernetes object: skipped (and said), not an error.
        assert_eq!(contents.skipped.len(), 1);
        assert_eq!(contents.skipped[0].document, Some(0));
    }

    /// A Job whose `status` nests `depth` levels, as block YAML.
    fn job_with_deep_status(depth: usize) -> String {
        let mut text = String::from(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: deep, namespace: jobs}\nspec:\n  template:\n    metadata:\n      annotations: {sidecar.istio.io/inject: \"true\"}\n      labels: {sidecar.istio.io/inject: \"true\"}\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\nstatus:\n",
        );
        for level in 1..depth {
            text.push_str(&" ".repeat(level * 2));
            text.push_str("a:\n");
        }
        text.push_str(&" ".repeat(depth * 2));
        text.push_str("a: 1\n");
        text
    }

    fn only_error(contents: &FileContents) -> &InputError {
        assert!(contents.objects.is_empty(), "{:?}", contents.objects);
        assert_eq!(contents.errors.len(), 1, "{:?}", contents.errors);
        &contents.errors[0]
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_the_parser_with_its_line() {
        for opening in ["[", "{a: "] {
            let text = format!(
                "apiVersion: v1\nkind: ConfigMap\ndata: {}\n",
                opening.repeat(5_000)
            );
            let contents = parse_text("deep.yaml", &text, false);
            let error = only_error(&contents);
            assert_eq!((error.document, error.line), (Some(0), Some(3)), "{error}");
            assert!(error.message.contains("refused before parsing"), "{error}");
            assert!(
                error
                    .to_string()
                    .starts_with("deep.yaml: document 1 (line 3)"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_deep_field_the_module_never_reads_is_read() {
        for depth in [200, 1_000] {
            let contents = parse_text("job.yaml", &job_with_deep_status(depth), false);
            assert!(contents.errors.is_empty(), "{depth}: {:?}", contents.errors);
            assert_eq!(contents.objects.len(), 1);
        }
        let json = serde_json::to_string(
            &serde_yaml_ng::from_str::<Value>(&job_with_deep_status(100)).unwrap(),
        )
        .unwrap();
        let deep_json = json.replace(
            "\"a\":1",
            &format!("\"a\":{}1{}", "{\"a\":".repeat(150), "}".repeat(150)),
        );
        let contents = parse_text("job.json", &deep_json, true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        assert_eq!(contents.objects.len(), 1);
    }

    #[test]
    fn the_cli_and_the_module_agree_on_deep_fields() {
        let engine = crate::module::engine::Engine::embedded().unwrap();
        let rules = |input: &Value| -> Vec<String> {
            let mut rules: Vec<String> = engine
                .evaluate(input.to_string().as_bytes())
                .unwrap()
                .into_iter()
                .map(|violation| violation.details.rule)
                .collect();
            rules.sort();
            rules
        };
        // A field the module never reads (`status`), and one it reads (an init container's
        // `env`, under the pod spec), each 200 levels deep.
        let deep = |depth: usize| {
            let mut value = serde_json::json!(1);
            for _ in 0..depth {
                value = serde_json::json!({ "a": value });
            }
            value
        };
        let job = |status: Value, env: Value| {
            serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "deep", "namespace": "jobs"},
                "spec": {"template": {
                    "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                    "spec": {"restartPolicy": "Never", "containers": [
                        {"name": "main", "image": "busybox", "env": env}
                    ]}
                }},
                "status": status,
            })
        };
        for object in [
            job(deep(200), serde_json::json!([])),
            job(serde_json::json!({}), deep(200)),
        ] {
            // The cluster's module gets the object as the API server decoded it: all of it.
            let cluster = rules(&serde_json::json!({
                "review": {"kind": {"group": "batch", "version": "v1", "kind": "Job"},
                           "operation": "CREATE", "name": "deep", "namespace": "jobs",
                           "object": object},
                "parameters": {}
            }));
            assert!(!cluster.is_empty());
            let text = disable_recursion_limit_to_string(&object);
            let contents = parse_text("job.json", &text, true);
            assert!(contents.errors.is_empty(), "{:?}", contents.errors);
            let review = contents.objects[0].review(None);
            let laptop = rules(&serde_json::json!({"review": review, "parameters": {}}));
            assert_eq!(laptop, cluster);
        }
    }

    /// serde_json writes values of any depth (only its reader has a limit).
    fn disable_recursion_limit_to_string(value: &Value) -> String {
        serde_json::to_string(value).unwrap()
    }

    #[test]
    fn infinities_and_nan_are_refused_naming_the_field() {
        for (literal, shown) in [
            (".inf", ".inf"),
            ("-.inf", "-.inf"),
            (".nan", ".nan"),
            (".NaN", ".nan"),
        ] {
            let text = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {literal}\n"
            );
            let contents = parse_text("web.yaml", &text, false);
            let error = only_error(&contents);
            assert_eq!(error.field.as_deref(), Some("spec.replicas"), "{error}");
            assert_eq!(error.line, Some(5), "{error}");
            assert!(error.message.contains(shown), "{error}");
        }
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    ports: [{containerPort: .inf}]\n";
        let error = only_error(&parse_text("p.yaml", text, false)).clone();
        assert_eq!(
            error.field.as_deref(),
            Some("spec.containers[0].ports[0].containerPort"),
            "{error}"
        );
    }

    #[test]
    fn integers_beyond_64_bits_are_refused_not_rounded() {
        for literal in [
            "99999999999999999999",
            "-99999999999999999999",
            "999999999999999999999999999999999999999999",
        ] {
            let yaml = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec: {{replicas: {literal}}}\n"
            );
            let json = format!(
                "{{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"spec\": {{\"replicas\": {literal}}}}}"
            );
            for contents in [
                parse_text("w.yaml", &yaml, false),
                parse_text("w.json", &json, true),
            ] {
                let error = only_error(&contents);
                assert_eq!(error.field.as_deref(), Some("spec.replicas"), "{error}");
                assert!(error.message.contains("64-bit"), "{error}");
            }
        }
        // In range, both signs, unchanged.
        let contents = parse_text(
            "w.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nx: 18446744073709551615\ny: -9223372036854775808\n",
            false,
        );
        assert_eq!(
            contents.objects[0].object.value()["x"],
            serde_json::json!(u64::MAX)
        );
        assert_eq!(
            contents.objects[0].object.value()["y"],
            serde_json::json!(i64::MIN)
        );
    }

    #[test]
    fn duplicate_keys_are_refused_whatever_else_the_document_holds() {
        let plain = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n";
        let with_comment = format!("{plain}# <<: not a merge key\n");
        let with_merge = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {labels: {x: y}}\n  name: a\n  name: b\n";
        for (text, line) in [(plain, 5), (with_comment.as_str(), 5), (with_merge, 6)] {
            let contents = parse_text("cm.yaml", text, false);
            let error = only_error(&contents);
            assert_eq!(error.line, Some(line), "{text}: {error}");
            assert!(error.to_string().contains("cm.yaml: document 1"), "{error}");
            assert!(error.to_string().contains("duplicate"), "{error}");
            assert!(error.to_string().contains("name"), "{error}");
        }
        let json = "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n \"kind\": \"Secret\"}";
        let error = only_error(&parse_text("cm.json", json, true)).clone();
        assert_eq!(error.field.as_deref(), Some("kind"), "{error}");
        assert_eq!(error.line, Some(2), "{error}");
        assert!(error.message.contains("duplicate key `kind`"), "{error}");
    }

    #[test]
    fn lists_inside_lists_are_expanded_and_bounded() {
        let job =
            serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
        let wrap = |kind: &str, items: Vec<Value>| serde_json::json!({"apiVersion": "v1", "kind": kind, "items": items});
        let config_map =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let nested = wrap("List", vec![config_map, wrap("JobList", vec![job.clone()])]);
        let contents = parse_text("l.json", &nested.to_string(), true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        let job_object = &contents.objects[1];
        assert_eq!(
            (job_object.item, job_object.inner_items.clone()),
            (Some(1), vec![0])
        );
        assert_eq!(job_object.location(), "document 1, item 2, item 1");

        let mut deep = job;
        for _ in 0..=MAX_LIST_NESTING {
            deep = wrap("List", vec![deep]);
        }
        let contents = parse_text("l.json", &deep.to_string(), true);
        let error = only_error(&contents);
        assert_eq!(error.item, Some(0));
        assert_eq!(error.inner_items.len(), MAX_LIST_NESTING - 1);
        assert!(
            error
                .to_string()
                .starts_with("l.json: document 1, item 1, item 1, item 1 (line 1): field `items`"),
            "{error}"
        );
    }

    #[test]
    fn merge_keys_are_resolved() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: merged}\n";
        let contents = parse_text("f.yaml", text, false);
        assert_eq!(contents.objects[0].name, "merged");
    }
}
