//! What the real OPA cannot be made to show, replayed: the rest of OPA's Go host now runs for
//! real (compat/opa/host: `opa eval -b`, `opa run -s`, the Go SDK and `v1/resolver/wasm`, on
//! OPA v1.22.3 and v1.18.2). Two things stay here because no public OPA API reaches them:
//!
//! - a memory maximum below 65,536 pages: OPA's VM takes its limits only from
//!   `internal/wasm/sdk/opa` (`WithMemoryMaxPages`), which no embedder can import, so the "an
//!   out-of-memory refusal before every fixture" column needs the replay's 16..16 pages;
//! - the data after a patch: OPA calls `opa_value_add_path` / `opa_value_remove_path` through
//!   its stash (the real resolver's `SetDataPath` runs in compat/opa/host), but never dumps the
//!   data again, so only the replay can show that the patched data is what was asked for.
//!
//! Both follow OPA's calls (`opa-wasm-abi.md` 2.7): memory from 16 pages, `opa_malloc(0)` before
//! the heap base, data through `opa_value_parse`, input as Go-quoted Rego text, `opa_eval`
//! format 1 whose output must parse as a Rego set of one `{"result": ...}` object.

use std::num::{NonZeroU32, NonZeroUsize};

use anyhow::{Context, Result, bail};
use regorus::Value as RegoValue;
use regorus::utils::limits::PolicyLengthConfig;
use serde_json::Value;
use wasmtime::{Engine, MemoryType, Module};

use crate::fixtures::{Fixture, exhausting_input};
use crate::guest::{AbortImport, Guest};
use crate::matrix::{CAPPED_PAGES, Check, Column, Outcome, REFUSALS_HOW, judge, refusals_check};
use crate::rego_text::go_term_string;

pub const HOST: &str = "OPA Go SDK (replay: what no public OPA API reaches)";
pub const VERSION: &str = "OPA 1.x, ABI 1.3 path";
const MIN_PAGES: u32 = 16;
const MAX_PAGES: u32 = 65536;
const ENTRYPOINT: &str = "meshlife/violation";
/// Data as a bundle's `data.json` would bring it.
const BUNDLE_DATA: &str = r#"{"meshlife": {"bundle": "compat"}}"#;

/// A VM as the Go SDK's pool holds it.
struct Vm {
    guest: Guest,
    data: i32,
    eval_heap: i32,
    entrypoint: i32,
}

/// `maximum`: the SDK's memory maximum in pages, `MAX_PAGES` unless an embedder lowers it.
fn new_guest(engine: &Engine, module: &Module, maximum: u32) -> Result<Guest> {
    let mut guest = Guest::new(
        engine,
        module,
        MemoryType::new(MIN_PAGES, Some(maximum)),
        AbortImport::Fails,
        None,
    )?;
    guest.exported_memory()?;
    let major = guest.global_i32("opa_wasm_abi_version")?;
    let minor = guest.global_i32("opa_wasm_abi_minor_version")?;
    if (major, minor) != (1, 3) && (major, minor) != (1, 1) {
        bail!("OPA accepts ABI 1.1 and 1.3 only; the module says {major}.{minor}");
    }
    guest.call::<i32, i32>("opa_malloc", 0)?;
    // OPA reads the heap base here (a pool's VM copies start from it).
    guest.call::<(), i32>("opa_heap_ptr_get", ())?;
    Ok(guest)
}

/// `vm.go` newVM: load, data, builtins, entrypoints, eval heap pointer.
fn load(engine: &Engine, module: &Module, maximum: u32) -> Result<Vm> {
    let mut guest = new_guest(engine, module, maximum)?;
    let text: i32 = guest.call("opa_malloc", BUNDLE_DATA.len() as i32)?;
    guest.write(text as u32, BUNDLE_DATA.as_bytes())?;
    let data: i32 = guest.call("opa_value_parse", (text, BUNDLE_DATA.len() as i32))?;
    if data == 0 {
        bail!("opa_value_parse refused the bundle data");
    }
    guest.call::<i32, ()>("opa_free", text)?;
    let builtins: i32 = guest.call("builtins", ())?;
    let dumped: i32 = guest.call("opa_json_dump", builtins)?;
    let names = guest.read_c_string(dumped as u32);
    guest.call::<i32, ()>("opa_free", dumped)?;
    if names != "{}" {
        bail!("builtins() dumps {names}; OPA resolves only its own builtins");
    }
    let entrypoints: i32 = guest.call("entrypoints", ())?;
    let entrypoints: Value = serde_json::from_str(&guest.dump(entrypoints, "opa_json_dump")?)
        .context("entrypoints() is not JSON")?;
    let entrypoint = entrypoints[ENTRYPOINT]
        .as_i64()
        .with_context(|| format!("entrypoints() has no `{ENTRYPOINT}`: {entrypoints}"))?
        as i32;
    let eval_heap: i32 = guest.call("opa_heap_ptr_get", ())?;
    guest.call::<(), ()>("opa_heap_stash_clear", ())?;
    Ok(Vm {
        guest,
        data,
        eval_heap,
        entrypoint,
    })
}

