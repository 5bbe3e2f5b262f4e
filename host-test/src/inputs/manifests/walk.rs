//! Folders: walked with `.meshlifeignore` and `--exclude`, symlinks and loops said, Helm charts
//! and Kustomize folders rendered (or skipped with the command to run).

use std::path::{Path, PathBuf};

use super::errors::{InputError, Skipped};
use super::file::parse_text;
use super::loaded::{FileContents, IGNORE_FILE, InputFile, LoadedInputs};
use super::render;
use crate::inputs::files::{self, ReadLimit};

/// A Kustomize folder or Helm chart: its rendering, parsed as a stream named by the command, or
/// the folder skipped (no renderer on the PATH, or it refused the folder alone: a chart that
/// needs values), or an error (the renderer could not run, ran too long, printed too much).
pub(super) fn render_folder(
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
pub(super) fn walk_folder(
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
pub(super) fn unfollowable_symlink(path: &Path) -> Option<(&Path, String)> {
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

pub(super) fn is_loop(error: &ignore::Error) -> bool {
    match error {
        ignore::Error::Loop { .. } => true,
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => is_loop(err),
        _ => false,
    }
}

/// The symlink of a loop (the walker's `child`), not the folder it leads back to.
pub(super) fn loop_link(error: &ignore::Error) -> Option<&Path> {
    match error {
        ignore::Error::Loop { child, .. } => Some(child),
        ignore::Error::WithPath { err, .. } | ignore::Error::WithDepth { err, .. } => {
            loop_link(err)
        }
        _ => None,
    }
}

pub(super) fn error_path(error: &ignore::Error) -> Option<&Path> {
    match error {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } => error_path(err),
        _ => None,
    }
}

/// The walker's message without the path it prefixes (the report names the path).
pub(super) fn error_text(error: &ignore::Error) -> String {
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
pub(super) fn has_manifest_extension(path: &Path) -> bool {
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
mod tests {
    use std::path::Path;

    use super::has_manifest_extension;

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
