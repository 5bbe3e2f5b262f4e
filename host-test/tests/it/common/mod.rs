//! A minimal OPA wasm host on wasmtime, written from the ABI contract (not the CLI's engine), so
//! the ABI tests check the module against an independent reading of the contract. It loads the
//! module the way npm's opa-wasm does (builtins, data `{}`, heap base, entrypoints) and evaluates
//! through the eval-context path or `opa_eval`.

#![allow(dead_code)] // each test binary uses part of the host

use std::sync::OnceLock;

use wasmtime::{Caller, Engine, Linker, Memory, MemoryType, Module, Store, TypedFunc};

/// The module `build.rs` produced, the same bytes the CLI embeds.
pub const MODULE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/meshlife.wasm"));

const PAGE_SIZE: usize = 65536;

fn engine_and_module() -> &'static (Engine, Module) {
    static COMPILED: OnceLock<(Engine, Module)> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let engine = Engine::default();
        let module = Module::new(&engine, MODULE).expect("the module compiles");
        (engine, module)
    })
}

pub struct HostState {
    memory: Option<Memory>,
    pub aborts: Vec<String>,
    pub printed: Vec<String>,
}

fn read_c_string(memory: &[u8], address: u32) -> String {
    let start = address as usize;
    let tail = memory.get(start..).unwrap_or_default();
    let end = tail
        .iter()
        .position(|byte| *byte == 0)
        .unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

/// `opa_eval(reserved, entrypoint, data, input, input_len, heap_ptr, format)`.
pub type OpaEvalArguments = (i32, i32, i32, i32, i32, i32, i32);

struct Exports {
    malloc: TypedFunc<i32, i32>,
    free: TypedFunc<i32, ()>,
    heap_ptr_get: TypedFunc<(), i32>,
    heap_ptr_set: TypedFunc<i32, ()>,
    json_parse: TypedFunc<(i32, i32), i32>,
    value_parse: TypedFunc<(i32, i32), i32>,
    json_dump: TypedFunc<i32, i32>,
    value_dump: TypedFunc<i32, i32>,
    builtins: TypedFunc<(), i32>,
    entrypoints: TypedFunc<(), i32>,
    ctx_new: TypedFunc<(), i32>,
    ctx_set_input: TypedFunc<(i32, i32), ()>,
    ctx_set_data: TypedFunc<(i32, i32), ()>,
    ctx_set_entrypoint: TypedFunc<(i32, i32), ()>,
    ctx_get_result: TypedFunc<i32, i32>,
    eval: TypedFunc<i32, i32>,
    opa_eval: TypedFunc<OpaEvalArguments, i32>,
    add_path: TypedFunc<(i32, i32, i32), i32>,
    remove_path: TypedFunc<(i32, i32), i32>,
}

pub struct Host {
    pub store: Store<HostState>,
    pub memory: Memory,
    exports: Exports,
    /// Heap pointer after loading data: every evaluation rewinds to it.
    pub base: u32,
    /// The data value (`{}`), as npm and Kubewarden pass it.
    pub data: u32,
}

impl Host {
    /// Instantiates the module with an imported memory of `initial_pages` and no maximum, then
    /// loads it like npm's opa-wasm.
    pub fn new(initial_pages: u32) -> Host {
        Host::with_memory(initial_pages, None)
    }

    /// Like [`Host::new`], with a memory maximum as some hosts set one (npm callers may pass
    /// `{initial: 2, maximum: 8}`).
    pub fn with_memory(initial_pages: u32, maximum_pages: Option<u32>) -> Host {
        let mut host = Host::instantiate(initial_pages, maximum_pages);
        let builtins = host.exports.builtins.call(&mut host.store, ()).unwrap() as u32;
        assert_eq!(host.json_dump(builtins).unwrap(), "{}");
        host.data = host.parse_json(b"{}").unwrap();
        assert_ne!(host.data, 0, "data {{}} parses");
        host.base = host.heap_ptr_get();
        let entrypoints = host.exports.entrypoints.call(&mut host.store, ()).unwrap() as u32;
        assert_eq!(
            host.json_dump(entrypoints).unwrap(),
            r#"{"meshlife/violation":0}"#
        );
        host
    }

    /// A fresh instance without the load sequence, for hosts that bring their own heap.
    pub fn instantiate(initial_pages: u32, maximum_pages: Option<u32>) -> Host {
        let (engine, module) = engine_and_module();
        let state = HostState {
            memory: None,
            aborts: Vec::new(),
            printed: Vec::new(),
        };
        let mut store = Store::new(engine, state);
        let memory =
            Memory::new(&mut store, MemoryType::new(initial_pages, maximum_pages)).unwrap();
        store.data_mut().memory = Some(memory);
        let mut linker = Linker::new(engine);
        linker.define(&store, "env", "memory", memory).unwrap();
        linker
            .func_wrap(
                "env",
                "opa_abort",
                |caller: Caller<'_, HostState>, address: i32| {
                    let message = host_string(&caller, address);
                    Err::<(), _>(wasmtime::Error::msg(format!("opa_abort: {message}")))
                },
            )
            .unwrap();
        linker
            .func_wrap(
                "env",
                "opa_println",
                |mut caller: Caller<'_, HostState>, address: i32| {
                    let message = host_string(&caller, address);
                    caller.data_mut().printed.push(message);
                },
            )
            .unwrap();
        let instance = linker
            .instantiate(&mut store, module)
            .expect("the module instantiates");
        macro_rules! typed {
            ($name:literal) => {
                instance.get_typed_func(&mut store, $name).expect($name)
            };
        }
        let exports = Exports {
            malloc: typed!("opa_malloc"),
            free: typed!("opa_free"),
            heap_ptr_get: typed!("opa_heap_ptr_get"),
            heap_ptr_set: typed!("opa_heap_ptr_set"),
            json_parse: typed!("opa_json_parse"),
            value_parse: typed!("opa_value_parse"),
            json_dump: typed!("opa_json_dump"),
            value_dump: typed!("opa_value_dump"),
            builtins: typed!("builtins"),
            entrypoints: typed!("entrypoints"),
            ctx_new: typed!("opa_eval_ctx_new"),
            ctx_set_input: typed!("opa_eval_ctx_set_input"),
            ctx_set_data: typed!("opa_eval_ctx_set_data"),
            ctx_set_entrypoint: typed!("opa_eval_ctx_set_entrypoint"),
            ctx_get_result: typed!("opa_eval_ctx_get_result"),
            eval: typed!("eval"),
            opa_eval: typed!("opa_eval"),
            add_path: typed!("opa_value_add_path"),
            remove_path: typed!("opa_value_remove_path"),
        };
        Host {
            store,
            memory,
            exports,
            base: 0,
            data: 0,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }

    pub fn heap_ptr_get(&mut self) -> u32 {
        self.exports.heap_ptr_get.call(&mut self.store, ()).unwrap() as u32
    }

    pub fn heap_ptr_set(&mut self, address: u32) {
        self.exports
            .heap_ptr_set
            .call(&mut self.store, address as i32)
            .unwrap();
    }

    pub fn read_c_string(&self, address: u32) -> String {
        read_c_string(self.memory.data(&self.store), address)
    }

    /// Writes `bytes` at `address`, growing memory first when needed (npm, rust opa-wasm and
    /// OPA Go do; the module must cope with memory that grew behind its back).
    pub fn write_raw(&mut self, address: u32, bytes: &[u8]) {
        let end = address as usize + bytes.len();
        let size = self.memory_bytes();
        if end > size {
            let pages = (end - size).div_ceil(PAGE_SIZE) as u64;
            self.memory.grow(&mut self.store, pages).unwrap();
        }
        self.memory
            .write(&mut self.store, address as usize, bytes)
            .unwrap();
    }

    /// `opa_malloc` + write, as hosts load data and the context path's input.
    pub fn malloc_write(&mut self, bytes: &[u8]) -> wasmtime::Result<u32> {
        let address = self
            .exports
            .malloc
            .call(&mut self.store, bytes.len() as i32)? as u32;
        self.memory
            .write(&mut self.store, address as usize, bytes)?;
        Ok(address)
    }

    pub fn malloc(&mut self, size: u32) -> wasmtime::Result<u32> {
        Ok(self.exports.malloc.call(&mut self.store, size as i32)? as u32)
    }

    pub fn free(&mut self, address: u32) -> wasmtime::Result<()> {
        self.exports.free.call(&mut self.store, address as i32)
    }

    pub fn parse_json(&mut self, text: &[u8]) -> wasmtime::Result<u32> {
        let address = self.malloc_write(text)?;
        let value = self
            .exports
            .json_parse
            .call(&mut self.store, (address as i32, text.len() as i32))?;
        Ok(value as u32)
    }

    pub fn parse_value(&mut self, text: &[u8]) -> wasmtime::Result<u32> {
        let address = self.malloc_write(text)?;
        let value = self
            .exports
            .value_parse
            .call(&mut self.store, (address as i32, text.len() as i32))?;
        Ok(value as u32)
    }

    pub fn json_dump(&mut self, value: u32) -> wasmtime::Result<String> {
        let address = self.exports.json_dump.call(&mut self.store, value as i32)?;
        Ok(self.read_c_string(address as u32))
    }

    pub fn value_dump(&mut self, value: u32) -> wasmtime::Result<String> {
        let address = self
            .exports
            .value_dump
            .call(&mut self.store, value as i32)?;
        Ok(self.read_c_string(address as u32))
    }

    pub fn add_path(&mut self, base: u32, path: u32, value: u32) -> wasmtime::Result<i32> {
        self.exports
            .add_path
            .call(&mut self.store, (base as i32, path as i32, value as i32))
    }

    pub fn remove_path(&mut self, base: u32, path: u32) -> wasmtime::Result<i32> {
        self.exports
            .remove_path
            .call(&mut self.store, (base as i32, path as i32))
    }

    /// The eval-context path (npm's slow path, Kubewarden): rewind, parse the input with
    /// `opa_json_parse` (a parse failure leaves the input absent, as npm does with `undefined`),
    /// evaluate entrypoint 0 and dump the result as JSON.
    pub fn eval_context(&mut self, input: Option<&[u8]>, data: u32) -> wasmtime::Result<String> {
        let result = self.eval_context_value(input, data, 0)?;
        self.json_dump(result)
    }

    /// The context path up to the result value; `entrypoint` as given.
    pub fn eval_context_value(
        &mut self,
        input: Option<&[u8]>,
        data: u32,
        entrypoint: i32,
    ) -> wasmtime::Result<u32> {
        self.heap_ptr_set(self.base);
        let input_value = match input {
            Some(text) => self.parse_json(text)?,
            None => 0,
        };
        let store = &mut self.store;
        let context = self.exports.ctx_new.call(&mut *store, ())?;
        self.exports
            .ctx_set_input
            .call(&mut *store, (context, input_value as i32))?;
        self.exports
            .ctx_set_data
            .call(&mut *store, (context, data as i32))?;
        self.exports
            .ctx_set_entrypoint
            .call(&mut *store, (context, entrypoint))?;
        let status = self.exports.eval.call(&mut *store, context)?;
        assert_eq!(status, 0, "eval returns 0");
        Ok(self.exports.ctx_get_result.call(&mut *store, context)? as u32)
    }

    /// `opa_eval` with the input written raw at the heap base (npm, rust opa-wasm, OPA Go);
    /// `None` passes address 0 and length 0.
    pub fn eval_fast(
        &mut self,
        input: Option<&[u8]>,
        data: u32,
        format: i32,
    ) -> wasmtime::Result<String> {
        self.eval_fast_entrypoint(input, data, format, 0)
    }

    pub fn eval_fast_entrypoint(
        &mut self,
        input: Option<&[u8]>,
        data: u32,
        format: i32,
        entrypoint: i32,
    ) -> wasmtime::Result<String> {
        let (address, len) = match input {
            Some(text) => {
                self.write_raw(self.base, text);
                (self.base, text.len() as u32)
            }
            None => (0, 0),
        };
        let heap = self.base + len;
        let arguments = (
            0,
            entrypoint,
            data as i32,
            address as i32,
            len as i32,
            heap as i32,
            format,
        );
        let result = self.exports.opa_eval.call(&mut self.store, arguments)?;
        Ok(self.read_c_string(result as u32))
    }

    pub fn opa_eval_raw(&mut self, arguments: OpaEvalArguments) -> wasmtime::Result<String> {
        let result = self.exports.opa_eval.call(&mut self.store, arguments)?;
        Ok(self.read_c_string(result as u32))
    }
}

