//! The wasm module: the host that evaluates it (`engine`), its build from the policy crate
//! (`build`), and the release artefacts made from the same bytes (`artefacts`).

pub mod artefacts;
pub mod build;
pub mod engine;
