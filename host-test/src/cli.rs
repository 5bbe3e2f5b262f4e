//! Command-line parsing and dispatch: each subcommand is a variant of [`Command`] whose arguments
//! and `run` live in `commands/` under the command's name.

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands;
use crate::terminal::{EXIT_ERROR, print_error, print_note};

#[derive(Parser, Debug)]
#[command(
    name = "meshlife",
    version,
    about = "Checks Kubernetes manifests for service-mesh lifecycle bugs (Istio, Linkerd)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check manifests (files, folders, `-` for stdin) against the mesh lifecycle rules.
    Check(Box<commands::check::CheckArgs>),
    /// Write a repository config (`.meshlife.yaml`) with the cluster's facts, read from the
    /// cluster (--from-cluster) or given as flags; `check` and `explain` find it from their
    /// inputs upward.
    Init(Box<commands::init::InitArgs>),
    /// Build the wasm module and the release artefacts (run inside the meshlife workspace).
    Build(commands::build::BuildArgs),
    /// Run gator `verify` suites (test.gatekeeper.sh Suite files, or folders of them) against the
    /// meshlife ConstraintTemplate, with the wasm module standing in for its Rego.
    Verify(commands::verify::VerifyArgs),
    /// Write a Gatekeeper MeshLifecycle constraint for a cluster from its facts (Kubernetes,
    /// Istio and Linkerd versions and settings), with comments on what each fact changes.
    Constraint(Box<commands::constraint::ConstraintCommandArgs>),
    /// Measure evaluation latency: the module warm and fresh in wasmtime, the native build, the
    /// JSON parse floor, a Rego rendition of three rules in regorus, and the npm SDK.
    Bench(commands::bench::BenchArgs),
    /// Serve the module to Gatekeeper (External Data, `POST /validate`) over HTTPS, with
    /// health and Prometheus metrics on a plain-HTTP port.
    Serve(Box<commands::serve::ServeArgs>),
    /// Print the manifests that run `meshlife serve` in a cluster, for `kubectl apply -f -`.
    Install(commands::install::InstallArgs),
    /// List the rules (id, name, severity, summary), or show one rule's full entry: what goes
    /// wrong, when it fires, the fix.
    Rules(commands::rules::RulesArgs),
    /// Draw each workload's startup and shutdown timeline (containers, proxy readiness,
    /// SIGTERM, drain, SIGKILL) and what happens to each kind of request.
    Explain(Box<commands::explain::ExplainArgs>),
    /// Diagnose what really happened to a pod, from its status, events, logs and `kubectl
    /// describe` text (files, or `pod/NAME` from the cluster), beside what its spec predicts.
    Diagnose(Box<commands::diagnose::DiagnoseArgs>),
    /// Prove a workload's rollout under load: restart it (or delete or evict one pod) while a
    /// load pod calls its Service, and report every error with its cause and the rule that
    /// predicted it. Changes the cluster: asks first (or --yes).
    Drill(Box<commands::drill::DrillArgs>),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(commands::completions::CompletionsArgs),
    /// Print the man page (meshlife.1), or write one per command into --dir.
    Man(commands::completions::ManArgs),
    /// The GitHub Action's entrypoint (action.yml): a `check` of the INPUT_* variables the
    /// runner sets, with SARIF written and the outcome in GITHUB_OUTPUT and the job summary.
    #[command(hide = true)]
    Action(commands::action::ActionArgs),
    /// The load pod of `meshlife drill`: calls one HTTP target at a fixed rate, with no
    /// retries, and writes each call's outcome as a JSON line.
    #[command(hide = true)]
    DrillClient(commands::drill::client::DrillClientArgs),
}

/// Parses `args` (the program's name first), applies the repository config of the commands
/// that read one (`crate::config`), runs the command and returns the process exit code.
/// `--help`, `--version` and a command line clap refuses end the process here, as clap does.
pub fn main(args: Vec<OsString>) -> u8 {
    let program = crate::terminal::called_as(args.first().map(OsString::as_os_str));
    // Run as kubectl's plugin, help and usage say what the user typed: `kubectl meshlife`.
    let command = Cli::command().bin_name(program);
    let matches = command.clone().get_matches_from(&args);
    let applied = match crate::config::apply(args, &command, &matches) {
        Ok(applied) => applied,
        Err(error) => {
            print_error(error);
            return EXIT_ERROR;
        }
    };
    for note in &applied.notes {
        print_note(note);
    }
    let mut cli = command
        .try_get_matches_from(&applied.args)
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches))
        .unwrap_or_else(|error| error.exit());
    match &mut cli.command {
        Command::Check(args) => args.config.used = applied.used,
        Command::Explain(args) => args.config.used = applied.used,
        _ => {}
    }
    run(cli)
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Check(args) => commands::check::run(&args),
        Command::Init(args) => commands::init::run(&args),
        Command::Build(args) => commands::build::run(&args),
        Command::Verify(args) => commands::verify::run_verify(&args),
        Command::Constraint(args) => commands::constraint::run(&args),
        Command::Bench(args) => commands::bench::run_bench(&args),
        Command::Serve(args) => commands::serve::run_serve(&args),
        Command::Install(args) => commands::install::run_install(&args),
        Command::Rules(args) => commands::rules::run(&args),
        Command::Explain(args) => commands::explain::run_explain(&args),
        Command::Diagnose(args) => commands::diagnose::run(&args),
        Command::Drill(args) => commands::drill::run(&args),
        Command::Completions(args) => commands::completions::run_completions(&args),
        Command::Man(args) => commands::completions::run_man(&args),
        Command::Action(args) => commands::action::run(&args),
        Command::DrillClient(args) => commands::drill::client::run(&args),
    }
}
