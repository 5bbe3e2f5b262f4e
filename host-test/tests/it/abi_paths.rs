//! The module through both ABI evaluation paths, checked against the policy compiled natively:
//! the eval-context path (Kubewarden, npm's slow path) and `opa_eval` in JSON (npm, rust
//! opa-wasm) and Rego format (OPA's Go host), with 2- and 5-page memories. Plus the host
//! behaviours the ABI contract names: data 0, absent input, Go-quoted Rego input, trailing NULs,
//! heap resets, heap copies into a fresh VM, path updates and bad entrypoints.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Host, assert_result_set, native_context_json, native_json, native_rego};
use meshlife::fixtures;
use serde_json::{Value, json};

/// Memory sizes hosts provide: opa-py-wasm and old rust opa-wasm 2 pages, npm, burrego and
/// wasmer 5.
const MEMORY_PAGES: [u32; 2] = [2, 5];

fn workspace_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// Every case of every case file, as (file: name, input JSON).
fn policy_cases() -> Vec<(String, Vec<u8>)> {
    fixtures::rule_cases(&workspace_path("policy/tests/cases"))
        .expect("the policy's rule cases load")
        .into_iter()
        .map(|fixture| (fixture.label, fixture.input))
        .collect()
}

/// A Deployment injected by a classic Istio sidecar without hold: ML101 fires by default.
fn deny_input() -> Value {
    json!({
        "review": {"object": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 3, "template": {
                "metadata": {"labels": {"app": "web", "sidecar.istio.io/inject": "true"}},
                "spec": {"containers": [{"name": "web", "image": "web:1",
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}}}]}}}
        }}
    })
}

fn deny_bytes() -> Vec<u8> {
    serde_json::to_vec(&deny_input()).unwrap()
}

/// Runs `input` through the context path and both `opa_eval` formats and compares each with the
/// native policy.
fn check_every_path(host: &mut Host, label: &str, input: &[u8], data: u32) {
    let context = host
        .eval_context(Some(input), data)
        .unwrap_or_else(|error| panic!("{label}: context path trapped: {error:?}"));
    assert_eq!(context, native_context_json(input), "{label}: context path");
    let json = host
        .eval_fast(Some(input), data, 0)
        .unwrap_or_else(|error| panic!("{label}: opa_eval trapped: {error:?}"));
    assert_eq!(json, native_json(input), "{label}: opa_eval format 0");
    let rego = host
        .eval_fast(Some(input), data, 1)
        .unwrap_or_else(|error| panic!("{label}: opa_eval trapped: {error:?}"));
    assert_eq!(rego, native_rego(input), "{label}: opa_eval format 1");
    assert_result_set(&json);
    assert_result_set(&rego);
}

#[test]
fn policy_cases_agree_with_native_evaluation_on_every_path() {
    let cases = policy_cases();
    for pages in MEMORY_PAGES {
        let mut host = Host::new(pages);
        let data = host.data;
        for (label, input) in &cases {
            check_every_path(&mut host, &format!("{label} ({pages} pages)"), input, data);
        }
    }
}

/// Every object of the example manifests, each with the Namespace of its file as
/// `namespaceObject`, as `meshlife check` sends them.
fn example_inputs() -> Vec<(String, Vec<u8>)> {
    let examples = workspace_path("examples").to_string_lossy().into_owned();
    let inputs: Vec<(String, Vec<u8>)> = fixtures::manifest_objects(&[examples], &json!({}))
        .expect("the examples load")
        .into_iter()
        .map(|fixture| (fixture.label, fixture.input))
        .collect();
    assert!(
        inputs.len() > 50,
        "expected the example manifests, found {}",
        inputs.len()
    );
    inputs
}

#[test]
fn example_manifests_agree_with_native_evaluation_on_every_path() {
    let mut host = Host::new(2);
    let data = host.data;
    let mut fired = 0;
    for (label, input) in example_inputs() {
        check_every_path(&mut host, &label, &input, data);
        fired += usize::from(!meshlife_policy::evaluate(&input).is_empty());
    }
    // The examples exist to fire rules: a module that found nothing would pass vacuously.
    assert!(
        fired > 30,
        "only {fired} example objects produced violations"
    );
}

