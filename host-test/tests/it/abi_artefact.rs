//! The built module, read as bytes: imports, exports, ABI globals and the wasm features it needs
//! (the shared `opa-wasm-abi.md`, sections 0 and 1.3). Plus the finishing step's lowering of
//! post-MVP instructions, run against native Rust semantics.

use crate::common;

use std::collections::BTreeMap;

use meshlife::module::build;
use wasmparser::{
    CompositeInnerType, ExternalKind, Operator, Parser, Payload, TypeRef, ValType, Validator,
    WasmFeatures,
};

/// (params, results), all i32 in this ABI.
type Signature = (usize, usize);

/// Every export of ABI 1.0-1.3 (`opa-wasm-abi.md` section 1.3).
const ABI_EXPORTS: [(&str, Signature); 23] = [
    ("eval", (1, 1)),
    ("builtins", (0, 1)),
    ("entrypoints", (0, 1)),
    ("opa_eval_ctx_new", (0, 1)),
    ("opa_eval_ctx_set_input", (2, 0)),
    ("opa_eval_ctx_set_data", (2, 0)),
    ("opa_eval_ctx_set_entrypoint", (2, 0)),
    ("opa_eval_ctx_get_result", (1, 1)),
    ("opa_malloc", (1, 1)),
    ("opa_free", (1, 0)),
    ("opa_json_parse", (2, 1)),
    ("opa_value_parse", (2, 1)),
    ("opa_json_dump", (1, 1)),
    ("opa_value_dump", (1, 1)),
    ("opa_heap_ptr_get", (0, 1)),
    ("opa_heap_ptr_set", (1, 0)),
    ("opa_value_add_path", (3, 1)),
    ("opa_value_remove_path", (2, 1)),
    ("opa_value_free", (1, 0)),
    ("opa_heap_blocks_stash", (0, 0)),
    ("opa_heap_blocks_restore", (0, 0)),
    ("opa_heap_stash_clear", (0, 0)),
    ("opa_eval", (7, 1)),
];

/// Function imports OPA modules may declare, with OPA's signatures.
fn allowed_function_imports() -> BTreeMap<&'static str, Signature> {
    BTreeMap::from([
        ("opa_abort", (1, 0)),
        ("opa_println", (1, 0)),
        ("opa_builtin0", (2, 1)),
        ("opa_builtin1", (3, 1)),
        ("opa_builtin2", (4, 1)),
        ("opa_builtin3", (5, 1)),
        ("opa_builtin4", (6, 1)),
    ])
}

struct Artefact {
    /// Function types, as (params, results) if every value is i32.
    types: Vec<Option<Signature>>,
    function_types: Vec<u32>,
    function_imports: BTreeMap<String, Signature>,
    memory_imports: Vec<(String, String, wasmparser::MemoryType)>,
    other_imports: Vec<String>,
    exports: BTreeMap<String, (ExternalKind, u32)>,
    /// Defined globals: (type, init value if it is a plain `i32.const`).
    globals: Vec<(wasmparser::GlobalType, Option<i32>)>,
    imported_globals: u32,
}

fn all_i32(types: &[ValType]) -> bool {
    types.iter().all(|ty| *ty == ValType::I32)
}

