//! Folders that are not manifests yet: a Kustomize folder (its `kustomization.yaml` names bases,
//! patches and a namespace, and only its build is what gets applied) and a Helm chart (its
//! templates are not YAML until rendered). Read as plain files they mislead: the Kustomization
//! counts as an object, its `namespace:` is ignored and the workloads land in `default`. So
//! such a folder is rendered by the tool its users run, when it is on the PATH, and otherwise
//! skipped as a whole with the command to run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What a folder needs before its manifests can be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Kustomize,
    HelmChart,
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

impl Source {
    /// What `folder` is, when it is one of these; plain folders are `None`.
    pub fn of(folder: &Path) -> Option<Source> {
        if KUSTOMIZATION_FILES
            .iter()
            .any(|name| folder.join(name).is_file())
        {
            Some(Source::Kustomize)
        } else if folder.join("Chart.yaml").is_file() {
            Some(Source::HelmChart)
        } else {
            None
        }
    }

    fn what(self) -> &'static str {
        match self {
            Source::Kustomize => "a Kustomize folder (kustomization.yaml)",
            Source::HelmChart => "a Helm chart (Chart.yaml)",
        }
    }

    /// The commands that render it, in the order tried: the first on the PATH is run.
    fn commands(self, folder: &str) -> Vec<(&'static str, Vec<String>)> {
        match self {
            Source::Kustomize => vec![
                ("kustomize", vec!["build".into(), folder.into()]),
                ("kubectl", vec!["kustomize".into(), folder.into()]),
            ],
            Source::HelmChart => vec![("helm", vec!["template".into(), folder.into()])],
        }
    }

    /// Why the folder was skipped, with the command to run, when no renderer is on the PATH.
    pub fn skip_reason(self, folder: &str) -> String {
        let render = match self {
            Source::Kustomize => format!("`kubectl kustomize {folder} | meshlife check -`"),
            Source::HelmChart => format!("`helm template {folder} | meshlife check -`"),
        };
        let tools = match self {
            Source::Kustomize => "kustomize or kubectl",
            Source::HelmChart => "helm",
        };
        format!(
            "{}, not manifests until rendered: render it first ({render}), or put {tools} on \
             the PATH and meshlife renders it",
            self.what()
        )
    }
}

/// A folder rendered: the name reports give its stream (`kustomize build overlays/prod`), the
/// text, and the note saying which tool made it.
pub struct Rendered {
    pub name: String,
    pub text: String,
    pub note: String,
}

/// Renders `folder` with the first of its tools found on the PATH. `Ok(None)`: none is there.
/// `Err`: the tool failed, with what it said.
pub fn render(source: Source, folder: &str, limit: u64) -> Result<Option<Rendered>, String> {
    for (tool, args) in source.commands(folder) {
        let Some(program) = on_path(tool) else {
            continue;
        };
        let command_line = format!("{tool} {}", args.join(" "));
        let output = Command::new(&program)
            .args(&args)
            .output()
            .map_err(|error| {
                format!("{}: `{command_line}` could not run: {error}", source.what())
            })?;
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr);
            let said: Vec<&str> = said
                .lines()
                .filter(|line| !line.trim().is_empty())
                .take(5)
                .collect();
            return Err(format!(
                "{}: `{command_line}` failed ({}): {}",
                source.what(),
                output.status,
                said.join(" / ")
            ));
        }
        if output.stdout.len() as u64 > limit {
            return Err(format!(
                "{}: `{command_line}` printed {} bytes, more than --max-file-size ({limit} bytes)",
                source.what(),
                output.stdout.len()
            ));
        }
        let text = String::from_utf8(output.stdout).map_err(|_| {
            format!(
                "{}: `{command_line}` printed text that is not UTF-8",
                source.what()
            )
        })?;
        return Ok(Some(Rendered {
            name: command_line.clone(),
            text,
            note: format!(
                "{folder}: {} rendered with `{command_line}` ({}); its files were not read one by one",
                source.what(),
                program.display()
            ),
        }));
    }
    Ok(None)
}

/// The executable `name` in one of the PATH's folders.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|folder| folder.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}
