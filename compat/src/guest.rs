//! A raw wasmtime instance of the module, for the harnesses that replay a host's exact call
//! sequence (Kubewarden's burrego, OPA's Go SDK). Every call returns an error instead of
//! panicking, so a trap becomes a red cell, not a crashed matrix.

use anyhow::{Context, Result, anyhow, bail};
use wasmtime::{
    Caller, Engine, Extern, Linker, Memory, MemoryType, Module, Store, WasmParams, WasmResults,
};

const PAGE_SIZE: usize = 65536;

/// What the host's `opa_abort` does.
#[derive(Clone, Copy)]
pub enum AbortImport {
    /// Logs and returns, as burrego does: the module must stop by itself.
    Returns,
    /// Fails the call, as OPA's Go SDK does.
    Fails,
}

pub struct GuestState {
    pub aborts: Vec<String>,
    pub printed: Vec<String>,
}

pub struct Guest {
    pub store: Store<GuestState>,
    instance: wasmtime::Instance,
    /// The memory the host created and passed as `env.memory`.
    pub memory: Memory,
}

/// Reads a NUL-terminated string through the caller's `memory` export, as burrego and the Go
/// SDK do (not through the host's own handle).
fn exported_string(caller: &mut Caller<'_, GuestState>, address: i32) -> String {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return "<the module exports no memory>".into();
    };
    c_string(memory.data(&*caller), address as u32)
}

