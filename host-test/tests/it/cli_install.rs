//! `meshlife install gatekeeper`: manifests that apply, certificates that verify, and
//! workloads that meshlife itself finds nothing wrong with.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::serve_support;

fn meshlife(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .filter(|value: &Value| !value.is_null())
        .collect()
}

fn find<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|document| document["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn install_prints_everything_gatekeeper_needs_and_meshlife_finds_nothing_in_it() {
    let (code, text, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
            "--replicas",
            "3",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let all = documents(&text);
    let kinds: Vec<&str> = all
        .iter()
        .map(|document| document["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "ServiceAccount",
        "Secret",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Provider",
        "ConstraintTemplate",
        "MeshLifecycle",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let deployment = find(&all, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > 15);
    assert_eq!(find(&all, "PodDisruptionBudget")["spec"]["minAvailable"], 2);

    // The Provider trusts the CA that signed the serving certificate, for the Service's name.
    let provider = find(&all, "Provider");
    assert_eq!(
        provider["spec"]["url"],
        "https://meshlife-provider.gatekeeper-system:8443/validate"
    );
    let secret = find(&all, "Secret");
    let ca_pem = secret["stringData"]["ca.crt"].as_str().unwrap();
    let bundle = provider["spec"]["caBundle"].as_str().unwrap();
    let decoded = decode_base64(bundle);
    assert_eq!(decoded, ca_pem.as_bytes());
    let cert_pem = secret["stringData"]["tls.crt"].as_str().unwrap();
    let leaf = rustls_pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
        .map(|der: rustls_pki_types::CertificateDer| der.to_vec())
        .unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).unwrap();
    let names: Vec<String> = parsed
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|name| name.to_string())
        .collect();
    assert!(
        names
            .iter()
            .any(|name| name.contains("meshlife-provider.gatekeeper-system")),
        "{names:?}"
    );

    // meshlife follows its own rules: nothing to report on its own manifests.
    let (code, report, stderr) = meshlife(&["check", "-"], Some(&text));
    assert_eq!(code, 0, "{report}{stderr}");
    assert!(
        report.contains("0 errors, 0 warnings, 0 info findings"),
        "{report}"
    );
}

#[test]
fn install_with_cert_manager_issues_from_the_ca_the_provider_trusts() {
    let (code, text, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--cert-manager",
            "--namespace",
            "policy",
            "--gatekeeper-cert-secret",
            "gatekeeper-ca",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let all = documents(&text);
    let certificate = find(&all, "Certificate");
    assert_eq!(certificate["spec"]["secretName"], "meshlife-provider-tls");
    assert!(
        certificate["spec"]["dnsNames"]
            .to_string()
            .contains("meshlife-provider.policy")
    );
    let ca_secret = find(&all, "Secret");
    let ca_pem = ca_secret["stringData"]["tls.crt"].as_str().unwrap();
    let provider = find(&all, "Provider");
    assert_eq!(
        decode_base64(provider["spec"]["caBundle"].as_str().unwrap()),
        ca_pem.as_bytes()
    );
    assert_eq!(
        provider["spec"]["url"],
        "https://meshlife-provider.policy:8443/validate"
    );
}

#[test]
fn install_refuses_what_is_not_a_constraint() {
    let (code, _, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--constraint",
            "examples/istio/job-classic-no-exit.yaml",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("job-classic-no-exit.yaml"), "{stderr}");
    let (code, _, stderr) = meshlife(
        &["install", "gatekeeper", "--constraint", "/nonexistent.yaml"],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent.yaml"), "{stderr}");
}

#[test]
fn every_install_refuses_a_constraint_whose_parameters_the_server_would_refuse() {
    // The server validates its constraints' parameters at start; an install that printed them
    // unchecked would ship a Deployment that never becomes ready.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\n\
         metadata: {name: mesh-lifecycle-errors}\n\
         spec: {enforcementAction: deny, parameters: {injectedNamespace: [apps]}}\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    for engine in ["gatekeeper", "kyverno", "webhook"] {
        let (code, stdout, stderr) = meshlife(&["install", engine, "--constraint", path], None);
        assert_eq!(code, 2, "install {engine}: {stderr}");
        assert!(stdout.is_empty(), "install {engine}: {stdout}");
        assert!(
            stderr.contains("typo.yaml") && stderr.contains("injectedNamespace"),
            "install {engine}: {stderr}"
        );
    }
}

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |byte: u8| -> u32 {
        match byte {
            b'A'..=b'Z' => u32::from(byte - b'A'),
            b'a'..=b'z' => u32::from(byte - b'a') + 26,
            b'0'..=b'9' => u32::from(byte - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {byte}"),
        }
    };
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let padding = chunk.iter().filter(|&&byte| byte == b'=').count();
        let mut triple = 0u32;
        for &byte in chunk {
            triple = (triple << 6) | if byte == b'=' { 0 } else { value(byte) };
        }
        let bytes = triple.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - padding]);
    }
    out
}

