//! What a load gives (objects, errors, skipped inputs, notes, the files read) and what it is told
//! (exclusions, the size limit), and what one file gives before the results are merged.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::errors::{EMPTY_STDIN, InputError, Skipped};
use super::object::ManifestObject;
use super::render;
use crate::inputs::files::ReadLimit;

/// What `-` on the command line reads, and how it is named in reports.
pub const STDIN_NAME: &str = "<stdin>";

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
            .filter(|object| object.is_namespace() && !object.identity.name.is_empty())
            .map(|object| (object.identity.name.clone(), object.object.value()))
            .collect()
    }

    /// The error of a run whose inputs held no object (`paths` as named on the command line):
    /// what was read, and what to do.
    pub fn no_object_error(&self, paths: &[String]) -> InputError {
        let named = match paths {
            [path] if path == "-" => STDIN_NAME.to_string(),
            [path] => path.clone(),
            _ => "the input".to_string(),
        };
        let mut read = match self.files.len() {
            0 => "no manifest file found".to_string(),
            1 => "1 file read".to_string(),
            count => format!("{count} files read"),
        };
        if !self.skipped.is_empty() {
            read.push_str(&format!(
                ", {} skipped (see the notes above)",
                self.skipped.len()
            ));
        }
        let stdin_empty = self
            .skipped
            .iter()
            .any(|skip| skip.file == STDIN_NAME && skip.reason == EMPTY_STDIN);
        let stdin_hint = if stdin_empty {
            "; an empty stdin is what a failed command before the pipe leaves (`set -o pipefail` \
             makes the shell fail on it)"
        } else if self.files.iter().any(|file| file == STDIN_NAME) {
            "; stdin held documents, none of them a Kubernetes object (each needs apiVersion and kind)"
        } else {
            ""
        };
        InputError::file(
            &named,
            format!(
                "no Kubernetes object to check ({read}){stdin_hint}; name the manifests to check \
                 (templates rendered first), or pass --allow-empty if an input without objects is \
                 expected"
            ),
        )
    }
}

/// One file's worth of results, so files can be parsed in parallel and merged in order.
#[derive(Default)]
pub(super) struct FileContents {
    pub(super) objects: Vec<ManifestObject>,
    pub(super) errors: Vec<InputError>,
    pub(super) skipped: Vec<Skipped>,
    /// What was done to read it (a folder rendered by kustomize), for `note:` lines.
    pub(super) notes: Vec<String>,
}

/// A file to read; `Stdin` for `-`; a folder to render first (Kustomize, a Helm chart).
pub(super) enum InputFile {
    Path(PathBuf),
    Stdin,
    Render(PathBuf, render::Source),
}
