//! The `meshlife` CLI as a library. `main.rs` only calls [`cli::run`]; `cli` parses and hands each
//! subcommand to its module in [`commands`]. Below the commands, grouped by concern:
//! [`inputs`] (files, documents, objects, Namespaces, Services), [`constraints`] (Gatekeeper
//! constraints: reading, match, cluster facts), [`module`] (the wasm module: host, build,
//! artefacts), [`report`] (findings and every output format) and [`terminal`] (exit codes and
//! what is printed).
//!
//! Without the default feature `commands`, only manifest reading (`inputs::files`,
//! `inputs::manifests`) is built: what the `manifest_reading` fuzz target instruments, without
//! wasmtime, the server stack or the embedded module.

#[cfg(feature = "commands")]
pub mod cli;
#[cfg(feature = "commands")]
pub mod cluster;
#[cfg(feature = "commands")]
pub mod commands;
#[cfg(feature = "commands")]
pub mod config;
#[cfg(feature = "commands")]
pub mod constraints;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod inputs;
#[cfg(feature = "commands")]
pub mod judging;
#[cfg(feature = "commands")]
pub mod module;
#[cfg(feature = "commands")]
pub mod report;
#[cfg(feature = "commands")]
pub mod rule_reference;
#[cfg(feature = "commands")]
pub mod terminal;
