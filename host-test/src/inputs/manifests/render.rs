//! Folders that are not manifests yet: a Kustomize folder (its `kustomization.yaml` names bases,
//! patches and a namespace, and only its build is what gets applied) and a Helm chart (its
//! templates are not YAML until rendered). Read as plain files they mislead: the Kustomization
//! counts as an object, its `namespace:` is ignored and the workloads land in `default`. So
//! such a folder is rendered by the tool its users run, when it is on the PATH, and otherwise
//! skipped as a whole with the command to run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a renderer may run: a remote base behind a credential prompt or a slow network
/// must not hang a CI job.
const RENDER_DEADLINE: Duration = Duration::from_secs(120);

/// What a folder needs before its manifests can be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Kustomize,
    /// `kind: Component`: applied only through a kustomization that lists it.
    KustomizeComponent,
    HelmChart,
    /// `type: library`: `helm template` refuses it; its templates render in the charts that
    /// depend on it.
    HelmLibraryChart,
}

/// Whether the YAML `text` has the top-level `key: value` (quoted or not).
fn has_top_level(text: &str, key: &str, value: &str) -> bool {
    text.lines().any(|line| {
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|rest| rest.split('#').next().unwrap_or_default().trim())
            .is_some_and(|found| found.trim_matches(['"', '\'']) == value)
    })
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

impl Source {
    /// What `folder` is, when it is one of these; plain folders are `None`.
    pub fn of(folder: &Path) -> Option<Source> {
        if let Some(file) = KUSTOMIZATION_FILES
            .iter()
            .map(|name| folder.join(name))
            .find(|file| file.is_file())
        {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            Some(if has_top_level(&text, "kind", "Component") {
                Source::KustomizeComponent
            } else {
                Source::Kustomize
            })
        } else if folder.join("Chart.yaml").is_file() {
            let text = std::fs::read_to_string(folder.join("Chart.yaml")).unwrap_or_default();
            Some(if has_top_level(&text, "type", "library") {
                Source::HelmLibraryChart
            } else {
                Source::HelmChart
            })
        } else {
            None
        }
    }