impl Vm {
    /// Go's `toRegoJSON`: malloc, write, `opa_value_parse`, free the text.
    fn rego_value(&mut self, text: &str) -> Result<i32> {
        let buffer: i32 = self.guest.call("opa_malloc", text.len() as i32)?;
        self.guest.write(buffer as u32, text.as_bytes())?;
        let value: i32 = self
            .guest
            .call("opa_value_parse", (buffer, text.len() as i32))?;
        self.guest.call::<i32, ()>("opa_free", buffer)?;
        if value == 0 {
            bail!("opa_value_parse refused {text}");
        }
        Ok(value)
    }

    /// `setHeapState`: rewind to the eval heap pointer and restore the stashed blocks.
    fn set_heap_state(&mut self) -> Result<()> {
        self.guest
            .call::<i32, ()>("opa_heap_ptr_set", self.eval_heap)?;
        self.guest.call::<(), ()>("opa_heap_blocks_restore", ())
    }

    /// `getHeapState`: the new eval heap pointer, blocks stashed.
    fn get_heap_state(&mut self) -> Result<()> {
        self.eval_heap = self.guest.call("opa_heap_ptr_get", ())?;
        self.guest.call::<(), ()>("opa_heap_blocks_stash", ())
    }

    /// `SetDataPath(path, value)` as the Go SDK does it for a data patch.
    fn set_data_path(&mut self, path: &str, value: &str) -> Result<i32> {
        self.set_heap_state()?;
        let value = self.rego_value(value)?;
        let path = self.rego_value(path)?;
        let code: i32 = self
            .guest
            .call("opa_value_add_path", (self.data, path, value))?;
        self.guest.call::<i32, ()>("opa_value_free", path)?;
        self.get_heap_state()?;
        Ok(code)
    }

    /// `RemoveDataPath(path)`.
    fn remove_data_path(&mut self, path: &str) -> Result<i32> {
        self.set_heap_state()?;
        let path = self.rego_value(path)?;
        let code: i32 = self
            .guest
            .call("opa_value_remove_path", (self.data, path))?;
        self.guest.call::<i32, ()>("opa_value_free", path)?;
        self.get_heap_state()?;
        Ok(code)
    }

    fn data_json(&mut self) -> Result<String> {
        self.guest.dump(self.data, "opa_json_dump")
    }

    /// `Eval` at ABI 1.3: input raw at the eval heap pointer, `opa_eval(..., format 1)`.
    fn eval(&mut self, input: Option<&[u8]>) -> Result<String> {
        let (address, length) = match input {
            Some(text) => {
                self.guest.write(self.eval_heap as u32, text)?;
                (self.eval_heap, text.len() as i32)
            }
            None => (0, 0),
        };
        let result: i32 = self.guest.call(
            "opa_eval",
            (
                0,
                self.entrypoint,
                self.data,
                address,
                length,
                self.eval_heap + length,
                1,
            ),
        )?;
        Ok(self.guest.read_c_string(result as u32))
    }
}

/// Go's `ast.ParseTerm` on the format-1 output, done by regorus: it must be a set of at most one
/// object whose only key is `result`; the `msg` strings of that result.
fn read_rego_result_set(text: &str) -> Result<Vec<String>> {
    let mut engine = regorus::Engine::new();
    // regorus refuses lines over 1,024 columns by default; a result set is one line.
    engine.set_policy_length_config(PolicyLengthConfig {
        max_col: NonZeroU32::new(u32::MAX).expect("non-zero"),
        max_file_bytes: NonZeroUsize::new(64 << 20).expect("non-zero"),
        max_lines: NonZeroUsize::new(1 << 20).expect("non-zero"),
    });
    let results = engine
        .eval_query(text.to_string(), false)
        .with_context(|| format!("not a Rego term: {text:.200}"))?;
    let value = results
        .result
        .first()
        .and_then(|result| result.expressions.first())
        .map(|expression| expression.value.clone())
        .with_context(|| format!("the Rego term evaluates to nothing: {text:.200}"))?;
    let RegoValue::Set(bindings) = &value else {
        bail!("illegal result type: OPA needs a set, got {text:.200}");
    };
    if bindings.len() > 1 {
        bail!(
            "the result set has {} elements; OPA takes at most one",
            bindings.len()
        );
    }
    let Some(binding) = bindings.iter().next() else {
        return Ok(Vec::new());
    };
    let binding = binding
        .as_object()
        .map_err(|_| anyhow::anyhow!("the binding is not an object: {text:.200}"))?;
    if binding.len() != 1 {
        bail!("the binding has keys besides `result`: {text:.200}");
    }
    let violations = binding
        .get(&RegoValue::from("result"))
        .with_context(|| format!("the binding has no `result`: {text:.200}"))?;
    let items: Vec<RegoValue> = match violations {
        RegoValue::Set(items) => items.iter().cloned().collect(),
        RegoValue::Array(items) => items.iter().cloned().collect(),
        other => bail!("`result` is neither a set nor an array: {other:?}"),
    };
    items
        .iter()
        .map(|violation| {
            violation
                .as_object()
                .ok()
                .and_then(|fields| fields.get(&RegoValue::from("msg")))
                .and_then(|msg| msg.as_string().ok())
                .map(|msg| msg.to_string())
                .with_context(|| format!("a violation without a string msg: {violation:?}"))
        })
        .collect()
}

