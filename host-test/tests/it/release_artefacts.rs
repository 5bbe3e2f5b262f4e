//! `meshlife build`'s artefacts for other hosts: `dist/meshlife.kubewarden.wasm` (the module
//! with Kubewarden's metadata in the custom section `io.kubewarden.metadata`) and
//! `dist/bundle.tar.gz` (an OPA bundle mapping `meshlife/violation` to `/policy.wasm`), read
//! back the way Kubewarden and the opa-wasm crate read them, plus the Kubewarden
//! ClusterAdmissionPolicy example.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use meshlife::module::artefacts::{self, KubewardenMetadata};
use meshlife::module::build::old_engine_features;
use meshlife::module::engine::Engine;
use meshlife_policy::Violation;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmparser::{Parser, Payload, Validator};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The module this test binary was built with (what `meshlife build` also compiles).
const MODULE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/meshlife.wasm"));

/// Runs `meshlife build` once for the whole test binary and returns the paths it printed.
fn built() -> &'static Vec<PathBuf> {
    static BUILT: OnceLock<Vec<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = workspace_root();
        let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
            .args(["build", "--workspace"])
            .arg(&root)
            .output()
            .expect("meshlife build runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "meshlife build failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout.lines().map(PathBuf::from).collect()
    })
}

fn built_file(relative: &str) -> Vec<u8> {
    let path = workspace_root().join(relative);
    assert!(built().contains(&path), "{relative} in {:?}", built());
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn yaml_documents(relative: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(workspace_root().join(relative)).expect(relative);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("YAML"))
        .collect()
}

/// A Job that the default parameters deny (ML301) and one that passes, as Gatekeeper inputs.
fn deny_input() -> Value {
    json!({
        "parameters": {},
        "review": {
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "operation": "CREATE",
            "name": "report",
            "namespace": "shop",
            "object": {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "report", "namespace": "shop"},
                "spec": {"template": {
                    "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                    "spec": {"restartPolicy": "Never",
                             "containers": [{"name": "report", "image": "registry.example/report:1"}]}
                }}
            }
        }
    })
}

fn allow_input() -> Value {
    let mut input = deny_input();
    input["review"]["object"]["spec"]["template"]["metadata"]["labels"]["sidecar.istio.io/inject"] =
        json!("false");
    input
}

fn native(input: &Value) -> Vec<Violation> {
    let engine = Engine::embedded().expect("the embedded module");
    engine
        .evaluate(input.to_string().as_bytes())
        .expect("an evaluation")
}

// ---------------------------------------------------------------------------------------------
// meshlife build

#[test]
fn meshlife_build_prints_the_module_and_both_artefacts() {
    let root = workspace_root();
    assert_eq!(
        built(),
        &vec![
            root.join("dist/meshlife.wasm"),
            root.join(artefacts::DIST_KUBEWARDEN_MODULE),
            root.join(artefacts::DIST_OPA_BUNDLE),
        ]
    );
    assert_eq!(built_file("dist/meshlife.wasm"), MODULE);
}

// ---------------------------------------------------------------------------------------------
// Kubewarden

