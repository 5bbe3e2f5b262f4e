//! Command-line parsing and dispatch: each subcommand is a variant of [`Command`] whose arguments
//! and `run` live in `commands/` under the command's name.

use clap::{Parser, Subcommand};

use crate::commands;

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
    /// The load pod of `meshlife drill`: calls one HTTP target at a fixed rate, with no
    /// retries, and writes each call's outcome as a JSON line.
    #[command(hide = true)]
    DrillClient(commands::drill::client::DrillClientArgs),
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Check(args) => commands::check::run(&args),
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
        Command::DrillClient(args) => commands::drill::client::run(&args),
    }
}
