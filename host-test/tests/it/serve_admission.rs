//! `meshlife serve` as the API server's own validating webhook: `POST /admission` from a real
//! HTTPS client on loopback, AdmissionReview v1 in and out, the Namespaces from a watch of a
//! local server that speaks the Kubernetes list/watch protocol.

use crate::serve_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use meshlife::module::engine::Engine;
use meshlife_policy::{Severity, Violation};
use serde_json::{Value, json};
use serve_support::kube_api::KubeApi;
use serve_support::{Authority, Client, SecretVolume, Server, runtime};

const WARNING_LIMIT: usize = 256;
const WARNINGS_TOTAL_LIMIT: usize = 4096;

struct Webhook {
    ca: Authority,
    _volume: SecretVolume,
    _dir: tempfile::TempDir,
    server: Server,
}

/// A server judging under `constraints` (YAML texts, one file each), watching `api` if given.
fn webhook(constraints: &[&str], api: Option<&KubeApi>, extra: &[&str]) -> Webhook {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let dir = tempfile::tempdir().unwrap();
    let mut flags: Vec<String> = extra.iter().map(|flag| flag.to_string()).collect();
    for (index, text) in constraints.iter().enumerate() {
        let path = dir.path().join(format!("constraint-{index}.yaml"));
        std::fs::write(&path, text).unwrap();
        flags.push("--constraint".into());
        flags.push(path.display().to_string());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut command = Server::command(&volume, false, &flags);
    if let Some(api) = api {
        command.env("KUBECONFIG", api.kubeconfig(dir.path()));
    }
    let server = Server::spawn(command);
    Webhook {
        ca,
        _volume: volume,
        _dir: dir,
        server,
    }
}

struct Reply {
    status: u16,
    text: String,
    json: Value,
}

async fn post(client: &Client, body: &[u8]) -> Reply {
    let mut connection = client.connect().await.unwrap();
    let reply = connection
        .post_with_headers("/admission", Bytes::copy_from_slice(body), &[])
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&reply.body).to_string();
    Reply {
        status: reply.status.as_u16(),
        json: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

fn admission_review(request: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    }))
    .unwrap()
}

fn constraint(name: &str, action: &str, parameters: &Value, match_: &Value) -> String {
    json!({
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": "MeshLifecycle",
        "metadata": {"name": name},
        "spec": {"enforcementAction": action, "match": match_, "parameters": parameters},
    })
    .to_string()
}

/// The answer's warnings are what the API server passes on, one per finding in `expected`
/// (cut when long), or those that fit and a last one saying how many did not.
fn assert_warnings_fit(response: &Value, expected: &[&Violation], label: &str) {
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .map(|warnings| warnings.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        warnings
            .iter()
            .all(|warning| warning.len() <= WARNING_LIMIT),
        "{label}: {warnings:?}"
    );
    assert!(
        warnings.iter().map(|warning| warning.len()).sum::<usize>() <= WARNINGS_TOTAL_LIMIT,
        "{label}"
    );
    let cut_short = warnings
        .last()
        .is_some_and(|last| last.contains("not shown"));
    let shown = warnings.len() - usize::from(cut_short);
    if !cut_short {
        assert_eq!(shown, expected.len(), "{label}: {warnings:?}");
    }
    for (warning, violation) in warnings.iter().zip(expected).take(shown) {
        let whole = violation.msg.replace(char::is_control, " ");
        let matches = *warning == whole
            || warning
                .strip_suffix("...")
                .is_some_and(|start| whole.starts_with(start));
        assert!(matches, "{label}: warning {warning:?} for {whole:?}");
    }
}

/// A rule case or example as the API server would send it, and the Namespace the watch serves.
struct Case {
    label: String,
    request: Value,
    namespace: Option<Value>,
}

/// The cases one server judges: its parameters, the Namespaces its API server serves, and the
/// namespaces of its cases that have none.
struct Group {
    parameters: Value,
    namespaces: BTreeMap<String, Value>,
    unserved: BTreeSet<String>,
    cases: Vec<Case>,
}

/// Whether a Namespace object could come from an API server: named as the request's
/// namespace, labels and annotations string maps. Others (rule cases of malformed Namespaces)
/// reach the module only through Gatekeeper's or Kyverno's routes.
fn served_namespace(namespace: &Value, request: &Value) -> bool {
    let metadata = &namespace["metadata"];
    let strings = |field: &str| match &metadata[field] {
        Value::Null => true,
        Value::Object(map) => map.values().all(Value::is_string),
        _ => false,
    };
    metadata.is_object()
        && metadata["name"].is_string()
        && metadata["name"] == request["namespace"]
        && strings("labels")
        && strings("annotations")
}

