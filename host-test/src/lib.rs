//! The `meshlife` CLI as a library: the wasm host, manifest reading, Gatekeeper constraints,
//! report formats and the command line. `main.rs` only calls [`cli::run`].
//!
//! Without the default feature `commands`, only manifest reading (`files`, `manifests`) is
//! built: what the `manifest_reading` fuzz target instruments, without wasmtime, the server
//! stack or the embedded module.

#[cfg(feature = "commands")]
pub mod artefacts;
#[cfg(feature = "commands")]
pub mod bench;
#[cfg(feature = "commands")]
pub mod cli;
#[cfg(feature = "commands")]
pub mod constraint;
#[cfg(feature = "commands")]
pub mod constraint_gen;
#[cfg(feature = "commands")]
pub mod coverage;
#[cfg(feature = "commands")]
pub mod engine;
#[cfg(feature = "commands")]
pub mod explain;
pub mod files;
#[cfg(feature = "commands")]
pub mod fixtures;
#[cfg(feature = "commands")]
pub mod install;
pub mod manifests;
#[cfg(feature = "commands")]
pub mod module_build;
#[cfg(feature = "commands")]
pub mod namespaces;
#[cfg(feature = "commands")]
pub mod output;
#[cfg(feature = "commands")]
pub mod report;
#[cfg(feature = "commands")]
pub mod rule_reference;
#[cfg(feature = "commands")]
pub mod serve;
#[cfg(feature = "commands")]
pub mod services;
#[cfg(feature = "commands")]
pub mod source_location;
#[cfg(feature = "commands")]
pub mod suite;
