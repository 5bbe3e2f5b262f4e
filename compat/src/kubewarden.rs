//! Kubewarden's evaluator replayed: burrego 0.3.4 in policy-evaluator 0.30.4, gatekeeper mode
//! (`opa-wasm-abi.md` 2.3). kwctl and burrego are not on crates.io, so this harness repeats their
//! calls exactly: a 5-page memory without maximum, an `opa_abort` that logs and returns, the
//! eval-context path only with entrypoint 0, the input Kubewarden builds from the
//! AdmissionRequest (no `namespaceObject`; `object` omitted when absent), data `{}` or an
//! inventory, and Kubewarden's reading of the result, which allows on any shape error. Every
//! fixture the native build denies must therefore deny here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};
use wasmtime::{Config, Engine, MemoryType, Module};

use crate::fixtures::{Fixture, exhausting_input, native_msgs};
use crate::guest::{AbortImport, Guest};
use crate::matrix::{
    CAPPED_PAGES, Check, Column, Outcome, REFUSALS_HOW, Verdict, is_limit_refusal, refusals_check,
};

pub const HOST: &str = "Kubewarden (burrego replay)";
pub const VERSION: &str = "policy-evaluator 0.30.4";
/// burrego's `MemoryType::new(5, None)`.
const PAGES: u32 = 5;
/// Epoch ticks per evaluation; a tick is 100 ms, like a webhook's 2 s budget.
const DEADLINE_TICKS: u64 = 20;

#[derive(Clone, Copy)]
enum Variant {
    DataEmpty,
    DataInventory,
    DeleteWithoutObject,
    /// As `DataEmpty`, on a memory with a maximum (burrego sets none; an embedder that wants
    /// one changes that `MemoryType`), the exhausting input sent before every fixture.
    Refusals,
}

impl Variant {
    fn describe(self) -> String {
        match self {
            Variant::DataEmpty => {
                "5 pages, context path, entrypoint 0, gatekeeper input, data {}".into()
            }
            Variant::DataInventory => {
                "5 pages, context path, entrypoint 0, gatekeeper input, data with an inventory"
                    .into()
            }
            Variant::DeleteWithoutObject => {
                "5 pages, context path, entrypoint 0, DELETE request without `object`, data {}"
                    .into()
            }
            Variant::Refusals => format!(
                "{REFUSALS_HOW}: 5..{CAPPED_PAGES} pages, context path, entrypoint 0, \
                 gatekeeper input, data {{}}"
            ),
        }
    }

    /// The memory maximum in pages; burrego's own is none.
    fn maximum(self) -> Option<u32> {
        match self {
            Variant::Refusals => Some(CAPPED_PAGES),
            _ => None,
        }
    }
}

/// The policy as burrego holds it after loading.
struct Loaded {
    guest: Guest,
    base: i32,
}

fn load(engine: &Engine, module: &Module, maximum: Option<u32>) -> Result<Loaded> {
    let mut guest = Guest::new(
        engine,
        module,
        MemoryType::new(PAGES, maximum),
        AbortImport::Returns,
        Some(DEADLINE_TICKS),
    )?;
    let builtins: i32 = guest.call("builtins", ())?;
    let builtins = guest.dump(builtins, "opa_json_dump")?;
    match serde_json::from_str::<Value>(&builtins) {
        Ok(Value::Object(names)) if names.is_empty() => {}
        _ => bail!("builtins() is {builtins}; burrego refuses builtins it does not implement"),
    }
    guest.parse(b"{}", "opa_json_parse")?;
    let base: i32 = guest.call("opa_heap_ptr_get", ())?;
    let entrypoints: i32 = guest.call("entrypoints", ())?;
    guest.dump(entrypoints, "opa_json_dump")?;
    Ok(Loaded { guest, base })
}

/// One request as burrego's `evaluate` makes it.
fn evaluate(loaded: &mut Loaded, data: &[u8], input: &[u8]) -> Result<String> {
    let guest = &mut loaded.guest;
    guest.store.set_epoch_deadline(DEADLINE_TICKS);
    guest.call::<i32, ()>("opa_heap_ptr_set", loaded.base)?;
    let data = guest.parse(data, "opa_json_parse")?;
    let heap: i32 = guest.call("opa_heap_ptr_get", ())?;
    guest.call::<i32, ()>("opa_heap_ptr_set", heap)?;
    let input = guest.parse(input, "opa_json_parse")?;
    let context: i32 = guest.call("opa_eval_ctx_new", ())?;
    guest.call::<(i32, i32), ()>("opa_eval_ctx_set_input", (context, input))?;
    guest.call::<(i32, i32), ()>("opa_eval_ctx_set_data", (context, data))?;
    guest.call::<(i32, i32), ()>("opa_eval_ctx_set_entrypoint", (context, 0))?;
    guest.call::<i32, i32>("eval", context)?;
    let result: i32 = guest.call("opa_eval_ctx_get_result", context)?;
    guest.dump(result, "opa_json_dump")
}

