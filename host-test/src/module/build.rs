//! Builds the policy's OPA wasm module: compiles `meshlife-policy` for `wasm32-unknown-unknown`
//! with a nested cargo, then finishes the linked module for OPA hosts.
//!
//! Shared by `host-test/build.rs` (included with `#[path]`, so this file uses only std,
//! wasmparser and wasm-encoder) and by the CLI's `meshlife build`.
//!
//! Finishing does three things rustc cannot:
//! - the shadow stack pointer: every export the host calls is entered through a wrapper that
//!   first resets the stack pointer to its initial value. A host that unwinds out of
//!   `opa_abort` (npm, Python and Go SDKs throw) skips the epilogues that would have restored
//!   it, so without the reset each refusal left it some kilobytes lower, and after a few the
//!   stack ran below address 0 and every later call trapped. Exports are only ever entered from
//!   the host with no module frame live (the module's only function import is `opa_abort`,
//!   which never calls back), so the initial value is always the right one;
//! - the ABI version globals: a Rust `#[no_mangle] static` is exported as a global whose value is
//!   the static's *address*; hosts read the global's value, so it is rewritten to 1 and 3;
//! - old engines: rustc's wasm32 standard library is built with sign-extension, saturating
//!   float-to-int and reference-types (overlong `call_indirect`) enabled, and LLVM applies the
//!   union of all functions' features to the whole module. Those instructions are lowered to
//!   MVP equivalents so the module validates with only MVP + bulk-memory (wasmer 1.1 and other
//!   older engines).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, Function, FunctionSection, GlobalSection, Instruction,
    TypeSection, ValType,
};
use wasmparser::{Operator, Parser, Payload, Validator, WasmFeatures};

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The cargo profile the module is built with (workspace `Cargo.toml`).
pub const WASM_PROFILE: &str = "wasm";
pub const POLICY_PACKAGE: &str = "meshlife-policy";
/// Target directory of the nested build, apart from the outer build's so neither waits for the
/// other's lock.
pub const WASM_TARGET_DIR: &str = "target/meshlife-wasm";
pub const DIST_MODULE: &str = "dist/meshlife.wasm";

pub const ABI_VERSION: i32 = 1;
/// 3 is the only minor version every host accepts (OPA Go takes 1 or 3, others need >= 2).
pub const ABI_MINOR_VERSION: i32 = 3;
pub const ABI_VERSION_GLOBAL: &str = "opa_wasm_abi_version";
pub const ABI_MINOR_VERSION_GLOBAL: &str = "opa_wasm_abi_minor_version";

/// What old engines understand, and what the finished module is validated against.
pub fn old_engine_features() -> WasmFeatures {
    WasmFeatures::MVP | WasmFeatures::BULK_MEMORY
}

/// Where the policy's sources are and how the nested cargo reaches them.
pub enum PolicySource {
    /// The meshlife workspace: `meshlife-policy` is its member, built with the workspace's
    /// `Cargo.lock` into `target/meshlife-wasm` (shared by debug and release builds and by
    /// `meshlife build`).
    Workspace(PathBuf),
    /// A packaged `meshlife-policy` (crates.io's, or `cargo package`'s): the folder cargo
    /// unpacked it into, which is not ours to write to. Its files are copied into `copy_to`, made
    /// a workspace of their own, and built there with `lockfile` (the packaged meshlife's) beside
    /// them, so the module's dependencies are the versions meshlife was released with.
    Packaged {
        unpacked: PathBuf,
        copy_to: PathBuf,
        lockfile: Option<PathBuf>,
    },
}

/// Compiles the policy and returns the finished module.
pub fn build_module(source: &PolicySource) -> Result<Vec<u8>, String> {
    ensure_wasm_target()?;
    let linked = compile_policy(source)?;
    let bytes =
        std::fs::read(&linked).map_err(|error| format!("reading {}: {error}", linked.display()))?;
    finish_module(&bytes)
}

