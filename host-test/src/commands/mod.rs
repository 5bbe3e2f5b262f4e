//! One module per subcommand, named after it: its arguments and its `run`, which returns the
//! process exit code (`terminal::EXIT_*`).

pub mod action;
pub mod bench;
pub mod build;
pub mod check;
pub mod completions;
pub mod constraint;
pub mod diagnose;
pub mod drill;
pub mod explain;
pub mod init;
pub mod install;
pub mod rules;
pub mod serve;
pub mod verify;
