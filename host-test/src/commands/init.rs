//! `meshlife init`: writes a repository config (`.meshlife.yaml`) with the cluster's facts,
//! read from the cluster (`--from-cluster`) or given as fact flags, each fact with its flag's
//! help as a comment, and the other keys commented out with their defaults.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Command};

use crate::cluster::ClusterSourceArgs;
use crate::config::{FILE_NAME, camel_case};
use crate::constraints::facts::ClusterFactArgs;
use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error, print_note};

/// Where editors find the config's schema (docs/config.schema.json, on the default branch).
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/meshlife/meshlife/main/docs/config.schema.json";

#[derive(Args, Debug)]
pub struct InitArgs {
    /// The file to write (`-`: stdout).
    #[arg(value_name = "FILE", default_value = FILE_NAME)]
    pub file: PathBuf,

    /// Replace the file when it exists.
    #[arg(long)]
    pub force: bool,

    /// Print the config's JSON Schema (docs/config.schema.json) instead, for editors.
    #[arg(long, exclusive = true)]
    pub schema: bool,

    /// The cluster's facts, as `meshlife constraint` takes them.
    #[command(flatten)]
    pub facts: ClusterFactArgs,

    /// The cluster to read the facts from.
    #[command(flatten)]
    pub cluster: ClusterSourceArgs,
}

/// Runs `meshlife init` and returns the process exit code.
pub fn run(args: &InitArgs) -> u8 {
    if args.schema {
        return match crate::terminal::write_stdout(&schema_text()) {
            Ok(()) => EXIT_OK,
            Err(error) => {
                print_error(error);
                EXIT_ERROR
            }
        };
    }
    match config_text(args).and_then(|text| write(args, &text)) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            print_error(error);
            EXIT_ERROR
        }
    }
}

fn write(args: &InitArgs, text: &str) -> Result<(), String> {
    if args.file.as_os_str() == "-" {
        return crate::terminal::write_stdout(text).map_err(|error| error.to_string());
    }
    let shown = args.file.display();
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(&args.file).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            format!("{shown} exists; --force replaces it (or name another file)")
        } else {
            format!("{shown}: cannot write: {error}")
        }
    })?;
    file.write_all(text.as_bytes())
        .map_err(|error| format!("{shown}: cannot write: {error}"))?;
    print_note(format_args!(
        "wrote {shown}: `meshlife check` and `meshlife explain` read it for inputs in its folder \
         and below"
    ));
    Ok(())
}

/// docs/config.schema.json as it should be: the schema of the config's keys, pretty-printed.
pub fn schema_text() -> String {
    use clap::CommandFactory;
    let command = crate::cli::Cli::command();
    let keys = command
        .find_subcommand("check")
        .map(crate::config::keys_of)
        .unwrap_or_default();
    let mut text = serde_json::to_string_pretty(&crate::config::schema(&keys)).unwrap_or_default();
    text.push('\n');
    text
}

/// The config's text: the facts, from the cluster or the flags, then the other keys.
fn config_text(args: &InitArgs) -> Result<String, String> {
    let (facts, read_from) = match args.cluster.read(&args.facts) {
        Some(read) => {
            let cluster = read?;
            let mut sets = cluster.fact_sets(&args.facts);
            if sets.len() > 1 {
                return Err(format!(
                    "{}: its Istio revisions are configured differently, which one set of facts \
                     cannot say; write the cluster's constraints with `meshlife constraint \
                     --from-cluster > cluster-constraints.yaml` and name that file in the \
                     config's `constraints` key instead",
                    cluster.cluster
                ));
            }
            let set = sets.pop().ok_or("the cluster gave no facts")?;
            let mut lines = vec![format!("Read from {}:", cluster.cluster)];
            lines.extend(
                cluster
                    .summary()
                    .into_iter()
                    .map(|line| format!("  {line}")),
            );
            lines.extend(set.notes.iter().map(|note| format!("  {note}")));
            (set.args, Some(lines))
        }
        None => {
            if !args.facts.describes_the_cluster() {
                return Err(
                    "say which cluster the manifests go to: --from-cluster (or --kubeconfig, \
                     --context) reads its facts, or give them as flags (--kubernetes 1.33 \
                     --istio 1.26 --linkerd 2.19, ...; `meshlife init --help` lists them)"
                        .into(),
                );
            }
            (args.facts.clone(), None)
        }
    };
    crate::constraints::generate::mesh_flags_need_their_version(&facts)?;
    Ok(render(&facts, read_from.as_deref()))
}