/// Builds the module and writes it to `dist/meshlife.wasm` under `workspace_root`.
pub fn build_dist(workspace_root: &Path) -> Result<PathBuf, String> {
    let module = build_module(&PolicySource::Workspace(workspace_root.to_owned()))?;
    let path = workspace_root.join(DIST_MODULE);
    if let Some(directory) = path.parent() {
        std::fs::create_dir_all(directory)
            .map_err(|error| format!("creating {}: {error}", directory.display()))?;
    }
    std::fs::write(&path, module)
        .map_err(|error| format!("writing {}: {error}", path.display()))?;
    Ok(path)
}

/// Installs the wasm32 standard library through rustup when the toolchain lacks it (a fresh CI
/// machine has only the host target, and `RUSTUP_AUTO_INSTALL=0` stops cargo from fetching it).
pub fn ensure_wasm_target() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", WASM_TARGET])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("running {}: {error}", rustc.to_string_lossy()))?;
    let library_dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() && !library_dir.is_empty() && Path::new(&library_dir).is_dir() {
        return Ok(());
    }
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|error| {
            format!("the {WASM_TARGET} target is missing and rustup could not be run: {error}")
        })?;
    if !status.success() {
        return Err(format!(
            "`rustup target add {WASM_TARGET}` failed ({status})"
        ));
    }
    Ok(())
}

/// The profile the module is built with, given to the nested cargo as `--config` so that it is
/// the same in the workspace and in a packaged crate (whose manifest carries no profiles).
/// Panics must abort (there is no unwinding in the module and a trap is the only honest end),
/// and one codegen unit with full LTO keeps it small. opt-level 3, not "s": since input is read
/// in one pass, inlining pays. Measured 2026-11-29 (typical Deployment in wasmtime): 26.7 us at
/// "s", 18.7 us at 3, for 88 KB more.
const WASM_PROFILE_SETTINGS: [(&str, &str); 7] = [
    ("inherits", "\"release\""),
    ("panic", "\"abort\""),
    ("lto", "\"fat\""),
    ("codegen-units", "1"),
    ("opt-level", "3"),
    ("strip", "\"symbols\""),
    ("debug", "false"),
];

/// Runs the nested `cargo build` and returns the path of the linked, unfinished module.
pub fn compile_policy(source: &PolicySource) -> Result<PathBuf, String> {
    let (manifest, target_dir) = match source {
        PolicySource::Workspace(root) => (
            root.join("policy").join("Cargo.toml"),
            root.join(WASM_TARGET_DIR),
        ),
        PolicySource::Packaged {
            unpacked,
            copy_to,
            lockfile,
        } => {
            let manifest = copy_packaged_policy(unpacked, copy_to, lockfile.as_deref())?;
            (manifest, copy_to.join("target"))
        }
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["-p", POLICY_PACKAGE, "--lib", "--target", WASM_TARGET]);
    for (key, value) in WASM_PROFILE_SETTINGS {
        command
            .arg("--config")
            .arg(format!("profile.{WASM_PROFILE}.{key}={value}"));
    }
    command
        .args(["--profile", WASM_PROFILE])
        .arg("--target-dir")
        .arg(&target_dir)
        .stdin(Stdio::null())
        // A build script's stdout carries instructions to cargo: keep the nested output off it.
        .stdout(Stdio::from(std::io::stderr()));
    for (name, _) in std::env::vars_os() {
        if leaks_into_nested_build(&name) {
            command.env_remove(&name);
        }
    }
    let status = command
        .status()
        .map_err(|error| format!("running {}: {error}", cargo.to_string_lossy()))?;
    if !status.success() {
        return Err(format!("building the wasm module failed ({status})"));
    }
    let linked = target_dir
        .join(WASM_TARGET)
        .join(WASM_PROFILE)
        .join(format!("{}.wasm", POLICY_PACKAGE.replace('-', "_")));
    if !linked.is_file() {
        return Err(format!(
            "the wasm build did not produce {}",
            linked.display()
        ));
    }
    Ok(linked)
}

