//! The module never traps, whatever the input: random JSON, truncated and byte-mutated inputs,
//! wrong types in the fields the rules read, nesting 10,000 deep and a ~1 MB object. Every call,
//! through the eval-context path and both `opa_eval` formats, returns a well-formed result set,
//! equal to the native policy's whenever the input is JSON.

use crate::common;

use std::cell::RefCell;

use common::{Host, assert_result_set, native_context_json, native_json, native_rego};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Value, json};

/// Field names the rules read, so random documents reach past the first shape check.
const FIELD_NAMES: &[&str] = &[
    "review",
    "object",
    "parameters",
    "namespaceObject",
    "operation",
    "kind",
    "apiVersion",
    "metadata",
    "name",
    "namespace",
    "annotations",
    "labels",
    "ownerReferences",
    "spec",
    "template",
    "jobTemplate",
    "containers",
    "initContainers",
    "image",
    "args",
    "command",
    "lifecycle",
    "preStop",
    "postStart",
    "exec",
    "sleep",
    "seconds",
    "startupProbe",
    "readinessProbe",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "replicas",
    "strategy",
    "rollingUpdate",
    "maxUnavailable",
    "ports",
    "containerPort",
    "appProtocol",
    "env",
    "value",
    "securityContext",
    "runAsUser",
    "hostNetwork",
    "istio",
    "linkerd",
    "rules",
    "excludeRules",
    "exemptNamespaces",
    "kubernetesMinorVersion",
];

/// Values with meaning to the rules, so random documents also take the deeper branches.
const FIELD_VALUES: &[&str] = &[
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Rollout",
    "apps/v1",
    "batch/v1",
    "argoproj.io/v1alpha1",
    "istio-proxy",
    "linkerd-proxy",
    "true",
    "false",
    "enabled",
    "disabled",
    "Always",
    "Never",
    "OnFailure",
    "DELETE",
    "CREATE",
    "5s",
    "1m30s",
    "sidecar.istio.io/inject",
    "proxy.istio.io/config",
    "linkerd.io/inject",
    "quitquitquit",
    "grpc",
    "25%",
    "Recreate",
    "*",
    "ML101",
];

/// Paths of fields the rules read (JSON pointers into [`base_input`]).
const READ_FIELDS: &[&str] = &[
    "/review",
    "/review/object",
    "/review/operation",
    "/review/namespaceObject",
    "/review/object/kind",
    "/review/object/metadata",
    "/review/object/metadata/ownerReferences",
    "/review/object/spec",
    "/review/object/spec/replicas",
    "/review/object/spec/strategy",
    "/review/object/spec/template",
    "/review/object/spec/template/metadata/annotations",
    "/review/object/spec/template/metadata/labels",
    "/review/object/spec/template/spec",
    "/review/object/spec/template/spec/containers",
    "/review/object/spec/template/spec/containers/0",
    "/review/object/spec/template/spec/containers/0/name",
    "/review/object/spec/template/spec/containers/0/lifecycle",
    "/review/object/spec/template/spec/containers/0/lifecycle/preStop/exec/command",
    "/review/object/spec/template/spec/containers/0/ports",
    "/review/object/spec/template/spec/containers/1/args",
    "/review/object/spec/template/spec/containers/1/env",
    "/review/object/spec/template/spec/initContainers",
    "/review/object/spec/template/spec/terminationGracePeriodSeconds",
    "/review/object/spec/template/spec/restartPolicy",
    "/parameters",
    "/parameters/istio",
    "/parameters/istio/terminationDrainDuration",
    "/parameters/linkerd",
    "/parameters/kubernetesMinorVersion",
    "/parameters/rules",
    "/parameters/exemptImages",
];