fn read(bytes: &[u8]) -> Artefact {
    let mut artefact = Artefact {
        types: Vec::new(),
        function_types: Vec::new(),
        function_imports: BTreeMap::new(),
        memory_imports: Vec::new(),
        other_imports: Vec::new(),
        exports: BTreeMap::new(),
        globals: Vec::new(),
        imported_globals: 0,
    };
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.unwrap() {
            Payload::TypeSection(section) => {
                for ty in section.into_iter_err_on_gc_types() {
                    let ty = ty.unwrap();
                    let (params, results) = (ty.params(), ty.results());
                    let signature = (all_i32(params) && all_i32(results))
                        .then_some((params.len(), results.len()));
                    artefact.types.push(signature);
                }
            }
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.unwrap();
                    let name = format!("{}.{}", import.module, import.name);
                    match import.ty {
                        TypeRef::Func(type_index) => {
                            artefact.function_types.push(type_index);
                            let signature = artefact.types[type_index as usize]
                                .unwrap_or_else(|| panic!("{name} has a non-i32 signature"));
                            assert_eq!(import.module, "env", "{name}");
                            artefact
                                .function_imports
                                .insert(import.name.to_owned(), signature);
                        }
                        TypeRef::Memory(memory) => artefact.memory_imports.push((
                            import.module.to_owned(),
                            import.name.to_owned(),
                            memory,
                        )),
                        TypeRef::Global(_) => {
                            artefact.imported_globals += 1;
                            artefact.other_imports.push(name);
                        }
                        _ => artefact.other_imports.push(name),
                    }
                }
            }
            Payload::FunctionSection(section) => {
                artefact
                    .function_types
                    .extend(section.into_iter().map(Result::unwrap));
            }
            Payload::GlobalSection(section) => {
                for global in section {
                    let global = global.unwrap();
                    let operators: Vec<Operator> = global
                        .init_expr
                        .get_operators_reader()
                        .into_iter()
                        .map(Result::unwrap)
                        .collect();
                    let value = match operators.as_slice() {
                        [Operator::I32Const { value }, Operator::End] => Some(*value),
                        _ => None,
                    };
                    artefact.globals.push((global.ty, value));
                }
            }
            Payload::ExportSection(section) => {
                for export in section {
                    let export = export.unwrap();
                    let previous = artefact
                        .exports
                        .insert(export.name.to_owned(), (export.kind, export.index));
                    assert!(previous.is_none(), "export {} appears twice", export.name);
                }
            }
            _ => {}
        }
    }
    artefact
}

#[test]
fn imports_only_memory_and_opa_host_functions() {
    let artefact = read(common::MODULE);
    assert!(
        artefact.other_imports.is_empty(),
        "unexpected imports: {:?}",
        artefact.other_imports
    );
    let [(module, name, memory)] = artefact.memory_imports.as_slice() else {
        panic!(
            "exactly one memory import expected: {:?}",
            artefact.memory_imports
        );
    };
    assert_eq!((module.as_str(), name.as_str()), ("env", "memory"));
    assert!(
        memory.initial <= 2,
        "memory minimum {} pages; hosts provide as few as 2",
        memory.initial
    );
    assert_eq!(
        memory.maximum, None,
        "a declared maximum is refused by npm, wasmer and burrego"
    );
    assert!(!memory.shared && !memory.memory64 && memory.page_size_log2.is_none());

    let allowed = allowed_function_imports();
    for (name, signature) in &artefact.function_imports {
        assert_eq!(
            allowed.get(name.as_str()),
            Some(signature),
            "import env.{name} {signature:?}"
        );
    }
}

#[test]
fn exports_memory_and_every_abi_function_with_its_signature() {
    let artefact = read(common::MODULE);
    assert!(matches!(
        artefact.exports.get("memory"),
        Some((ExternalKind::Memory, 0))
    ));
    for (name, expected) in ABI_EXPORTS {
        let Some(&(kind, index)) = artefact.exports.get(name) else {
            panic!("missing export {name}");
        };
        assert_eq!(kind, ExternalKind::Func, "{name} is a function");
        let type_index = artefact.function_types[index as usize];
        assert_eq!(
            artefact.types[type_index as usize],
            Some(expected),
            "signature of {name}"
        );
    }
}

#[test]
fn abi_version_globals_are_1_and_3() {
    let artefact = read(common::MODULE);
    for (name, expected) in [
        ("opa_wasm_abi_version", 1),
        ("opa_wasm_abi_minor_version", 3),
    ] {
        let Some(&(ExternalKind::Global, index)) = artefact.exports.get(name) else {
            panic!("{name} is not an exported global");
        };
        let (ty, value) = artefact.globals[(index - artefact.imported_globals) as usize];
        assert_eq!(ty.content_type, ValType::I32, "{name} type");
        assert!(!ty.mutable, "{name} must be immutable");
        assert_eq!(value, Some(expected), "{name}");
    }
}

#[test]
fn validates_with_mvp_and_bulk_memory_only() {
    Validator::new_with_features(WasmFeatures::MVP | WasmFeatures::BULK_MEMORY)
        .validate_all(common::MODULE)
        .expect("the module loads in MVP + bulk-memory engines");
}

