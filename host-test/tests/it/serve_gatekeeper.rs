//! `meshlife serve` behind Gatekeeper: a real server process, real HTTPS clients on loopback.

use crate::serve_support;

use std::time::{Duration, Instant};

use meshlife::commands::bench::client::provider_request;
use meshlife::fixtures;
use meshlife::module::engine::Engine;
use serde_json::{Value, json};
use serve_support::{Authority, Client, SecretVolume, Server, runtime, workspace};

fn items(response: &Value) -> &Vec<Value> {
    response["response"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {response}"))
}

fn system_error(response: &Value) -> &str {
    response["response"]["systemError"].as_str().unwrap_or("")
}

fn mtls_server() -> (Authority, serve_support::Leaf, SecretVolume, Server) {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let server = Server::start(&volume, true, &[]);
    let client = ca.client();
    (ca, client, volume, server)
}

#[test]
fn every_rule_case_and_example_answers_as_the_cli_engine_does() {
    let (ca, client_leaf, _volume, server) = mtls_server();
    let client = Client::new(server.routes, &ca, Some(&client_leaf));
    let all = serve_support::rule_cases_and_examples();
    let engine = Engine::embedded().unwrap();
    let runtime = runtime();
    runtime.block_on(async {
        let mut connection = client.connect().await.unwrap();
        // Batches of 7 keys on one keep-alive connection, as Gatekeeper's cache misses come.
        for batch in all.chunks(7) {
            let keys: Vec<String> = batch
                .iter()
                .map(|fixture| String::from_utf8(fixture.input.clone()).unwrap())
                .collect();
            let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let reply = connection
                .post("/validate", provider_request(&key_refs))
                .await
                .unwrap();
            assert_eq!(reply.status, 200);
            let response: Value = serde_json::from_slice(&reply.body).unwrap();
            assert_eq!(response["kind"], "ProviderResponse");
            assert_eq!(system_error(&response), "");
            let answered = items(&response);
            assert_eq!(answered.len(), batch.len());
            for ((fixture, key), item) in batch.iter().zip(&keys).zip(answered) {
                assert_eq!(
                    item["key"].as_str(),
                    Some(key.as_str()),
                    "key echoed verbatim"
                );
                assert!(item.get("error").is_none(), "{}: {item}", fixture.label);
                let expected =
                    serde_json::to_value(engine.evaluate(&fixture.input).unwrap()).unwrap();
                assert_eq!(item["value"], expected, "{}", fixture.label);
            }
        }
    });
    assert!(server.metric("meshlife_keys_total{outcome=\"violations\"}") > 50.0);
    assert!(server.metric("meshlife_keys_total{outcome=\"clean\"}") > 10.0);
}

#[test]
fn the_cli_and_the_server_find_the_same_on_the_examples() {
    let (ca, client_leaf, _volume, server) = mtls_server();
    let client = Client::new(server.routes, &ca, Some(&client_leaf));
    let examples = workspace().join("examples");
    // The keys below carry no parameters (the parameters' defaults), so check judges under
    // those too, not under the releases it assumes when given no constraint.
    let scratch = tempfile::tempdir().unwrap();
    let defaults = scratch.path().join("defaults.yaml");
    std::fs::write(
        &defaults,
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\n\
         metadata: {name: defaults}\nspec: {parameters: {}}\n",
    )
    .unwrap();
    let check = std::process::Command::new(serve_support::meshlife_binary())
        .args(["check", "-o", "json", "--constraint"])
        .arg(&defaults)
        .arg(&examples)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    let mut cli_messages: Vec<String> = Vec::new();
    collect_messages(&report, &mut cli_messages);
    cli_messages.sort();
    assert!(
        cli_messages.len() > 30,
        "{} findings from check",
        cli_messages.len()
    );

    let fixtures =
        fixtures::manifest_objects(&[examples.display().to_string()], &json!({})).unwrap();
    let keys: Vec<String> = fixtures
        .iter()
        .map(|fixture| String::from_utf8(fixture.input.clone()).unwrap())
        .collect();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let response = runtime().block_on(client.validate(&key_refs)).unwrap();
    let mut served: Vec<String> = items(&response)
        .iter()
        .flat_map(|item| item["value"].as_array().unwrap().clone())
        .map(|violation| violation["msg"].as_str().unwrap().to_string())
        .collect();
    served.sort();
    assert_eq!(served, cli_messages);
}

/// The `msg` of every finding `meshlife check -o json` lists.
fn collect_messages(value: &Value, out: &mut Vec<String>) {
    for finding in value["findings"]
        .as_array()
        .expect("check -o json prints an envelope with a list of findings")
    {
        out.push(
            finding["msg"]
                .as_str()
                .expect("each finding has a msg")
                .to_string(),
        );
    }
}

#[test]
fn malformed_requests_get_answers_and_the_server_keeps_serving() {
    let (ca, client_leaf, _volume, server) = mtls_server();
    let client = Client::new(server.routes, &ca, Some(&client_leaf));
    let good = r#"{"review":{"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"name":"a","image":"a"}]}}},"parameters":{}}"#;
    runtime().block_on(async {
        let raw = |body: &'static [u8]| {
            let client = &client;
            async move {
                let mut connection = client.connect().await.unwrap();
                let reply = connection.post("/validate", bytes::Bytes::from_static(body)).await.unwrap();
                assert_eq!(reply.status, 200);
                serde_json::from_slice::<Value>(&reply.body).unwrap()
            }
        };
        let not_json = raw(b"this is not json").await;
        assert!(system_error(&not_json).contains("not JSON"), "{not_json}");
        let wrong_kind = raw(br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"AdmissionReview","request":{"keys":[]}}"#).await;
        assert!(system_error(&wrong_kind).contains("kind is \"AdmissionReview\""), "{wrong_kind}");
        let number_key = raw(br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":[1]}}"#).await;
        assert!(system_error(&number_key).contains("request.keys[0] is a number"), "{number_key}");

        // A key that is not an input gets its own error; the good key beside it is evaluated.
        let mixed = client.validate(&["{\"not\": \"an input\"}", good, "plain text"]).await.unwrap();
        assert_eq!(system_error(&mixed), "");
        let answered = items(&mixed);
        assert!(answered[0]["error"].as_str().unwrap().contains("not a meshlife input"));
        assert_eq!(answered[1]["value"], json!([]), "{mixed}");
        assert!(answered[2]["error"].as_str().unwrap().contains("not a meshlife input"));
        assert_eq!(answered[2]["key"], "plain text");

        // 20 MB: above the 16 MiB body limit, refused whole, with the connection closed.
        let huge = format!(
            r#"{{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{{"keys":["{}"]}}}}"#,
            "x".repeat(20 << 20)
        );
        let mut connection = client.connect().await.unwrap();
        let reply = connection.post("/validate", bytes::Bytes::from(huge)).await.unwrap();
        let refused: Value = serde_json::from_slice(&reply.body).unwrap();
        assert!(system_error(&refused).contains("exceeds the server's limit"), "{refused}");
        assert!(reply.closes());

        // A key above --max-key (8 MiB) inside a body that fits: a per-key error.
        let big_key = format!(r#"{{"review":{{"object":{{"a":"{}"}}}}}}"#, "y".repeat(9 << 20));
        let big = client.validate(&[&big_key, good]).await.unwrap();
        assert!(items(&big)[0]["error"].as_str().unwrap().contains("--max-key"), "{}", items(&big)[0]["error"]);
        assert_eq!(items(&big)[1]["value"], json!([]));

        // Still serving, on a fresh connection.
        let after = client.validate(&[good]).await.unwrap();
        assert_eq!(items(&after)[0]["value"], json!([]));
        // Routes and methods that do not exist.
        let mut connection = client.connect().await.unwrap();
        let reply = connection.post("/nowhere", bytes::Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(reply.status, 404);
    });
    assert_eq!(
        server.metric("meshlife_refusals_total{reason=\"malformed\"}"),
        3.0
    );
    assert_eq!(
        server.metric("meshlife_refusals_total{reason=\"body_too_large\"}"),
        1.0
    );
    assert_eq!(
        server.metric("meshlife_keys_total{outcome=\"not_an_input\"}"),
        2.0
    );
    assert_eq!(
        server.metric("meshlife_keys_total{outcome=\"too_large\"}"),
        1.0
    );
    assert!(
        !server.log().contains("\"review\""),
        "object contents logged at info:\n{}",
        server.log()
    );
}

#[test]
fn client_certificates_are_required_and_checked() {
    let (ca, client_leaf, _volume, server) = mtls_server();
    let good =
        r#"{"review":{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}}}"#;
    runtime().block_on(async {
        let trusted = Client::new(server.routes, &ca, Some(&client_leaf));
        let answered = trusted.validate(&[good]).await.unwrap();
        assert_eq!(items(&answered)[0]["value"], json!([]));

        let anonymous = Client::new(server.routes, &ca, None);
        let refused = anonymous.validate(&[good]).await.unwrap();
        assert!(
            system_error(&refused).contains("requires a client certificate"),
            "{refused}"
        );
        assert!(items(&refused).is_empty());

        let stranger_ca = Authority::new("someone-else");
        let stranger = Client::new(server.routes, &ca, Some(&stranger_ca.client()));
        let outcome = match stranger.connect().await {
            Err(error) => Err(error),
            Ok(mut connection) => connection
                .post("/validate", provider_request(&[good]))
                .await
                .map(|_| ()),
        };
        assert!(
            outcome.is_err(),
            "a certificate from another CA was accepted"
        );
    });
    assert!(server.metric("meshlife_refusals_total{reason=\"tls_handshake\"}") >= 1.0);
    assert_eq!(
        server.metric("meshlife_refusals_total{reason=\"client_certificate\"}"),
        1.0
    );
}

#[test]
fn a_certificate_rotation_loses_no_request() {
    let ca = Authority::new("meshlife-test-ca");
    let first = ca.server();
    let mut volume = SecretVolume::new(&first, &ca.cert_pem);
    let server = Server::start(&volume, true, &["--tls-reload-interval", "200ms"]);
    let client_leaf = ca.client();
    let good =
        r#"{"review":{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}}}"#;
    let client = std::sync::Arc::new(Client::new(server.routes, &ca, Some(&client_leaf)));
    let runtime = runtime();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let client = std::sync::Arc::clone(&client);
            let stop = std::sync::Arc::clone(&stop);
            runtime.spawn(async move {
                let (mut sent, mut failed) = (0u32, Vec::new());
                let mut connection = client.connect().await.unwrap();
                let mut requests_on_connection = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // New connections now and then, so that some handshakes meet the new files.
                    if requests_on_connection == 20 {
                        connection = client.connect().await.unwrap();
                        requests_on_connection = 0;
                    }
                    sent += 1;
                    requests_on_connection += 1;
                    match connection
                        .post("/validate", provider_request(&[good]))
                        .await
                    {
                        Ok(reply) if reply.status == 200 => {}
                        Ok(reply) => failed.push(format!("status {}", reply.status)),
                        Err(error) => failed.push(format!("{error:#}")),
                    }
                }
                (sent, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let second = ca.server();
    volume.write(&second, &ca.cert_pem);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.metric("meshlife_tls_reloads_total{outcome=\"reloaded\"}") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no reload seen:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for sender in senders {
        let (sent, failed) = runtime.block_on(sender).unwrap();
        assert!(
            failed.is_empty(),
            "requests failed during the rotation: {failed:?}"
        );
        total += sent;
    }
    assert!(total > 40, "only {total} requests sent");
    // New connections are served with the new certificate.
    let presented =
        runtime.block_on(async { client.connect().await.unwrap().server_certificate() });
    let second_der = rustls_pki_types::pem::PemObject::from_pem_slice(second.cert_pem.as_bytes())
        .map(|der: rustls_pki_types::CertificateDer| der.to_vec())
        .unwrap();
    assert_eq!(presented, Some(second_der));
    // A broken update (a key of another certificate) keeps the working pair.
    let mismatched = serve_support::Leaf {
        cert_pem: second.cert_pem.clone(),
        key_pem: first.key_pem.clone(),
    };
    volume.write(&mismatched, &ca.cert_pem);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.metric("meshlife_tls_reloads_total{outcome=\"failed\"}") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the broken update was not noticed:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = runtime.block_on(client.validate(&[good])).unwrap();
    assert_eq!(items(&still)[0]["value"], json!([]));
    assert_eq!(server.health_get("/readyz").0, 200);
}

/// An OPA-ABI module whose `opa_eval` never returns when the input holds a `!`, and answers
/// an empty result set otherwise.
const STUCK_MODULE: &str = r#"
(module
  (import "env" "memory" (memory 2))
  (import "env" "opa_abort" (func $abort (param i32)))
  (global $heap (mut i32) (i32.const 4096))
  (global (export "opa_wasm_abi_version") i32 (i32.const 1))
  (global (export "opa_wasm_abi_minor_version") i32 (i32.const 3))
  (data (i32.const 16) "{\"meshlife/violation\":0}\00")
  (data (i32.const 64) "[]\00")
  (func (export "opa_malloc") (param $size i32) (result i32) (local $at i32)
    global.get $heap local.set $at
    global.get $heap local.get $size i32.add global.set $heap
    local.get $at)
  (func (export "opa_json_parse") (param i32 i32) (result i32) i32.const 8)
  (func (export "opa_json_dump") (param i32) (result i32) i32.const 16)
  (func (export "opa_heap_ptr_get") (result i32) global.get $heap)
  (func (export "entrypoints") (result i32) i32.const 8)
  (func (export "opa_eval") (param i32 i32 i32) (param $input i32) (param $length i32) (param i32 i32) (result i32)
    (local $i i32)
    block $done
      loop $scan
        local.get $i local.get $length i32.ge_u br_if $done
        local.get $input local.get $i i32.add i32.load8_u i32.const 33 i32.eq
        if
          loop $forever br $forever end
        end
        local.get $i i32.const 1 i32.add local.set $i
        br $scan
      end
    end
    i32.const 64))
"#;

/// A server on STUCK_MODULE, without client authentication, with `flags`.
fn stuck_module_server(flags: &[&str]) -> (Authority, SecretVolume, Server) {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let module = volume.dir.path().join("stuck.wasm");
    std::fs::write(&module, wat::parse_str(STUCK_MODULE).unwrap()).unwrap();
    let mut args = vec!["--module", module.to_str().unwrap()];
    args.extend_from_slice(flags);
    let server = Server::start(&volume, false, &args);
    (ca, volume, server)
}

#[test]
fn an_evaluation_that_never_returns_meets_its_deadline_and_the_worker_recovers() {
    let (ca, _volume, server) = stuck_module_server(&["--workers", "1", "--eval-timeout", "200ms"]);
    let client = Client::new(server.routes, &ca, None);
    let stuck = r#"{"review":{"object":{"name":"stuck!"}}}"#;
    let fine = r#"{"review":{"object":{"name":"fine"}}}"#;
    runtime().block_on(async {
        for _ in 0..3 {
            let started = Instant::now();
            let response = client.validate(&[stuck, fine]).await.unwrap();
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
            let answered = items(&response);
            assert!(
                answered[0]["error"]
                    .as_str()
                    .unwrap()
                    .contains("--eval-timeout"),
                "{response}"
            );
            assert_eq!(answered[1]["value"], json!([]));
        }
    });
    assert_eq!(
        server.metric("meshlife_keys_total{outcome=\"deadline\"}"),
        3.0
    );
    assert_eq!(server.metric("meshlife_instances_discarded_total"), 3.0);
    assert_eq!(server.health_get("/readyz").0, 200);
}

#[test]
fn overload_is_refused_at_once_counted_and_bounded() {
    let (ca, _volume, server) =
        stuck_module_server(&["--workers", "1", "--queue", "2", "--eval-timeout", "300ms"]);
    let client = std::sync::Arc::new(Client::new(server.routes, &ca, None));
    let payload = "!".repeat(1 << 20);
    let stuck = std::sync::Arc::new(format!(
        r#"{{"review":{{"object":{{"name":"{payload}"}}}}}}"#
    ));
    let runtime = runtime();
    let started = Instant::now();
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let client = std::sync::Arc::clone(&client);
            let stuck = std::sync::Arc::clone(&stuck);
            runtime.spawn(async move { client.validate(&[stuck.as_str()]).await.unwrap() })
        })
        .collect();
    let mut overloaded = 0;
    let mut deadline = 0;
    for task in tasks {
        let response = runtime.block_on(task).unwrap();
        if system_error(&response).contains("overloaded") {
            overloaded += 1;
        } else if items(&response)[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("--eval-timeout")
        {
            deadline += 1;
        } else {
            panic!(
                "unexpected answer {}",
                &response.to_string()[..300.min(response.to_string().len())]
            );
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "overload: 40 requests of 1 MiB, 1 worker, queue 2: {deadline} evaluated to the deadline, {overloaded} refused, in {elapsed:?}, peak RSS {} KiB",
        server.peak_rss_kib()
    );
    assert!(overloaded >= 20, "{overloaded} refused");
    assert!(deadline >= 3);
    assert_eq!(
        server.metric("meshlife_refusals_total{reason=\"overloaded\"}"),
        overloaded as f64
    );
    // 40 bodies of 1 MiB at most in memory at once, plus the module: far below a gigabyte.
    assert!(
        server.peak_rss_kib() < 600 * 1024,
        "peak RSS {} KiB",
        server.peak_rss_kib()
    );
    let fine = r#"{"review":{"object":{"name":"fine"}}}"#;
    let after = runtime.block_on(client.validate(&[fine])).unwrap();
    assert_eq!(items(&after)[0]["value"], json!([]));
}

#[test]
fn the_transport_floor_answers_its_fixed_bytes_without_evaluating() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let answer = volume.dir.path().join("floor-answer.json");
    let fixed = json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderResponse",
        "response": {"idempotent": true, "items": [{"key": "k", "value": ["fixed"]}], "systemError": ""},
    });
    std::fs::write(&answer, fixed.to_string()).unwrap();
    let server = Server::start(
        &volume,
        false,
        &["--transport-floor-answer", answer.to_str().unwrap()],
    );
    let client = Client::new(server.routes, &ca, None);
    // A key the module would judge (and one that is no input at all) both get the fixed
    // bytes: nothing is evaluated.
    let inputs = meshlife::commands::bench::bench_inputs();
    let typical = inputs
        .iter()
        .find(|input| input.name == "deployment-typical")
        .unwrap();
    let deployment = std::str::from_utf8(&typical.bytes).unwrap();
    runtime().block_on(async {
        for key in [deployment, "not an input"] {
            assert_eq!(client.validate(&[key]).await.unwrap(), fixed);
        }
    });
    // Nothing evaluated, though the server answered both (the health port's metrics are its).
    assert!(
        server
            .metrics()
            .contains("meshlife_evaluation_duration_seconds_count 0"),
        "{}",
        server.metrics()
    );
}
