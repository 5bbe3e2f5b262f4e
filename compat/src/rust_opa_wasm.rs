//! The Rust host: the `opa-wasm` crate (matrix-org/rust-opa-wasm) used as a library, on both ABI
//! paths, with and without data, and through its bundle loader on `dist/bundle.tar.gz`.

use std::path::Path;

use anyhow::{Context, Result};
use opa_wasm::wasmtime::{Engine, Module, Store};
use serde_json::{Value, json};

use crate::fixtures::Fixture;
use crate::matrix::{Column, Outcome, judge};

pub const HOST: &str = "opa-wasm crate (Rust)";
const ENTRYPOINT: &str = "meshlife/violation";

/// Where the module bytes come from and which data the policy is instantiated with.
struct Setup {
    how: &'static str,
    data: Option<Value>,
}

async fn evaluate_all(
    module_bytes: &[u8],
    setup: &Setup,
    fixtures: &[Fixture],
) -> Result<Vec<Outcome>> {
    let engine = Engine::default();
    let module = Module::new(&engine, module_bytes)?;
    let mut store = Store::new(&engine, ());
    let runtime = opa_wasm::Runtime::new(&mut store, &module)
        .await
        .context("opa_wasm::Runtime::new refused the module")?;
    let policy = match &setup.data {
        Some(data) => runtime.with_data(&mut store, data).await?,
        None => runtime.without_data(&mut store).await?,
    };
    let mut outcomes = Vec::new();
    for fixture in fixtures {
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
    Ok(outcomes)
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
) -> Result<Vec<Column>> {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let version = crate_version(workspace);
    let inventory = json!({"inventory": {"cluster": {}, "namespace": {}}});
    let bundled = runtime
        .block_on(opa_wasm::read_bundle(bundle))
        .with_context(|| format!("opa_wasm::read_bundle({})", bundle.display()))?;
    let runs: [(&[u8], Setup); 5] = [
        (
            module,
            Setup {
                how: "opa_eval (ABI 1.3), data {}",
                data: None,
            },
        ),
        (
            module,
            Setup {
                how: "opa_eval (ABI 1.3), data with an inventory",
                data: Some(inventory.clone()),
            },
        ),
        (
            context_path_module,
            Setup {
                how: "eval-context path (copy patched to ABI 1.1), data {}",
                data: None,
            },
        ),
        (
            context_path_module,
            Setup {
                how: "eval-context path (copy patched to ABI 1.1), data with an inventory",
                data: Some(inventory),
            },
        ),
        (
            &bundled,
            Setup {
                how: "read_bundle(dist/bundle.tar.gz), opa_eval",
                data: None,
            },
        ),
    ];
    let mut columns = Vec::new();
    for (bytes, setup) in runs {
        let outcomes = runtime.block_on(evaluate_all(bytes, &setup, fixtures))?;
        columns.push(Column {
            host: HOST.into(),
            version: version.clone(),
            how: setup.how.into(),
            verdicts: fixtures
                .iter()
                .zip(outcomes)
                .map(|(fixture, outcome)| judge(fixture, outcome, false))
                .collect(),
        });
    }
    Ok(columns)
}
