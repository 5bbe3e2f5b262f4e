//! "0 findings" must never stand for "not judged": workloads judged as not meshed are counted
//! with the reason, `--require-mesh` makes them errors, misplaced mesh keys get a hint.

use crate::cli_support;

use cli_support::*;

/// A Deployment whose pod template asks for a sidecar with the annotation only.
const ANNOTATION_ONLY: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        sidecar.istio.io/inject: "true"
        sidecar.istio.io/nativeSidecar: "false"
    spec:
      containers:
      - name: web
        image: registry.example/web:1
"#;

#[test]
fn an_inject_annotation_alone_does_not_mesh_and_the_run_says_why() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", ANNOTATION_ONLY);
    let outcome = workspace.run(&["check", "web.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .contains("0 errors, 0 warnings, 0 info findings; 1 workload judged as not meshed"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("only the annotation sidecar.istio.io/inject: \"true\"")
            && outcome
                .stderr
                .contains("web.yaml: document 1: Deployment shop/web"),
        "{outcome:?}"
    );

    // In an injected namespace the webhook is called, and then the annotation counts.
    workspace.write(
        "injected.yaml",
        &stream(&[
            namespace("shop", "istio-injection: enabled"),
            ANNOTATION_ONLY.to_string(),
        ]),
    );
    let outcome = workspace.run(&["check", "injected.yaml", "-o", "json"]);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    assert!(!outcome.stdout.contains("not meshed"), "{outcome:?}");
}

#[test]
fn workloads_whose_namespace_is_unknown_are_counted_with_what_to_add() {
    let workspace = Workspace::new();
    workspace.write(
        "app.yaml",
        &stream(&[
            unlabelled_deployment("web", "shop"),
            plain_deployment("api", "shop"),
        ]),
    );
    let outcome = workspace.run(&["check", "app.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("2 workloads judged as not meshed"),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains(
            "2 objects judged as not meshed, so no mesh rule applies: no mesh signal, and whether \
             namespace shop injects is unknown: its Namespace is not in the input and not in the facts"
        ),
        "{outcome:?}"
    );
    // With the facts stated there is nothing unknown left.
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--istio",
        "1.26",
        "--istio-injected-namespaces",
        "shop",
    ]);
    assert!(!outcome.stdout.contains("not meshed"), "{outcome:?}");
}