fn host_string(caller: &Caller<'_, HostState>, address: i32) -> String {
    let memory = caller
        .data()
        .memory
        .expect("memory is set before instantiation");
    read_c_string(memory.data(caller), address as u32)
}

/// The native expectation for a JSON input: the policy's own result set.
pub fn native_json(input: &[u8]) -> String {
    meshlife_policy::result_set_json(&meshlife_policy::evaluate(input))
}

pub fn native_rego(input: &[u8]) -> String {
    meshlife_policy::result_set_rego(&meshlife_policy::evaluate(input))
}

/// What the context path must return for `input`: hosts parse with `opa_json_parse`, which
/// accepts exactly what serde_json accepts (a trailing NUL aside); a rejected input is absent.
pub fn native_context_json(input: &[u8]) -> String {
    let json = meshlife_policy::value_text::trim_trailing_nul(input);
    if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok() {
        native_json(json)
    } else {
        native_json(b"")
    }
}

/// Checks that `dump` is a result set, `[{"result": [violation, ...]}]` (or Rego syntax, which
/// is converted first), with a string `msg` and `details.rule` in every violation. Returns the
/// violations' rule ids.
pub fn assert_result_set(dump: &str) -> Vec<String> {
    let json = meshlife_policy::value_text::to_json(dump.as_bytes())
        .unwrap_or_else(|error| panic!("result is not a value ({error}): {dump}"));
    let value: serde_json::Value = serde_json::from_slice(&json)
        .unwrap_or_else(|error| panic!("result is not JSON ({error}): {dump}"));
    let bindings = value
        .as_array()
        .unwrap_or_else(|| panic!("result set is not a list: {dump}"));
    assert_eq!(bindings.len(), 1, "one binding: {dump}");
    let binding = bindings[0]
        .as_object()
        .unwrap_or_else(|| panic!("binding is not an object: {dump}"));
    assert_eq!(binding.len(), 1, "the binding holds only `result`: {dump}");
    let violations = binding["result"]
        .as_array()
        .unwrap_or_else(|| panic!("result is not a list: {dump}"));
    violations
        .iter()
        .map(|violation| {
            assert!(
                violation["msg"].is_string(),
                "violation without msg: {violation}"
            );
            violation["details"]["rule"]
                .as_str()
                .unwrap_or_else(|| panic!("violation without details.rule: {violation}"))
                .to_owned()
        })
        .collect()
}
