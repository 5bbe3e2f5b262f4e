//! Every integration test of the meshlife crate, in one binary: each test file is a module, so
//! wasmtime, kube and regorus are linked once instead of once per file (link time and disk).
//! The support modules (a minimal OPA host, the CLI runner, a real `meshlife serve`) are shared.

mod cli_support;
mod common;
mod fake_api_server;
mod serve_support;

mod abi_artefact;
mod abi_paths;
mod cli_action;
mod cli_bench;
mod cli_cluster_facts;
mod cli_completions;
mod cli_config;
mod cli_constraint_gen;
mod cli_constraints;
mod cli_diagnose;
mod cli_diagnose_helpers_restarts;
mod cli_drill;
mod cli_exit_codes;
mod cli_explain;
mod cli_formats;
mod cli_inputs;
mod cli_install;
mod cli_memory;
mod cli_not_judged;
mod cli_output;
mod cli_repository;
mod cli_rules;
mod cli_services;
mod cli_verify;
mod cluster_facts_read;
mod constraints_gatekeeper;
mod docs_timelines;
mod never_traps;
mod readme_figures;
mod release_artefacts;
mod serve_admission;
mod serve_drain;
mod serve_flood;
mod serve_gatekeeper;
mod serve_kyverno;
mod serve_monitoring;
mod template_rego;
