//! Reading the `proxy.istio.io/config` annotation: a ProxyConfig in YAML or JSON (JSON is tried
//! first, being both the common spelling and the cheap one).

use serde_json::Value;

use crate::duration::parse_go_duration;
use crate::yaml_subset::parse_yaml;

/// The lifecycle fields of a ProxyConfig, each `None` when absent or unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    pub hold_application_until_proxy_starts: Option<bool>,
    pub termination_drain_ms: Option<u64>,
    pub exit_on_zero_active_connections: Option<bool>,
    pub minimum_drain_ms: Option<u64>,
    /// `drainDuration`: how long Envoy drains (`--drain-time-s`), which a native proxy's preStop
    /// starts at the pod's deletion.
    pub drain_duration_ms: Option<u64>,
}

/// Flow nesting and indentation beyond these are not a ProxyConfig; refusing them keeps the
/// parse (and the drop of its tree) within the module's small stack.
const MAX_FLOW_DEPTH: usize = 32;
const MAX_INDENT: usize = 64;

/// Parses the annotation value. Problems (each a sentence for ML601) are returned beside the
/// fields that could be read.
pub fn parse_proxy_config(text: &str) -> (ProxyConfig, Vec<String>) {
    let mut problems = Vec::new();
    // go-yaml skips a byte order mark before the text (see `yaml_subset`); so does JSON here.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return (ProxyConfig::default(), problems);
    }
    if let Err(problem) = check_nesting(text) {
        problems.push(problem);
        return (ProxyConfig::default(), problems);
    }
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(_) => match parse_yaml(text) {
            Ok(value) => value,
            Err(error) => {
                problems.push(format!(
                    "is neither JSON nor YAML that meshlife can read ({error})"
                ));
                return (ProxyConfig::default(), problems);
            }
        },
    };
    // An empty first document: jsonpb applies a top-level null as no change at all.
    if value.is_null() {
        return (ProxyConfig::default(), problems);
    }
    let Value::Object(map) = value else {
        problems.push("is not a YAML or JSON map of ProxyConfig fields".to_string());
        return (ProxyConfig::default(), problems);
    };
    let mut config = ProxyConfig::default();
    match map.get("holdApplicationUntilProxyStarts") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(hold)) => config.hold_application_until_proxy_starts = Some(*hold),
        Some(other) => problems.push(format!(
            "holds holdApplicationUntilProxyStarts: {other}, which is not a boolean (true or false)"
        )),
    }
    config.termination_drain_ms = duration_field(
        map.get("terminationDrainDuration"),
        "terminationDrainDuration",
        &mut problems,
    );
    config.drain_duration_ms =
        duration_field(map.get("drainDuration"), "drainDuration", &mut problems);
    match map.get("proxyMetadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(metadata)) => {
            match metadata.get("EXIT_ON_ZERO_ACTIVE_CONNECTIONS") {
                None => {}
                Some(Value::String(flag)) => {
                    config.exit_on_zero_active_connections = Some(flag.eq_ignore_ascii_case("true"))
                }
                Some(Value::Bool(flag)) => config.exit_on_zero_active_connections = Some(*flag),
                Some(other) => problems.push(format!(
                    "holds proxyMetadata.EXIT_ON_ZERO_ACTIVE_CONNECTIONS: {other}, which is not \"true\" or \"false\""
                )),
            }
            config.minimum_drain_ms = duration_field(
                metadata.get("MINIMUM_DRAIN_DURATION"),
                "proxyMetadata.MINIMUM_DRAIN_DURATION",
                &mut problems,
            );
        }
        Some(other) => problems.push(format!(
            "holds proxyMetadata: {other}, which is not a map of strings"
        )),
    }
    (config, problems)
}

fn duration_field(value: Option<&Value>, key: &str, problems: &mut Vec<String>) -> Option<u64> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => match parse_go_duration(text) {
            Ok(ms) => Some(ms),
            Err(problem) => {
                problems.push(format!(
                    "holds {key}: \"{text}\", a malformed duration ({problem})"
                ));
                None
            }
        },
        Some(other) => {
            problems.push(format!(
                "holds {key}: {other}, which is not a duration string such as \"30s\""
            ));
            None
        }
    }
}