/// Copies a packaged `meshlife-policy` (its manifest, build script and sources) into `copy_to`
/// as a workspace of its own, with `lockfile` beside it, and returns the copy's manifest. The
/// packaged manifest is already normalized (no `workspace = true`), so it stands alone once it
/// declares itself a workspace root: without that, a copy under a workspace's `target/` would
/// be taken for one of that workspace's members.
fn copy_packaged_policy(
    unpacked: &Path,
    copy_to: &Path,
    lockfile: Option<&Path>,
) -> Result<PathBuf, String> {
    let copy_error =
        |what: &Path, error: std::io::Error| format!("copying {}: {error}", what.display());
    copy_tree(&unpacked.join("src"), &copy_to.join("src"))?;
    let build_script = unpacked.join("build.rs");
    if build_script.is_file() {
        std::fs::copy(&build_script, copy_to.join("build.rs"))
            .map_err(|error| copy_error(&build_script, error))?;
    }
    let packaged_manifest = unpacked.join("Cargo.toml");
    let manifest_text = std::fs::read_to_string(&packaged_manifest)
        .map_err(|error| format!("reading {}: {error}", packaged_manifest.display()))?;
    let manifest = copy_to.join("Cargo.toml");
    std::fs::write(&manifest, format!("{manifest_text}\n[workspace]\n"))
        .map_err(|error| format!("writing {}: {error}", manifest.display()))?;
    if let Some(lockfile) = lockfile {
        std::fs::copy(lockfile, copy_to.join("Cargo.lock"))
            .map_err(|error| copy_error(lockfile, error))?;
    }
    Ok(manifest)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|error| format!("creating {}: {error}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|error| format!("reading {}: {error}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("reading {}: {error}", from.display()))?;
        let path = entry.path();
        let destination = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &destination)?;
        } else {
            std::fs::copy(&path, &destination)
                .map_err(|error| format!("copying {}: {error}", path.display()))?;
        }
    }
    Ok(())
}