#[test]
fn hand_made_inputs_agree_with_native_evaluation() {
    let mut big_annotations = serde_json::Map::new();
    for index in 0..2000 {
        big_annotations.insert(format!("example.com/key-{index}"), json!("v".repeat(100)));
    }
    let mut big = deny_input();
    big["review"]["object"]["spec"]["template"]["metadata"]["annotations"] =
        Value::Object(big_annotations);
    let mut no_review = deny_input();
    no_review["review"] = json!("a string");
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("deny", deny_bytes()),
        (
            "pretty-printed deny",
            serde_json::to_vec_pretty(&deny_input()).unwrap(),
        ),
        ("odd length", b" {} ".to_vec()),
        ("empty object", b"{}".to_vec()),
        (
            "review not an object",
            serde_json::to_vec(&no_review).unwrap(),
        ),
        ("scalar input", b"42".to_vec()),
        ("200 KB of annotations", serde_json::to_vec(&big).unwrap()),
    ];
    for pages in MEMORY_PAGES {
        let mut host = Host::new(pages);
        let data = host.data;
        for (label, input) in &inputs {
            check_every_path(&mut host, label, input, data);
        }
    }
    let mut host = Host::new(2);
    let deny = host.eval_fast(Some(&deny_bytes()), host.data, 0).unwrap();
    assert!(
        assert_result_set(&deny).contains(&"ML101".to_owned()),
        "the deny input denies: {deny}"
    );
}

#[test]
fn data_zero_and_absent_input() {
    let mut host = Host::new(2);
    // opa-py-wasm and OPA Go pass data 0.
    check_every_path(&mut host, "data 0", &deny_bytes(), 0);
    // npm and OPA Go pass address 0, length 0 for no input; npm's slow path passes value 0.
    let expected = native_json(b"");
    assert_eq!(
        assert_result_set(&expected),
        ["ML000"],
        "the policy reports absent input"
    );
    assert_eq!(host.eval_fast(None, host.data, 0).unwrap(), expected);
    assert_eq!(host.eval_fast(None, 0, 1).unwrap(), native_rego(b""));
    assert_eq!(host.eval_context(None, host.data).unwrap(), expected);
}