#[test]
fn every_rule_case_and_example_is_judged_as_the_cli_engine_judges_it() {
    let engine = Engine::embedded().unwrap();
    // Grouped by parameters (one server each, its --constraint) and by Namespaces that fit in
    // one cluster (one watched API server each).
    // A case without a Namespace must not share a server with one whose Namespace has its name.
    let mut groups: Vec<Group> = Vec::new();
    let mut not_representable = Vec::new();
    for (index, fixture) in serve_support::rule_cases_and_examples()
        .into_iter()
        .enumerate()
    {
        let input: Value = serde_json::from_slice(&fixture.input).unwrap();
        let parameters = input.get("parameters").cloned().unwrap_or(json!({}));
        let Some(mut request) = input
            .get("review")
            .filter(|review| review.is_object())
            .cloned()
        else {
            not_representable.push(format!("{}: review is not an object", fixture.label));
            continue;
        };
        let namespace = request
            .as_object_mut()
            .unwrap()
            .remove("namespaceObject")
            .filter(|namespace| !namespace.is_null());
        request["uid"] = json!(format!("uid-{index}"));
        if request.get("namespace").is_none()
            && let Some(namespace) = request.pointer("/object/metadata/namespace").cloned()
        {
            request["namespace"] = namespace;
        }
        if let Some(namespace) = &namespace
            && !served_namespace(namespace, &request)
        {
            not_representable.push(format!("{}: its Namespace", fixture.label));
            continue;
        }
        let probe = constraint("probe", "deny", &parameters, &json!({}));
        let valid = meshlife::constraints::constraint::parse_constraints_text("probe", &probe)
            .map(|constraints| constraints[0].validate_parameters(&engine).is_ok())
            .unwrap_or(false);
        if !valid {
            not_representable.push(format!("{}: parameters refused", fixture.label));
            continue;
        }
        let case = Case {
            label: fixture.label,
            request,
            namespace,
        };
        let name = case.request["namespace"].as_str().unwrap_or("").to_string();
        let fits = |group: &Group| {
            group.parameters == parameters
                && match &case.namespace {
                    Some(namespace) => {
                        !group.unserved.contains(&name)
                            && group
                                .namespaces
                                .get(&name)
                                .is_none_or(|known| known == namespace)
                    }
                    None => !group.namespaces.contains_key(&name),
                }
        };
        let group = match groups.iter().position(fits) {
            Some(position) => &mut groups[position],
            None => {
                groups.push(Group {
                    parameters,
                    namespaces: BTreeMap::new(),
                    unserved: BTreeSet::new(),
                    cases: Vec::new(),
                });
                groups.last_mut().unwrap()
            }
        };
        match &case.namespace {
            Some(namespace) => {
                group.namespaces.insert(name, namespace.clone());
            }
            None => {
                group.unserved.insert(name);
            }
        }
        group.cases.push(case);
    }
    // Said, not skipped silently: rule cases of inputs no API server sends.
    eprintln!(
        "{} fixtures not sent to /admission (no API server sends them):\n  {}",
        not_representable.len(),
        not_representable.join("\n  ")
    );
    let judged: usize = groups.iter().map(|group| group.cases.len()).sum();
    assert!(judged > 200, "{judged} fixtures judged");
    assert!(
        not_representable.len() * 10 < judged,
        "{not_representable:?}"
    );

    let mut denied = 0;
    let mut warned = 0;
    eprintln!("{judged} fixtures judged by {} servers", groups.len());
    for Group {
        parameters,
        namespaces,
        cases,
        ..
    } in &groups
    {
        let api = KubeApi::start(&namespaces.values().cloned().collect::<Vec<_>>());
        let hook = webhook(
            &[&constraint("under-test", "deny", parameters, &json!({}))],
            Some(&api),
            &[],
        );
        let client = Client::new(hook.server.routes, &hook.ca, None);
        runtime().block_on(async {
            for case in cases {
                let reply = post(&client, &admission_review(&case.request)).await;
                let has_kind = case.request["kind"].is_object()
                    || (case.request.pointer("/object/kind").is_some()
                        && case.request.pointer("/object/apiVersion").is_some());
                if !has_kind {
                    assert_eq!(reply.status, 400, "{}: {}", case.label, reply.text);
                    assert!(reply.text.contains("request.kind"), "{}", reply.text);
                    continue;
                }
                assert_eq!(reply.status, 200, "{}: {}", case.label, reply.text);
                let response = &reply.json["response"];
                assert_eq!(response["uid"], case.request["uid"], "{}", case.label);
                let mut review = case.request.clone();
                if let Some(namespace) = &case.namespace {
                    review["namespaceObject"] = namespace.clone();
                }
                let input = json!({"review": review, "parameters": parameters});
                let violations = engine
                    .evaluate(&serde_json::to_vec(&input).unwrap())
                    .unwrap();
                let (errors, others): (Vec<&Violation>, Vec<&Violation>) = violations
                    .iter()
                    .partition(|violation| violation.details.severity == Severity::Error);
                assert_eq!(
                    response["allowed"],
                    errors.is_empty(),
                    "{}: {response}",
                    case.label
                );
                if !errors.is_empty() {
                    denied += 1;
                    assert_eq!(response["status"]["code"], 403, "{}", case.label);
                    let message = response["status"]["message"].as_str().unwrap();
                    for violation in errors.iter().chain(&others) {
                        let line = format!("{} Fix: {}", violation.msg, violation.details.fix);
                        assert!(
                            message.contains(&line),
                            "{}: {line} in {message}",
                            case.label
                        );
                    }
                }
                warned += usize::from(!others.is_empty());
                assert_warnings_fit(response, &others, &case.label);
                // The audit log gets every finding whole.
                let audit = response["auditAnnotations"]["findings"]
                    .as_str()
                    .unwrap_or("");
                for violation in &violations {
                    let line = format!("{} Fix: {}", violation.msg, violation.details.fix);
                    assert!(audit.contains(&line), "{}: {line} in {audit:?}", case.label);
                }
                if violations.is_empty() {
                    assert!(response.get("auditAnnotations").is_none(), "{}", case.label);
                }
            }
        });
        assert!(api.requests().0 >= 1, "the server listed the Namespaces");
    }
    assert!(denied > 20, "{denied} denied");
    assert!(warned > 20, "{warned} with warnings");
}