fn c_string(memory: &[u8], address: u32) -> String {
    let tail = memory.get(address as usize..).unwrap_or_default();
    let end = tail
        .iter()
        .position(|byte| *byte == 0)
        .unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

impl Guest {
    /// Instantiates with a host-made memory of `memory_type` and the function imports OPA's
    /// compiler emits (`opa_abort`, `opa_println`, `opa_builtin0..4`); wasmtime ignores those the
    /// module does not import.
    pub fn new(
        engine: &Engine,
        module: &Module,
        memory_type: MemoryType,
        abort: AbortImport,
        epoch_deadline: Option<u64>,
    ) -> Result<Guest> {
        let mut store = Store::new(
            engine,
            GuestState {
                aborts: Vec::new(),
                printed: Vec::new(),
            },
        );
        // With epoch interruption on, the deadline also covers the start function.
        if let Some(ticks) = epoch_deadline {
            store.set_epoch_deadline(ticks);
        }
        let memory = Memory::new(&mut store, memory_type)
            .map_err(|error| anyhow!("creating env.memory: {error:#}"))?;
        let mut linker = Linker::new(engine);
        linker.define(&store, "env", "memory", memory)?;
        match abort {
            AbortImport::Returns => linker.func_wrap(
                "env",
                "opa_abort",
                |mut caller: Caller<'_, GuestState>, address: i32| {
                    let message = exported_string(&mut caller, address);
                    caller.data_mut().aborts.push(message);
                },
            )?,
            AbortImport::Fails => linker.func_wrap(
                "env",
                "opa_abort",
                |mut caller: Caller<'_, GuestState>, address: i32| {
                    let message = exported_string(&mut caller, address);
                    caller.data_mut().aborts.push(message.clone());
                    Err::<(), _>(wasmtime::Error::msg(format!("opa_abort: {message}")))
                },
            )?,
        };
        linker.func_wrap(
            "env",
            "opa_println",
            |mut caller: Caller<'_, GuestState>, address: i32| {
                let message = exported_string(&mut caller, address);
                caller.data_mut().printed.push(message);
            },
        )?;
        linker.func_wrap(
            "env",
            "opa_builtin0",
            |_: i32, _: i32| -> Result<i32, wasmtime::Error> {
                Err(wasmtime::Error::msg(
                    "opa_builtin0: the module declared no builtins",
                ))
            },
        )?;
        linker.func_wrap(
            "env",
            "opa_builtin1",
            |_: i32, _: i32, _: i32| -> Result<i32, wasmtime::Error> {
                Err(wasmtime::Error::msg(
                    "opa_builtin1: the module declared no builtins",
                ))
            },
        )?;
        linker.func_wrap(
            "env",
            "opa_builtin2",
            |_: i32, _: i32, _: i32, _: i32| -> Result<i32, wasmtime::Error> {
                Err(wasmtime::Error::msg(
                    "opa_builtin2: the module declared no builtins",
                ))
            },
        )?;
        linker.func_wrap(
            "env",
            "opa_builtin3",
            |_: i32, _: i32, _: i32, _: i32, _: i32| -> Result<i32, wasmtime::Error> {
                Err(wasmtime::Error::msg(
                    "opa_builtin3: the module declared no builtins",
                ))
            },
        )?;
        linker.func_wrap(
            "env",
            "opa_builtin4",
            |_: i32, _: i32, _: i32, _: i32, _: i32, _: i32| -> Result<i32, wasmtime::Error> {
                Err(wasmtime::Error::msg(
                    "opa_builtin4: the module declared no builtins",
                ))
            },
        )?;
        let instance = linker
            .instantiate(&mut store, module)
            .map_err(|error| anyhow!("instantiating: {error:#}"))?;
        Ok(Guest {
            store,
            instance,
            memory,
        })
    }

    /// Calls the export `name` with typed parameters and results.
    pub fn call<P: WasmParams, R: WasmResults>(&mut self, name: &str, params: P) -> Result<R> {
        let function = self
            .instance
            .get_typed_func::<P, R>(&mut self.store, name)
            .map_err(|error| anyhow!("export `{name}`: {error:#}"))?;
        let aborts_before = self.store.data().aborts.len();
        let result = function.call(&mut self.store, params);
        let aborts = &self.store.data().aborts[aborts_before..];
        match result {
            Ok(value) if aborts.is_empty() => Ok(value),
            Ok(_) => bail!("`{name}` returned after opa_abort({:?})", aborts.join("; ")),
            Err(error) if aborts.is_empty() => bail!("`{name}` trapped: {error:#}"),
            Err(_) => bail!("`{name}`: opa_abort({})", aborts.join("; ")),
        }
    }

    /// Reads an exported i32 global, such as the ABI version.
    pub fn global_i32(&mut self, name: &str) -> Result<i32> {
        let global = self
            .instance
            .get_global(&mut self.store, name)
            .with_context(|| format!("the module exports no global `{name}`"))?;
        global
            .get(&mut self.store)
            .i32()
            .with_context(|| format!("global `{name}` is not an i32"))
    }

    /// The `memory` export: hosts that read through it fail without it.
    pub fn exported_memory(&mut self) -> Result<Memory> {
        self.instance
            .get_memory(&mut self.store, "memory")
            .context("the module does not export `memory`")
    }

    pub fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }

    /// Writes `bytes` at `address`, growing memory first when it ends beyond it, as the hosts
    /// that write input raw do.
    pub fn write(&mut self, address: u32, bytes: &[u8]) -> Result<()> {
        let end = address as usize + bytes.len();
        let size = self.memory_bytes();
        if end > size {
            let pages = (end - size).div_ceil(PAGE_SIZE) as u64;
            self.memory
                .grow(&mut self.store, pages)
                .map_err(|error| anyhow!("memory.grow by {pages} pages: {error:#}"))?;
        }
        self.memory
            .write(&mut self.store, address as usize, bytes)
            .map_err(|error| anyhow!("writing {} bytes at {address}: {error}", bytes.len()))
    }

    pub fn read_c_string(&self, address: u32) -> String {
        c_string(self.memory.data(&self.store), address)
    }

    /// `opa_malloc` + write + `opa_json_parse` (or `opa_value_parse`): the value's address, an
    /// error when the parser answers 0.
    pub fn parse(&mut self, text: &[u8], parser: &str) -> Result<i32> {
        let buffer: i32 = self.call("opa_malloc", text.len() as i32)?;
        self.write(buffer as u32, text)?;
        let value: i32 = self.call(parser, (buffer, text.len() as i32))?;
        if value == 0 {
            bail!("{parser} returned 0 for {} bytes", text.len());
        }
        Ok(value)
    }

    /// `opa_json_dump(value)` read back as a string.
    pub fn dump(&mut self, value: i32, dumper: &str) -> Result<String> {
        let text: i32 = self.call(dumper, value)?;
        Ok(self.read_c_string(text as u32))
    }
}
