//! Every integration test of meshlife-policy, in one binary: each former test file is a module,
//! so the crate and its dev-dependencies (proptest, serde_yaml_ng) are linked once instead of
//! once per file. The rule cases' data stays in `tests/cases/`, read from the manifest dir.
//! proptest keeps its saved failures in `tests/proptest-regressions/` (`cases.txt`): with a
//! `main.rs` here, that sibling folder is where it looks, not beside the test file.

mod cases;
mod never_panics;
mod timeline;
mod verdicts;