/// The config for `facts`, each fact with its flag's help as a comment.
pub fn render(facts: &ClusterFactArgs, read_from: Option<&[String]>) -> String {
    let help = ClusterFactArgs::augment_args(Command::new("facts"));
    let help_of = |id: &str| {
        help.get_arguments()
            .find(|arg| arg.get_id() == id)
            .and_then(|arg| arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    let mut out = String::new();
    out.push_str(
        "# meshlife's repository config. `meshlife check` and `meshlife explain` read it for the\n\
         # inputs in this folder and below (up to the repository root); a flag on the command\n\
         # line wins over its key. Every key: docs/config.md.\n",
    );
    out.push_str(&format!("# yaml-language-server: $schema={SCHEMA_URL}\n\n"));
    if let Some(lines) = read_from {
        for line in lines {
            out.push_str(&format!("# {line}\n"));
        }
    }
    out.push_str("# The cluster these manifests are applied to.\nfacts:\n");
    let (rule_settings, cluster_facts): (Vec<_>, Vec<_>) = fact_values(facts)
        .into_iter()
        .partition(|(id, _)| is_rule_setting(&help, id));
    for (id, value) in cluster_facts {
        for line in wrap(&help_of(id), 86) {
            out.push_str(&format!("  # {line}\n"));
        }
        out.push_str(&format!("  {}: {value}\n", camel_case(id)));
    }
    out.push('\n');
    for (id, value) in rule_settings {
        for line in wrap(&help_of(id), 88) {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str(&format!("{}: {value}\n", camel_case(id)));
    }
    let written: Vec<String> = out.lines().map(str::to_string).collect();
    for (key, comment) in COMMENTED_KEYS {
        if !written
            .iter()
            .any(|line| line.starts_with(&format!("{key}:")))
        {
            out.push_str(&format!("# {comment}\n# {key}: {}\n", default_of(key)));
        }
    }
    out
}

/// The keys written commented out, with what they do.
const COMMENTED_KEYS: [(&str, &str); 5] = [
    (
        "failOn",
        "The lowest severity of a deny finding that fails the run: error, warning, info, none.",
    ),
    (
        "exclude",
        "Files and folders left out: gitignore globs, relative to each folder checked.",
    ),
    (
        "rules",
        "Only these rules run (ids or names: `meshlife rules`).",
    ),
    ("excludeRules", "These rules never run (ids or names)."),
    (
        "output",
        "The report's format: text, json, sarif, junit, tap, github, ... (`meshlife check --help`).",
    ),
];

fn default_of(key: &str) -> &'static str {
    match key {
        "failOn" => "warning",
        "output" => "text",
        _ => "[]",
    }
}

fn is_rule_setting(help: &Command, id: &str) -> bool {
    help.get_arguments()
        .any(|arg| arg.get_id() == id && arg.get_help_heading() == Some("Rules"))
}

/// Every fact and rule setting `facts` gives, as (flag id, YAML value).
fn fact_values(facts: &ClusterFactArgs) -> Vec<(&'static str, String)> {
    let quoted = |text: String| format!("{text:?}");
    // A list flag given no value writes no key.
    let list = |items: &[String]| {
        (!items.is_empty()).then(|| {
            let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
            format!("[{}]", quoted.join(", "))
        })
    };
    let switch = |on: bool| on.then(|| "true".to_string());
    let values = [
        (
            "kubernetes",
            facts.kubernetes.as_ref().map(|v| quoted(v.to_string())),
        ),
        ("istio", facts.istio.as_ref().map(|v| quoted(v.to_string()))),
        (
            "istio_native_sidecars",
            facts.istio_native_sidecars.map(|v| v.to_string()),
        ),
        ("istio_hold", switch(facts.istio_hold)),
        ("istio_hold_forced", switch(facts.istio_hold_forced)),
        ("istio_cni", switch(facts.istio_cni)),
        ("istio_drain", facts.istio_drain.clone().map(quoted)),
        (
            "istio_drain_duration",
            facts.istio_drain_duration.clone().map(quoted),
        ),
        (
            "istio_injected_namespaces",
            list(&facts.istio_injected_namespaces),
        ),
        (
            "istio_ambient_namespaces",
            list(&facts.istio_ambient_namespaces),
        ),
        (
            "istio_proxy_uid",
            facts.istio_proxy_uid.map(|v| v.to_string()),
        ),
        (
            "linkerd",
            facts.linkerd.as_ref().map(|v| quoted(v.to_string())),
        ),
        (
            "linkerd_native_sidecars",
            facts.linkerd_native_sidecars.map(|v| v.to_string()),
        ),
        ("linkerd_await", facts.linkerd_await.map(|v| v.to_string())),
        ("linkerd_cni", switch(facts.linkerd_cni)),
        (
            "linkerd_shutdown_endpoint",
            switch(facts.linkerd_shutdown_endpoint),
        ),
        (
            "linkerd_injected_namespaces",
            list(&facts.linkerd_injected_namespaces),
        ),
        (
            "linkerd_proxy_uid",
            facts.linkerd_proxy_uid.map(|v| v.to_string()),
        ),
        (
            "min_severity",
            facts.min_severity.map(|v| format!("{v:?}").to_lowercase()),
        ),
        ("min_available", facts.min_available.map(|v| v.to_string())),
        ("rules", list(&facts.rules)),
        ("exclude_rules", list(&facts.exclude_rules)),
        ("exempt_namespaces", list(&facts.exempt_namespaces)),
        ("exempt_images", list(&facts.exempt_images)),
        ("exit_markers", list(&facts.exit_markers)),
    ];
    values
        .into_iter()
        .filter_map(|(id, value)| value.map(|value| (id, value)))
        .collect()
}

/// `text` in lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    use super::*;

    /// Every fact flag, set, comes out as a key: a flag added to the CLI without a line in
    /// `fact_values` would be lost from the config `init` writes.
    #[test]
    fn every_fact_flag_is_written() {
        let command = ClusterFactArgs::augment_args(Command::new("facts"));
        let mut argv = vec!["facts".to_string()];
        for arg in command.get_arguments() {
            let long = format!("--{}", arg.get_long().unwrap());
            let value_name = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map(|name| name.to_string());
            if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
                argv.push(long);
                continue;
            }
            match value_name.as_deref() {
                None => argv.push(long),
                Some("VERSION") if arg.get_id() == "linkerd" => argv.push(format!("{long}=2.19")),
                Some("VERSION") => argv.push(format!("{long}=1.33")),
                Some("true|false") => argv.push(format!("{long}=true")),
                Some("N" | "UID") => argv.push(format!("{long}=7")),
                Some("DURATION") => argv.push(format!("{long}=5s")),
                Some("SEVERITY") => argv.push(format!("{long}=warning")),
                Some(_) => argv.push(format!("{long}=x")),
            }
        }
        let matches = command.clone().try_get_matches_from(&argv).unwrap();
        let facts = ClusterFactArgs::from_arg_matches(&matches).unwrap();
        let written: Vec<&str> = fact_values(&facts).iter().map(|(id, _)| *id).collect();
        let flags: Vec<&str> = command
            .get_arguments()
            .map(|arg| arg.get_id().as_str())
            .collect();
        assert_eq!(written, flags);
    }
}
