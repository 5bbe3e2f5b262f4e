//! `.meshlife.yaml`, the repository config: what a team would otherwise repeat on every
//! `meshlife check` (the cluster's constraint files or facts, `exclude`, `failOn`, the rule
//! selection, `output`). It is found from the inputs upward to the repository root, as
//! kube-linter and Checkov find theirs.
//!
//! Each key stands for a flag of the command, and is applied as that flag: the config becomes
//! arguments put before the command line's own, parsed by the same clap definition. So a key
//! accepts exactly what its flag accepts, and the keys cannot drift from the flags (the facts'
//! keys are even derived from the fact flags' names). A flag on the command line wins over its
//! key; the cluster's description (`constraints` or `facts`) is one unit, so a command line that
//! describes the cluster in any way leaves the config's description out whole.

mod keys;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use serde_yaml_ng::Value;

pub(crate) use keys::camel_case;
pub use keys::{Key, keys_of, schema};

/// The file name looked for; `.meshlife.yml` is read too.
pub const FILE_NAME: &str = ".meshlife.yaml";
const OTHER_FILE_NAME: &str = ".meshlife.yml";

/// The commands that read a repository config.
pub const COMMANDS: [&str; 2] = ["check", "explain"];

/// `--config` and `--no-config`, on every command that reads a repository config.
#[derive(Args, Clone, Debug, Default)]
pub struct ConfigArgs {
    /// The repository config to use, instead of the `.meshlife.yaml` found from the inputs
    /// upward to the repository root. Flags on the command line win over its keys.
    #[arg(long, value_name = "FILE", help_heading = "Config")]
    pub config: Option<PathBuf>,

    /// Use no repository config, even where one is found.
    #[arg(long, help_heading = "Config", conflicts_with = "config")]
    pub no_config: bool,

    /// The config this run used, as the report names it (set after parsing).
    #[arg(skip)]
    pub used: Option<String>,
}

/// A command line with the repository config applied.
pub struct Applied {
    /// The arguments to parse: the config's keys as flags, then the command line's own.
    pub args: Vec<OsString>,
    /// The config used, as the report names it; `None` when none was.
    pub used: Option<String>,
    /// What to say: keys left out because the command line gave their flags.
    pub notes: Vec<String>,
}

/// `args` (the whole command line, program name first) with the repository config of the
/// command `matches` parsed applied to it. Commands that read no config, `--no-config`, and
/// inputs under no config give `args` back as they were.
pub fn apply(
    args: Vec<OsString>,
    command: &clap::Command,
    matches: &ArgMatches,
) -> Result<Applied, String> {
    let unchanged = |args| Applied {
        args,
        used: None,
        notes: Vec::new(),
    };
    let Some((name, sub_matches)) = matches.subcommand() else {
        return Ok(unchanged(args));
    };
    if !COMMANDS.contains(&name) || sub_matches.get_flag("no_config") {
        return Ok(unchanged(args));
    }
    let path = match sub_matches.get_one::<PathBuf>("config") {
        Some(named) => named.clone(),
        None => {
            let paths: Vec<String> = sub_matches
                .get_many::<String>("paths")
                .map(|paths| paths.cloned().collect())
                .unwrap_or_default();
            match find(&paths)? {
                Some(found) => found,
                None => return Ok(unchanged(args)),
            }
        }
    };
    let shown = shown_path(&path);
    let subcommand = command
        .find_subcommand(name)
        .ok_or_else(|| format!("no subcommand {name}"))?;
    let every_key = command
        .find_subcommand("check")
        .map(keys_of)
        .unwrap_or_default();
    let config = RepositoryConfig::read(&path, &shown)?;
    let mut notes = Vec::new();
    let cluster_on_command_line = keys::cluster_args(subcommand)
        .into_iter()
        .find(|id| given(sub_matches, id));
    let mut config_args = Vec::new();
    for setting in config.settings(&every_key)? {
        if !setting.key.applies_to(subcommand, name) {
            continue;
        }
        if setting.key.cluster {
            if let Some(id) = &cluster_on_command_line {
                // The flag as typed: an id is not always its flag (`constraints` is
                // `--constraint`).
                let flag = subcommand
                    .get_arguments()
                    .find(|arg| arg.get_id() == id.as_str())
                    .and_then(clap::Arg::get_long)
                    .unwrap_or(id);
                notes.push(format!(
                    "{shown}: `{}` left out: the command line describes the cluster (--{flag})",
                    setting.key.path
                ));
                continue;
            }
        } else if given(sub_matches, &setting.key.arg) {
            notes.push(format!(
                "{shown}: `{}` left out: --{} on the command line wins",
                setting.key.path, setting.key.long
            ));
            continue;
        }
        setting.check(subcommand, name, &shown)?;
        config_args.extend(setting.flags);
    }
    // The config's flags go right after the subcommand's name, so that a `--` on the command
    // line still ends the flags and the command line's own flags come after them.
    let position = args
        .iter()
        .position(|arg| arg.to_str() == Some(name))
        .map_or(args.len(), |index| index + 1);
    let mut merged = args;
    merged.splice(position..position, config_args);
    Ok(Applied {
        args: merged,
        used: Some(shown),
        notes,
    })
}