/// `check` on Linkerd's own install reported ML101 on linkerd-identity, which starts without a
/// proxy on purpose. The meshes' namespaces are not judged, as the generated constraints leave
/// them out, and the run says so; `--include-control-planes` judges them.
#[test]
fn mesh_control_planes_are_not_judged_and_the_run_says_so() {
    let workspace = Workspace::new();
    workspace.write(
        "install.yaml",
        &stream(&[
            meshed_deployment("identity", "linkerd"),
            meshed_deployment("istiod", "istio-system"),
            meshed_deployment("web", "shop"),
        ]),
    );
    for extra in [
        &[][..],
        &["--istio", "1.26", "--istio-injected-namespaces", "*"][..],
    ] {
        let outcome =
            workspace.run(&[&["check", "install.yaml", "-o", "json"][..], extra].concat());
        let judged: Vec<String> = outcome
            .json()
            .iter()
            .map(|finding| finding["namespace"].as_str().unwrap().to_string())
            .collect();
        assert!(!judged.is_empty(), "{extra:?}: {outcome:?}");
        assert!(
            judged.iter().all(|ns| ns == "shop"),
            "{extra:?}: {outcome:?}"
        );
        assert!(
            outcome.stderr.contains(
                "meshlife: note: 2 objects not judged, in a mesh's control-plane namespace: their \
                 lifecycle is the mesh's own"
            ),
            "{extra:?}: {outcome:?}"
        );
        assert!(
            outcome.stderr.contains("Deployment linkerd/identity"),
            "{extra:?}: {outcome:?}"
        );
    }
    let text = workspace.run(&["check", "install.yaml"]);
    assert!(
        text.stdout.contains("2 workloads in mesh control planes"),
        "{text:?}"
    );
    for extra in [
        &[][..],
        &["--istio", "1.26", "--istio-injected-namespaces", "*"][..],
    ] {
        let outcome = workspace.run(
            &[
                &[
                    "check",
                    "install.yaml",
                    "-o",
                    "json",
                    "--include-control-planes",
                ][..],
                extra,
            ]
            .concat(),
        );
        let namespaces: std::collections::BTreeSet<String> = outcome
            .json()
            .iter()
            .map(|finding| finding["namespace"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            namespaces,
            ["istio-system", "linkerd", "shop"].map(String::from).into(),
            "{extra:?}: {outcome:?}"
        );
    }
}

#[test]
fn require_mesh_makes_an_unmeshed_workload_an_error() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", ANNOTATION_ONLY);
    let outcome = workspace.run(&["check", "web.yaml", "--require-mesh", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert_eq!(findings.len(), 1, "{outcome:?}");
    assert_eq!(findings[0]["rule"], "require-mesh");
    assert_eq!(findings[0]["severity"], "error");
    assert_eq!(findings[0]["path"], "spec.template.spec");

    // A meshed workload passes it.
    workspace.write("meshed.yaml", &meshed_deployment("web", "shop"));
    let outcome = workspace.run(&["check", "meshed.yaml", "--require-mesh", "-o", "json"]);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
}

#[test]
fn a_mesh_key_on_the_controller_gets_the_hint_a_misplaced_exemption_gets() {
    let workspace = Workspace::new();
    let misplaced = plain_deployment("web", "shop").replacen(
        "  namespace: shop\n",
        "  namespace: shop\n  labels:\n    sidecar.istio.io/inject: \"true\"\n",
        1,
    );
    workspace.write("web.yaml", &misplaced);
    let outcome = workspace.run(&["check", "web.yaml"]);
    assert!(
        outcome.stderr.contains(
            "web.yaml: document 1: Deployment shop/web: metadata.labels[\"sidecar.istio.io/inject\"] is on the \
             controller's metadata, where the injector does not read it: move it to the pod template"
        ),
        "{outcome:?}"
    );
}

#[test]
fn every_pod_spec_of_an_object_is_asked_once_whatever_its_findings_and_constraints() {
    let workspace = Workspace::new();
    // Metric 0 is meshed (findings), metric 1 is not: the second must still be counted.
    workspace.write(
        "analysis.yaml",
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: smoke
  namespace: shop
spec:
  metrics:
  - name: meshed
    provider:
      job:
        spec:
          template:
            metadata:
              labels: {sidecar.istio.io/inject: "true"}
            spec:
              restartPolicy: Never
              containers: [{name: smoke, image: registry.example/smoke:1}]
  - name: plain
    provider:
      job:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: smoke, image: registry.example/smoke:1}]
"#,
    );
    workspace.write_constraint(
        "deny.yaml",
        &["--kubernetes", "1.31", "--istio", "1.26", "--name", "deny"],
    );
    workspace.write_constraint(
        "warn.yaml",
        &[
            "--kubernetes",
            "1.31",
            "--istio",
            "1.26",
            "--name",
            "warn",
            "--enforcement",
            "warn",
        ],
    );
    let outcome = workspace.run(&[
        "check",
        "analysis.yaml",
        "--constraint",
        "deny.yaml",
        "--constraint",
        "warn.yaml",
        "--require-mesh",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let required: Vec<(String, String)> = outcome
        .json()
        .iter()
        .filter(|finding| finding["rule"] == "require-mesh")
        .map(|finding| {
            (
                finding["path"].as_str().unwrap_or_default().to_string(),
                finding["enforcementAction"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        required,
        [(
            "spec.metrics[1].provider.job.spec.template.spec".to_string(),
            "deny".to_string()
        )],
        "{outcome:?}"
    );
    assert_eq!(
        outcome.stderr.matches("judged as not meshed").count(),
        1,
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("AnalysisTemplate shop/smoke at spec.metrics[1]"),
        "{outcome:?}"
    );

    // Under a warn constraint alone, --require-mesh still fails the run: it is the user's word.
    let outcome = workspace.run(&[
        "check",
        "analysis.yaml",
        "--constraint",
        "warn.yaml",
        "--require-mesh",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
}

/// A run given no facts judges as a cluster on today's releases, where both meshes inject
/// native sidecars, and says so in one line; a rule flag alone keeps that cluster; a run given
/// facts or a constraint judges its own cluster and says nothing.
#[test]
fn a_run_without_facts_says_which_cluster_it_assumed() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", ANNOTATION_ONLY);
    let assumed = |outcome: &Outcome| {
        outcome
            .stderr
            .lines()
            .filter(|line| line.starts_with("meshlife: note: no cluster versions given"))
            .count()
    };
    let bare = workspace.run(&["check", "web.yaml"]);
    assert_eq!(assumed(&bare), 1, "{bare:?}");
    assert!(
        bare.stderr.contains(
            "judged as a cluster on today's releases, Kubernetes 1.37 with Istio 1.31 and \
             Linkerd 2.20, both injecting native sidecars by default"
        ),
        "{bare:?}"
    );
    let rules_only = workspace.run(&["check", "web.yaml", "--rules", "ML101"]);
    assert_eq!(assumed(&rules_only), 1, "{rules_only:?}");

    // The verdicts follow: a Job in an injected namespace that never stops its proxy completes
    // under today's native sidecars, and hangs under Istio 1.26's classic ones.
    workspace.write(
        "job.yaml",
        &stream(&[
            namespace("reports", "istio-injection: enabled"),
            meshed_job("nightly", "reports").replace(
                "        sidecar.istio.io/nativeSidecar: \"false\"\n",
                "        proxy.istio.io/config: '{}'\n",
            ),
        ]),
    );
    let today = workspace.run(&["check", "job.yaml", "-o", "json"]);
    assert!(!today.rules().contains(&"ML301".to_string()), "{today:?}");
    let rules_only = workspace.run(&["check", "job.yaml", "-o", "json", "--exempt-images", "x"]);
    assert!(
        !rules_only.rules().contains(&"ML301".to_string()),
        "{rules_only:?}"
    );
    let classic = workspace.run(&["check", "job.yaml", "-o", "json", "--istio", "1.26"]);
    assert!(
        classic.rules().contains(&"ML301".to_string()),
        "{classic:?}"
    );

    let with_facts = workspace.run(&[
        "check",
        "web.yaml",
        "--kubernetes",
        "1.37",
        "--istio",
        "1.31",
    ]);
    assert_eq!(assumed(&with_facts), 0, "{with_facts:?}");
    workspace.write(
        "constraint.yaml",
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata:\n  \
         name: c\nspec:\n  parameters:\n    kubernetesMinorVersion: 37\n",
    );
    let with_constraint = workspace.run(&["check", "web.yaml", "--constraint", "constraint.yaml"]);
    assert_eq!(assumed(&with_constraint), 0, "{with_constraint:?}");
}

/// A NetworkPolicy restricting ingress to the app's port only, in namespace `shop`.
const APP_PORT_ONLY_POLICY: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web-ingress
  namespace: shop
spec:
  podSelector:
    matchLabels: {app: web}
  policyTypes: [Ingress]
  ingress:
  - ports:
    - port: 8080
"#;

#[test]
fn a_network_policy_whose_namespace_mode_is_unknown_is_said_apart_from_workloads() {
    let workspace = Workspace::new();
    workspace.write("policy.yaml", APP_PORT_ONLY_POLICY);
    let outcome = workspace.run(&["check", "policy.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains(
            "0 info findings; 1 NetworkPolicy whose namespace's mode is unknown (see the notes above)"
        ) && !outcome.stdout.contains("judged as not meshed"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("1 object not judged: NetworkPolicies in namespace \"shop\"")
            && outcome
                .stderr
                .contains("policy.yaml: document 1: NetworkPolicy shop/web-ingress"),
        "{outcome:?}"
    );
    let json = workspace.run(&["check", "policy.yaml", "-o", "json"]);
    assert_eq!(
        json.json_envelope()["notJudged"][0]["kind"],
        "network-policy-mode-unknown",
        "{json:?}"
    );

    // Once the facts say the namespace is ambient, it is judged: ML604 for HBONE (a rule
    // without `from` admits the kubelet's probes).
    let outcome = workspace.run(&[
        "check",
        "policy.yaml",
        "--istio",
        "1.31",
        "--istio-ambient-namespaces",
        "shop",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.rules(), ["ML604"], "{outcome:?}");
}
