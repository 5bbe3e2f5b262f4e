//! The monitoring `meshlife install --monitoring` and the chart ship (the alerts of
//! charts/meshlife/files/monitoring/rules.yaml and the Grafana dashboard beside it) select only
//! metrics a running `meshlife serve` exports, read from its /metrics over a real socket.
//! (compat/monitoring/promcheck holds their syntax to Prometheus' own parser.)

use std::collections::BTreeSet;
use std::path::Path;

use crate::serve_support::{
    Authority, Client, SecretVolume, Server, rule_cases_and_examples, runtime,
};

/// The metrics the API server exports about meshlife's webhook, which the rules and the
/// dashboard use for engine webhook (k8s.io/apiserver/pkg/admission/metrics).
const API_SERVER_METRICS: [&str; 2] = [
    "apiserver_admission_webhook_rejection_count",
    "apiserver_admission_webhook_fail_open_count",
];

/// The metric names a PromQL text selects: identifiers followed by `{`, `[`, `)` or a space
/// that are not functions, keywords or label names (which sit inside braces or `by (...)`).
fn selected_metrics(expressions: &[String]) -> BTreeSet<String> {
    let name = regex::Regex::new(r"\b([a-z_][a-z0-9_]*)\b").unwrap();
    // Label matchers, grouping lists, strings and Grafana's variables hold no metric.
    let not_metrics = regex::Regex::new(r#"\{[^}]*\}|\((?:[a-z_, ]+)\)|"[^"]*"|\$\w+"#).unwrap();
    let mut names = BTreeSet::new();
    for expression in expressions {
        let without_braces = not_metrics.replace_all(expression, " ");
        for found in name.captures_iter(&without_braces) {
            let word = &found[1];
            if word.starts_with("meshlife_") || word.starts_with("apiserver_") {
                names.insert(word.to_string());
            }
        }
    }
    names
}

fn monitoring_file(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../charts/meshlife/files/monitoring")
            .join(name),
    )
    .unwrap()
}

fn expressions() -> Vec<String> {
    let rules: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&monitoring_file("rules.yaml")).unwrap();
    let mut expressions: Vec<String> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_sequence().unwrap().iter())
        .map(|rule| rule["expr"].as_str().unwrap().to_string())
        .collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&monitoring_file("dashboard.json")).unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            expressions.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    expressions
}

#[test]
fn the_alerts_and_the_dashboard_select_metrics_the_server_exports() {
    let selected = selected_metrics(&expressions());
    assert!(selected.contains("meshlife_ready"), "{selected:?}");
    assert!(
        selected.contains("meshlife_request_duration_seconds_bucket"),
        "{selected:?}"
    );

    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let server = Server::start(&volume, false, &[]);
    // A key judged and a malformed request refused, so that the labelled series exist as they
    // do on a serving pod (a counter has no series before its first count).
    let client = Client::new(server.routes, &ca, None);
    let fixture = &rule_cases_and_examples()[0];
    let key = String::from_utf8(fixture.input.clone()).unwrap();
    runtime().block_on(async {
        let response = client.validate(&[&key]).await.unwrap();
        assert_eq!(response["kind"], "ProviderResponse");
        let mut connection = client.connect().await.unwrap();
        let reply = connection
            .post(
                "/validate",
                bytes::Bytes::from_static(b"not a ProviderRequest"),
            )
            .await
            .unwrap();
        // Gatekeeper gets the refusal as a systemError in a 200.
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    });
    let exported: BTreeSet<String> = server
        .metrics()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| line.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    for name in &selected {
        if API_SERVER_METRICS.contains(&name.as_str()) {
            continue;
        }
        assert!(
            exported.contains(name),
            "{name} is selected by the monitoring but meshlife serve does not export it; it \
             exports {exported:?}"
        );
    }
    // The readiness and certificate gauges say what /readyz and the certificate say.
    assert_eq!(server.metric("meshlife_ready"), 1.0);
    let expiry = server.metric("meshlife_certificate_expiry_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        expiry > now,
        "the test certificate is valid: {expiry} vs {now}"
    );
}