#[test]
fn no_function_type_uses_multiple_results() {
    for payload in Parser::new(0).parse_all(common::MODULE) {
        if let Payload::TypeSection(section) = payload.unwrap() {
            for group in section {
                for sub_type in group.unwrap().types() {
                    if let CompositeInnerType::Func(ty) = &sub_type.composite_type.inner {
                        assert!(ty.results().len() <= 1, "multi-value type {ty:?}");
                    }
                }
            }
        }
    }
}

/// A module that uses every instruction the finishing step lowers, run before and after
/// lowering: results must match Rust's own conversions (which saturate like `trunc_sat`).
#[test]
fn lowering_keeps_the_semantics_of_sign_extension_and_saturating_truncation() {
    use wasm_encoder::{
        CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
        GlobalSection, GlobalType, Instruction, Module, TypeSection, ValType as EncodedType,
    };

    let cases: Vec<(&str, EncodedType, EncodedType, Instruction)> = vec![
        (
            "i32_extend8_s",
            EncodedType::I32,
            EncodedType::I32,
            Instruction::I32Extend8S,
        ),
        (
            "i32_extend16_s",
            EncodedType::I32,
            EncodedType::I32,
            Instruction::I32Extend16S,
        ),
        (
            "i64_extend8_s",
            EncodedType::I64,
            EncodedType::I64,
            Instruction::I64Extend8S,
        ),
        (
            "i64_extend16_s",
            EncodedType::I64,
            EncodedType::I64,
            Instruction::I64Extend16S,
        ),
        (
            "i64_extend32_s",
            EncodedType::I64,
            EncodedType::I64,
            Instruction::I64Extend32S,
        ),
        (
            "i32_f32_s",
            EncodedType::F32,
            EncodedType::I32,
            Instruction::I32TruncSatF32S,
        ),
        (
            "i32_f32_u",
            EncodedType::F32,
            EncodedType::I32,
            Instruction::I32TruncSatF32U,
        ),
        (
            "i32_f64_s",
            EncodedType::F64,
            EncodedType::I32,
            Instruction::I32TruncSatF64S,
        ),
        (
            "i32_f64_u",
            EncodedType::F64,
            EncodedType::I32,
            Instruction::I32TruncSatF64U,
        ),
        (
            "i64_f32_s",
            EncodedType::F32,
            EncodedType::I64,
            Instruction::I64TruncSatF32S,
        ),
        (
            "i64_f32_u",
            EncodedType::F32,
            EncodedType::I64,
            Instruction::I64TruncSatF32U,
        ),
        (
            "i64_f64_s",
            EncodedType::F64,
            EncodedType::I64,
            Instruction::I64TruncSatF64S,
        ),
        (
            "i64_f64_u",
            EncodedType::F64,
            EncodedType::I64,
            Instruction::I64TruncSatF64U,
        ),
    ];
    let mut types = TypeSection::new();
    let mut functions = FunctionSection::new();
    let mut code = CodeSection::new();
    let mut exports = ExportSection::new();
    for (index, (name, param, result, instruction)) in cases.iter().enumerate() {
        types.ty().function([*param], [*result]);
        functions.function(index as u32);
        let mut body = Function::new([]);
        body.instruction(&Instruction::LocalGet(0));
        body.instruction(instruction);
        body.instruction(&Instruction::End);
        code.function(&body);
        exports.export(name, ExportKind::Func, index as u32);
    }
    let mut globals = GlobalSection::new();
    for (index, name) in ["opa_wasm_abi_version", "opa_wasm_abi_minor_version"]
        .iter()
        .enumerate()
    {
        let ty = GlobalType {
            val_type: EncodedType::I32,
            mutable: false,
            shared: false,
        };
        globals.global(ty, &ConstExpr::i32_const(1_048_576 + index as i32 * 4));
        exports.export(name, ExportKind::Global, index as u32);
    }
    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&globals)
        .section(&exports)
        .section(&code);
    let original = module.finish();
    let lowered = build::finish_module(&original).expect("finishing succeeds");
    let artefact = read(&lowered);
    assert_eq!(artefact.globals[0].1, Some(1));
    assert_eq!(artefact.globals[1].1, Some(3));

    let engine = wasmtime::Engine::default();
    let mut store = wasmtime::Store::new(&engine, ());
    let original = wasmtime::Module::new(&engine, &original).unwrap();
    let original = wasmtime::Instance::new(&mut store, &original, &[]).unwrap();
    let lowered = wasmtime::Module::new(&engine, &lowered).unwrap();
    let lowered = wasmtime::Instance::new(&mut store, &lowered, &[]).unwrap();

    let integers: Vec<i64> = vec![
        0,
        1,
        -1,
        127,
        128,
        255,
        256,
        -128,
        -129,
        32767,
        32768,
        65535,
        -32768,
        -32769,
        i32::MAX as i64,
        i32::MIN as i64,
        u32::MAX as i64,
        1 << 32,
        i64::MAX,
        i64::MIN,
        0x1234_5678_9abc_def0,
        -0x1234_5678_9abc_def0,
        0x80,
        0x8000,
        0x8000_0000,
    ];
    let floats: Vec<f64> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        -0.999,
        -1.0,
        -1.5,
        1.9,
        2147483646.5,
        2147483647.0,
        2147483647.9,
        2147483648.0,
        -2147483648.0,
        -2147483648.9,
        -2147483649.0,
        -2147483904.0,
        4294967295.0,
        4294967295.5,
        4294967296.0,
        9.223372036854775e18,
        9.223372036854776e18,
        -9.223372036854776e18,
        -9.223372036854778e18,
        1.844674407370955e19,
        1.8446744073709552e19,
        1e30,
        -1e30,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        3.4e38,
    ];
    let mut call = |instance: &wasmtime::Instance, name: &str, argument: wasmtime::Val| {
        let function = instance.get_func(&mut store, name).unwrap();
        let mut results = [wasmtime::Val::I32(0)];
        function
            .call(&mut store, &[argument], &mut results)
            .unwrap();
        match results[0] {
            wasmtime::Val::I32(value) => value as i64,
            wasmtime::Val::I64(value) => value,
            ref other => panic!("unexpected result {other:?}"),
        }
    };
    for (name, param, _, _) in &cases {
        let arguments: Vec<wasmtime::Val> = match param {
            EncodedType::I32 => integers
                .iter()
                .map(|&v| wasmtime::Val::I32(v as i32))
                .collect(),
            EncodedType::I64 => integers.iter().map(|&v| wasmtime::Val::I64(v)).collect(),
            EncodedType::F32 => floats
                .iter()
                .map(|&v| wasmtime::Val::F32((v as f32).to_bits()))
                .collect(),
            _ => floats
                .iter()
                .map(|&v| wasmtime::Val::F64(v.to_bits()))
                .collect(),
        };
        for argument in arguments {
            let expected = call(&original, name, argument);
            let actual = call(&lowered, name, argument);
            assert_eq!(actual, expected, "{name}({argument:?})");
            assert_eq!(
                expected,
                native(name, &argument),
                "{name}({argument:?}) natively"
            );
        }
    }
}

