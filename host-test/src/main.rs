use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = meshlife::cli::Cli::parse();
    ExitCode::from(meshlife::cli::run(cli))
}
