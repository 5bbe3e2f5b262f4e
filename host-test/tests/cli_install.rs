//! `meshlife install gatekeeper`: manifests that apply, certificates that verify, and
//! workloads that meshlife itself finds nothing wrong with.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

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