/// Kubewarden's reading in gatekeeper mode: `result[0].result` as a list of violations with an
/// optional string `msg`; any other shape is an empty list, that is an allow.
fn violation_msgs(result: &str) -> Vec<Option<String>> {
    let Ok(Value::Array(bindings)) = serde_json::from_str::<Value>(result) else {
        return Vec::new();
    };
    let Some(Value::Array(violations)) = bindings.first().and_then(|binding| binding.get("result"))
    else {
        return Vec::new();
    };
    let mut msgs = Vec::new();
    for violation in violations {
        let Value::Object(fields) = violation else {
            return Vec::new();
        };
        match fields.get("msg") {
            None => msgs.push(None),
            Some(Value::String(msg)) => msgs.push(Some(msg.clone())),
            Some(_) => return Vec::new(),
        }
    }
    msgs
}

/// The AdmissionRequest Kubewarden passes as `review`, built from the fixture's review; `None`
/// for fixtures that are not an admission of an object (Kubewarden builds its input itself and
/// cannot send those).
fn admission_request(fixture_input: &Value, variant: Variant) -> Option<(Value, Value)> {
    let review = fixture_input.get("review")?;
    let object = review.get("object")?.as_object()?;
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let metadata = object.get("metadata").and_then(Value::as_object);
    let field = |name: &str| metadata.and_then(|m| m.get(name)).cloned();
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version,
        "resource": format!("{}s", kind.to_ascii_lowercase())});
    let mut request = Map::new();
    request.insert("uid".into(), json!("705ab4f5-6393-11e8-b7cc-42010a800002"));
    request.insert("kind".into(), gvk.clone());
    request.insert("resource".into(), gvr.clone());
    request.insert("requestKind".into(), gvk);
    request.insert("requestResource".into(), gvr);
    if let Some(name) = field("name") {
        request.insert("name".into(), name);
    }
    if let Some(namespace) = field("namespace").or_else(|| review.get("namespace").cloned()) {
        request.insert("namespace".into(), namespace);
    }
    request.insert(
        "userInfo".into(),
        json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}),
    );
    match variant {
        Variant::DeleteWithoutObject => {
            request.insert("operation".into(), json!("DELETE"));
            request.insert("oldObject".into(), Value::Object(object.clone()));
            request.insert(
                "options".into(),
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
            );
        }
        Variant::DataEmpty | Variant::DataInventory | Variant::Refusals => {
            let operation = review.get("operation").cloned().unwrap_or(json!("CREATE"));
            request.insert("operation".into(), operation);
            request.insert("object".into(), Value::Object(object.clone()));
            if let Some(old) = review.get("oldObject") {
                request.insert("oldObject".into(), old.clone());
            }
            request.insert(
                "options".into(),
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
            );
        }
    }
    request.insert("dryRun".into(), json!(false));
    let parameters = fixture_input
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let input = json!({"parameters": parameters, "review": Value::Object(request)});
    let data = match variant {
        Variant::DataInventory => inventory(review, object),
        _ => json!({}),
    };
    Some((input, data))
}

/// A context-aware policy's data: the object's Namespace (from the fixture's
/// `namespaceObject`) and the object itself, in Kubewarden's inventory layout.
fn inventory(review: &Value, object: &Map<String, Value>) -> Value {
    let mut cluster = json!({});
    if let Some(namespace) = review.get("namespaceObject") {
        let name = namespace["metadata"]["name"].as_str().unwrap_or("default");
        cluster = json!({"v1": {"Namespace": {name: namespace}}});
    }
    let namespace = object
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("unnamed");
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("Unknown");
    json!({"inventory": {"cluster": cluster,
        "namespace": {namespace: {api_version: {kind: {name: Value::Object(object.clone())}}}}}})
}

/// Sends the exhausting input as a request; what the host answered (its violation `msg`s if the
/// module answered, which the check then fails).
fn refuse(loaded: &mut Loaded, exhausting: &Value) -> Result<Outcome> {
    let (input, data) = admission_request(exhausting, Variant::Refusals)
        .expect("the exhausting input is an admission of a Deployment");
    Ok(
        match evaluate(
            loaded,
            &serde_json::to_vec(&data)?,
            &serde_json::to_vec(&input)?,
        ) {
            Err(error) => Outcome::Error(format!("{error:#}")),
            Ok(result) => Outcome::Msgs(violation_msgs(&result).into_iter().flatten().collect()),
        },
    )
}