/// An injected classic-Istio Deployment that several rules look at closely.
fn base_input() -> Value {
    json!({
        "parameters": {"istio": {"terminationDrainDuration": "20s"}, "kubernetesMinorVersion": 31},
        "review": {
            "operation": "CREATE",
            "namespaceObject": {"metadata": {"name": "shop", "labels": {"istio-injection": "enabled"}}},
            "object": {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
                    "template": {
                        "metadata": {"annotations": {"proxy.istio.io/config": "terminationDrainDuration: 45s"},
                                     "labels": {"app": "web"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 30,
                            "restartPolicy": "Always",
                            "initContainers": [{"name": "migrate", "image": "migrate:1"}],
                            "containers": [
                                {"name": "web", "image": "web:1", "ports": [{"name": "grpc", "containerPort": 9000}],
                                 "lifecycle": {"preStop": {"exec": {"command": ["sleep", "60"]}}}},
                                {"name": "istio-proxy", "image": "proxyv2", "args": ["proxy", "sidecar"],
                                 "env": [{"name": "EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "value": "true"}]}
                            ]
                        }
                    }
                }
            }
        }
    })
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[ -~]{0,10}".prop_map(Value::from),
        ".{0,4}".prop_map(Value::from),
        select(FIELD_VALUES).prop_map(Value::from),
    ]
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![select(FIELD_NAMES).prop_map(String::from), "[a-z]{1,6}"];
    json_leaf().prop_recursive(6, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// Replaces the value at `pointer` (creating the last key in an object) with `value`.
fn set_at(document: &mut Value, pointer: &str, value: Value) {
    let (parent, last) = pointer.rsplit_once('/').expect("pointers start with /");
    match document.pointer_mut(parent) {
        Some(Value::Object(object)) => {
            object.insert(last.to_owned(), value);
        }
        Some(Value::Array(array)) => {
            if let Some(slot) = last
                .parse::<usize>()
                .ok()
                .and_then(|index| array.get_mut(index))
            {
                *slot = value;
            }
        }
        _ => {}
    }
}

thread_local! {
    // One instance for all cases: evaluations must also survive each other's heap leftovers.
    static HOST: RefCell<Host> = RefCell::new(Host::new(2));
}

/// Every ABI path on `input`: no trap, a well-formed result set, and the native result when
/// the input is JSON.
fn check(input: &[u8]) {
    HOST.with(|host| {
        let mut host = host.borrow_mut();
        let data = host.data;
        let context = host
            .eval_context(Some(input), data)
            .expect("context path trapped");
        assert_result_set(&context);
        assert_eq!(context, native_context_json(input), "context path");

        let json = host
            .eval_fast(Some(input), data, 0)
            .expect("opa_eval format 0 trapped");
        assert_result_set(&json);
        let rego = host
            .eval_fast(Some(input), 0, 1)
            .expect("opa_eval format 1 trapped");
        assert_result_set(&rego);
        if serde_json::from_slice::<serde::de::IgnoredAny>(input).is_ok() {
            assert_eq!(json, native_json(input), "opa_eval format 0");
            assert_eq!(rego, native_rego(input), "opa_eval format 1");
        }

        let base = host.base;
        host.heap_ptr_set(base);
        let value = host.parse_value(input).expect("opa_value_parse trapped");
        if value != 0 {
            let dump = host.json_dump(value).expect("opa_json_dump trapped");
            serde_json::from_str::<Value>(&dump).expect("a parsed value dumps as JSON");
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_json_documents(document in arbitrary_json()) {
        check(&serde_json::to_vec(&document).unwrap());
    }

    #[test]
    fn random_objects_under_review(object in arbitrary_json(), parameters in arbitrary_json()) {
        let input = json!({"review": {"object": object}, "parameters": parameters});
        check(&serde_json::to_vec(&input).unwrap());
    }

    #[test]
    fn wrong_types_in_fields_the_rules_read(
        changes in prop::collection::vec((select(READ_FIELDS), arbitrary_json()), 1..4),
    ) {
        let mut input = base_input();
        for (pointer, value) in changes {
            set_at(&mut input, pointer, value);
        }
        check(&serde_json::to_vec(&input).unwrap());
    }

    #[test]
    fn truncated_inputs(cut in any::<Index>(), pretty in any::<bool>()) {
        let input = if pretty {
            serde_json::to_vec_pretty(&base_input()).unwrap()
        } else {
            serde_json::to_vec(&base_input()).unwrap()
        };
        check(&input[..cut.index(input.len())]);
    }

    #[test]
    fn byte_mutated_inputs(mutations in prop::collection::vec((any::<Index>(), any::<u8>()), 1..8)) {
        let mut input = serde_json::to_vec(&base_input()).unwrap();
        for (position, byte) in mutations {
            let index = position.index(input.len());
            input[index] = byte;
        }
        check(&input);
    }

    #[test]
    fn random_bytes(input in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&input);
    }
}

#[test]
fn the_fixed_wrong_types_from_the_contract() {
    let cases: [(&str, Value); 4] = [
        ("/review/object/spec/template/spec/containers", json!("web")),
        (
            "/review/object/spec/template/spec/terminationGracePeriodSeconds",
            json!("30"),
        ),
        (
            "/review/object/spec/template/metadata/annotations",
            json!(["a", "b"]),
        ),
        ("/parameters/kubernetesMinorVersion", json!("1.31")),
    ];
    for (pointer, value) in cases {
        let mut input = base_input();
        set_at(&mut input, pointer, value);
        let input = serde_json::to_vec(&input).unwrap();
        check(&input);
        let rules = assert_result_set(&native_json(&input));
        assert_eq!(rules, ["ML000"], "{pointer}");
    }
}

#[test]
fn nesting_ten_thousand_deep() {
    const DEPTH: usize = 10_000;
    let arrays = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(DEPTH), "}".repeat(DEPTH));
    let rego_sets = format!("{}1{}", "{".repeat(DEPTH), "}".repeat(DEPTH));
    let under_review = format!(r#"{{"review": {{"object": {objects}}}}}"#);
    let in_containers = format!(
        r#"{{"review": {{"object": {{"kind": "Pod", "spec": {{"containers": {arrays}}}}}}}}}"#
    );
    for input in [&arrays, &objects, &rego_sets, &under_review, &in_containers] {
        check(input.as_bytes());
    }
    // A deep value is refused by the Rego parser and by path updates, without a trap.
    HOST.with(|host| {
        let mut host = host.borrow_mut();
        let base = host.base;
        host.heap_ptr_set(base);
        assert_eq!(host.parse_value(arrays.as_bytes()).unwrap(), 0);
        let deep = host.parse_json(objects.as_bytes()).unwrap();
        assert_ne!(deep, 0, "opa_json_parse accepts deep JSON");
        let path = host.parse_json(br#"["x"]"#).unwrap();
        assert_eq!(
            host.add_path(deep, path, deep).unwrap(),
            1,
            "internal error, no trap"
        );
    });
}

#[test]
fn a_one_megabyte_object() {
    let mut input = base_input();
    let container = |index: usize| {
        json!({
            "name": format!("worker-{index}"),
            "image": format!("registry.example.com/team/worker:{index}"),
            "args": ["--listen", ":8080", "--log-level", "info"],
            "env": (0..12).map(|n| json!({"name": format!("VARIABLE_{n}"), "value": "x".repeat(40)})).collect::<Vec<_>>(),
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}}
        })
    };
    let containers: Vec<Value> = (0..1100).map(container).collect();
    set_at(
        &mut input,
        "/review/object/spec/template/spec/containers",
        Value::Array(containers),
    );
    let input = serde_json::to_vec(&input).unwrap();
    assert!(input.len() > 1_000_000, "{} bytes", input.len());
    check(&input);
}

/// An input the module reads into far more memory than its own size: each of its many empty
/// containers becomes a typed container, so it fits in the host's capped memory but its
/// evaluation does not.
fn exhausting_input(containers: usize) -> Vec<u8> {
    let mut input = base_input();
    set_at(
        &mut input,
        "/review/object/spec/template/spec/containers",
        Value::Array(vec![json!({}); containers]),
    );
    serde_json::to_vec(&input).unwrap()
}

/// Hosts unwind out of `opa_abort` (npm, Python and Go throw), skipping the frames' epilogues;
/// after any number of out-of-memory refusals, the same instance must answer every ABI path
/// exactly as a fresh instance does. Memory is capped at 16 pages, as an npm caller may.
#[test]
fn many_refusals_then_valid_inputs() {
    let exhausting = exhausting_input(150_000);
    let mut deny = base_input();
    set_at(
        &mut deny,
        "/review/object/spec/template/spec/terminationGracePeriodSeconds",
        json!(1),
    );
    let valid: Vec<Vec<u8>> = [deny, base_input(), json!({})]
        .iter()
        .map(|input| serde_json::to_vec(input).unwrap())
        .collect();
    let answers = |host: &mut Host, input: &[u8]| {
        let data = host.data;
        (
            host.eval_fast(Some(input), data, 0)
                .expect("opa_eval format 0"),
            host.eval_fast(Some(input), 0, 1)
                .expect("opa_eval format 1"),
            host.eval_context(Some(input), data).expect("context path"),
        )
    };
    let mut fresh = Host::with_memory(2, Some(16));
    let expected: Vec<_> = valid
        .iter()
        .map(|input| answers(&mut fresh, input))
        .collect();

    let mut capped = Host::with_memory(2, Some(16));
    for round in 0..25 {
        let data = capped.data;
        let refusal = match round % 2 {
            0 => capped.eval_fast(Some(&exhausting), data, 0),
            _ => capped.eval_context(Some(&exhausting), data),
        };
        let error = refusal.expect_err("the exhausting input must be refused");
        assert!(
            format!("{error:?}").contains("out of memory"),
            "round {round}: refused with the module's own abort, got {error:?}"
        );
        for (input, expected) in valid.iter().zip(&expected) {
            assert_eq!(
                &answers(&mut capped, input),
                expected,
                "after {} refusals",
                round + 1
            );
        }
    }
}
