//! What the cluster reader makes of the meshes' own installs (tests/data/mesh-installs: Istio's
//! charts as Helm renders them, Linkerd's after its chart), without a cluster: each install's
//! facts with their sources, and the constraint `meshlife constraint --from-cluster` writes from
//! them, compared with the shipped cluster file for that install.

use std::path::PathBuf;

use meshlife::cluster::{ClusterFacts, Snapshot, facts_of};
use meshlife::constraints::facts::ClusterFactArgs;
use meshlife::constraints::generate::ConstraintArgs;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn install(name: &str) -> Snapshot {
    let path = repo().join("host-test/tests/data/mesh-installs").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    snapshot_of(name, &text)
}

fn snapshot_of(name: &str, text: &str) -> Snapshot {
    let objects = serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| {
            <Value as serde::Deserialize>::deserialize(document)
                .unwrap_or_else(|error| panic!("{name}: {error}"))
        })
        .filter(|value| !value.is_null());
    Snapshot::from_objects(&format!("fixture {name}"), objects)
}

fn facts(name: &str) -> ClusterFacts {
    facts_of(&install(name), &ClusterFactArgs::default())
        .unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn base_args(flags: ClusterFactArgs) -> ConstraintArgs {
    ConstraintArgs::new(flags)
}

/// The constraints `meshlife constraint --from-cluster` writes for these facts.
fn constraint_pair(facts: &ClusterFacts) -> (String, Vec<Value>) {
    let (generated, _) = facts
        .generate_constraints(&base_args(ClusterFactArgs::default()))
        .unwrap();
    (generated.yaml, generated.documents)
}

/// `spec.parameters` with what equals the default left out: the shipped files spell out some
/// defaults (`injectedNamespaces: []`, `proxyUID: 1337`) that the generator leaves implicit.
fn parameters(document: &Value) -> Value {
    let mut parameters = document["spec"]["parameters"].clone();
    for mesh in ["istio", "linkerd"] {
        if let Some(section) = parameters.get_mut(mesh).and_then(Value::as_object_mut) {
            section.retain(|key, value| {
                !(value == &json!([])
                    || (key == "proxyUID" && (value == &json!(1337) || value == &json!(2102))))
            });
        }
    }
    parameters
}

/// The YAML with its comment lines joined, so a sentence wrapped over lines is found whole.
fn comments(yaml: &str) -> String {
    yaml.lines()
        .map(|line| line.trim_start().trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

fn shipped_pair(file: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(repo().join("constraints/gatekeeper/clusters").join(file)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| <Value as serde::Deserialize>::deserialize(document).unwrap())
        .filter(|value| !value.is_null())
        .collect()
}

#[test]
fn each_install_gives_the_parameters_of_its_shipped_cluster_file() {
    // Install fixture -> the cluster file written by hand for such a cluster.
    let pairs = [
        ("istio-1.26-classic.yaml", "istio-1.26-classic.yaml"),
        ("istio-1.27-native.yaml", "istio-1.27-native.yaml"),
        ("istio-cni.yaml", "istio-cni.yaml"),
        ("linkerd-2.19-classic.yaml", "linkerd-2.19-classic.yaml"),
        ("linkerd-2.20-native.yaml", "linkerd-2.20-native.yaml"),
    ];
    for (install, file) in pairs {
        let (_, generated) = constraint_pair(&facts(install));
        let shipped = shipped_pair(file);
        assert_eq!(generated.len(), shipped.len(), "{install}");
        for (generated, shipped) in generated.iter().zip(&shipped) {
            assert_eq!(generated["metadata"]["name"], shipped["metadata"]["name"]);
            assert_eq!(
                parameters(generated),
                parameters(shipped),
                "{install} against constraints/gatekeeper/clusters/{file}, {}",
                shipped["metadata"]["name"]
            );
        }
    }
}

#[test]
fn every_fact_names_the_object_and_field_it_was_read_from() {
    let facts = facts("istio-1.26-classic.yaml");
    // The lowest of the two kubelets, not the first listed.
    assert_eq!(facts.kubernetes.value.minor, 31);
    assert_eq!(facts.kubernetes.source.object, "Node node-2");
    let revision = &facts.istio.as_ref().unwrap().revisions[0];
    assert_eq!(revision.name, "default");
    assert_eq!(revision.version.value.text, "1.26.3");
    assert_eq!(
        revision.version.source.to_string(),
        "Deployment istio-system/istiod spec.template.spec.containers[0].image \
         (docker.io/istio/pilot:1.26.3)"
    );
    assert!(revision.native_sidecars.is_none(), "{revision:?}");
    assert_eq!(
        revision.hold.source.to_string(),
        "ConfigMap istio-system/istio data.mesh defaultConfig.holdApplicationUntilProxyStarts"
    );
    assert_eq!(
        revision.cni.source.to_string(),
        "ConfigMap istio-system/istio-sidecar-injector data.values pilot.cni.enabled"
    );
    let (yaml, _) = constraint_pair(&facts);
    for cited in [
        "Read from the cluster: Node node-2 status.nodeInfo.kubeletVersion (the lowest of 2 nodes).",
        "Read from the cluster: ConfigMap istio-system/istio-sidecar-injector data.values pilot.cni.enabled.",
        "The facts were read from fixture istio-1.26-classic.yaml by `meshlife constraint --from-cluster`",
    ] {
        assert!(comments(&yaml).contains(cited), "{cited} not in:\n{yaml}");
    }
}

#[test]
fn istiod_settings_are_read_from_its_environment_mesh_config_and_injector_values() {
    let native = facts("istio-1.27-native-env.yaml");
    let revision = &native.istio.as_ref().unwrap().revisions[0];
    let native_sidecars = revision.native_sidecars.as_ref().unwrap();
    assert!(native_sidecars.value);
    assert_eq!(
        native_sidecars.source.field,
        "spec.template.spec.containers[0].env[1] ENABLE_NATIVE_SIDECARS"
    );
    // Kubelets 1.31: auto would say classic; the environment says native.
    let (_, documents) = constraint_pair(&native);
    assert_eq!(
        documents[0]["spec"]["parameters"]["istio"]["nativeSidecars"],
        true
    );

    let hold = facts("istio-hold.yaml");
    let revision = &hold.istio.as_ref().unwrap().revisions[0];
    assert!(revision.hold.value && revision.hold_forced.value);
    assert_eq!(revision.drain.as_ref().unwrap().value, "20s");
    assert_eq!(revision.envoy_drain.as_ref().unwrap().value, "30s");
    let (_, documents) = constraint_pair(&hold);
    let istio = &documents[0]["spec"]["parameters"]["istio"];
    assert_eq!(istio["holdApplicationUntilProxyStarts"], true);
    assert_eq!(istio["holdForced"], true);
    assert_eq!(istio["terminationDrainDuration"], "20s");
    assert_eq!(istio["drainDuration"], "30s");
    // Unset, it is not written: Istio's 45s is the parameter's default.
    let (_, documents) = constraint_pair(&native);
    assert!(
        documents[0]["spec"]["parameters"]["istio"]
            .get("drainDuration")
            .is_none()
    );
}

#[test]
fn revisions_configured_differently_get_constraints_matched_to_their_namespaces() {
    let facts = facts("istio-two-revisions.yaml");
    let revisions = &facts.istio.as_ref().unwrap().revisions;
    assert_eq!(
        revisions
            .iter()
            .map(|one| one.name.as_str())
            .collect::<Vec<_>>(),
        ["canary", "default"]
    );
    let (yaml, documents) = constraint_pair(&facts);
    let names: Vec<&str> = documents
        .iter()
        .map(|document| document["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "mesh-lifecycle-canary-errors",
            "mesh-lifecycle-canary-warnings",
            "mesh-lifecycle-default-errors",
            "mesh-lifecycle-default-warnings",
            "mesh-lifecycle-default-istio-injection-errors",
            "mesh-lifecycle-default-istio-injection-warnings",
        ]
    );
    let selector = |index: usize| documents[index]["spec"]["match"]["namespaceSelector"].clone();
    // As Istio's rev.namespace webhook of the canary revision selects.
    assert_eq!(
        selector(0),
        json!({"matchExpressions": [
            {"key": "istio.io/rev", "operator": "In", "values": ["canary"]},
            {"key": "istio-injection", "operator": "DoesNotExist"},
        ]})
    );
    assert_eq!(
        selector(2),
        json!({"matchExpressions": [
            {"key": "istio.io/rev", "operator": "NotIn", "values": ["canary"]},
        ]})
    );
    assert_eq!(
        selector(4),
        json!({"matchExpressions": [
            {"key": "istio-injection", "operator": "In", "values": ["enabled"]},
            {"key": "istio.io/rev", "operator": "In", "values": ["canary"]},
        ]})
    );
    // Each revision's own facts: canary holds, default does not.
    let hold = |index: usize| {
        documents[index]["spec"]["parameters"]["istio"]["holdApplicationUntilProxyStarts"].clone()
    };
    assert_eq!(
        (hold(0), hold(2), hold(4)),
        (json!(true), json!(false), json!(false))
    );
    assert!(
        comments(&yaml).contains("Istio revisions are configured differently"),
        "{yaml}"
    );
}

/// The selectors are evaluated as Gatekeeper and `meshlife check` evaluate them: every
/// namespace is under exactly one revision's constraints, the one that injects it.
#[test]
fn each_namespace_falls_under_the_revision_that_injects_it() {
    use meshlife::constraints::selectors::Selector;
    let facts = facts("istio-two-revisions.yaml");
    let (_, documents) = constraint_pair(&facts);
    let errors: Vec<&Value> = documents
        .iter()
        .filter(|document| document["spec"]["enforcementAction"] == "deny")
        .collect();
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    };
    for (namespace, injected_by) in [
        (
            labels(&[("istio.io/rev", "canary")]),
            "mesh-lifecycle-canary-errors",
        ),
        (
            labels(&[("istio.io/rev", "default")]),
            "mesh-lifecycle-default-errors",
        ),
        (
            labels(&[("istio-injection", "enabled")]),
            "mesh-lifecycle-default-errors",
        ),
        (labels(&[]), "mesh-lifecycle-default-errors"),
        (
            labels(&[("istio-injection", "enabled"), ("istio.io/rev", "canary")]),
            "mesh-lifecycle-default-istio-injection-errors",
        ),
    ] {
        let matching: Vec<&str> = errors
            .iter()
            .filter(|document| {
                let selector =
                    serde_json::from_value(document["spec"]["match"]["namespaceSelector"].clone())
                        .unwrap();
                Selector::new(selector, "namespaceSelector")
                    .unwrap()
                    .matches(&namespace)
            })
            .map(|document| document["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(matching, [injected_by], "{namespace:?}");
    }
}

#[test]
fn a_revision_tag_belongs_to_its_revision_and_a_label_no_webhook_serves_is_said() {
    let facts = facts("istio-revision-tag.yaml");
    let istio = facts.istio.as_ref().unwrap();
    assert_eq!(istio.revisions.len(), 1);
    assert_eq!(istio.revisions[0].name, "canary");
    assert_eq!(istio.revisions[0].tags, ["prod"]);
    // shop is labelled istio.io/rev=prod, which the tag's webhook serves: nothing to add.
    assert!(istio.injected_namespaces.is_empty(), "{istio:?}");
    assert!(
        facts.notes.iter().any(|note| note.contains(
            "no injector webhook of this cluster \
             selects"
        ) && note.contains("legacy")
            && !note.contains("shop")),
        "{:?}",
        facts.notes
    );
}

#[test]
fn namespaces_injected_by_default_are_listed_with_the_webhook_that_injects_them() {
    let facts = facts("istio-injection-by-default.yaml");
    let istio = facts.istio.as_ref().unwrap();
    let injected: Vec<&str> = istio
        .injected_namespaces
        .iter()
        .map(|fact| fact.value.as_str())
        .collect();
    // Unlabelled namespaces but the excluded kube-node-lease; opted-out says disabled.
    assert_eq!(injected, ["istio-system", "tools"]);
    assert_eq!(
        istio.injected_namespaces[1].source.to_string(),
        "MutatingWebhookConfiguration istio-sidecar-injector webhooks[4].namespaceSelector \
         (revision default)"
    );
    let (_, documents) = constraint_pair(&facts);
    assert_eq!(
        documents[0]["spec"]["parameters"]["istio"]["injectedNamespaces"],
        json!(["istio-system", "tools"])
    );
}

#[test]
fn ambient_mode_is_read_from_ztunnel_and_the_namespace_labels() {
    let facts = facts("istio-ambient.yaml");
    let istio = facts.istio.as_ref().unwrap();
    assert_eq!(
        istio.ztunnel.as_ref().unwrap().to_string(),
        "DaemonSet istio-system/ztunnel"
    );
    let (_, documents) = constraint_pair(&facts);
    assert_eq!(
        documents[0]["spec"]["parameters"]["istio"]["ambientNamespaces"],
        json!(["mesh-ambient"])
    );
}

#[test]
fn linkerd_settings_are_read_from_linkerd_config() {
    let facts = facts("linkerd-cni-shutdown.yaml");
    assert_eq!(facts.kubernetes.value.minor, 30);
    let linkerd = facts.linkerd.as_ref().unwrap();
    assert_eq!(linkerd.version.value.to_string(), "edge-26.3.1");
    assert!(linkerd.cni.value && linkerd.shutdown_endpoint.value);
    assert_eq!(
        linkerd.shutdown_endpoint.source.to_string(),
        "ConfigMap linkerd/linkerd-config data.values proxy.enableShutdownEndpoint"
    );
    // The injector's webhook leaves legacy out (admission-webhooks: disabled): said.
    assert!(
        facts.notes.iter().any(|note| note
            .contains("MutatingWebhookConfiguration linkerd-proxy-injector-webhook-config's namespaceSelector leaves out: legacy")),
        "{:?}",
        facts.notes
    );
    // No parameter carries the wait before exit: it is said, not dropped.
    assert!(
        facts
            .notes
            .iter()
            .any(|note| note.contains("proxy.waitBeforeExitSeconds is 10")),
        "{:?}",
        facts.notes
    );
    let (yaml, documents) = constraint_pair(&facts);
    let parameters = &documents[0]["spec"]["parameters"]["linkerd"];
    assert_eq!(parameters["cni"], true);
    assert_eq!(parameters["shutdownEndpoint"], true);
    assert!(
        comments(&yaml).contains("proxy.waitBeforeExitSeconds is 10"),
        "{yaml}"
    );
}

#[test]
fn what_cannot_be_told_is_an_error_not_a_guess() {
    let classic = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/istio-1.26-classic.yaml"),
    )
    .unwrap();
    // The chart's default image tag.
    let latest = classic.replace("pilot:1.26.3", "pilot:latest");
    let error = facts_of(&snapshot_of("latest", &latest), &ClusterFactArgs::default()).unwrap_err();
    assert!(
        error.contains("docker.io/istio/pilot:latest") && error.contains("pass --istio VERSION"),
        "{error}"
    );
    // A flag states what the cluster cannot tell.
    let no_nodes: String = classic
        .split("\n---\n")
        .filter(|document| !document.contains("kind: Node"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let error = facts_of(
        &snapshot_of("no-nodes", &no_nodes),
        &ClusterFactArgs::default(),
    )
    .unwrap_err();
    assert!(error.contains("pass --kubernetes VERSION"), "{error}");

    let neither = facts_of(
        &snapshot_of(
            "empty",
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {nodeInfo: {kubeletVersion: v1.31.0}}\n",
        ),
        &ClusterFactArgs::default(),
    )
    .unwrap_err();
    assert!(neither.contains("no mesh found"), "{neither}");

    // The versions the errors ask for, given with --from-cluster, stand in for them.
    let flags = ClusterFactArgs {
        istio: Some(meshlife::constraints::facts::parse_istio_version("1.26").unwrap()),
        kubernetes: Some(meshlife::constraints::facts::parse_kubernetes_version("1.30").unwrap()),
        ..ClusterFactArgs::default()
    };
    let latest_without_nodes: String = latest
        .split("\n---\n")
        .filter(|document| !document.contains("kind: Node"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let stated = facts_of(&snapshot_of("stated", &latest_without_nodes), &flags).unwrap();
    let revision = &stated.istio.as_ref().unwrap().revisions[0];
    assert_eq!(revision.version.value.minor, 26);
    assert_eq!(revision.version.source.object, "--istio");
    assert_eq!(stated.kubernetes.value.minor, 30);
    // The rest is still read from the cluster.
    assert_eq!(
        revision.hold.source.to_string(),
        "ConfigMap istio-system/istio data.mesh defaultConfig.holdApplicationUntilProxyStarts"
    );
}

#[test]
fn the_revision_behind_istio_injection_is_the_one_its_webhooks_name() {
    // Only revision canary, with the tag default: istio-injection=enabled goes to canary.
    let facts = facts("istio-default-tag.yaml");
    let istio = facts.istio.as_ref().unwrap();
    assert_eq!(istio.revisions[0].name, "canary");
    assert_eq!(istio.revisions[0].tags, ["default"]);
    assert_eq!(istio.injection_label_revision.as_deref(), Some("canary"));
    // shop (istio-injection=enabled) is injected by the tag's webhook: nothing to add.
    assert!(istio.injected_namespaces.is_empty(), "{istio:?}");
}

#[test]
fn broken_cluster_data_is_an_error_naming_the_object_and_field() {
    let classic = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/istio-1.26-classic.yaml"),
    )
    .unwrap();
    let mesh_a_list = classic.replace(
        "  mesh: |-\n    defaultConfig:",
        "  mesh: |-\n    - a list\n    defaultConfig_:",
    );
    let error = facts_of(
        &snapshot_of("mesh", &mesh_a_list),
        &ClusterFactArgs::default(),
    );
    assert!(
        error
            .as_ref()
            .is_err_and(|error| error.contains("ConfigMap istio-system/istio: data.mesh is not")),
        "{error:?}"
    );
    let twice = format!(
        "{}\n---\n{}",
        classic,
        classic.replace("namespace: istio-system", "namespace: istio-other")
    );
    let error = facts_of(&snapshot_of("twice", &twice), &ClusterFactArgs::default()).unwrap_err();
    assert!(
        error.contains("both serve Istio revision default"),
        "{error}"
    );
    let linkerd = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/linkerd-2.19-classic.yaml"),
    )
    .unwrap();
    let bad_uid = linkerd.replace("      uid: 2102", "      uid: root");
    let error = facts_of(&snapshot_of("uid", &bad_uid), &ClusterFactArgs::default()).unwrap_err();
    assert!(
        error.contains("ConfigMap linkerd/linkerd-config: data.values proxy.uid is \"root\", not a whole number"),
        "{error}"
    );
}

#[test]
fn flags_given_with_the_cluster_win_and_are_said() {
    let facts = facts("istio-1.26-classic.yaml");
    let flags = ClusterFactArgs {
        istio_drain: Some("45s".into()),
        min_severity: Some(meshlife::constraints::facts::MinSeverity::Warning),
        ..ClusterFactArgs::default()
    };
    let sets = facts.fact_sets(&flags);
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].args.istio_drain.as_deref(), Some("45s"));
    assert_eq!(sets[0].args.istio.as_ref().unwrap().text, "1.26.3");
    assert!(
        sets[0]
            .notes
            .iter()
            .any(|note| note.contains("--istio-drain")),
        "{:?}",
        sets[0].notes
    );
    let (generated, _) = facts.generate_constraints(&base_args(flags)).unwrap();
    let yaml = generated.yaml;
    assert_eq!(
        generated.documents[0]["spec"]["parameters"]["minSeverity"], "error",
        "the pair's own minSeverity"
    );
    assert!(
        comments(&yaml).contains("Given by --istio-drain, in place of the cluster's value."),
        "{yaml}"
    );
}

#[test]
fn two_meshes_at_once_are_both_written_and_said() {
    let read = |name: &str| {
        std::fs::read_to_string(repo().join("host-test/tests/data/mesh-installs").join(name))
            .unwrap()
    };
    // One cluster: Istio's objects and Linkerd's (the second file's Nodes and Namespaces too).
    let both = format!(
        "{}\n---\n{}",
        read("istio-1.26-classic.yaml"),
        read("linkerd-2.19-classic.yaml")
    );
    let facts = facts_of(&snapshot_of("both", &both), &ClusterFactArgs::default()).unwrap();
    assert!(facts.istio.is_some() && facts.linkerd.is_some());
    assert!(
        facts
            .notes
            .iter()
            .any(|note| note.contains("both Istio and Linkerd run in this cluster")),
        "{:?}",
        facts.notes
    );
    let (_, documents) = constraint_pair(&facts);
    let parameters = &documents[0]["spec"]["parameters"];
    assert_eq!(parameters["istio"]["nativeSidecars"], false);
    assert_eq!(parameters["linkerd"]["proxyAwait"], true);
}

/// The notices of webhooks that see pods after a mesh's injector: one line each, starting so.
fn webhook_notices(facts: &ClusterFacts) -> Vec<String> {
    facts
        .notes
        .iter()
        .filter(|note| note.starts_with("native sidecars: "))
        .cloned()
        .collect()
}

/// A document of `name` from a fixture's stream.
fn document_named(text: &str, name: &str) -> String {
    text.split("\n---\n")
        .find(|document| document.contains(&format!("\n  name: {name}\n")))
        .unwrap_or_else(|| panic!("no document named {name}"))
        .to_string()
}

#[test]
fn webhooks_that_see_pods_after_a_native_injector_are_named_one_line_each() {
    let facts = facts("istio-1.27-native-webhooks.yaml");
    let notices = webhook_notices(&facts);
    // In the API server's order: datadog-webhook sorts before istio-sidecar-injector but is
    // called again after it (IfNeeded); pod-identity-webhook and vault-agent-injector-cfg sort
    // after it. Gatekeeper's (before it, Never) and service-defaults-webhook (Services only)
    // never see an injected pod.
    assert_eq!(
        notices,
        [
            "native sidecars: MutatingWebhookConfiguration datadog-webhook, webhook \
             datadog.webhook.agent.config: matches Pod CREATE and sorts before Istio's injector \
             (istio-sidecar-injector) but has reinvocationPolicy: IfNeeded, so it runs again \
             after it; the Datadog Cluster Agent's admission controller, whose releases built \
             on k8s.io/api older than 0.28 remove restartPolicy from native sidecars \
             (DataDog/datadog-agent#37837, DataDog/datadog-operator#1116), and the API server \
             then refuses every meshed pod it sees (\"may not be set for init containers without \
             restartPolicy=Always\"): run a release built on k8s.io/api 0.28 or later, or leave \
             the meshed pods out with its objectSelector or namespaceSelector",
            "native sidecars: MutatingWebhookConfiguration pod-identity-webhook, webhook \
             iam-for-pods.amazonaws.com: matches Pod CREATE and runs after Istio's injector \
             (istio-sidecar-injector); the EKS pod identity webhook, whose releases built on \
             k8s.io/api older than 0.28 remove restartPolicy from native sidecars \
             (aws/amazon-eks-pod-identity-webhook#208), and the API server then refuses every \
             meshed pod it sees (\"may not be set for init containers without restartPolicy=Always\"): \
             run a release built on k8s.io/api 0.28 or later, or leave the meshed pods out with \
             its objectSelector or namespaceSelector",
            "native sidecars: MutatingWebhookConfiguration vault-agent-injector-cfg, webhook \
             vault.hashicorp.com: matches Pod CREATE and runs after Istio's injector \
             (istio-sidecar-injector); it may change pods after the injector; if pods fail with \
             \"may not be set for init containers without restartPolicy=Always\", check it",
        ],
        "{:#?}",
        facts.notes
    );
    for quiet in ["gatekeeper", "service-defaults-webhook"] {
        assert!(
            !notices.iter().any(|notice| notice.contains(quiet)),
            "{quiet}: {notices:#?}"
        );
    }
    // The constraint file says them too, among what was read and no parameter carries.
    let (yaml, documents) = constraint_pair(&facts);
    assert!(
        comments(&yaml).contains(
            "MutatingWebhookConfiguration vault-agent-injector-cfg, webhook vault.hashicorp.com"
        ),
        "{yaml}"
    );
    // Notices, not facts: the parameters are the native install's.
    assert_eq!(
        documents[0]["spec"]["parameters"]["istio"]["nativeSidecars"],
        true
    );
}

#[test]
fn webhooks_after_an_injector_of_classic_sidecars_are_not_said() {
    let text = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/istio-1.27-native-webhooks.yaml"),
    )
    .unwrap();
    // Istio 1.27's auto on a kubelet 1.31: classic sidecars, nothing to remove.
    let classic_kubelet = text.replace("kubeletVersion: v1.33.2", "kubeletVersion: v1.31.4");
    let facts = facts_of(
        &snapshot_of("classic", &classic_kubelet),
        &ClusterFactArgs::default(),
    )
    .unwrap();
    assert!(webhook_notices(&facts).is_empty(), "{:#?}", facts.notes);
    // ENABLE_NATIVE_SIDECARS=true on istiod asks for native sidecars there all the same.
    let forced = classic_kubelet.replace(
        "        - {name: REVISION, value: default}\n",
        "        - {name: REVISION, value: default}\n        - {name: ENABLE_NATIVE_SIDECARS, value: \"true\"}\n",
    );
    let facts = facts_of(&snapshot_of("forced", &forced), &ClusterFactArgs::default()).unwrap();
    assert_eq!(webhook_notices(&facts).len(), 3, "{:#?}", facts.notes);
}

#[test]
fn webhooks_after_linkerds_native_injector_are_said_with_its_configuration() {
    let linkerd = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/linkerd-2.20-native.yaml"),
    )
    .unwrap();
    let webhooks = std::fs::read_to_string(
        repo().join("host-test/tests/data/mesh-installs/istio-1.27-native-webhooks.yaml"),
    )
    .unwrap();
    let cluster = format!(
        "{linkerd}\n---\n{}\n---\n{}",
        document_named(&webhooks, "datadog-webhook"),
        document_named(&webhooks, "vault-agent-injector-cfg")
    );
    let facts = facts_of(
        &snapshot_of("linkerd", &cluster),
        &ClusterFactArgs::default(),
    )
    .unwrap();
    let notices = webhook_notices(&facts);
    assert_eq!(notices.len(), 2, "{:#?}", facts.notes);
    assert!(
        notices[0].contains(
            "datadog-webhook, webhook datadog.webhook.agent.config: matches Pod CREATE and sorts \
             before Linkerd's injector (linkerd-proxy-injector-webhook-config) but has \
             reinvocationPolicy: IfNeeded"
        ),
        "{notices:#?}"
    );
    assert!(
        notices[1].contains(
            "vault-agent-injector-cfg, webhook vault.hashicorp.com: matches Pod CREATE and runs \
             after Linkerd's injector (linkerd-proxy-injector-webhook-config); it may change pods"
        ),
        "{notices:#?}"
    );
    // Linkerd 2.19 injects classic sidecars: nothing said.
    let classic = cluster.replace(
        "linkerdVersion: enterprise-2.20.0",
        "linkerdVersion: enterprise-2.19.0",
    );
    assert_ne!(classic, cluster, "the fixture names its version");
    let facts = facts_of(
        &snapshot_of("classic", &classic),
        &ClusterFactArgs::default(),
    )
    .unwrap();
    assert!(webhook_notices(&facts).is_empty(), "{:#?}", facts.notes);
}