#[test]
fn install_refuses_two_constraints_with_the_same_name() {
    // Every cluster file names its constraints mesh-lifecycle-errors and -warnings: applied
    // together, the second would replace the first in the cluster.
    let (code, stdout, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-cni.yaml",
        ],
        None,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("constraint constraints/gatekeeper/clusters/istio-cni.yaml")
            && stderr.contains("`mesh-lifecycle-errors` is also the name of the constraint in constraints/gatekeeper/clusters/istio-1.26-classic.yaml"),
        "{stderr}"
    );
}

/// `meshlife serve` started with the arguments the printed Deployment gives it, its files
/// (`/certs`, `/constraints`, ...) written from the printed Secrets and ConfigMaps into `dir`.
fn serve_as_deployed(all: &[Value], dir: &std::path::Path) -> serve_support::Server {
    let deployment = find(all, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut files: Vec<(String, String)> = Vec::new();
    for document in all {
        let data = match document["kind"].as_str() {
            Some("Secret") => &document["stringData"],
            Some("ConfigMap") => &document["data"],
            _ => continue,
        };
        let name = document["metadata"]["name"].as_str().unwrap();
        for (key, value) in data.as_object().unwrap() {
            files.push((format!("{name}/{key}"), value.as_str().unwrap().to_string()));
        }
    }
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let mut mapped = Vec::new();
    for mount in container["volumeMounts"].as_array().unwrap() {
        let volume = volumes
            .iter()
            .find(|volume| volume["name"] == mount["name"])
            .unwrap();
        let source = volume["secret"]["secretName"]
            .as_str()
            .or(volume["configMap"]["name"].as_str());
        if let Some(source) = source {
            mapped.push((
                mount["mountPath"].as_str().unwrap().to_string(),
                dir.join(source),
            ));
        }
    }
    for (path, text) in &files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_meshlife"));
    command
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST");
    for arg in container["args"].as_array().unwrap() {
        let arg = arg.as_str().unwrap();
        let arg = match arg.split_once('=') {
            Some(("--listen" | "--health-listen", _)) => {
                format!("{}=127.0.0.1:0", arg.split_once('=').unwrap().0)
            }
            _ => {
                let mut arg = arg.to_string();
                for (mount_path, local) in &mapped {
                    arg = arg.replace(
                        &format!("={mount_path}/"),
                        &format!("={}/", local.display()),
                    );
                }
                arg
            }
        };
        command.arg(arg);
    }
    serve_support::Server::spawn(command)
}

/// A TLS connection to `server` trusting `ca_pem` for the Service name `name`, as the caller
/// in the cluster makes it.
async fn connect_as_caller(
    server: &serve_support::Server,
    ca_pem: &str,
    name: &str,
) -> meshlife::commands::bench::client::Connection {
    let config = meshlife::commands::bench::client::client_config(ca_pem.as_bytes(), None).unwrap();
    meshlife::commands::bench::client::Connection::open(server.routes, name, &config)
        .await
        .unwrap()
}

fn injected_job(namespace: &str) -> Value {
    serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "nightly", "namespace": namespace},
        "spec": {"template": {
            "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
            "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 600,
                     "containers": [{"name": "work", "image": "registry.example/work:1"}]}
        }}
    })
}