/// Whether the command line gave the argument `id` (not its default, not the config).
fn given(matches: &ArgMatches, id: &str) -> bool {
    matches.try_get_raw(id).is_ok_and(|values| values.is_some())
        && matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// The config that governs `paths`: the first `.meshlife.yaml` (or `.meshlife.yml`) from each
/// input's folder upward, stopping at the repository root (the folder holding `.git`); stdin
/// is looked up from the current folder. Inputs under different configs are an error, since
/// one run judges under one.
pub fn find(paths: &[String]) -> Result<Option<PathBuf>, String> {
    let mut found: Vec<(PathBuf, &str)> = Vec::new();
    let starts = if paths.is_empty() {
        vec!["-"]
    } else {
        paths.iter().map(String::as_str).collect()
    };
    for input in starts {
        let Some(start) = start_folder(input) else {
            continue;
        };
        if let Some(config) = find_from(&start)?
            && !found.iter().any(|(known, _)| *known == config)
        {
            found.push((config, input));
        }
    }
    match found.as_slice() {
        [] => Ok(None),
        [(one, _)] => Ok(Some(one.clone())),
        [(first, first_input), (second, second_input), ..] => Err(format!(
            "{first_input} is under {} and {second_input} under {}: one run judges under one \
             config; check them in separate runs, or name one with --config FILE (--no-config: \
             none)",
            shown_path(first),
            shown_path(second)
        )),
    }
}

/// The folder an input's config is looked for from, canonical; `None` when the input does not
/// exist (its reading says so).
fn start_folder(input: &str) -> Option<PathBuf> {
    let path = Path::new(input);
    let folder = if input == "-" {
        PathBuf::from(".")
    } else if path.is_dir() {
        path.to_path_buf()
    } else {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        }
    };
    folder.canonicalize().ok()
}

