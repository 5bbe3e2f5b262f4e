//! The pre-commit hook `meshlife` (`.pre-commit-hooks.yaml`, `language: rust`). pre-commit builds
//! a hook written in Rust with `cargo install --bins --path .` at the repository's root, which is
//! why the root manifest is this package as well as the workspace, and runs its binary with the
//! names of the files a commit changes.
//!
//! It is `meshlife check` with `--allow-empty`: a commit that changes only YAML that is not a
//! manifest (values files, CI workflows, Helm templates, each skipped with a note) has nothing to
//! judge and must not be refused for it. The repository's `.meshlife.yaml` applies as it does to
//! `meshlife check`, and the hook's `args:` are check's flags.

use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let given: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut args: Vec<OsString> = vec!["meshlife".into(), "check".into()];
    if !given.iter().any(|arg| arg == "--allow-empty") {
        args.push("--allow-empty".into());
    }
    args.extend(given);
    ExitCode::from(meshlife::cli::main(args))
}