#[test]
fn install_kyverno_cluster_policy_prints_a_server_and_policies_that_reach_it_with_the_token() {
    let (code, text, stderr) = meshlife(
        &[
            "install",
            "kyverno",
            "--cluster-policy",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    // The bound the policies cannot set themselves: Kyverno's call timeout inside its webhook's.
    assert!(
        stderr.contains("\"value\":\"--apiCallTimeout=2s\"") && !stderr.contains("SSL_CERT_DIR"),
        "{stderr}"
    );
    let all = documents(&text);
    let policies: Vec<&Value> = all
        .iter()
        .filter(|document| document["kind"] == "ClusterPolicy")
        .collect();
    assert_eq!(policies.len(), 2);
    let token_secret = all
        .iter()
        .find(|document| document["metadata"]["name"] == "meshlife-kyverno-token")
        .unwrap();
    let token = token_secret["stringData"]["token"].as_str().unwrap();
    let tls = all
        .iter()
        .find(|document| document["metadata"]["name"] == "meshlife-tls")
        .unwrap();
    let ca_pem = tls["stringData"]["ca.crt"].as_str().unwrap();
    let facts = meshlife::constraints::constraint::load_constraints(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../constraints/gatekeeper/clusters/istio-1.26-classic.yaml"
        )),
        Default::default(),
    )
    .unwrap();
    for (policy, constraint) in policies.iter().zip(&facts) {
        let rule = &policy["spec"]["rules"][0];
        assert_eq!(
            policy["metadata"]["annotations"]["pod-policies.kyverno.io/autogen-controllers"],
            "none"
        );
        assert_eq!(policy["spec"]["background"], false);
        // One call per rule: the server adds the Namespace from its watch, so no rule fetches
        // it (no apiCall to the API server).
        assert_eq!(rule["context"].as_array().unwrap().len(), 1, "{rule}");
        let call = &rule["context"][0]["apiCall"];
        assert_eq!(call["data"][0]["value"], "{{ to_string(request) }}");
        assert_eq!(
            call["service"]["url"],
            "https://meshlife.meshlife-system.svc:8443/kyverno"
        );
        assert_eq!(
            call["service"]["caBundle"].as_str().unwrap().trim(),
            ca_pem.trim()
        );
        assert!(
            call["service"]["headers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|header| header["key"] == "Authorization"
                    && header["value"] == format!("Bearer {token}")),
            "{call}"
        );
        // The cluster file's facts, without the Gatekeeper-only providerFailure.
        let mut expected = constraint.parameters.clone();
        expected.as_object_mut().unwrap().remove("providerFailure");
        assert_eq!(
            call["data"][1]["value"], expected,
            "{}",
            policy["metadata"]["name"]
        );
    }
    // The server's ServiceAccount may watch Namespaces, and its pods get its token.
    let role = all
        .iter()
        .find(|document| document["kind"] == "ClusterRole")
        .expect("a ClusterRole");
    assert_eq!(
        role["metadata"]["name"],
        "meshlife-kyverno-namespace-reader"
    );
    assert_eq!(role["rules"][0]["resources"][0], "namespaces");
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "list", "watch"])
    );
    let binding = find(&all, "ClusterRoleBinding");
    assert_eq!(
        binding["roleRef"]["name"],
        "meshlife-kyverno-namespace-reader"
    );
    assert_eq!(binding["subjects"][0]["name"], "meshlife");
    assert_eq!(binding["subjects"][0]["namespace"], "meshlife-system");
    let deployment = find(&all, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["automountServiceAccountToken"],
        true
    );

    // The server as the Deployment runs it takes the policies' token and judges.
    let dir = tempfile::tempdir().unwrap();
    let server = serve_as_deployed(&all, dir.path());
    let input = serde_json::json!({
        "review": {"operation": "CREATE", "namespace": "batch", "object": injected_job("batch")},
        "parameters": policies[0]["spec"]["rules"][0]["context"][0]["apiCall"]["data"][1]["value"],
    });
    let runtime = serve_support::runtime();
    runtime.block_on(async {
        let mut connection =
            connect_as_caller(&server, ca_pem, "meshlife.meshlife-system.svc").await;
        let body = bytes::Bytes::from(serde_json::to_vec(&input).unwrap());
        let authorization = format!("Bearer {token}");
        let reply = connection
            .post_with_headers(
                "/kyverno",
                body.clone(),
                &[("authorization", &authorization)],
            )
            .await
            .unwrap();
        let answer: Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(answer["error"], "", "{answer}");
        assert_eq!(answer["deny"], true, "{answer}");
        let refused = connection.post("/kyverno", body).await.unwrap();
        let refused: Value = serde_json::from_slice(&refused.body).unwrap();
        assert!(
            refused["error"].as_str().unwrap().contains("bearer token"),
            "{refused}"
        );
    });

    let (code, text, stderr) = meshlife(&["install", "kyverno", "--namespace", "ml"], None);
    assert_eq!(code, 0, "{stderr}");
    // The step apply cannot take: Kyverno's http.Post trusts its own system roots only.
    assert!(
        stderr.contains("kubectl -n kyverno patch deployment kyverno-admission-controller")
            && stderr.contains("SSL_CERT_DIR")
            && stderr.contains("MeshlifeAdmissionsFailedOpen")
            && !stderr.contains("--apiCallTimeout=2s"),
        "{stderr}"
    );
    let all = documents(&text);
    let trusted = all
        .iter()
        .find(|document| {
            document["kind"] == "ConfigMap" && document["metadata"]["name"] == "meshlife-ca"
        })
        .expect("the ConfigMap meshlife-ca");
    assert_eq!(trusted["metadata"]["namespace"], "kyverno");
    let served_ca = all
        .iter()
        .filter_map(|document| document["stringData"]["ca.crt"].as_str())
        .next()
        .expect("the server's TLS Secret holds its CA");
    assert_eq!(
        trusted["data"]["meshlife-ca.crt"].as_str().unwrap().trim(),
        served_ca.trim()
    );
    let cel: Vec<&Value> = all
        .iter()
        .filter(|document| document["kind"] == "ValidatingPolicy")
        .collect();
    assert_eq!(cel.len(), 2);
    // The ValidatingPolicies send Kyverno's namespaceObject: the server watches nothing.
    assert!(
        !all.iter().any(|document| document["kind"] == "ClusterRole"),
        "{text}"
    );
    // meshlife-errors-cel decides in its match condition (failurePolicy governs only those
    // errors) and asks again in its variable for the message; the warnings policy asks once.
    let calls = [
        &cel[0]["spec"]["matchConditions"][1]["expression"],
        &cel[0]["spec"]["variables"][0]["expression"],
        &cel[1]["spec"]["variables"][0]["expression"],
    ];
    for call in calls {
        let call = call.as_str().unwrap();
        assert!(call.starts_with("http.Post("), "{call}");
        assert!(
            call.contains("https://meshlife.ml.svc:8443/kyverno"),
            "{call}"
        );
        assert!(call.contains("\"Authorization\": \"Bearer "), "{call}");
    }

    // meshlife follows its own rules on what it installs.
    let (code, report, stderr) = meshlife(&["check", "-"], Some(&text));
    assert_eq!(code, 0, "{report}{stderr}");
}