pub fn run(module_bytes: &[u8], fixtures: &[Fixture]) -> Result<(Vec<Column>, Vec<Check>)> {
    let engine = Engine::default();
    let module = Module::new(&engine, module_bytes)?;
    let mut checks = Vec::new();
    let mut first = load(&engine, &module, MAX_PAGES)?;

    let added = first.set_data_path(r#"["meshlife", "cluster"]"#, r#"{"name": "compat"}"#)?;
    let after_add = first.data_json()?;
    let removed = first.remove_data_path(r#"["meshlife", "cluster"]"#)?;
    let after_remove = first.data_json()?;
    let expected_after_add = r#"{"meshlife":{"bundle":"compat","cluster":{"name":"compat"}}}"#;
    let outcome = if added == 0
        && removed == 0
        && after_add == expected_after_add
        && after_remove == r#"{"meshlife":{"bundle":"compat"}}"# {
        Ok("add_path 0, remove_path 0, data dumps as patched, stash/restore/clear called".into())
    } else {
        Err(format!(
            "add_path {added} -> {after_add}, remove_path {removed} -> {after_remove}"
        ))
    };
    checks.push(Check::new(
        HOST,
        "data patch through the stash and path exports",
        outcome,
    ));

    let capped = refusals_column(&engine, &module, fixtures)?;
    checks.push(capped.1);
    Ok((vec![capped.0], checks))
}

/// One VM whose memory cannot grow past `CAPPED_PAGES` (which is also the SDK's minimum, so it
/// never grows): the exhausting input, refused, before every fixture.
fn refusals_column(
    engine: &Engine,
    module: &Module,
    fixtures: &[Fixture],
) -> Result<(Column, Check)> {
    let mut vm = load(engine, module, CAPPED_PAGES)?;
    let exhausting: Value =
        serde_json::from_slice(&exhausting_input()).expect("the exhausting input is JSON");
    let exhausting = go_term_string(&exhausting);
    let read = |answer: Result<String>| match answer {
        Ok(text) => match read_rego_result_set(&text) {
            Ok(msgs) => Outcome::Msgs(msgs),
            Err(error) => Outcome::Error(format!("{error:#}")),
        },
        Err(error) => Outcome::Error(format!("{error:#}")),
    };
    let (mut refusals, mut verdicts) = (Vec::new(), Vec::new());
    for fixture in fixtures {
        refusals.push(read(vm.eval(Some(exhausting.as_bytes()))));
        let input = fixture.input_value().map(|value| go_term_string(&value));
        let outcome = read(vm.eval(input.as_deref().map(str::as_bytes)));
        verdicts.push(judge(fixture, outcome, true));
    }
    let how = format!(
        "{REFUSALS_HOW}: {MIN_PAGES}..{CAPPED_PAGES} pages, Go-quoted Rego input, opa_eval \
         format 1"
    );
    let check = refusals_check(HOST, &how, &refusals, &verdicts);
    let column = Column {
        host: HOST.into(),
        version: VERSION.into(),
        how,
        verdicts,
    };
    Ok((column, check))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_1_must_be_a_rego_set_of_one_result_binding() {
        assert_eq!(
            read_rego_result_set(r#"{{"result": {{"msg": "a"}, {"msg": "b"}}}}"#).unwrap(),
            vec!["a", "b"]
        );
        assert!(
            read_rego_result_set(r#"{{"result": set()}}"#)
                .unwrap()
                .is_empty()
        );
        assert!(read_rego_result_set("set()").unwrap().is_empty());
        let long = format!(r#"{{{{"result": {{{{"msg": "{}"}}}}}}}}"#, "x".repeat(5000));
        assert_eq!(read_rego_result_set(&long).unwrap()[0].len(), 5000);
        for refused in [
            r#"[{"result": []}]"#,
            r#"{{"result": set()}, {"other": 1}}"#,
            r#"{{"result": set(), "extra": 1}}"#,
            r#"{{"result": {{"details": {}}}}}"#,
            "not rego",
        ] {
            assert!(read_rego_result_set(refused).is_err(), "{refused}");
        }
    }
}