/// Environment an outer cargo (or a build script's environment) sets that would bend the nested
/// build: its target, rustflags, target directory, jobserver, clippy wrapper and build-script
/// variables. Registry, network and home settings stay.
fn leaks_into_nested_build(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    const KEPT_CARGO_PREFIXES: [&str; 6] = [
        "CARGO_HOME",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRY_",
        "CARGO_REGISTRIES_",
        "CARGO_TERM_",
    ];
    const REMOVED: [&str; 16] = [
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "RUSTDOC",
        "MAKEFLAGS",
        "MFLAGS",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "CARGO",
        "CARGO_ENCODED_RUSTFLAGS",
    ];
    if name.starts_with("__CARGO") || REMOVED.contains(&name) {
        return true;
    }
    name.starts_with("CARGO_")
        && !KEPT_CARGO_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// Rewrites the ABI version globals, lowers post-MVP instructions and validates the result for
/// MVP + bulk-memory engines.
pub fn finish_module(linked: &[u8]) -> Result<Vec<u8>, String> {
    let survey = Survey::of(linked)?;
    let mut finisher = Finisher::new(&survey)?;
    let mut module = wasm_encoder::Module::new();
    finisher
        .parse_core_module(&mut module, Parser::new(0), linked)
        .map_err(|error| format!("re-encoding the module: {error}"))?;
    let finished = module.finish();
    Validator::new_with_features(old_engine_features())
        .validate_all(&finished)
        .map_err(|error| {
            format!("the finished module needs more than MVP + bulk-memory: {error}")
        })?;
    Ok(finished)
}

/// What the finisher needs to know before it re-encodes the first section.
struct Survey {
    type_count: u32,
    imported_functions: u32,
    defined_functions: u32,
    imported_globals: u32,
    abi_globals: HashMap<u32, i32>,
    saturating_truncations: Vec<Truncation>,
    /// Type index of every function, imported ones first.
    function_types: Vec<u32>,
    /// Parameter types of each function type, by type index.
    type_params: Vec<Vec<wasmparser::ValType>>,
    imported_function_names: Vec<String>,
    /// Indices of the functions the host may call, in export order.
    exported_functions: Vec<u32>,
    /// Mutable globals defined by the module, with their `i32.const` initial values.
    mutable_globals: Vec<(u32, Option<i32>)>,
}

/// The only function import a wrapped module may have: one that never calls back into it, so
/// no export is ever entered while module frames are live.
const NON_REENTRANT_IMPORTS: [&str; 1] = ["opa_abort"];

impl Survey {
    fn of(module: &[u8]) -> Result<Survey, String> {
        let mut survey = Survey {
            type_count: 0,
            imported_functions: 0,
            defined_functions: 0,
            imported_globals: 0,
            abi_globals: HashMap::new(),
            saturating_truncations: Vec::new(),
            function_types: Vec::new(),
            type_params: Vec::new(),
            imported_function_names: Vec::new(),
            exported_functions: Vec::new(),
            mutable_globals: Vec::new(),
        };
        let parse_error =
            |error: wasmparser::BinaryReaderError| format!("parsing the module: {error}");
        for payload in Parser::new(0).parse_all(module) {
            match payload.map_err(parse_error)? {
                Payload::TypeSection(section) => {
                    survey.type_count = section.count();
                    for function_type in section.into_iter_err_on_gc_types() {
                        let function_type = function_type.map_err(parse_error)?;
                        survey.type_params.push(function_type.params().to_vec());
                    }
                }
                Payload::ImportSection(section) => {
                    for import in section.into_imports() {
                        let import = import.map_err(parse_error)?;
                        match import.ty {
                            wasmparser::TypeRef::Func(type_index) => {
                                survey.imported_functions += 1;
                                survey.function_types.push(type_index);
                                survey.imported_function_names.push(import.name.to_string());
                            }
                            wasmparser::TypeRef::Global(_) => survey.imported_globals += 1,
                            _ => {}
                        }
                    }
                }
                Payload::FunctionSection(section) => {
                    survey.defined_functions = section.count();
                    for type_index in section {
                        survey.function_types.push(type_index.map_err(parse_error)?);
                    }
                }
                Payload::GlobalSection(section) => {
                    for (position, global) in section.into_iter().enumerate() {
                        let global = global.map_err(parse_error)?;
                        if !global.ty.mutable {
                            continue;
                        }
                        let mut init = global.init_expr.get_operators_reader();
                        let value = match init.read().map_err(parse_error)? {
                            Operator::I32Const { value } => Some(value),
                            _ => None,
                        };
                        let index = survey.imported_globals + position as u32;
                        survey.mutable_globals.push((index, value));
                    }
                }
                Payload::ExportSection(section) => {
                    for export in section {
                        let export = export.map_err(parse_error)?;
                        if export.kind == wasmparser::ExternalKind::Func {
                            survey.exported_functions.push(export.index);
                        }
                        let value = match export.name {
                            ABI_VERSION_GLOBAL => ABI_VERSION,
                            ABI_MINOR_VERSION_GLOBAL => ABI_MINOR_VERSION,
                            _ => continue,
                        };
                        if export.kind != wasmparser::ExternalKind::Global {
                            return Err(format!("`{}` is not exported as a global", export.name));
                        }
                        survey.abi_globals.insert(export.index, value);
                    }
                }
                Payload::CodeSectionEntry(body) => {
                    let mut operators = body.get_operators_reader().map_err(parse_error)?;
                    while !operators.eof() {
                        let operator = operators.read().map_err(parse_error)?;
                        if let Some(truncation) = Truncation::of(&operator)
                            && !survey.saturating_truncations.contains(&truncation)
                        {
                            survey.saturating_truncations.push(truncation);
                        }
                    }
                }
                _ => {}
            }
        }
        if survey.abi_globals.len() != 2 {
            return Err(format!(
                "the module must export the globals `{ABI_VERSION_GLOBAL}` and \
                 `{ABI_MINOR_VERSION_GLOBAL}` (the policy's `abi` module defines them)"
            ));
        }
        Ok(survey)
    }

    /// The stack pointer LLD defines (`__stack_pointer`, the module's only mutable global once
    /// symbols are stripped) and its initial value; `None` for a module without a shadow stack
    /// (no mutable global), which has nothing to reset.
    fn stack_pointer(&self) -> Result<Option<(u32, i32)>, String> {
        if self.mutable_globals.is_empty() {
            return Ok(None);
        }
        if let Some(name) = self
            .imported_function_names
            .iter()
            .find(|name| !NON_REENTRANT_IMPORTS.contains(&name.as_str()))
        {
            return Err(format!(
                "the module imports `{name}`, which may call back into it, so its exports cannot \
                 reset the stack pointer on entry; only {NON_REENTRANT_IMPORTS:?} are expected"
            ));
        }
        match self.mutable_globals.as_slice() {
            [(index, Some(initial))] => Ok(Some((*index, *initial))),
            globals => Err(format!(
                "expected exactly one mutable i32 global initialised by a constant (the stack \
                 pointer), found {globals:?}"
            )),
        }
    }
}

/// An exported function's stand-in: resets the stack pointer, then calls the original with the
/// same arguments, so the host's view of the export (name, type) is unchanged.
struct EntryWrapper {
    wrapped: u32,
    type_index: u32,
    param_count: u32,
}

impl EntryWrapper {
    fn body(&self, stack_pointer: u32, initial: i32) -> Function {
        let mut body = Function::new([]);
        body.instruction(&Instruction::I32Const(initial));
        body.instruction(&Instruction::GlobalSet(stack_pointer));
        for param in 0..self.param_count {
            body.instruction(&Instruction::LocalGet(param));
        }
        body.instruction(&Instruction::Call(self.wrapped));
        body.instruction(&Instruction::End);
        body
    }
}

/// A saturating float-to-int conversion, replaced by a call to a helper function that does the
/// same with MVP instructions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Truncation {
    from: FloatType,
    to: IntType,
    signed: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FloatType {
    F32,
    F64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum IntType {
    I32,
    I64,
}

impl Truncation {
    fn of(operator: &Operator) -> Option<Truncation> {
        use FloatType::*;
        use IntType::*;
        let (from, to, signed) = match operator {
            Operator::I32TruncSatF32S => (F32, I32, true),
            Operator::I32TruncSatF32U => (F32, I32, false),
            Operator::I32TruncSatF64S => (F64, I32, true),
            Operator::I32TruncSatF64U => (F64, I32, false),
            Operator::I64TruncSatF32S => (F32, I64, true),
            Operator::I64TruncSatF32U => (F32, I64, false),
            Operator::I64TruncSatF64S => (F64, I64, true),
            Operator::I64TruncSatF64U => (F64, I64, false),
            _ => return None,
        };
        Some(Truncation { from, to, signed })
    }

    fn param(self) -> ValType {
        match self.from {
            FloatType::F32 => ValType::F32,
            FloatType::F64 => ValType::F64,
        }
    }

    fn result(self) -> ValType {
        match self.to {
            IntType::I32 => ValType::I32,
            IntType::I64 => ValType::I64,
        }
    }

    /// `(param float) (result int)`: NaN gives 0, values beyond the range give its ends, others
    /// the trapping truncation, which is safe once the range is checked.
    fn helper_body(self) -> Function {
        let bits: u32 = if self.to == IntType::I32 { 32 } else { 64 };
        // The plain conversion traps unless lower < x < upper. For signed results that means
        // x <= -bound - 1, which is x < -bound where -bound - 1 is not representable (f32, and
        // f64 converting to i64). All bounds used are exact in both float types.
        let (upper, lower, lower_inclusive) = if self.signed {
            let bound = 2f64.powi(bits as i32 - 1);
            if self.from == FloatType::F64 && self.to == IntType::I32 {
                (bound, -bound - 1.0, true)
            } else {
                (bound, -bound, false)
            }
        } else {
            (2f64.powi(bits as i32), -1.0, true)
        };
        let (min, max): (i64, i64) = match (self.to, self.signed) {
            (IntType::I32, true) => (i32::MIN.into(), i32::MAX.into()),
            (IntType::I32, false) => (0, -1),
            (IntType::I64, true) => (i64::MIN, i64::MAX),
            (IntType::I64, false) => (0, -1),
        };
        let int_const = |value: i64| match self.to {
            IntType::I32 => Instruction::I32Const(value as i32),
            IntType::I64 => Instruction::I64Const(value),
        };
        let float_const = |value: f64| match self.from {
            FloatType::F32 => Instruction::F32Const((value as f32).into()),
            FloatType::F64 => Instruction::F64Const(value.into()),
        };
        let (not_equal, at_least, at_most, below) = match self.from {
            FloatType::F32 => (
                Instruction::F32Ne,
                Instruction::F32Ge,
                Instruction::F32Le,
                Instruction::F32Lt,
            ),
            FloatType::F64 => (
                Instruction::F64Ne,
                Instruction::F64Ge,
                Instruction::F64Le,
                Instruction::F64Lt,
            ),
        };
        let truncate = match (self.to, self.from, self.signed) {
            (IntType::I32, FloatType::F32, true) => Instruction::I32TruncF32S,
            (IntType::I32, FloatType::F32, false) => Instruction::I32TruncF32U,
            (IntType::I32, FloatType::F64, true) => Instruction::I32TruncF64S,
            (IntType::I32, FloatType::F64, false) => Instruction::I32TruncF64U,
            (IntType::I64, FloatType::F32, true) => Instruction::I64TruncF32S,
            (IntType::I64, FloatType::F32, false) => Instruction::I64TruncF32U,
            (IntType::I64, FloatType::F64, true) => Instruction::I64TruncF64S,
            (IntType::I64, FloatType::F64, false) => Instruction::I64TruncF64U,
        };
        let x = Instruction::LocalGet(0);
        let mut body = Function::new([]);
        let checks = [
            (vec![x.clone(), x.clone(), not_equal], 0),
            (vec![x.clone(), float_const(upper), at_least], max),
            (
                vec![
                    x.clone(),
                    float_const(lower),
                    if lower_inclusive { at_most } else { below },
                ],
                min,
            ),
        ];
        for (condition, result) in checks {
            for instruction in &condition {
                body.instruction(instruction);
            }
            body.instruction(&Instruction::If(BlockType::Empty));
            body.instruction(&int_const(result));
            body.instruction(&Instruction::Return);
            body.instruction(&Instruction::End);
        }
        body.instruction(&x);
        body.instruction(&truncate);
        body.instruction(&Instruction::End);
        body
    }
}

/// The MVP sequence for a sign-extension instruction: shift the narrow value to the top of the
/// register and arithmetic-shift it back.
fn sign_extension_lowering(operator: &Operator) -> Option<[Instruction<'static>; 4]> {
    let (is_i64, width) = match operator {
        Operator::I32Extend8S => (false, 8),
        Operator::I32Extend16S => (false, 16),
        Operator::I64Extend8S => (true, 8),
        Operator::I64Extend16S => (true, 16),
        Operator::I64Extend32S => (true, 32),
        _ => return None,
    };
    Some(if is_i64 {
        let shift = 64 - width;
        [
            Instruction::I64Const(shift),
            Instruction::I64Shl,
            Instruction::I64Const(shift),
            Instruction::I64ShrS,
        ]
    } else {
        let shift = 32 - width as i32;
        [
            Instruction::I32Const(shift),
            Instruction::I32Shl,
            Instruction::I32Const(shift),
            Instruction::I32ShrS,
        ]
    })
}

struct Finisher {
    abi_globals: HashMap<u32, i32>,
    next_global: u32,
    /// Helpers in the order they are appended; helper `k` has function index
    /// `first_helper_function + k` and type index `first_helper_type + k`.
    helpers: Vec<Truncation>,
    first_helper_function: u32,
    first_helper_type: u32,
    /// Wrappers follow the helpers; wrapper `k` stands for the `k`th exported function.
    wrappers: Vec<EntryWrapper>,
    stack_pointer: u32,
    initial_stack_pointer: i32,
}

impl Finisher {
    fn new(survey: &Survey) -> Result<Finisher, String> {
        let stack = survey.stack_pointer()?;
        let (stack_pointer, initial_stack_pointer) = stack.unwrap_or_default();
        let mut wrappers = Vec::new();
        let wrapped_exports = match stack {
            Some(_) => survey.exported_functions.as_slice(),
            None => &[],
        };
        for &wrapped in wrapped_exports {
            if wrappers
                .iter()
                .any(|wrapper: &EntryWrapper| wrapper.wrapped == wrapped)
            {
                continue;
            }
            let type_index = *survey
                .function_types
                .get(wrapped as usize)
                .ok_or_else(|| format!("export of function {wrapped}, which does not exist"))?;
            let params = survey
                .type_params
                .get(type_index as usize)
                .ok_or_else(|| format!("function {wrapped} has type {type_index}, unknown"))?;
            wrappers.push(EntryWrapper {
                wrapped,
                type_index,
                param_count: params.len() as u32,
            });
        }
        Ok(Finisher {
            abi_globals: survey.abi_globals.clone(),
            next_global: survey.imported_globals,
            helpers: survey.saturating_truncations.clone(),
            first_helper_function: survey.imported_functions + survey.defined_functions,
            first_helper_type: survey.type_count,
            wrappers,
            stack_pointer,
            initial_stack_pointer,
        })
    }

    fn wrapper_index(&self, wrapped: u32) -> Option<u32> {
        let position = self
            .wrappers
            .iter()
            .position(|wrapper| wrapper.wrapped == wrapped)?;
        Some(self.first_helper_function + (self.helpers.len() + position) as u32)
    }

    fn helper_index(&self, truncation: Truncation) -> Option<u32> {
        let position = self
            .helpers
            .iter()
            .position(|helper| *helper == truncation)?;
        Some(self.first_helper_function + position as u32)
    }
}

type Reencoded = Result<(), ReencodeError<String>>;

impl Reencode for Finisher {
    type Error = String;

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Reencoded {
        utils::parse_type_section(self, types, section)?;
        for helper in &self.helpers {
            types.ty().function([helper.param()], [helper.result()]);
        }
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Reencoded {
        utils::parse_function_section(self, functions, section)?;
        for position in 0..self.helpers.len() as u32 {
            functions.function(self.first_helper_type + position);
        }
        for wrapper in &self.wrappers {
            functions.function(wrapper.type_index);
        }
        Ok(())
    }

    fn parse_export(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        export: wasmparser::Export<'_>,
    ) -> Reencoded {
        let wrapper = match export.kind {
            wasmparser::ExternalKind::Func => self.wrapper_index(export.index),
            _ => None,
        };
        let Some(wrapper) = wrapper else {
            return utils::parse_export(self, exports, export);
        };
        exports.export(export.name, wasm_encoder::ExportKind::Func, wrapper);
        Ok(())
    }

    fn parse_global(
        &mut self,
        globals: &mut GlobalSection,
        global: wasmparser::Global<'_>,
    ) -> Reencoded {
        let index = self.next_global;
        self.next_global += 1;
        let Some(&value) = self.abi_globals.get(&index) else {
            return utils::parse_global(self, globals, global);
        };
        if global.ty.mutable || global.ty.content_type != wasmparser::ValType::I32 {
            return Err(ReencodeError::UserError(format!(
                "ABI version global {index} must be an immutable i32"
            )));
        }
        globals.global(self.global_type(global.ty)?, &ConstExpr::i32_const(value));
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Reencoded {
        utils::parse_code_section(self, code, section)?;
        for helper in &self.helpers {
            code.function(&helper.helper_body());
        }
        for wrapper in &self.wrappers {
            code.function(&wrapper.body(self.stack_pointer, self.initial_stack_pointer));
        }
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut CodeSection,
        body: wasmparser::FunctionBody<'_>,
    ) -> Reencoded {
        let mut function = self.new_function_with_parsed_locals(&body)?;
        let mut operators = body.get_operators_reader()?;
        while !operators.eof() {
            let operator = operators.read()?;
            if let Some(sequence) = sign_extension_lowering(&operator) {
                for instruction in &sequence {
                    function.instruction(instruction);
                }
            } else if let Some(helper) =
                Truncation::of(&operator).and_then(|t| self.helper_index(t))
            {
                function.instruction(&Instruction::Call(helper));
            } else {
                // Re-encoding also writes `call_indirect`'s table index in the one-byte MVP form.
                function.instruction(&self.instruction(operator)?);
            }
        }
        code.function(&function);
        Ok(())
    }

    fn parse_custom_section(
        &mut self,
        module: &mut wasm_encoder::Module,
        section: wasmparser::CustomSectionReader<'_>,
    ) -> Reencoded {
        // It lists the post-MVP features the code no longer uses; tools that trust it (wasm-opt)
        // would bring them back.
        if section.name() == "target_features" {
            return Ok(());
        }
        utils::parse_custom_section(self, module, section)
    }
}
