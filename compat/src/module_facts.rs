//! What can be checked of the module without running it, and the context-path copy.

use anyhow::{Context, Result, bail};
use meshlife::module::build::{ABI_MINOR_VERSION_GLOBAL, ABI_VERSION_GLOBAL, old_engine_features};
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef, Validator};

use crate::matrix::Check;

pub const HOST: &str = "static (wasmparser)";

/// Validation with only MVP + bulk-memory (what wasmer 1.1 and other old engines accept), the
/// imports every host can satisfy, and the ABI globals.
pub fn checks(module: &[u8]) -> Vec<Check> {
    let validation = Validator::new_with_features(old_engine_features())
        .validate_all(module)
        .map(|_| {
            format!(
                "{} bytes validate with features mvp + bulk-memory",
                module.len()
            )
        })
        .map_err(|error| format!("{error}"));
    vec![
        Check::new(HOST, "validate --features=mvp,bulk-memory", validation),
        Check::new(
            HOST,
            "imports",
            imports(module).map_err(|error| format!("{error:#}")),
        ),
        Check::new(
            HOST,
            "ABI version globals",
            abi_globals(module).map_err(|error| format!("{error:#}")),
        ),
    ]
}

fn imports(module: &[u8]) -> Result<String> {
    let mut names = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        if let Payload::ImportSection(section) = payload? {
            for import in section.into_imports() {
                let import = import?;
                let name = format!("{}.{}", import.module, import.name);
                match import.ty {
                    TypeRef::Memory(memory) if name == "env.memory" => {
                        if memory.initial > 2 || memory.maximum.is_some() {
                            bail!(
                                "env.memory is min {} max {:?}; hosts give 2 pages and no maximum",
                                memory.initial,
                                memory.maximum
                            );
                        }
                        names.push(format!("env.memory (min {}, no max)", memory.initial));
                    }
                    TypeRef::Func(_)
                        if import.module == "env" && import.name.starts_with("opa_") =>
                    {
                        names.push(name)
                    }
                    _ => bail!("`{name}` is an import no OPA host provides"),
                }
            }
        }
    }
    Ok(names.join(", "))
}

/// The global indices and the offset of each `i32.const` immediate of the ABI globals.
fn abi_global_immediates(module: &[u8]) -> Result<Vec<(&'static str, i32, usize)>> {
    let mut indices = Vec::new();
    let mut imported_globals = 0;
    let mut found = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        match payload? {
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    if matches!(import?.ty, TypeRef::Global(_)) {
                        imported_globals += 1;
                    }
                }
            }
            Payload::ExportSection(section) => {
                for export in section {
                    let export = export?;
                    let name = match export.name {
                        ABI_VERSION_GLOBAL => ABI_VERSION_GLOBAL,
                        ABI_MINOR_VERSION_GLOBAL => ABI_MINOR_VERSION_GLOBAL,
                        _ => continue,
                    };
                    if export.kind != ExternalKind::Global {
                        bail!("`{name}` is exported, but not as a global");
                    }
                    indices.push((name, export.index));
                }
            }
            Payload::GlobalSection(section) => {
                for (index, global) in section.into_iter().enumerate() {
                    let global = global?;
                    let mut reader = global.init_expr.get_operators_reader();
                    let opcode_offset = reader.original_position();
                    if let Operator::I32Const { value } = reader.read()? {
                        found.push((imported_globals + index as u32, value, opcode_offset + 1));
                    }
                }
            }
            _ => {}
        }
    }
    indices
        .into_iter()
        .map(|(name, index)| {
            let (_, value, offset) = found
                .iter()
                .find(|(global, _, _)| *global == index)
                .with_context(|| format!("`{name}` is not an i32.const global"))?;
            Ok((name, *value, *offset))
        })
        .collect()
}

fn abi_globals(module: &[u8]) -> Result<String> {
    let globals = abi_global_immediates(module)?;
    let value = |wanted: &str| {
        globals
            .iter()
            .find(|(name, ..)| *name == wanted)
            .map(|g| g.1)
    };
    match (value(ABI_VERSION_GLOBAL), value(ABI_MINOR_VERSION_GLOBAL)) {
        (Some(1), Some(3)) => Ok("opa_wasm_abi_version 1, opa_wasm_abi_minor_version 3".into()),
        other => bail!("ABI globals are {other:?}; every host accepts only 1.3"),
    }
}

/// A copy of the module whose minor ABI version reads 1: hosts then take the eval-context path
/// (npm's slow path, rust opa-wasm without `opa_eval`). Only the one-byte immediate changes.
pub fn with_minor_version_1(module: &[u8]) -> Result<Vec<u8>> {
    let globals = abi_global_immediates(module)?;
    let (_, value, offset) = globals
        .iter()
        .find(|(name, ..)| *name == ABI_MINOR_VERSION_GLOBAL)
        .context("the module has no minor version global")?;
    if *value != 3 || module.get(*offset) != Some(&3) {
        bail!("expected the minor version immediate 3 at byte {offset}");
    }
    let mut patched = module.to_vec();
    patched[*offset] = 1;
    Validator::new_with_features(old_engine_features())
        .validate_all(&patched)
        .context("the patched copy no longer validates")?;
    Ok(patched)
}
