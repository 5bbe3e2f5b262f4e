//! `meshlife completions SHELL` and `meshlife man`: the shell completion scripts and the man
//! pages, both written from the CLI's definition at run time (clap_complete, clap_mangen), so
//! a flag added to a command is completed and documented at once. Rule ids and names complete
//! after `--rules`, `--exclude-rules` and `meshlife rules` (`rule_reference::RuleNames`).

use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error, print_note};

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete in. bash: `source <(meshlife completions bash)` in ~/.bashrc, or
    /// the script saved as /usr/share/bash-completion/completions/meshlife; zsh: saved as
    /// `_meshlife` in a folder of $fpath; fish: saved as
    /// ~/.config/fish/completions/meshlife.fish; powershell: `meshlife completions powershell
    /// | Out-String | Invoke-Expression` in $PROFILE.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write meshlife.1 and one page per command (meshlife-check.1, ...) into this folder,
    /// for `man -M` or a MANPATH folder's man1/; without it, meshlife.1 goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command line's definition without its hidden commands (`drill-client`, which only the
/// load pod runs): clap_mangen leaves them out, clap_complete's bash script would offer them.
fn definition() -> clap::Command {
    let full = crate::cli::Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .cloned()
        .collect();
    clap::Command::new("meshlife")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .subcommand_required(true)
        .subcommands(visible)
}

pub fn run_completions(args: &CompletionsArgs) -> u8 {
    let mut command = definition();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "meshlife", &mut script);
    write(&String::from_utf8_lossy(&script))
}

pub fn run_man(args: &ManArgs) -> u8 {
    let command = definition();
    let Some(dir) = &args.dir else {
        let mut page = Vec::new();
        return match clap_mangen::Man::new(command).render(&mut page) {
            Ok(()) => write(&String::from_utf8_lossy(&page)),
            Err(error) => {
                print_error(format_args!("rendering the man page: {error}"));
                EXIT_ERROR
            }
        };
    };
    if let Err(error) = std::fs::create_dir_all(dir) {
        print_error(format_args!("{}: cannot create: {error}", dir.display()));
        return EXIT_ERROR;
    }
    // clap_mangen names each page after the command's path (meshlife-check.1) and leaves
    // hidden commands (drill-client, the load pod's) out.
    match clap_mangen::generate_to(command, dir) {
        Ok(()) => {
            print_note(format_args!(
                "man pages written to {}: `man -M {} meshlife-check` reads one",
                dir.display(),
                dir.parent()
                    .filter(|parent| !parent.as_os_str().is_empty())
                    .map_or_else(|| ".".into(), |parent| parent.display().to_string())
            ));
            EXIT_OK
        }
        Err(error) => {
            print_error(format_args!(
                "{}: writing the man pages: {error}",
                dir.display()
            ));
            EXIT_ERROR
        }
    }
}

fn write(text: &str) -> u8 {
    match crate::terminal::write_stdout(text) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            print_error(error);
            EXIT_ERROR
        }
    }
}