/// Advances the engine's epoch every 100 ms while the harness runs, as policy-evaluator does,
/// so a runaway evaluation is interrupted instead of hanging the matrix.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let (engine, flag) = (engine.clone(), stop.clone());
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                engine.increment_epoch();
            }
        });
        EpochTicker { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub fn run(module_bytes: &[u8], fixtures: &[Fixture]) -> Result<(Vec<Column>, Vec<Check>)> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, module_bytes)?;
    let _ticker = EpochTicker::start(&engine);
    let exhausting: Value =
        serde_json::from_slice(&exhausting_input()).expect("the exhausting input is JSON");
    let mut columns = Vec::new();
    let mut checks = Vec::new();
    for variant in [
        Variant::DataEmpty,
        Variant::DataInventory,
        Variant::DeleteWithoutObject,
        Variant::Refusals,
    ] {
        let mut loaded = load(&engine, &module, variant.maximum())?;
        let mut verdicts = Vec::new();
        let mut refusals = Vec::new();
        let (mut denies, mut denied) = (0, 0);
        for fixture in fixtures {
            if let Variant::Refusals = variant {
                refusals.push(refuse(&mut loaded, &exhausting)?);
            }
            let request = fixture
                .input_value()
                .and_then(|input| admission_request(&input, variant));
            let Some((input, data)) = request else {
                verdicts.push(Verdict::NotApplicable(
                    "not an admission of an object: Kubewarden builds the input itself".into(),
                ));
                continue;
            };
            let input = serde_json::to_vec(&input)?;
            let expected = native_msgs(&input);
            denies += usize::from(!expected.is_empty());
            let verdict = match evaluate(&mut loaded, &serde_json::to_vec(&data)?, &input) {
                Err(error)
                    if variant.maximum().is_some()
                        && is_limit_refusal(input.len(), &format!("{error:#}")) =>
                {
                    // Kubewarden rejects a request whose evaluation failed: a deny stays a deny.
                    denied += usize::from(!expected.is_empty());
                    Verdict::MemoryLimit
                }
                Err(error) => {
                    // A failed evaluation is a rejection with the error in Kubewarden, so only
                    // an expected deny could pass; we hold it to the exact answer instead.
                    Verdict::Differs(format!(
                        "expected {expected:?}, evaluation failed: {error:#}"
                    ))
                }
                Ok(result) => {
                    let msgs = violation_msgs(&result);
                    let mut got: Vec<String> = msgs.iter().flatten().cloned().collect();
                    got.sort();
                    got.dedup();
                    denied += usize::from(!msgs.is_empty() && !expected.is_empty());
                    if msgs.is_empty() && !expected.is_empty() {
                        Verdict::Differs(format!(
                            "ALLOWED (Kubewarden reads {result:.200} as no violations), \
                             the native build denies with {expected:?}"
                        ))
                    } else if got != expected || msgs.len() != got.len() {
                        Verdict::Differs(format!("expected {expected:?}, Kubewarden read {msgs:?}"))
                    } else {
                        Verdict::Agrees
                    }
                }
            };
            verdicts.push(verdict);
        }
        let outcome = if denied == denies {
            Ok(format!("{denied} of {denies} deny fixtures denied"))
        } else {
            Err(format!("only {denied} of {denies} deny fixtures denied"))
        };
        checks.push(Check::new(
            HOST,
            &format!("fail-open reading ({})", variant.describe()),
            outcome,
        ));
        if let Variant::Refusals = variant {
            checks.push(refusals_check(
                HOST,
                &variant.describe(),
                &refusals,
                &verdicts,
            ));
        }
        columns.push(Column {
            host: HOST.into(),
            version: VERSION.into(),
            how: variant.describe(),
            verdicts,
        });
    }
    Ok((columns, checks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubewarden_reads_malformed_results_as_allow() {
        assert_eq!(
            violation_msgs(r#"[{"result":[{"msg":"a"},{"msg":"b"}]}]"#).len(),
            2
        );
        assert_eq!(
            violation_msgs(r#"[{"result":[{"details":{}}]}]"#),
            vec![None]
        );
        for malformed in [
            "",
            "{}",
            "[]",
            r#"[{"result":{"msg":"a"}}]"#,
            r#"[{"result":[{"msg":1}]}]"#,
            r#"[{"result":["a"]}]"#,
        ] {
            assert!(violation_msgs(malformed).is_empty(), "{malformed}");
        }
    }

    #[test]
    fn the_request_omits_object_on_delete_and_never_carries_namespace_object() {
        let fixture = json!({"review": {"object": {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"}},
            "namespaceObject": {"metadata": {"name": "shop"}}}, "parameters": {"minAvailable": 2}});
        let (input, data) = admission_request(&fixture, Variant::DataEmpty).unwrap();
        assert_eq!(input["review"]["kind"]["group"], "apps");
        assert_eq!(input["review"]["operation"], "CREATE");
        assert!(input["review"].get("namespaceObject").is_none());
        assert_eq!(input["parameters"]["minAvailable"], 2);
        assert_eq!(data, json!({}));
        let (input, _) = admission_request(&fixture, Variant::DeleteWithoutObject).unwrap();
        assert!(input["review"].get("object").is_none());
        assert_eq!(input["review"]["oldObject"]["metadata"]["name"], "web");
        let (_, data) = admission_request(&fixture, Variant::DataInventory).unwrap();
        assert_eq!(
            data["inventory"]["cluster"]["v1"]["Namespace"]["shop"]["metadata"]["name"],
            "shop"
        );
        assert!(
            admission_request(&json!({"review": {"object": "Pod"}}), Variant::DataEmpty).is_none()
        );
    }
}
