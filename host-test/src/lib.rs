//! The `meshlife` CLI as a library: the wasm host, manifest reading, Gatekeeper constraints,
//! report formats and the command line. `main.rs` only calls [`cli::run`].

pub mod artefacts;
pub mod bench;
pub mod cli;
pub mod constraint;
pub mod constraint_gen;
pub mod coverage;
pub mod engine;
pub mod explain;
pub mod files;
pub mod fixtures;
pub mod install;
pub mod manifests;
pub mod module_build;
pub mod namespaces;
pub mod output;
pub mod report;
pub mod rule_reference;
pub mod serve;
pub mod services;
pub mod source_location;
pub mod suite;