/// The config in `folder` or the nearest folder above it, up to the repository root.
fn find_from(folder: &Path) -> Result<Option<PathBuf>, String> {
    for dir in folder.ancestors() {
        let names: Vec<PathBuf> = [FILE_NAME, OTHER_FILE_NAME]
            .iter()
            .map(|name| dir.join(name))
            .filter(|candidate| candidate.is_file())
            .collect();
        match names.as_slice() {
            [] => {}
            [one] => return Ok(Some(one.clone())),
            _ => {
                return Err(format!(
                    "{} holds both {FILE_NAME} and {OTHER_FILE_NAME}: keep one",
                    shown_path(dir)
                ));
            }
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    Ok(None)
}

/// `path` relative to the current folder when it is below it, else as it is.
fn shown_path(path: &Path) -> String {
    let current = std::env::current_dir().ok();
    let relative = current
        .as_deref()
        .and_then(|current| path.strip_prefix(current).ok())
        .filter(|relative| !relative.as_os_str().is_empty());
    relative.unwrap_or(path).display().to_string()
}

/// A config file, read and its keys known; values are checked when applied, by their flags.
struct RepositoryConfig {
    /// As the messages name it.
    shown: String,
    text: String,
    /// Relative paths in the config are relative to its folder.
    folder: PathBuf,
    root: serde_yaml_ng::Mapping,
}

/// One key of the config as the flags it stands for.
struct Setting {
    key: Key,
    line: usize,
    flags: Vec<OsString>,
}

impl RepositoryConfig {
    fn read(path: &Path, shown: &str) -> Result<RepositoryConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("{shown}: cannot read the config: {error}"))?;
        let root = match serde_yaml_ng::from_str::<Value>(&text) {
            Ok(Value::Mapping(root)) => root,
            Ok(Value::Null) => serde_yaml_ng::Mapping::new(),
            Ok(_) => {
                return Err(format!(
                    "{shown}: a config is a mapping of keys (failOn: error, exclude: [...]); \
                     docs/config.md lists them"
                ));
            }
            Err(error) => return Err(format!("{shown}: not YAML: {error}")),
        };
        let folder = path
            .canonicalize()
            .ok()
            .and_then(|full| full.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(RepositoryConfig {
            shown: shown.to_string(),
            text,
            folder,
            root,
        })
    }

    /// Where `path` (`facts.istio`) is in the file, for messages.
    fn line_of(&self, path: &str) -> usize {
        crate::inputs::source_location::locate(&self.text, 1, path).map_or(1, |(line, _)| line)
    }

    /// Every key of the file as the flags it stands for, in the file's order. An unknown key, or a
    /// value of the wrong shape, is an error naming the file, the line and the nearest key.
    fn settings(&self, known: &[Key]) -> Result<Vec<Setting>, String> {
        let mut settings = Vec::new();
        self.collect(&self.root, "", known, &mut settings)?;
        Ok(settings)
    }

    fn collect(
        &self,
        mapping: &serde_yaml_ng::Mapping,
        prefix: &str,
        known: &[Key],
        settings: &mut Vec<Setting>,
    ) -> Result<(), String> {
        for (name, value) in mapping {
            let Some(name) = name.as_str() else {
                return Err(format!(
                    "{}: {name:?}: keys are names (failOn, facts, ...)",
                    self.shown
                ));
            };
            let path = format!("{prefix}{name}");
            let line = self.line_of(&path);
            let here = format!("{}:{line}", self.shown);
            if keys::is_group(&path) {
                match value {
                    Value::Mapping(inner) => {
                        self.collect(inner, &format!("{path}."), known, settings)?;
                    }
                    Value::Null => {}
                    _ => {
                        return Err(format!(
                            "{here}: `{path}` is a mapping of facts (kubernetes: \"1.33\", \
                             istio: \"1.26\", ...)"
                        ));
                    }
                }
                continue;
            }
            let Some(key) = known.iter().find(|key| key.path == path) else {
                return Err(unknown_key(&here, &path, prefix, known));
            };
            if matches!(value, Value::Null) {
                continue;
            }
            let flags = key
                .flags(value, &self.folder)
                .map_err(|problem| format!("{here}: `{path}`: {problem}"))?;
            settings.push(Setting {
                key: key.clone(),
                line,
                flags,
            });
        }
        Ok(())
    }
}

/// "unknown key", with the nearest key of the same level.
fn unknown_key(here: &str, path: &str, prefix: &str, known: &[Key]) -> String {
    let mut level: Vec<&str> = known
        .iter()
        .filter_map(|key| key.path.strip_prefix(prefix))
        .filter(|rest| !rest.contains('.'))
        .collect();
    if let Some(group) = keys::group_under(prefix) {
        level.push(group);
    }
    let name = &path[prefix.len()..];
    let nearest = level
        .iter()
        .map(|candidate| {
            (
                crate::rule_reference::edit_distance(
                    &name.to_ascii_lowercase(),
                    &candidate.to_ascii_lowercase(),
                ),
                *candidate,
            )
        })
        .min();
    match nearest {
        Some((distance, candidate)) if distance <= name.len().max(3) / 2 + 1 => format!(
            "{here}: unknown key `{path}`; did you mean `{prefix}{candidate}`? (docs/config.md \
             lists the keys)"
        ),
        _ => format!(
            "{here}: unknown key `{path}`; the keys{}: {} (docs/config.md)",
            if prefix.is_empty() {
                String::new()
            } else {
                format!(" under `{}`", prefix.trim_end_matches('.'))
            },
            level.join(", ")
        ),
    }
}

impl Setting {
    /// Parses this setting's flags with the command's own definition, so that a value its flag
    /// refuses is an error naming the config's line instead of the flag.
    fn check(&self, command: &clap::Command, name: &str, shown: &str) -> Result<(), String> {
        // The subcommand parses as a program of its own: its name first, then a path for the
        // required inputs, then the flags.
        let mut trial: Vec<OsString> = vec![name.into(), "-".into()];
        trial.extend(self.flags.iter().cloned());
        command
            .clone()
            .try_get_matches_from(trial)
            .map(|_| ())
            .map_err(|error| {
                // clap's message down to its first blank line: the problem and the possible
                // values, without the usage that names the flag's syntax.
                let rendered = error.render().to_string();
                let message: Vec<&str> = rendered
                    .lines()
                    .take_while(|line| !line.trim().is_empty())
                    .map(|line| line.trim().trim_start_matches("error: "))
                    .collect();
                format!(
                    "{shown}:{}: `{}`: {}",
                    self.line,
                    self.key.path,
                    message.join(" ")
                )
            })
    }
}

#[cfg(test)]
mod tests;