fn job(namespace: &str) -> Value {
    json!({
        "uid": "3b8f-job",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE",
        "name": "nightly",
        "namespace": namespace,
        "userInfo": {"username": "ci"},
        "object": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "nightly", "namespace": namespace},
            "spec": {
                "activeDeadlineSeconds": 600,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "registry.example/work:1"}]
                }}
            }
        }
    })
}

fn namespace(name: &str, injection: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"istio-injection": injection}}})
}

fn has_rule(response: &Value, rule: &str) -> bool {
    response["status"]["message"]
        .as_str()
        .is_some_and(|message| message.contains(&format!("[{rule} ")))
}

#[test]
fn a_namespace_relabelled_mid_test_changes_the_next_verdict() {
    let api = KubeApi::start(&[namespace("batch", "enabled")]);
    let hook = webhook(&[], Some(&api), &[]);
    let client = Client::new(hook.server.routes, &hook.ca, None);
    runtime().block_on(async {
        let injected = post(&client, &admission_review(&job("batch"))).await;
        assert_eq!(injected.status, 200, "{}", injected.text);
        assert_eq!(
            injected.json["response"]["allowed"], false,
            "{}",
            injected.text
        );
        assert!(
            has_rule(&injected.json["response"], "ML301"),
            "{}",
            injected.text
        );

        api.apply(namespace("batch", "disabled"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reply = post(&client, &admission_review(&job("batch"))).await;
            if reply.json["response"]["allowed"] == true {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the relabelled Namespace never reached the verdict: {}",
                reply.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // A Namespace created after the list arrives through the watch as well.
        api.apply(namespace("reports", "enabled"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while post(&client, &admission_review(&job("reports"))).await.json["response"]["allowed"]
            == true
        {
            assert!(Instant::now() < deadline, "the new Namespace never arrived");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let (lists, watches) = api.requests();
    // The start's list of one Namespace (does the configuration work?), then the watch's.
    assert_eq!(
        lists, 2,
        "one list at start, one for the watch, then the watch"
    );
    assert!(watches >= 1);
    assert_eq!(
        hook.server
            .metric("meshlife_namespace_watch{state=\"synced\"}"),
        1.0
    );
    assert_eq!(hook.server.metric("meshlife_namespaces_cached"), 2.0);
}

#[test]
fn a_namespace_the_watch_has_not_delivered_yet_is_fetched() {
    // Created in the same `kubectl apply` as its Job, a moment before it: the watch lags.
    let api = KubeApi::start(&[namespace("batch", "enabled")]);
    let hook = webhook(&[], Some(&api), &[]);
    let client = Client::new(hook.server.routes, &hook.ca, None);
    api.apply_unwatched(namespace("fresh", "enabled"));
    runtime().block_on(async {
        let reply = post(&client, &admission_review(&job("fresh"))).await;
        assert_eq!(
            reply.json["response"]["allowed"],
            false,
            "{}\n{}",
            reply.text,
            hook.server.log()
        );
        assert!(has_rule(&reply.json["response"], "ML301"), "{}", reply.text);
        // A namespace that does not exist: the parameters decide (nothing injects it).
        let missing = post(&client, &admission_review(&job("nowhere"))).await;
        assert_eq!(
            missing.json["response"]["allowed"], true,
            "{}",
            missing.text
        );
    });
    assert_eq!(api.gets(), 2, "one GET per Namespace the watch lacked");
}

#[test]
fn without_a_watch_the_parameters_decide_injection() {
    let injected = json!({"istio": {"injectedNamespaces": ["batch"]}});
    let constraint = constraint("facts", "deny", &injected, &json!({}));
    // No Kubernetes configuration at all, and the flag beside a working one.
    let api = KubeApi::start(&[namespace("batch", "disabled")]);
    for (api, extra, logged) in [
        (None, &[][..], "no Kubernetes configuration"),
        (
            Some(&api),
            &["--no-namespace-watch"][..],
            "--no-namespace-watch",
        ),
    ] {
        let hook = webhook(&[&constraint], api, extra);
        let client = Client::new(hook.server.routes, &hook.ca, None);
        runtime().block_on(async {
            let reply = post(&client, &admission_review(&job("batch"))).await;
            assert_eq!(reply.json["response"]["allowed"], false, "{}", reply.text);
            assert!(has_rule(&reply.json["response"], "ML301"), "{}", reply.text);
            let other = post(&client, &admission_review(&job("elsewhere"))).await;
            assert_eq!(other.json["response"]["allowed"], true, "{}", other.text);
        });
        assert!(
            hook.server.log().contains(logged),
            "{logged} in {}",
            hook.server.log()
        );
        assert_eq!(
            hook.server
                .metric("meshlife_namespace_watch{state=\"off\"}"),
            1.0,
            "{}",
            hook.server.metrics()
        );
    }
}

/// Runs `meshlife serve` with `kubeconfig` and returns its exit code and stderr, or `None`
/// when it was still running after `limit` (it served).
fn serve_with_kubeconfig(
    kubeconfig: &std::path::Path,
    extra: &[&str],
    limit: Duration,
) -> (Option<i32>, String) {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let mut command = Server::command(&volume, false, extra);
    command
        .env("KUBECONFIG", kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + limit;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (code, stderr)
}

#[test]
fn a_kubernetes_configuration_that_does_not_work_stops_the_server_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let forbidding = KubeApi::start(&[namespace("batch", "enabled")]);
    forbidding.forbid();
    let forbidden = forbidding.kubeconfig(dir.path());
    // A port nothing listens on (bound, then released).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let unreachable = dir.path().join("unreachable");
    std::fs::write(
        &unreachable,
        std::fs::read_to_string(&forbidden)
            .unwrap()
            .replace(&forbidding.address.to_string(), &closed.to_string()),
    )
    .unwrap();
    let unreadable = dir.path().join("unreadable");
    std::fs::write(
        &unreadable,
        "apiVersion: v1\nkind: Config\nclusters: [oops\n",
    )
    .unwrap();
    for (kubeconfig, said) in [
        (&forbidden, "forbids listing Namespaces"),
        (&unreachable, "Connection refused"),
        (&unreadable, "cannot be used to watch Namespaces"),
    ] {
        let (code, stderr) = serve_with_kubeconfig(kubeconfig, &[], Duration::from_secs(30));
        assert_eq!(code, Some(2), "{}: {stderr}", kubeconfig.display());
        assert!(stderr.contains(said), "{said} in {stderr}");
        assert!(stderr.contains("--no-namespace-watch"), "{stderr}");
    }
    // The flag says to run without it: the server serves.
    let (code, stderr) = serve_with_kubeconfig(
        &forbidden,
        &["--no-namespace-watch"],
        Duration::from_secs(3),
    );
    assert_eq!(code, None, "{stderr}");
}

#[test]
fn constraints_match_and_enforce_as_a_cluster_file_says() {
    let api = KubeApi::start(&[
        namespace("batch", "enabled"),
        namespace("kube-ops", "enabled"),
    ]);
    let deny = constraint(
        "errors",
        "deny",
        &json!({"minSeverity": "error"}),
        &json!({"excludedNamespaces": ["kube-ops"]}),
    );
    let warn = constraint(
        "warnings",
        "warn",
        &json!({"excludeRules": ["ML301"]}),
        &json!({"excludedNamespaces": ["kube-ops"]}),
    );
    let hook = webhook(&[&deny, &warn], Some(&api), &[]);
    let client = Client::new(hook.server.routes, &hook.ca, None);
    runtime().block_on(async {
        let reply = post(&client, &admission_review(&job("batch"))).await;
        let response = &reply.json["response"];
        assert_eq!(response["allowed"], false, "{}", reply.text);
        assert!(has_rule(response, "ML301"));
        // ML101 (no hold) is a warning of the warn constraint, also named in the message.
        let warnings = response["warnings"].as_array().unwrap();
        assert!(
            warnings
                .iter()
                .any(|warning| warning.as_str().unwrap().starts_with("[ML101 ")),
            "{warnings:?}"
        );
        assert!(has_rule(response, "ML101"), "{}", reply.text);

        let excluded = post(&client, &admission_review(&job("kube-ops"))).await;
        assert_eq!(
            excluded.json["response"]["allowed"], true,
            "{}",
            excluded.text
        );
        assert!(excluded.json["response"].get("warnings").is_none());

        let mut deletion = job("batch");
        deletion["operation"] = json!("DELETE");
        deletion["oldObject"] = deletion["object"].take();
        let deleted = post(&client, &admission_review(&deletion)).await;
        assert_eq!(
            deleted.json["response"]["allowed"], true,
            "{}",
            deleted.text
        );
        assert_eq!(deleted.json["response"]["uid"], "3b8f-job");

        // A finalizer coming off an object being deleted is never refused.
        let mut letting_go = job("batch");
        letting_go["operation"] = json!("UPDATE");
        letting_go["object"]["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        letting_go["oldObject"] = letting_go["object"].clone();
        let let_go = post(&client, &admission_review(&letting_go)).await;
        assert_eq!(let_go.json["response"]["allowed"], true, "{}", let_go.text);
        // The same update of a live object is judged.
        letting_go["object"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("deletionTimestamp");
        let judged = post(&client, &admission_review(&letting_go)).await;
        assert_eq!(judged.json["response"]["allowed"], false, "{}", judged.text);
    });
    assert!(
        hook.server
            .metric("meshlife_requests_total{route=\"admission\",outcome=\"answered\"}")
            >= 3.0
    );
}

#[test]
fn malformed_reviews_are_refused_with_a_reason_and_the_server_goes_on() {
    let hook = webhook(&[], None, &[]);
    let client = Client::new(hook.server.routes, &hook.ca, None);
    runtime().block_on(async {
        for (body, expected) in [
            (&b"not json"[..], "not JSON"),
            (
                br#"{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}"#,
                "admissionReviewVersions",
            ),
            (
                br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}"#,
                "request.uid",
            ),
            (
                br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "operation": "CREATE"}}"#,
                "request.kind",
            ),
        ] {
            let reply = post(&client, body).await;
            assert_eq!(reply.status, 400, "{}", reply.text);
            assert!(reply.text.contains(expected), "{expected} in {}", reply.text);
        }
        let reply = post(&client, &admission_review(&job("batch"))).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    });
    assert!(
        hook.server
            .metric("meshlife_refusals_total{reason=\"malformed\"}")
            >= 4.0
    );
}

/// Issue 25 item 1 through `serve`: with `injectedNamespaces: ["*"]` in the constraint, a
/// Namespace the watch shows labelled `istio-injection: disabled` is not meshed (its Job is
/// admitted), while one without any injection label keeps the wildcard's reading (ML301).
#[test]
fn a_namespace_that_opts_out_beats_a_wildcard_constraint() {
    let wildcard = "apiVersion: constraints.gatekeeper.sh/v1beta1
kind: MeshLifecycle
metadata: {name: wildcard}
spec:
  enforcementAction: deny
  parameters:
    kubernetesMinorVersion: 31
    istio: {injectedNamespaces: [\"*\"]}
";
    let api = KubeApi::start(&[
        namespace("opted-out", "disabled"),
        json!({"metadata": {"name": "plain"}}),
    ]);
    let hook = webhook(&[wildcard], Some(&api), &[]);
    let client = Client::new(hook.server.routes, &hook.ca, None);
    runtime().block_on(async {
        let opted_out = post(&client, &admission_review(&job("opted-out"))).await;
        assert_eq!(
            opted_out.json["response"]["allowed"], true,
            "{}",
            opted_out.text
        );
        let plain = post(&client, &admission_review(&job("plain"))).await;
        assert_eq!(plain.json["response"]["allowed"], false, "{}", plain.text);
        assert!(has_rule(&plain.json["response"], "ML301"), "{}", plain.text);
    });
}
