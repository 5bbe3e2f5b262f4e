//! `meshlife serve` behind Kyverno: `POST /kyverno` from a real HTTPS client on loopback, the
//! body a ClusterPolicy's service call or a ValidatingPolicy's `http.Post` sends.

use crate::serve_support;

use bytes::Bytes;
use meshlife::module::engine::Engine;
use meshlife_policy::Severity;
use serde_json::{Value, json};
use serve_support::{Authority, Client, SecretVolume, Server, runtime};

/// A server without client certificates (Kyverno presents none), with `extra` flags.
fn server(extra: &[&str]) -> (Authority, SecretVolume, Server) {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let server = Server::start(&volume, false, extra);
    (ca, volume, server)
}

async fn post(client: &Client, body: &[u8], headers: &[(&str, &str)]) -> Value {
    let mut connection = client.connect().await.unwrap();
    let reply = connection
        .post_with_headers("/kyverno", Bytes::copy_from_slice(body), headers)
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    serde_json::from_slice(&reply.body).unwrap()
}

#[test]
fn every_rule_case_and_example_answers_as_the_cli_engine_does() {
    let (ca, _volume, server) = server(&[]);
    let client = Client::new(server.routes, &ca, None);
    let all = serve_support::rule_cases_and_examples();
    let engine = Engine::embedded().unwrap();
    let mut denied = 0;
    runtime().block_on(async {
        for fixture in &all {
            let answer = post(&client, &fixture.input, &[]).await;
            let violations = engine.evaluate(&fixture.input).unwrap();
            assert_eq!(answer["error"], "", "{}: {answer}", fixture.label);
            assert_eq!(
                answer["violations"],
                serde_json::to_value(&violations).unwrap(),
                "{}",
                fixture.label
            );
            let errors: Vec<_> = violations
                .iter()
                .filter(|violation| violation.details.severity == Severity::Error)
                .collect();
            assert_eq!(answer["deny"], !errors.is_empty(), "{}", fixture.label);
            assert_eq!(
                answer["warnings"].as_array().map(Vec::len),
                Some(violations.len() - errors.len()),
                "{}",
                fixture.label
            );
            let message = answer["message"].as_str().unwrap();
            // The message names every finding's rule and fix, the errors first.
            let mut searched_from = 0;
            for violation in errors.iter().copied().chain(
                violations
                    .iter()
                    .filter(|violation| violation.details.severity != Severity::Error),
            ) {
                let line = format!("{} Fix: {}", violation.msg, violation.details.fix);
                let found = message[searched_from..].find(&line);
                assert!(
                    found.is_some(),
                    "{}: {line} in order in {message}",
                    fixture.label
                );
                searched_from += found.unwrap() + line.len();
            }
            denied += usize::from(!errors.is_empty());
        }
    });
    assert!(denied > 20, "{denied} fixtures denied");
    assert!(
        server.metric("meshlife_requests_total{route=\"kyverno\",outcome=\"answered\"}") > 200.0
    );
}

#[test]
fn a_required_token_must_be_presented_exactly() {
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let (ca, _volume, server) = server(&["--kyverno-token-file", token_file.to_str().unwrap()]);
    let client = Client::new(server.routes, &ca, None);
    let input = br#"{"review": {"operation": "CREATE", "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {"containers": [{"name": "a", "image": "a"}]}}}, "parameters": {}}"#;
    runtime().block_on(async {
        let accepted = post(&client, input, &[("authorization", "Bearer s3cret-token")]).await;
        assert_eq!(accepted["error"], "", "{accepted}");
        for headers in [
            vec![],
            vec![("authorization", "Bearer s3cret-tokeN")],
            vec![("authorization", "Bearer s3cret")],
            vec![("authorization", "s3cret-token")],
        ] {
            let refused = post(&client, input, &headers).await;
            let error = refused["error"].as_str().unwrap();
            assert!(
                error.contains("token") || error.contains("Bearer"),
                "{headers:?}: {refused}"
            );
            assert_eq!(refused["violations"], json!([]), "{refused}");
        }
    });
    assert!(server.metric("meshlife_refusals_total{reason=\"unauthenticated\"}") >= 4.0);
}

#[test]
fn malformed_bodies_are_answered_with_an_error_saying_what_is_expected() {
    let (ca, _volume, server) = server(&[]);
    let client = Client::new(server.routes, &ca, None);
    runtime().block_on(async {
        for body in [
            &b"not json"[..],
            b"[]",
            b"{\"review\": \"x\"}",
            b"{\"parameters\": {}}",
            b"\xff\xfe",
        ] {
            let answer = post(&client, body, &[]).await;
            let error = answer["error"].as_str().unwrap();
            assert!(
                error.contains("review") || error.contains("UTF-8"),
                "{}: {answer}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(answer["deny"], false);
        }
    });
}

/// The ClusterPolicy pair sends Kyverno's request, which carries no Namespace: the server adds
/// it from its watch (a relabelled Namespace changes the next answer), and a Namespace the
/// review carries (the ValidatingPolicies') is judged as sent.
#[test]
fn a_review_without_its_namespace_gets_it_from_the_watch() {
    use serve_support::kube_api::KubeApi;
    use std::time::{Duration, Instant};
    let namespace = |injection: &str| json!({"metadata": {"name": "batch", "labels": {"istio-injection": injection}}});
    let api = KubeApi::start(&[namespace("enabled")]);
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let dir = tempfile::tempdir().unwrap();
    let mut command = Server::command(&volume, false, &[]);
    command.env("KUBECONFIG", api.kubeconfig(dir.path()));
    let server = Server::spawn(command);
    let client = Client::new(server.routes, &ca, None);
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly", "namespace": "batch"},
        "spec": {"activeDeadlineSeconds": 600, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "work", "image": "registry.example/work:1"}]}}}});
    let request = json!({"kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "operation": "CREATE", "name": "nightly", "namespace": "batch", "object": job});
    // As the ClusterPolicies send it: the request as JSON text.
    let sent = json!({"review": request.to_string(), "parameters": {}}).to_string();
    runtime().block_on(async {
        let answer = post(&client, sent.as_bytes(), &[]).await;
        assert_eq!(answer["error"], "", "{answer}");
        assert_eq!(
            answer["deny"], true,
            "the injected Job never exits: {answer}"
        );

        // The review's own Namespace wins over the watch's.
        let mut carried = request.clone();
        carried["namespaceObject"] = namespace("disabled");
        let body = json!({"review": carried, "parameters": {}}).to_string();
        let answer = post(&client, body.as_bytes(), &[]).await;
        assert_eq!(answer["deny"], false, "{answer}");

        api.apply(namespace("disabled"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = post(&client, sent.as_bytes(), &[]).await;
            if answer["deny"] == false {
                assert_eq!(answer["error"], "", "{answer}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the relabelled Namespace never reached the answer: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