#[test]
fn install_webhook_prints_a_webhook_whose_server_judges_under_the_constraints() {
    let (code, text, stderr) = meshlife(
        &[
            "install",
            "webhook",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
            "--failure-policy",
            "fail",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let all = documents(&text);
    // Every field is one the API server knows: the typed objects give back what was printed.
    fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(document: &Value) {
        let typed: T = serde_json::from_value(document.clone()).unwrap();
        assert_eq!(&serde_json::to_value(typed).unwrap(), document);
    }
    use k8s_openapi::api::{admissionregistration, apps, core, policy, rbac};
    round_trips::<admissionregistration::v1::ValidatingWebhookConfiguration>(find(
        &all,
        "ValidatingWebhookConfiguration",
    ));
    round_trips::<apps::v1::Deployment>(find(&all, "Deployment"));
    round_trips::<core::v1::Service>(find(&all, "Service"));
    round_trips::<core::v1::ConfigMap>(find(&all, "ConfigMap"));
    round_trips::<policy::v1::PodDisruptionBudget>(find(&all, "PodDisruptionBudget"));
    round_trips::<rbac::v1::ClusterRole>(find(&all, "ClusterRole"));
    round_trips::<rbac::v1::ClusterRoleBinding>(find(&all, "ClusterRoleBinding"));
    let configuration = find(&all, "ValidatingWebhookConfiguration");
    let webhook = &configuration["webhooks"][0];
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["admissionReviewVersions"][0], "v1");
    assert!(webhook["timeoutSeconds"].as_u64().unwrap() <= 10);
    assert!(
        webhook["namespaceSelector"]["matchExpressions"][0]["values"]
            .as_array()
            .unwrap()
            .contains(&Value::from("meshlife-system"))
    );
    assert!(webhook["matchConditions"].as_array().unwrap().len() >= 2);
    let service = &webhook["clientConfig"]["service"];
    assert_eq!(service["path"], "/admission");
    let rules = find(&all, "ClusterRole")["rules"][0]["verbs"].clone();
    assert_eq!(rules, serde_json::json!(["get", "list", "watch"]));
    let ca_pem = String::from_utf8(decode_base64(
        webhook["clientConfig"]["caBundle"].as_str().unwrap(),
    ))
    .unwrap();

    // The server as the Deployment runs it, with the ConfigMap's constraints, answers the API
    // server's request on the path and name the configuration gives.
    let dir = tempfile::tempdir().unwrap();
    let server = serve_as_deployed(&all, dir.path());
    let name = format!(
        "{}.{}.svc",
        service["name"].as_str().unwrap(),
        service["namespace"].as_str().unwrap()
    );
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e2e-1",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "operation": "CREATE",
            "namespace": "batch",
            "name": "nightly",
            "object": injected_job("batch"),
        }
    });
    let runtime = serve_support::runtime();
    runtime.block_on(async {
        let mut connection = connect_as_caller(&server, &ca_pem, &name).await;
        let reply = connection
            .post(
                service["path"].as_str().unwrap(),
                bytes::Bytes::from(serde_json::to_vec(&review).unwrap()),
            )
            .await
            .unwrap();
        let answer: Value = serde_json::from_slice(&reply.body).unwrap();
        let response = &answer["response"];
        assert_eq!(response["uid"], "e2e-1");
        assert_eq!(response["allowed"], false, "{answer}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(message.contains("[ML301 "), "{message}");
        // The warn constraint of the cluster file reports ML101 as a warning.
        assert!(
            response["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|warning| warning.as_str().unwrap().starts_with("[ML101 ")),
            "{answer}"
        );
    });
    assert!(
        server.log().contains("no Namespace watch"),
        "{}",
        server.log()
    );

    let (code, report, stderr) = meshlife(&["check", "-"], Some(&text));
    assert_eq!(code, 0, "{report}{stderr}");
}

#[test]
fn install_kyverno_refuses_a_constraint_file_that_is_not_a_cluster_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two-deny.yaml");
    let constraint = |name: &str| {
        format!(
            "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {{name: {name}}}\nspec: {{enforcementAction: deny}}\n"
        )
    };
    std::fs::write(
        &path,
        format!("{}---\n{}", constraint("a"), constraint("b")),
    )
    .unwrap();
    let (code, _, stderr) = meshlife(
        &["install", "kyverno", "--constraint", path.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("expected one deny constraint"), "{stderr}");
    let (code, _, stderr) = meshlife(&["install", "webhook", "--timeout-seconds", "31"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("between 1 and 30"), "{stderr}");
}

#[test]
fn url_points_every_install_at_a_server_outside_the_cluster_and_its_certificate_names_it() {
    let url = "https://127.0.0.1:9443";
    // (install arguments, the engine's path, where the install says the server is)
    type Case = (
        &'static [&'static str],
        &'static str,
        fn(&[Value]) -> String,
    );
    let cases: [Case; 4] = [
        (&["gatekeeper"], "/validate", |all| {
            find(all, "Provider")["spec"]["url"]
                .as_str()
                .unwrap()
                .into()
        }),
        (&["webhook"], "/admission", |all| {
            let webhook = &find(all, "ValidatingWebhookConfiguration")["webhooks"][0];
            assert!(webhook["clientConfig"].get("service").is_none());
            webhook["clientConfig"]["url"].as_str().unwrap().into()
        }),
        (&["kyverno", "--cluster-policy"], "/kyverno", |all| {
            find(all, "ClusterPolicy")["spec"]["rules"][0]["context"][0]["apiCall"]["service"]["url"]
                .as_str()
                .unwrap()
                .into()
        }),
        (&["kyverno"], "/kyverno", |all| {
            let policy = serde_json::to_string(find(all, "ValidatingPolicy")).unwrap();
            assert!(
                policy.contains("https://127.0.0.1:9443/kyverno"),
                "{policy}"
            );
            "https://127.0.0.1:9443/kyverno".into()
        }),
    ];
    for (target, path, called) in cases {
        let mut args = vec!["install"];
        args.extend_from_slice(target);
        args.extend_from_slice(&["--url", url]);
        let (code, text, stderr) = meshlife(&args, None);
        assert_eq!(code, 0, "{target:?}: {stderr}");
        let all = documents(&text);
        assert_eq!(called(&all), format!("{url}{path}"), "{target:?}");
        assert!(
            !text.contains(".svc:8443/"),
            "{target:?} still names the Service"
        );
        // The serving certificate names the URL's host (an IP address SAN) beside the Service.
        let secret = all
            .iter()
            .find(|document| {
                document["kind"] == "Secret" && document["type"] == "kubernetes.io/tls"
            })
            .unwrap();
        let pem = secret["stringData"]["tls.crt"].as_str().unwrap();
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
            .map(|cert: rustls_pki_types::CertificateDer| cert.to_vec())
            .unwrap();
        let (_, certificate) = x509_parser::parse_x509_certificate(&der).unwrap();
        let names = format!(
            "{:?}",
            certificate
                .subject_alternative_name()
                .unwrap()
                .unwrap()
                .value
        );
        assert!(
            names.contains("127.0.0.1") || names.contains("[127, 0, 0, 1]"),
            "{names}"
        );
        assert!(names.contains(".svc"), "{names}");
    }
    for (bad, said) in [
        ("http://127.0.0.1:9443", "https://"),
        (
            "https://meshlife.example/admission",
            "only the scheme, host and port",
        ),
        ("https://meshlife.example:0", "port"),
        ("https://", "no host"),
    ] {
        let (code, _, stderr) = meshlife(&["install", "webhook", "--url", bad], None);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(stderr.contains(said), "{bad}: {stderr}");
    }
}

/// `--secrets-dir`: the first run writes the CA, serving certificate and token there (keys
/// readable by their owner only), later runs print the same manifests byte for byte; another
/// namespace keeps the CA (every caBundle the same) and issues the serving certificate again;
/// half a CA is refused naming both files.
#[test]
fn a_secrets_dir_makes_every_install_print_the_same_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("secrets");
    let kept_arg = kept.to_str().unwrap();
    for target in [
        &["install", "gatekeeper"][..],
        &["install", "kyverno", "--cluster-policy"][..],
        &["install", "kyverno"][..],
        &["install", "webhook"][..],
    ] {
        let with_dir = [target, &["--secrets-dir", kept_arg][..]].concat();
        let (code, first, _) = meshlife(&with_dir, None);
        assert_eq!(code, 0, "{target:?}");
        let (code, second, stderr) = meshlife(&with_dir, None);
        assert_eq!(code, 0, "{target:?}: {stderr}");
        assert_eq!(
            first, second,
            "{target:?}: the second run printed other manifests"
        );
        let (_, unkept, _) = meshlife(target, None);
        assert_ne!(first, unkept, "{target:?}: without the folder, new secrets");
    }
    // `--cel`, from before the ValidatingPolicy pair was the default, still prints it, and
    // cannot be asked for together with the ClusterPolicy pair.
    let (code, default, _) = meshlife(&["install", "kyverno", "--secrets-dir", kept_arg], None);
    assert_eq!(code, 0);
    let (code, cel, stderr) = meshlife(
        &["install", "kyverno", "--cel", "--secrets-dir", kept_arg],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(default, cel);
    let (code, _, stderr) = meshlife(&["install", "kyverno", "--cel", "--cluster-policy"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    use std::os::unix::fs::PermissionsExt as _;
    for (file, mode) in [
        ("ca.crt", 0o644),
        ("ca.key", 0o600),
        ("tls.crt", 0o644),
        ("tls.key", 0o600),
        ("kyverno-token", 0o600),
    ] {
        let metadata = std::fs::metadata(kept.join(file)).unwrap();
        assert_eq!(
            metadata.permissions().mode() & 0o077,
            mode & 0o077,
            "{file}"
        );
    }

    let ca_bundle = |text: &str| {
        find(&documents(text), "Provider")["spec"]["caBundle"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (_, here, _) = meshlife(&["install", "gatekeeper", "--secrets-dir", kept_arg], None);
    let (code, elsewhere, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--secrets-dir",
            kept_arg,
            "--namespace",
            "policy",
            "--gatekeeper-cert-secret",
            "gatekeeper-ca-copy",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ca_bundle(&here), ca_bundle(&elsewhere));
    assert!(
        stderr.contains(
            "tls.crt: it does not name meshlife-provider.policy: issued again from the kept CA"
        ),
        "{stderr}"
    );

    // A serving key that is not the certificate's: issued again; a CA key that is not the
    // CA's: refused.
    std::fs::copy(kept.join("ca.key"), kept.join("tls.key")).unwrap();
    let (code, _, stderr) = meshlife(&["install", "gatekeeper", "--secrets-dir", kept_arg], None);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("tls.crt: tls.key is not its key: issued again"),
        "{stderr}"
    );
    let ca_key = std::fs::read(kept.join("ca.key")).unwrap();
    std::fs::copy(kept.join("tls.key"), kept.join("ca.key")).unwrap();
    let (code, _, stderr) = meshlife(&["install", "gatekeeper", "--secrets-dir", kept_arg], None);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ca.key: not the key of"), "{stderr}");
    std::fs::write(kept.join("ca.key"), ca_key).unwrap();

    std::fs::remove_file(kept.join("ca.key")).unwrap();
    let (code, _, stderr) = meshlife(&["install", "webhook", "--secrets-dir", kept_arg], None);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("ca.crt and ca.key go together, and only one of them is there"),
        "{stderr}"
    );
}

/// `install gatekeeper --namespace X`: refused with the reason and the commands while the
/// provider would mount Gatekeeper's Secret from another namespace; with a copy named, X is
/// printed as a Namespace, the copy is mounted, and a constraint that does not exclude X is
/// named in a note.
#[test]
fn install_gatekeeper_in_another_namespace_needs_a_copy_of_gatekeepers_ca() {
    let (code, text, stderr) = meshlife(&["install", "gatekeeper", "--namespace", "policy"], None);
    assert_eq!(code, 2, "{text}");
    assert!(
        stderr.contains(
            "--namespace policy: the provider verifies Gatekeeper's client certificate with \
             ca.crt of the Secret gatekeeper-webhook-server-cert, which Gatekeeper keeps in \
             gatekeeper-system and a pod in policy cannot mount"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("--gatekeeper-cert-secret gatekeeper-ca"),
        "{stderr}"
    );

    let (code, text, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--namespace",
            "policy",
            "--gatekeeper-cert-secret",
            "gatekeeper-ca",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let all = documents(&text);
    assert_eq!(find(&all, "Namespace")["metadata"]["name"], "policy");
    let deployment = find(&all, "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], "policy");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].to_string();
    assert!(
        volumes.contains("\"secretName\":\"gatekeeper-ca\""),
        "{volumes}"
    );
    assert!(
        stderr.contains("constraint mesh-lifecycle-errors does not exclude policy"),
        "{stderr}"
    );
    // In Gatekeeper's own namespace: no Namespace printed, no note.
    let (code, text, stderr) = meshlife(
        &[
            "install",
            "gatekeeper",
            "--constraint",
            "constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !documents(&text)
            .iter()
            .any(|object| object["kind"] == "Namespace")
    );
    assert!(!stderr.contains("does not exclude"), "{stderr}");
}