/// The same conversions in Rust, whose `as` casts saturate and map NaN to 0.
fn native(name: &str, argument: &wasmtime::Val) -> i64 {
    use wasmtime::Val;
    match (name, argument) {
        ("i32_extend8_s", Val::I32(v)) => *v as i8 as i64,
        ("i32_extend16_s", Val::I32(v)) => *v as i16 as i64,
        ("i64_extend8_s", Val::I64(v)) => *v as i8 as i64,
        ("i64_extend16_s", Val::I64(v)) => *v as i16 as i64,
        ("i64_extend32_s", Val::I64(v)) => *v as i32 as i64,
        ("i32_f32_s", Val::F32(bits)) => f32::from_bits(*bits) as i32 as i64,
        ("i32_f32_u", Val::F32(bits)) => f32::from_bits(*bits) as u32 as i32 as i64,
        ("i32_f64_s", Val::F64(bits)) => f64::from_bits(*bits) as i32 as i64,
        ("i32_f64_u", Val::F64(bits)) => f64::from_bits(*bits) as u32 as i32 as i64,
        ("i64_f32_s", Val::F32(bits)) => f32::from_bits(*bits) as i64,
        ("i64_f32_u", Val::F32(bits)) => f32::from_bits(*bits) as u64 as i64,
        ("i64_f64_s", Val::F64(bits)) => f64::from_bits(*bits) as i64,
        ("i64_f64_u", Val::F64(bits)) => f64::from_bits(*bits) as u64 as i64,
        _ => unreachable!("{name}"),
    }
}