#[test]
fn rego_text_with_go_escapes_and_sets_evaluates_like_its_json() {
    // What OPA's Go host sends: `ast.Term.String()`, strings quoted by `strconv.Quote`, and a
    // set where a Rego policy would build one.
    let rego = concat!(
        r#"{"parameters": {"excludeRules": set(), "rules": {"ML101", "startup-no-hold"}}, "#,
        r#""review": {"object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "#,
        r#"{"annotations": {"note": "bell\a tab\x09 unit\x1f emoji\U0001F600 e\u00e9 q\"\\"}, "#,
        r#""name": "web", "namespace": "shop"}, "spec": {"replicas": 3, "template": {"metadata": "#,
        r#"{"labels": {"sidecar.istio.io/inject": "true"}}, "spec": {"containers": "#,
        r#"[{"image": "web:1", "name": "web"}]}}}}}}"#
    );
    let json = json!({
        "parameters": {"excludeRules": [], "rules": ["ML101", "startup-no-hold"]},
        "review": {"object": {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"annotations": {"note": "bell\u{7} tab\t unit\u{1f} emoji😀 eé q\"\\"},
                "name": "web", "namespace": "shop"},
            "spec": {"replicas": 3, "template": {
                "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                "spec": {"containers": [{"image": "web:1", "name": "web"}]}}}}}
    });
    let json = serde_json::to_vec(&json).unwrap();
    let expected_rego = native_rego(&json);
    assert!(assert_result_set(&expected_rego).contains(&"ML101".to_owned()));
    for pages in MEMORY_PAGES {
        let mut host = Host::new(pages);
        assert_eq!(
            host.eval_fast(Some(rego.as_bytes()), 0, 1).unwrap(),
            expected_rego
        );
        assert_eq!(
            host.eval_fast(Some(rego.as_bytes()), host.data, 0).unwrap(),
            native_json(&json)
        );
        // OPA Go loads data with `opa_value_parse`; the context path accepts the same text.
        host.heap_ptr_set(host.base);
        let value = host.parse_value(rego.as_bytes()).unwrap();
        assert_ne!(value, 0, "opa_value_parse accepts Rego text");
        let reparsed: Value = serde_json::from_str(&host.json_dump(value).unwrap()).unwrap();
        assert_eq!(reparsed, serde_json::from_slice::<Value>(&json).unwrap());
    }
}

#[test]
fn trailing_nul_counted_in_the_length_is_ignored() {
    // rust opa-wasm passes `len + 1` for the C string it wrote.
    let mut with_nul = deny_bytes();
    with_nul.push(0);
    let mut host = Host::new(2);
    let data = host.data;
    assert_eq!(
        host.eval_fast(Some(&with_nul), data, 0).unwrap(),
        native_json(&deny_bytes())
    );
    assert_eq!(
        host.eval_context(Some(&with_nul), data).unwrap(),
        native_json(&deny_bytes())
    );
    host.heap_ptr_set(host.base);
    let data_with_nul = host.parse_json(b"{}\0").unwrap();
    assert_eq!(host.json_dump(data_with_nul).unwrap(), "{}");
}

#[test]
fn malformed_input_parses_to_zero_and_still_evaluates() {
    let mut host = Host::new(2);
    for text in [
        &b"{"[..],
        b"{\"a\":}",
        b"",
        b"nul",
        b"[1,]",
        b"{} {}",
        b"\xff",
    ] {
        host.heap_ptr_set(host.base);
        assert_eq!(
            host.parse_json(text).unwrap(),
            0,
            "opa_json_parse({:?})",
            String::from_utf8_lossy(text)
        );
        assert_eq!(
            host.parse_value(text).unwrap(),
            0,
            "opa_value_parse({:?})",
            String::from_utf8_lossy(text)
        );
        let label = format!("{:?}", String::from_utf8_lossy(text));
        check_every_path(&mut host, &label, text, 0);
    }
}

#[test]
fn repeated_evaluations_with_heap_resets_keep_memory_flat() {
    let big = {
        let mut input = deny_input();
        input["review"]["object"]["metadata"]["annotations"] = json!({"blob": "x".repeat(300_000)});
        serde_json::to_vec(&input).unwrap()
    };
    let mut host = Host::new(2);
    let data = host.data;
    let run = |host: &mut Host| {
        host.eval_context(Some(&big), data).unwrap();
        host.eval_fast(Some(&big), data, 0).unwrap();
        host.eval_fast(Some(&deny_bytes()), data, 1).unwrap();
        host.eval_fast(None, data, 0).unwrap();
    };
    for _ in 0..5 {
        run(&mut host);
    }
    let warm = host.memory_bytes();
    for _ in 0..200 {
        run(&mut host);
    }
    assert_eq!(host.memory_bytes(), warm, "memory grew across evaluations");
}

#[test]
fn heap_pointer_get_keeps_headroom_and_set_accepts_any_address() {
    let mut host = Host::new(2);
    let headroom = host.memory_bytes() - host.base as usize;
    assert!(
        headroom >= 4 << 20,
        "only {headroom} bytes free above the heap pointer"
    );

    // Odd pointers (npm's `dataHeap + len`) and pointers past the end of memory.
    host.heap_ptr_set(host.base + 3);
    let block = host.malloc(10).unwrap();
    assert!(
        block >= host.base + 3 && block.is_multiple_of(8),
        "aligned block {block}"
    );
    let beyond = host.memory_bytes() as u32 + 1000;
    host.heap_ptr_set(beyond);
    let block = host.malloc(100).unwrap();
    assert!(block >= beyond);
    assert!(
        host.memory_bytes() >= block as usize + 100,
        "memory grew to hold the block"
    );
    // `opa_malloc(0)` (OPA Go's first call) gives a usable address.
    assert_ne!(host.malloc(0).unwrap(), 0);
}

#[test]
fn a_memory_with_a_maximum_still_loads_and_evaluates() {
    // npm callers may pass `{initial: 2, maximum: 8}`: the headroom growth fails quietly.
    let mut host = Host::with_memory(2, Some(8));
    let data = host.data;
    check_every_path(&mut host, "capped memory", &deny_bytes(), data);
    assert!(host.memory_bytes() <= 8 * 65536);
}

#[test]
fn a_byte_copy_of_the_data_heap_evaluates_identically_in_a_fresh_instance() {
    // OPA's Go VM pool: load data in one VM, copy [base, data heap pointer) into new VMs.
    let mut first = Host::instantiate(2, None);
    first.malloc(0).unwrap();
    let base = first.heap_ptr_get();
    let data = first
        .parse_value(br#"{"inventory": {"namespaces": {"shop", "web"}}}"#)
        .unwrap();
    assert_ne!(data, 0);
    let path = first
        .parse_json(br#"["inventory", "cluster", "v1"]"#)
        .unwrap();
    let value = first
        .parse_json(br#"{"Namespace": {"shop": {"metadata": {"name": "shop"}}}}"#)
        .unwrap();
    assert_eq!(first.add_path(data, path, value).unwrap(), 0);
    let data_heap = first.heap_ptr_get();
    let data_dump = first.json_dump(data).unwrap();

    let mut second = Host::instantiate(2, None);
    second.malloc(0).unwrap();
    assert_eq!(
        second.heap_ptr_get(),
        base,
        "both instances start their heap at __heap_base"
    );
    let heap = first.memory.data(&first.store)[base as usize..data_heap as usize].to_vec();
    second.write_raw(base, &heap);
    second.heap_ptr_set(data_heap);
    assert_eq!(second.json_dump(data).unwrap(), data_dump);
    assert_eq!(
        second.value_dump(data).unwrap(),
        first.value_dump(data).unwrap()
    );

    for host in [&mut first, &mut second] {
        host.base = data_heap;
        host.data = data;
    }
    let input = deny_bytes();
    let expected = native_rego(&input);
    assert_eq!(first.eval_fast(Some(&input), data, 1).unwrap(), expected);
    assert_eq!(second.eval_fast(Some(&input), data, 1).unwrap(), expected);
    assert_eq!(
        second.eval_context(Some(&input), data).unwrap(),
        native_json(&input)
    );
}

#[test]
fn add_and_remove_path_follow_opa_error_codes() {
    const OK: i32 = 0;
    const INVALID_TYPE: i32 = 2;
    const INVALID_PATH: i32 = 3;
    let mut host = Host::new(2);
    let data = host.parse_json(b"{}").unwrap();
    let one = host.parse_json(b"1").unwrap();
    let path = |host: &mut Host, text: &str| host.parse_json(text.as_bytes()).unwrap();
    let dump =
        |host: &mut Host| serde_json::from_str::<Value>(&host.json_dump(data).unwrap()).unwrap();

    let a_b = path(&mut host, r#"["a", "b"]"#);
    assert_eq!(host.add_path(data, a_b, one).unwrap(), OK);
    assert_eq!(dump(&mut host), json!({"a": {"b": 1}}));
    let a_b_c = path(&mut host, r#"["a", "b", "c"]"#);
    assert_eq!(
        host.add_path(data, a_b_c, one).unwrap(),
        INVALID_TYPE,
        "b holds a number"
    );
    for bad_path in ["[]", r#""a""#, "[1]", r#"{"a": 1}"#] {
        let bad_path = path(&mut host, bad_path);
        assert_eq!(host.add_path(data, bad_path, one).unwrap(), INVALID_PATH);
        assert_eq!(host.remove_path(data, bad_path).unwrap(), INVALID_PATH);
    }
    let array = host.parse_json(b"[1]").unwrap();
    let a = path(&mut host, r#"["a"]"#);
    assert_eq!(
        host.add_path(array, a, one).unwrap(),
        INVALID_TYPE,
        "base must be an object"
    );

    let x_y = path(&mut host, r#"["x", "y"]"#);
    assert_eq!(
        host.remove_path(data, x_y).unwrap(),
        OK,
        "a missing path counts as removed"
    );
    assert_eq!(dump(&mut host), json!({"a": {"b": 1}}));
    assert_eq!(host.remove_path(data, a_b).unwrap(), OK);
    assert_eq!(dump(&mut host), json!({"a": {}}));

    // A value nested deeper than the module rebuilds safely is refused, not a trap.
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep = host.parse_json(deep.as_bytes()).unwrap();
    assert_ne!(deep, 0);
    assert_eq!(host.add_path(data, a, deep).unwrap(), 1);
    let value_dump = host.value_dump(data).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&value_dump).unwrap(),
        json!({"a": {}})
    );
}

#[test]
fn result_values_dump_as_json_and_as_a_rego_set() {
    let mut host = Host::new(2);
    let input = deny_bytes();
    let result = host.eval_context_value(Some(&input), host.data, 0).unwrap();
    assert_eq!(host.json_dump(result).unwrap(), native_json(&input));
    assert_eq!(host.value_dump(result).unwrap(), native_rego(&input));
    let empty = host
        .eval_context_value(
            Some(br#"{"review": {"object": {"kind": "Service"}}}"#),
            host.data,
            0,
        )
        .unwrap();
    assert_eq!(host.json_dump(empty).unwrap(), r#"[{"result":[]}]"#);
    assert_eq!(host.value_dump(empty).unwrap(), r#"{{"result": set()}}"#);
}

#[test]
fn unknown_entrypoint_and_reserved_argument_abort() {
    let input = deny_bytes();
    let mut host = Host::new(2);
    let data = host.data;
    let error = host
        .eval_fast_entrypoint(Some(&input), data, 0, 1)
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("invalid entrypoint"),
        "{error:?}"
    );
    let mut host = Host::new(2);
    let data = host.data;
    let error = host.eval_context_value(Some(&input), data, 7).unwrap_err();
    assert!(
        format!("{error:?}").contains("invalid entrypoint"),
        "{error:?}"
    );
    let mut host = Host::new(2);
    let base = host.base as i32;
    let error = host.opa_eval_raw((1, 0, 0, 0, 0, base, 0)).unwrap_err();
    assert!(format!("{error:?}").contains("reserved"), "{error:?}");
}
