//! The native build never panics on the free-text fields the rules interpret: ProxyConfig
//! annotations (JSON or YAML), durations, sleeps in shell scripts, and every other annotation.
//! (host-test's never_traps covers the whole input through the wasm module.)

use meshlife_policy::{evaluate, proxy_config::parse_proxy_config};
use proptest::prelude::*;
use serde_json::json;

fn review_with(annotations: serde_json::Value, command: Vec<String>) -> Vec<u8> {
    let input = json!({
        "review": {"object": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {
                "metadata": {"labels": {"sidecar.istio.io/inject": "true"}, "annotations": annotations},
                "spec": {"containers": [{"name": "web", "image": "web:1",
                    "lifecycle": {"preStop": {"exec": {"command": command}}}}]}}}}},
        "parameters": {"linkerd": {"injectedNamespaces": ["*"]}}
    });
    serde_json::to_vec(&input).unwrap()
}

/// YAML-ish text: the characters that steer a YAML reader, plus anything.
fn yamlish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just(":".to_string()),
            Just(" ".to_string()),
            Just("\n".to_string()),
            Just("- ".to_string()),
            Just("{".to_string()),
            Just("}".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just(",".to_string()),
            Just("'".to_string()),
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("#".to_string()),
            Just("|".to_string()),
            Just(">".to_string()),
            Just("&a".to_string()),
            Just("terminationDrainDuration".to_string()),
            Just("holdApplicationUntilProxyStarts".to_string()),
            Just("proxyMetadata".to_string()),
            Just("1.5h".to_string()),
            Just("é".to_string()),
            "\\PC{0,4}",
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn proxy_config_reader_never_panics(text in yamlish()) {
        let _ = parse_proxy_config(&text);
    }

    #[test]
    fn every_annotation_and_script_is_read_without_panicking(
        config in yamlish(),
        wait in "\\PC{0,8}",
        await_value in "\\PC{0,8}",
        script in "(sleep|sh|-c| |[0-9]{1,25}|\\.|s|m|h|;|&|\\PC){0,12}",
    ) {
        let annotations = json!({
            "proxy.istio.io/config": config,
            "config.alpha.linkerd.io/proxy-wait-before-exit-seconds": wait,
            "config.linkerd.io/proxy-await": await_value,
            "config.linkerd.io/shutdown-grace-period": wait,
        });
        let violations = evaluate(&review_with(annotations, vec!["sh".into(), "-c".into(), script]));
        for violation in violations {
            let prefix = format!("[{} ", violation.details.rule);
            prop_assert!(violation.msg.starts_with(&prefix), "malformed: {}", violation.msg);
        }
    }
}