fn check_nesting(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    for byte in text.bytes() {
        match byte {
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(format!("nests deeper than {MAX_FLOW_DEPTH} levels"));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    for line in crate::yaml_subset::yaml_lines(text) {
        if line.len() - line.trim_start().len() > MAX_INDENT {
            return Err(format!("is indented deeper than {MAX_INDENT} columns"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_and_yaml_spellings() {
        let (json, problems) = parse_proxy_config(r#"{"holdApplicationUntilProxyStarts": true}"#);
        assert!(problems.is_empty());
        assert_eq!(json.hold_application_until_proxy_starts, Some(true));

        let yaml = "holdApplicationUntilProxyStarts: false\nterminationDrainDuration: 45s\nproxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"\n  MINIMUM_DRAIN_DURATION: 10s\n";
        let (config, problems) = parse_proxy_config(yaml);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.hold_application_until_proxy_starts, Some(false));
        assert_eq!(config.termination_drain_ms, Some(45_000));
        assert_eq!(config.exit_on_zero_active_connections, Some(true));
        assert_eq!(config.minimum_drain_ms, Some(10_000));
    }

    #[test]
    fn reports_what_the_mesh_would_reject() {
        let (_, problems) = parse_proxy_config("just a string");
        assert_eq!(problems.len(), 1, "{problems:?}");
        let (_, problems) = parse_proxy_config(r#"{"holdApplicationUntilProxyStarts": "yes"}"#);
        assert!(problems[0].contains("not a boolean"), "{problems:?}");
        let (config, problems) = parse_proxy_config("terminationDrainDuration: 5 seconds");
        assert!(problems[0].contains("malformed duration"), "{problems:?}");
        assert_eq!(config.termination_drain_ms, None);
        let (_, problems) = parse_proxy_config("{a: [unclosed");
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn refuses_deep_nesting_without_parsing_it() {
        let deep = "[".repeat(10_000);
        let (_, problems) = parse_proxy_config(&deep);
        assert!(problems[0].contains("nests deeper"), "{problems:?}");
    }

    // Each case below is read as Istio reads the annotation: sigs.k8s.io/yaml's YAMLToJSON
    // (go-yaml v2) and then golang/protobuf's jsonpb (see the module comment of `yaml_subset`).

    #[test]
    fn reads_only_the_first_document_as_istio_does() {
        let (config, problems) = parse_proxy_config(
            "holdApplicationUntilProxyStarts: true\n---\nholdApplicationUntilProxyStarts: false\nterminationDrainDuration: 9s\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.hold_application_until_proxy_starts, Some(true));
        assert_eq!(config.termination_drain_ms, None);
        // An explicit first document, after comments; what follows it is never parsed.
        let (config, problems) =
            parse_proxy_config("# drain\n---\nterminationDrainDuration: 45s\n---\n{unclosed: [\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.termination_drain_ms, Some(45_000));
        // An empty first document is JSON null, which jsonpb applies as no change at all.
        let (config, problems) =
            parse_proxy_config("---\n---\nholdApplicationUntilProxyStarts: true\n");
        assert_eq!((config, problems), (ProxyConfig::default(), vec![]));
        // `---` indented, or inside a block scalar, is text, not a document marker.
        let (config, problems) =
            parse_proxy_config("holdApplicationUntilProxyStarts: true\nextra: |\n  ---\n  text\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.hold_application_until_proxy_starts, Some(true));
    }

    /// `text`'s config, asserting it read cleanly with the hold set, as Istio reads it.
    fn read_with_hold(text: &str) -> ProxyConfig {
        let (config, problems) = parse_proxy_config(text);
        assert!(problems.is_empty(), "{text:?}: {problems:?}");
        assert_eq!(
            config.hold_application_until_proxy_starts,
            Some(true),
            "{text:?}"
        );
        config
    }

    #[test]
    fn skips_a_leading_byte_order_mark() {
        read_with_hold("\u{feff}holdApplicationUntilProxyStarts: true\n");
        read_with_hold("\u{feff}{\"holdApplicationUntilProxyStarts\": true}");
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line() {
        for text in [
            "holdApplicationUntilProxyStarts: true\rterminationDrainDuration: 45s\r",
            "holdApplicationUntilProxyStarts: true\r\nterminationDrainDuration: 45s",
            "holdApplicationUntilProxyStarts: true\u{2028}terminationDrainDuration: 45s",
            "holdApplicationUntilProxyStarts: true\u{85}terminationDrainDuration: 45s",
        ] {
            let config = read_with_hold(text);
            assert_eq!(config.termination_drain_ms, Some(45_000), "{text:?}");
        }
    }

    #[test]
    fn refuses_durations_beyond_go_int64_nanoseconds() {
        let (config, problems) = parse_proxy_config("terminationDrainDuration: 2562048h");
        assert_eq!(config.termination_drain_ms, None);
        assert!(problems[0].contains("malformed duration"), "{problems:?}");
        let (config, problems) =
            parse_proxy_config("terminationDrainDuration: 2562047h47m16.854775807s");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.termination_drain_ms, Some(9_223_372_036_854));
    }

    #[test]
    fn refuses_an_empty_flow_entry() {
        for text in [
            "proxyStatsMatcher: {inclusionPrefixes: [a,,b]}\nholdApplicationUntilProxyStarts: true",
            "tags: [,a]\nholdApplicationUntilProxyStarts: true",
            "tags: {a: 1,, b: 2}\nholdApplicationUntilProxyStarts: true",
        ] {
            let (config, problems) = parse_proxy_config(text);
            assert_eq!(problems.len(), 1, "{text:?}: {problems:?}");
            assert!(
                problems[0].contains("did not find expected node content"),
                "{problems:?}"
            );
            assert_eq!(config.hold_application_until_proxy_starts, None, "{text:?}");
        }
        // A trailing comma and an empty mapping value are valid YAML.
        let (config, problems) = parse_proxy_config(
            "tags: [a, b,]\nmeta: {a: , b: 1,}\nholdApplicationUntilProxyStarts: true",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config.hold_application_until_proxy_starts, Some(true));
    }

    #[test]
    fn empty_value_is_no_config() {
        assert_eq!(parse_proxy_config("  "), (ProxyConfig::default(), vec![]));
    }
}