    fn what(self) -> &'static str {
        match self {
            Source::Kustomize => "a Kustomize folder (kustomization.yaml)",
            Source::KustomizeComponent => "a Kustomize Component (kind: Component)",
            Source::HelmChart => "a Helm chart (Chart.yaml)",
            Source::HelmLibraryChart => "a Helm library chart (type: library)",
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
            Source::KustomizeComponent | Source::HelmLibraryChart => Vec::new(),
        }
    }

    /// Why the folder was skipped, with the command to run, when no renderer is on the PATH
    /// (or, for a Component or library chart, none renders it alone).
    pub fn skip_reason(self, folder: &str) -> String {
        let (render, tools) = match self {
            Source::Kustomize => (
                format!("`kubectl kustomize {folder} | meshlife check -`"),
                "kustomize or kubectl",
            ),
            Source::HelmChart => (
                format!("`helm template {folder} | meshlife check -`"),
                "helm",
            ),
            Source::KustomizeComponent => {
                return format!(
                    "{}, applied only through a kustomization that lists it: its objects are \
                     judged where that kustomization is rendered",
                    self.what()
                );
            }
            Source::HelmLibraryChart => {
                return format!(
                    "{}, which renders nothing alone: its templates are judged in the charts \
                     that depend on it",
                    self.what()
                );
            }
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

/// What became of a folder's rendering.
pub enum Outcome {
    Rendered(Rendered),
    /// None of its tools is on the PATH (or none renders it alone).
    NoTool,
    /// `helm template` refused the chart alone, with what it said (a chart that needs values
    /// it was not given): the folder is not judged, and said so.
    Refused(String),
    /// The tool could not run, failed (a kustomization that does not build), ran too long or
    /// printed what cannot be read.
    Failed(String),
}

/// Renders `folder` with the first of its tools found on the PATH, within [`RENDER_DEADLINE`],
/// reading at most `limit` bytes of what it prints.
pub fn render(source: Source, folder: &str, limit: u64) -> Outcome {
    for (tool, args) in source.commands(folder) {
        let Some(program) = on_path(tool) else {
            continue;
        };
        let command_line = format!("{tool} {}", args.join(" "));
        let what = source.what();
        let output = match run_bounded(&program, &args, limit) {
            Ok(output) => output,
            Err(error) => return Outcome::Failed(format!("{what}: `{command_line}` {error}")),
        };
        if output.stdout.len() as u64 > limit {
            return Outcome::Failed(format!(
                "{what}: `{command_line}` printed more than --max-file-size ({limit} bytes)"
            ));
        }
        if !output.success {
            let said = String::from_utf8_lossy(&output.stderr);
            let said: Vec<&str> = said
                .lines()
                .filter(|line| !line.trim().is_empty())
                .take(5)
                .collect();
            let failed = format!(
                "{what}: `{command_line}` failed ({}): {}",
                output.status,
                said.join(" / ")
            );
            // A chart often renders only with the values it is deployed with: not judged, and
            // said so. A kustomization that does not build is broken as it is applied.
            return match source {
                Source::HelmChart => Outcome::Refused(format!(
                    "{failed}; render it with the values you deploy it with and pipe it to \
                     `meshlife check -`"
                )),
                _ => Outcome::Failed(failed),
            };
        }
        let Ok(text) = String::from_utf8(output.stdout) else {
            return Outcome::Failed(format!(
                "{what}: `{command_line}` printed text that is not UTF-8"
            ));
        };
        return Outcome::Rendered(Rendered {
            name: command_line.clone(),
            text,
            note: format!(
                "{folder}: {what} rendered with `{command_line}` ({}); its files were not read one by one",
                program.display()
            ),
        });
    }
    Outcome::NoTool
}

struct BoundedOutput {
    success: bool,
    status: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `program` with no stdin, reading at most `limit + 1` bytes of its stdout and 64 KiB of
/// its stderr; stops it once it has printed more than `limit` (the caller says so) or at
/// [`RENDER_DEADLINE`] (an error).
fn run_bounded(program: &Path, args: &[String], limit: u64) -> Result<BoundedOutput, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("could not run: {error}"))?;
    let stdout = child.stdout.take().expect("piped above");
    let stderr = child.stderr.take().expect("piped above");
    let overflowed = Arc::new(AtomicBool::new(false));
    let out_reader = {
        let overflowed = Arc::clone(&overflowed);
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut limited = stdout.take(limit.saturating_add(1));
            let _ = limited.read_to_end(&mut bytes);
            // Set before the pipe closes (with `limited`), so that a tool that dies of the
            // closed pipe is already known to have printed too much.
            overflowed.store(bytes.len() as u64 > limit, Ordering::Release);
            drop(limited);
            bytes
        })
    };
    let err_reader = std::thread::spawn(move || {
        let mut stderr = stderr;
        let mut bytes = Vec::new();
        let _ = (&mut stderr).take(64 << 10).read_to_end(&mut bytes);
        // The rest is drained, not left to block (or kill) a talkative tool.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        bytes
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            // A tool stopped by the pipe closing after the limit was read printed too much.
            Ok(Some(_)) if overflowed.load(Ordering::Acquire) => break None,
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(error) => return Err(format!("could not be waited for: {error}")),
        }
        if overflowed.load(Ordering::Acquire) {
            let _ = child.kill();
            let _ = child.wait();
            // The caller reports the output over the limit.
            break None;
        }
        if started.elapsed() >= RENDER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "did not finish within {} s and was stopped",
                RENDER_DEADLINE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(BoundedOutput {
        success: status.is_none_or(|status| status.success()),
        status: status.map_or_else(|| "stopped".into(), |status| status.to_string()),
        stdout: out_reader.join().unwrap_or_default(),
        // Stopped for printing too much, only the limit is reported: its stderr is not waited
        // for (a grandchild may still hold it open).
        stderr: match status {
            Some(_) => err_reader.join().unwrap_or_default(),
            None => Vec::new(),
        },
    })
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
