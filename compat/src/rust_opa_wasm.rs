//! The Rust host: the `opa-wasm` crate (matrix-org/rust-opa-wasm) used as a library, on both ABI
//! paths, with and without data, and through its bundle loader on `dist/bundle.tar.gz`.

use std::path::Path;

use anyhow::{Context, Result};
use opa_wasm::wasmtime::{Engine, Module, Store, StoreLimits, StoreLimitsBuilder};
use serde_json::{Value, json};

use crate::fixtures::Fixture;
use crate::fixtures::exhausting_input;
use crate::matrix::{CAPPED_PAGES, Check, Column, Outcome, REFUSALS_HOW, judge, refusals_check};

pub const HOST: &str = "opa-wasm crate (Rust)";
const ENTRYPOINT: &str = "meshlife/violation";

/// Where the module bytes come from and which data the policy is instantiated with.
struct Setup {
    how: String,
    data: Option<Value>,
    /// Memory capped at `CAPPED_PAGES` and the exhausting input sent before every fixture.
    refusals: bool,
}

/// What the host answered for each fixture, and (in a refusals run) for the exhausting input
/// sent before it.
struct Answers {
    outcomes: Vec<Outcome>,
    refusals: Vec<Outcome>,
}

async fn evaluate_all(module_bytes: &[u8], setup: &Setup, fixtures: &[Fixture]) -> Result<Answers> {
    let engine = Engine::default();
    let module = Module::new(&engine, module_bytes)?;
    // The crate creates `env.memory` itself from the module's import (no maximum), so the cap is
    // the store's limiter: a `memory.grow` past it fails (the module then aborts) and so does the
    // crate's own grow before it writes an input.
    let limits = if setup.refusals {
        StoreLimitsBuilder::new()
            .memory_size(CAPPED_PAGES as usize * 65536)
            .build()
    } else {
        StoreLimits::default()
    };
    let mut store = Store::new(&engine, limits);
    store.limiter(|limits| limits);
    let runtime = opa_wasm::Runtime::new(&mut store, &module)
        .await
        .context("opa_wasm::Runtime::new refused the module")?;
    let policy = match &setup.data {
        Some(data) => runtime.with_data(&mut store, data).await?,
        None => runtime.without_data(&mut store).await?,
    };
    let exhausting: Value =
        serde_json::from_slice(&exhausting_input()).expect("the exhausting input is JSON");
    let mut outcomes = Vec::new();
    let mut refusals = Vec::new();
    for fixture in fixtures {
        if setup.refusals {
            let result: Result<Value> = policy.evaluate(&mut store, ENTRYPOINT, &exhausting).await;
            refusals.push(match result {
                Ok(result) => read_result_set(&result),
                Err(error) => Outcome::Error(format!("{error:#}")),
            });
        }
        let Some(input) = fixture.input_value() else {
            outcomes.push(Outcome::NotApplicable(
                "the crate serialises a value: an absent input cannot be expressed".into(),
            ));
            continue;
        };
        let result: Result<Value> = policy.evaluate(&mut store, ENTRYPOINT, &input).await;
        outcomes.push(match result {
            Ok(result) => read_result_set(&result),
            Err(error) => Outcome::Error(format!("{error:#}")),
        });
    }
    Ok(Answers { outcomes, refusals })
}

/// `[{"result": [{"msg": ...}, ...]}]` to its `msg` strings.
pub fn read_result_set(result: &Value) -> Outcome {
    let Some(violations) = result
        .as_array()
        .filter(|bindings| bindings.len() == 1)
        .and_then(|bindings| bindings[0]["result"].as_array())
    else {
        return Outcome::Error(format!(
            "not a one-binding result set: {:.200}",
            result.to_string()
        ));
    };
    let mut msgs = Vec::new();
    for violation in violations {
        match violation["msg"].as_str() {
            Some(msg) => msgs.push(msg.to_string()),
            None => return Outcome::Error(format!("a violation without msg: {violation}")),
        }
    }
    Outcome::Msgs(msgs)
}

fn crate_version(workspace: &Path) -> String {
    locked_version(workspace, "opa-wasm").unwrap_or_else(|| "(version unknown)".into())
}

/// A package's version as `Cargo.lock` resolved it.
pub fn locked_version(workspace: &Path, package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).ok()?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let end = lock[start..].find('"')?;
    Some(lock[start..start + end].to_string())
}

pub fn run(
    workspace: &Path,
    module: &[u8],
    context_path_module: &[u8],
    bundle: &Path,
    fixtures: &[Fixture],
) -> Result<(Vec<Column>, Vec<Check>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let version = crate_version(workspace);
    let inventory = json!({"inventory": {"cluster": {}, "namespace": {}}});
    let bundled = runtime
        .block_on(opa_wasm::read_bundle(bundle))
        .with_context(|| format!("opa_wasm::read_bundle({})", bundle.display()))?;
    let setup = |how: &str, data: Option<&Value>, refusals: bool| Setup {
        how: how.into(),
        data: data.cloned(),
        refusals,
    };
    let runs: [(&[u8], Setup); 6] = [
        (module, setup("opa_eval (ABI 1.3), data {}", None, false)),
        (
            module,
            setup(
                "opa_eval (ABI 1.3), data with an inventory",
                Some(&inventory),
                false,
            ),
        ),
        (
            context_path_module,
            setup(
                "eval-context path (copy patched to ABI 1.1), data {}",
                None,
                false,
            ),
        ),
        (
            context_path_module,
            setup(
                "eval-context path (copy patched to ABI 1.1), data with an inventory",
                Some(&inventory),
                false,
            ),
        ),
        (
            &bundled,
            setup("read_bundle(dist/bundle.tar.gz), opa_eval", None, false),
        ),
        (
            module,
            setup(
                &format!("{REFUSALS_HOW}: a store limiter, opa_eval (ABI 1.3), data {{}}"),
                None,
                true,
            ),
        ),
    ];
    let mut columns = Vec::new();
    let mut checks = Vec::new();
    for (bytes, setup) in runs {
        let answers = runtime.block_on(evaluate_all(bytes, &setup, fixtures))?;
        let verdicts: Vec<_> = fixtures
            .iter()
            .zip(answers.outcomes)
            .map(|(fixture, outcome)| judge(fixture, outcome, setup.refusals))
            .collect();
        if setup.refusals {
            checks.push(refusals_check(
                HOST,
                &setup.how,
                &answers.refusals,
                &verdicts,
            ));
        }
        columns.push(Column {
            host: HOST.into(),
            version: version.clone(),
            how: setup.how,
            verdicts,
        });
    }
    Ok((columns, checks))
}
