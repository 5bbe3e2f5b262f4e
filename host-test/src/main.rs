use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(meshlife::cli::main(std::env::args_os().collect()))
}