/// The custom sections of `module`, by name, in order.
fn custom_sections(module: &[u8]) -> Vec<(String, Vec<u8>)> {
    Parser::new(0)
        .parse_all(module)
        .filter_map(|payload| match payload.expect("a valid module") {
            Payload::CustomSection(section) => {
                Some((section.name().to_string(), section.data().to_vec()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_kubewarden_module_carries_the_metadata_as_kwctl_writes_it() {
    let annotated = built_file(artefacts::DIST_KUBEWARDEN_MODULE);
    // Everything but the appended section is the module, byte for byte.
    assert!(annotated.starts_with(MODULE));
    let sections = custom_sections(&annotated);
    let metadata: Vec<&Vec<u8>> = sections
        .iter()
        .filter(|(name, _)| name == "io.kubewarden.metadata")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(metadata.len(), 1, "one metadata section");
    assert_eq!(
        sections.last().map(|(name, _)| name.as_str()),
        Some("io.kubewarden.metadata"),
        "appended last"
    );
    let mut appended = Vec::new();
    wasm_encoder::Section::append_to(
        &wasm_encoder::CustomSection {
            name: "io.kubewarden.metadata".into(),
            data: metadata[0].as_slice().into(),
        },
        &mut appended,
    );
    assert_eq!(&annotated[MODULE.len()..], appended.as_slice());

    let json: Value = serde_json::from_slice(metadata[0]).expect("the section is JSON");
    // policy-evaluator's Metadata, serialised: its keys in its order.
    let keys: Vec<&str> = json
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "protocolVersion",
            "rules",
            "annotations",
            "mutating",
            "backgroundAudit",
            "executionMode",
            "policyType",
            "contextAwareResources"
        ]
    );
    assert_eq!(json["executionMode"], "gatekeeper");
    assert_eq!(json["protocolVersion"], "Unknown");
    assert_eq!(json["mutating"], false);
    assert_eq!(json["backgroundAudit"], true);
    assert_eq!(json["policyType"], "kubernetes");
    assert_eq!(json["contextAwareResources"], json!([]));
    // The rules are metadata.yml's, and cover every kind the module reviews.
    let yaml = &yaml_documents(artefacts::KUBEWARDEN_METADATA)[0];
    assert_eq!(json["rules"], yaml["rules"]);
    let mut resources = BTreeSet::new();
    for rule in json["rules"].as_array().expect("rules") {
        assert_eq!(rule["operations"], json!(["CREATE", "UPDATE"]), "{rule}");
        for group in rule["apiGroups"].as_array().expect("groups") {
            for resource in rule["resources"].as_array().expect("resources") {
                resources.insert(format!(
                    "{}/{}",
                    group.as_str().expect("a group"),
                    resource.as_str().expect("a resource")
                ));
            }
        }
    }
    assert_eq!(
        resources,
        [
            "/pods",
            "/replicationcontrollers",
            "apps/daemonsets",
            "apps/deployments",
            "apps/replicasets",
            "apps/statefulsets",
            "argoproj.io/analysistemplates",
            "argoproj.io/clusteranalysistemplates",
            "argoproj.io/rollouts",
            "batch.volcano.sh/jobs",
            "batch/cronjobs",
            "batch/jobs",
            "jobset.x-k8s.io/jobsets",
            "kubeflow.org/experiments",
            "kubeflow.org/jaxjobs",
            "kubeflow.org/mpijobs",
            "kubeflow.org/paddlejobs",
            "kubeflow.org/pytorchjobs",
            "kubeflow.org/tfjobs",
            "kubeflow.org/xgboostjobs",
            "networking.k8s.io/networkpolicies"
        ]
        .into_iter()
        .map(String::from)
        .collect()
    );
    for annotation in [
        "title",
        "description",
        "author",
        "url",
        "source",
        "license",
        "usage",
    ] {
        let key = format!("io.kubewarden.policy.{annotation}");
        assert!(
            json["annotations"][&key]
                .as_str()
                .is_some_and(|value| !value.trim().is_empty()),
            "{key}"
        );
    }
    assert_eq!(
        json["annotations"]["io.kubewarden.policy.license"],
        "Apache-2.0"
    );
}

#[test]
fn the_kubewarden_module_still_validates_and_evaluates() {
    let annotated = built_file(artefacts::DIST_KUBEWARDEN_MODULE);
    Validator::new_with_features(old_engine_features())
        .validate_all(&annotated)
        .expect("valid under MVP + bulk-memory");
    // kwctl's gatekeeper mode wants an export whose name starts with `opa_`.
    let mut export_names = Vec::new();
    for payload in Parser::new(0).parse_all(&annotated) {
        if let Payload::ExportSection(exports) = payload.expect("a payload") {
            for export in exports {
                export_names.push(export.expect("an export").name.to_string());
            }
        }
    }
    let exports_opa = export_names.iter().any(|name| name.starts_with("opa_"));
    assert!(exports_opa);

    let path = workspace_root().join(artefacts::DIST_KUBEWARDEN_MODULE);
    let engine = Engine::from_file(&path, Default::default()).expect("the annotated module loads");
    for input in [deny_input(), allow_input()] {
        let violations = engine
            .evaluate(input.to_string().as_bytes())
            .expect("an evaluation");
        assert_eq!(violations, native(&input));
    }
    assert!(!native(&deny_input()).is_empty());
    assert!(native(&allow_input()).is_empty());
}

#[test]
fn metadata_that_would_break_the_policy_is_refused() {
    let text = std::fs::read_to_string(workspace_root().join(artefacts::KUBEWARDEN_METADATA))
        .expect("metadata.yml");
    let metadata = KubewardenMetadata::from_yaml(&text).expect("the shipped metadata");
    assert_eq!(metadata.protocol_version.as_deref(), Some("Unknown"));
    for (from, to, expected) in [
        (
            "executionMode: gatekeeper",
            "executionMode: opa",
            "gatekeeper",
        ),
        ("mutating: false", "mutating: true", "mutating"),
        (
            "backgroundAudit: true",
            "backgroundAudit: true\nexecutionMod: wasi",
            "executionMod",
        ),
        (
            "operations: [CREATE, UPDATE]",
            "operations: [CREATE, PATCH]",
            "PATCH",
        ),
        (
            "policyType: kubernetes",
            "policyType: cluster",
            "policyType",
        ),
    ] {
        assert_eq!(text.matches(from).count().min(1), 1, "{from}");
        let broken = text.replacen(from, to, 1);
        let error = KubewardenMetadata::from_yaml(&broken).expect_err(to);
        assert!(error.contains(expected), "{to}: {error}");
    }
}

#[test]
fn an_annotated_module_is_not_annotated_twice() {
    let once = artefacts::annotate_for_kubewarden(MODULE, b"{}").expect("annotates");
    let error = artefacts::annotate_for_kubewarden(&once, b"{}").expect_err("twice");
    assert!(error.contains("already"), "{error}");
}

/// The ClusterAdmissionPolicy example: the reviewed kinds, and settings the module accepts
/// and applies to Kubewarden's input, which has no namespaceObject.
#[test]
fn the_cluster_admission_policies_are_usable() {
    let metadata = &yaml_documents(artefacts::KUBEWARDEN_METADATA)[0];
    let policies = yaml_documents("constraints/kubewarden/cluster-admission-policy.yaml");
    assert_eq!(policies.len(), 2);
    let engine = Engine::embedded().expect("the embedded module");
    let loaded = meshlife::inputs::manifests::load(&[workspace_root()
        .join("examples")
        .display()
        .to_string()]);
    for policy in &policies {
        let name = policy["metadata"]["name"].as_str().expect("a name");
        assert_eq!(policy["apiVersion"], "policies.kubewarden.io/v1", "{name}");
        assert_eq!(policy["kind"], "ClusterAdmissionPolicy", "{name}");
        assert_eq!(policy["spec"]["rules"], metadata["rules"], "{name}");
        assert_eq!(policy["spec"]["mutating"], false, "{name}");
        let settings = &policy["spec"]["settings"];
        let mut findings = 0;
        for object in &loaded.objects {
            // Kubewarden's gatekeeper mode: {"parameters": settings, "review": request}.
            let input = json!({"parameters": settings, "review": object.review(None)});
            let violations = engine
                .evaluate(input.to_string().as_bytes())
                .expect("an evaluation");
            for violation in &violations {
                assert_ne!(violation.details.rule, "ML000", "{name}: {violation:?}");
                if policy["spec"]["mode"] == "protect" {
                    assert_eq!(
                        violation.details.severity,
                        meshlife_policy::Severity::Error,
                        "{name}"
                    );
                }
            }
            findings += violations.len();
        }
        assert!(findings > 0, "{name} reports on the examples");
    }
    assert_eq!(policies[0]["spec"]["mode"], "protect");
    assert_eq!(policies[1]["spec"]["mode"], "monitor");
}

// ---------------------------------------------------------------------------------------------
// OPA bundle

/// `(name, mtime, uid, gid, contents)` of every entry, with the name exactly as stored.
fn bundle_entries(bundle: &[u8]) -> Vec<(String, u64, u64, u64, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bundle));
    archive
        .entries()
        .expect("a tar archive")
        .map(|entry| {
            let mut entry = entry.expect("an entry");
            let header = entry.header().clone();
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents).expect("contents");
            (
                String::from_utf8(header.path_bytes().into_owned()).expect("UTF-8 name"),
                header.mtime().expect("mtime"),
                header.uid().expect("uid"),
                header.gid().expect("gid"),
                contents,
            )
        })
        .collect()
}

#[test]
fn the_bundle_holds_the_manifest_and_the_module_under_slash_names() {
    let bundle = built_file(artefacts::DIST_OPA_BUNDLE);
    let entries = bundle_entries(&bundle);
    let names: Vec<&str> = entries.iter().map(|entry| entry.0.as_str()).collect();
    assert_eq!(names, ["/.manifest", "/policy.wasm"]);
    for (name, mtime, uid, gid, _) in &entries {
        assert_eq!((*mtime, *uid, *gid), (0, 0, 0), "{name}");
    }
    let manifest: Value = serde_json::from_slice(&entries[0].4).expect("JSON manifest");
    assert_eq!(
        manifest,
        json!({"revision": env!("CARGO_PKG_VERSION"), "roots": ["meshlife"],
               "wasm": [{"entrypoint": "meshlife/violation", "module": "/policy.wasm"}]})
    );
    assert_eq!(entries[1].4, MODULE);
    // Deterministic: the same module and version give the same bytes.
    assert_eq!(
        artefacts::opa_bundle(MODULE, env!("CARGO_PKG_VERSION")).expect("a bundle"),
        bundle
    );
}

#[derive(Deserialize)]
struct ResultBinding {
    result: Vec<Violation>,
}

#[tokio::test]
async fn the_bundle_loads_in_the_opa_wasm_crate_and_evaluates_like_the_native_policy() {
    let path = workspace_root().join(artefacts::DIST_OPA_BUNDLE);
    built();
    let module_bytes = opa_wasm::read_bundle(&path)
        .await
        .expect("the opa-wasm loader finds /policy.wasm");
    assert_eq!(module_bytes, MODULE);

    use opa_wasm::wasmtime::{Engine as WasmEngine, Module, Store};
    let engine = WasmEngine::default();
    let module = Module::new(&engine, &module_bytes).expect("compiles");
    let mut store = Store::new(&engine, ());
    let runtime = opa_wasm::Runtime::new(&mut store, &module)
        .await
        .expect("a valid OPA module");
    assert_eq!(runtime.default_entrypoint(), Some("meshlife/violation"));
    let policy = runtime
        .without_data(&mut store)
        .await
        .expect("instantiates");
    for (input, denies) in [(deny_input(), true), (allow_input(), false)] {
        let results: Vec<ResultBinding> = policy
            .evaluate(&mut store, "meshlife/violation", &input)
            .await
            .expect("evaluates");
        assert_eq!(results.len(), 1);
        let expected = native(&input);
        assert_eq!(results[0].result, expected);
        assert_eq!(!expected.is_empty(), denies);
        if denies {
            assert!(
                expected
                    .iter()
                    .any(|violation| violation.details.rule == "ML301")
            );
        }
    }
}
