//! `meshlife check` on manifests as real projects ship them: without namespaces (rendered
//! charts), with the cluster's facts on the command line, and with several Namespace manifests
//! (kustomize bases and overlays checked together).

use crate::cli_support;

use cli_support::*;

/// An API server on a real socket, for the tests that read a cluster (here and in
/// `cli_diagnose.rs`, which uses it from here: a file is loaded as one module).
use crate::fake_api_server;

/// What `helm template` prints: no `metadata.namespace`, a `# Source:` comment.
const HELM_JOB: &str = r#"---
# Source: shop/templates/migrate.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: registry.example/migrate:1
"#;

#[test]
fn objects_without_a_namespace_land_in_the_default_namespace() {
    let workspace = Workspace::new();
    let outcome = workspace.run_with_stdin(
        &[
            "check",
            "-",
            "--istio",
            "1.26",
            "--istio-injected-namespaces",
            "default",
            "-o",
            "json",
        ],
        HELM_JOB,
    );
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(
        sorted(outcome.rules()),
        ["ML101", "ML301", "ML303"],
        "{outcome:?}"
    );
    assert_eq!(outcome.json()[0]["namespace"], "default", "{outcome:?}");

    // `--namespace` moves them, as `kubectl apply -n` would.
    let outcome = workspace.run_with_stdin(
        &[
            "check",
            "-",
            "-n",
            "shop",
            "--istio",
            "1.26",
            "--istio-injected-namespaces",
            "shop",
            "-o",
            "json",
        ],
        HELM_JOB,
    );
    assert_eq!(
        sorted(outcome.rules()),
        ["ML101", "ML301", "ML303"],
        "{outcome:?}"
    );
    assert_eq!(outcome.json()[0]["namespace"], "shop", "{outcome:?}");
}

#[test]
fn a_generated_constraint_matches_objects_without_a_namespace() {
    let workspace = Workspace::new();
    workspace.write_constraint(
        "constraint.yaml",
        &[
            "--kubernetes",
            "1.31",
            "--istio",
            "1.26",
            "--istio-injected-namespaces",
            "*",
        ],
    );
    workspace.write("rendered.yaml", HELM_JOB);
    let outcome = workspace.run(&[
        "check",
        "rendered.yaml",
        "--constraint",
        "constraint.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(
        sorted(outcome.rules()),
        ["ML101", "ML301", "ML303"],
        "{outcome:?}"
    );
}

#[test]
fn facts_on_the_command_line_judge_as_the_constraint_they_make() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &unlabelled_job("reports"));
    let flags = [
        "--kubernetes",
        "1.31",
        "--istio",
        "1.26",
        "--istio-injected-namespaces",
        "reports",
    ];
    let from_flags =
        workspace.run(&[&["check", "job.yaml", "-o", "json"][..], &flags[..]].concat());
    // One deny constraint, as the flags make for `check` (the default pair repeats ML401 and
    // ML403 errors as warnings).
    workspace.write_constraint(
        "constraint.yaml",
        &[&flags[..], &["--enforcement", "deny"]].concat(),
    );
    let from_file = workspace.run(&[
        "check",
        "job.yaml",
        "--constraint",
        "constraint.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(from_flags.code, 1, "{from_flags:?}");
    assert_eq!(
        from_flags.rules(),
        from_file.rules(),
        "{from_flags:?}\n{from_file:?}"
    );

    // Istio 1.27 on Kubernetes 1.33 injects native sidecars: the Job then completes.
    let native = workspace.run(&[
        "check",
        "job.yaml",
        "--kubernetes",
        "1.33",
        "--istio",
        "1.27",
        "--istio-injected-namespaces",
        "reports",
        "-o",
        "json",
    ]);
    assert!(!native.rules().contains(&"ML301".to_string()), "{native:?}");
}

#[test]
fn facts_and_a_constraint_file_together_are_refused() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &unlabelled_job("reports"));
    workspace.write_constraint(
        "constraint.yaml",
        &["--kubernetes", "1.31", "--istio", "1.26"],
    );
    let outcome = workspace.run(&[
        "check",
        "job.yaml",
        "--constraint",
        "constraint.yaml",
        "--istio",
        "1.26",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("--constraint and the cluster-fact flags"),
        "{outcome:?}"
    );
}

/// clap's `requires` said only "the following required arguments were not provided: --istio".
#[test]
fn mesh_flags_without_their_mesh_version_say_why_the_version_is_needed() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &unlabelled_job("reports"));
    for command in ["check", "constraint"] {
        let mut args = vec![command];
        if command == "check" {
            args.push("job.yaml");
        } else {
            // `constraint` needs the Kubernetes version and a mesh: here the other mesh.
            args.extend(["--kubernetes", "1.31", "--linkerd", "2.19"]);
        }
        args.extend(["--istio-injected-namespaces", "reports", "--istio-cni"]);
        let outcome = workspace.run(&args);
        assert_eq!(outcome.code, 2, "{command}: {outcome:?}");
        assert!(
            outcome.stderr.contains(
                "--istio-cni, --istio-injected-namespaces describe an Istio install, so they \
                 need --istio VERSION (`istioctl version`): what injection produces depends on \
                 the version"
            ),
            "{command}: {outcome:?}"
        );
        assert!(
            outcome
                .stderr
                .contains("add, for example, `--istio 1.26` (your version)"),
            "{command}: {outcome:?}"
        );
        assert!(
            !outcome.stderr.contains("required arguments"),
            "{command}: {outcome:?}"
        );
    }
    let outcome = workspace.run(&["check", "job.yaml", "--linkerd-cni"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("--linkerd-cni describes a Linkerd install, so it needs --linkerd VERSION"),
        "{outcome:?}"
    );
}

#[test]
fn facts_win_over_a_namespace_stub_and_the_run_says_so() {
    let workspace = Workspace::new();
    workspace.write(
        "app.yaml",
        &stream(&[
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: reports\n".to_string(),
            unlabelled_job("reports"),
        ]),
    );
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--istio",
        "1.26",
        "--istio-injected-namespaces",
        "*",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains(
            "the facts take every namespace as Istio-injected (istio.injectedNamespaces: \"*\"): \
             namespace reports is judged as injected, though its manifest in app.yaml (document 1) \
             does not turn injection on (no istio-injection or istio.io/rev label); a \"*\" gives \
             way only to the label istio-injection: disabled"
        ),
        "{outcome:?}"
    );
}

#[test]
fn objects_without_a_namespace_beside_a_namespace_manifest_get_a_hint() {
    let workspace = Workspace::new();
    let input = stream(&[
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio-injection: enabled\n"
            .to_string(),
        HELM_JOB.to_string(),
    ]);
    // kubectl's rule stays: the Job is in `default`, where nothing injects it.
    let outcome = workspace.run_with_stdin(&["check", "-"], &input);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "note: 1 object names no namespace and is judged in `default`, as `kubectl apply` \
             would put them, while the input defines Namespace shop: if they belong there, check \
             with `-n shop`"
        ),
        "{outcome:?}"
    );
    // Following the hint judges it where it belongs (under Istio 1.26's classic sidecars, where
    // the Job never completes).
    let outcome =
        workspace.run_with_stdin(&["check", "-", "-n", "shop", "--istio", "1.26"], &input);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(!outcome.stderr.contains("check with `-n"), "{outcome:?}");
}

#[test]
fn a_namespace_that_opts_out_beats_a_wildcard_in_the_facts() {
    let workspace = Workspace::new();
    for (mesh, opt_out, flags) in [
        (
            "istio",
            "  labels:\n    istio-injection: disabled\n",
            ["--istio", "1.26", "--istio-injected-namespaces", "*"],
        ),
        (
            "linkerd",
            "  annotations:\n    linkerd.io/inject: disabled\n",
            ["--linkerd", "2.19", "--linkerd-injected-namespaces", "*"],
        ),
    ] {
        workspace.write(
            "app.yaml",
            &stream(&[
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: reports\n{opt_out}"),
                unlabelled_job("reports"),
            ]),
        );
        let mut args = vec!["check", "app.yaml"];
        args.extend(flags);
        let outcome = workspace.run(&args);
        // The Job would get ML301 (an error) if "*" won: Istio's and Linkerd's injectors never
        // see this namespace.
        assert_eq!(outcome.code, 0, "{mesh}: {outcome:?}");
        assert!(!outcome.stdout.contains("ML301"), "{mesh}: {outcome:?}");
        let key = if mesh == "istio" {
            "istio-injection"
        } else {
            "linkerd.io/inject"
        };
        assert!(
            outcome
                .stdout
                .contains(&format!("reports has {key}: disabled"))
                || outcome
                    .stderr
                    .contains(&format!("reports has {key}: disabled")),
            "{mesh}: the not-meshed summary names the opt-out: {outcome:?}"
        );
        assert!(
            !outcome.stderr.contains("the facts win"),
            "{mesh}: {outcome:?}"
        );
    }
}

#[test]
fn overlays_each_take_their_own_namespace_definition_and_the_conflict_is_reported() {
    let workspace = Workspace::new();
    // A kustomize layout: the base's Namespace is a stub, the prod overlay turns injection on.
    workspace.write("base/namespace.yaml", &namespace("reports", ""));
    workspace.write("base/job.yaml", &unlabelled_job("reports"));
    workspace.write(
        "overlays/prod/namespace.yaml",
        &namespace("reports", "istio-injection: enabled"),
    );
    workspace.write("overlays/prod/jobs/job.yaml", &unlabelled_job("reports"));
    let outcome = workspace.run(&["check", "base", "overlays", "-o", "json", "--istio", "1.26"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let files: Vec<String> = outcome
        .json()
        .iter()
        .filter(|finding| finding["rule"] == "ML301")
        .map(|finding| finding["file"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(files, ["overlays/prod/jobs/job.yaml"], "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("Namespace reports is defined differently in base/namespace.yaml"),
        "{outcome:?}"
    );
}

/// A Job whose namespace alone can mesh it (no injection label of its own).
fn unlabelled_job(namespace: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: nightly
  namespace: {namespace}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: task
        image: registry.example/task:1
"#
    )
}

#[test]
fn jobs_inside_analysis_templates_are_reviewed_under_the_generated_constraint() {
    let workspace = Workspace::new();
    let template = r#"apiVersion: argoproj.io/v1alpha1
kind: ClusterAnalysisTemplate
metadata:
  name: smoke-test
spec:
  metrics:
  - name: smoke
    provider:
      job:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: smoke
                image: registry.example/smoke:1
"#;
    workspace.write("analysis.yaml", template);
    workspace.write_constraint(
        "constraint.yaml",
        &[
            "--kubernetes",
            "1.31",
            "--istio",
            "1.26",
            "--istio-injected-namespaces",
            "*",
        ],
    );
    let outcome = workspace.run(&[
        "check",
        "analysis.yaml",
        "--constraint",
        "constraint.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let paths: Vec<String> = outcome
        .json()
        .iter()
        .filter(|finding| finding["rule"] == "ML301")
        .map(|finding| finding["path"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        paths,
        ["spec.metrics[0].provider.job.spec.template.spec"],
        "{outcome:?}"
    );
}

/// A kubeconfig whose API server is a loopback port nothing listens on.
fn unreachable_kubeconfig(workspace: &Workspace) -> std::path::PathBuf {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    workspace.write(
        "unreachable.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: \
             https://127.0.0.1:{port}\ncontexts:\n- name: staging\n  context: {{cluster: gone, \
             user: me}}\ncurrent-context: staging\nusers:\n- name: me\n  user: {{token: t}}\n"
        ),
    )
}

#[test]
fn an_unreachable_api_server_is_said_with_its_context_and_address() {
    let workspace = Workspace::new();
    let kubeconfig = unreachable_kubeconfig(&workspace);
    workspace.write("job.yaml", &unlabelled_job("reports"));
    let kubeconfig = kubeconfig.to_str().unwrap();
    for args in [
        vec!["constraint", "--kubeconfig", kubeconfig],
        vec!["check", "job.yaml", "--kubeconfig", kubeconfig],
        vec!["explain", "job.yaml", "--kubeconfig", kubeconfig],
    ] {
        let outcome = workspace.run(&args);
        assert_eq!(outcome.code, 2, "{args:?}: {outcome:?}");
        assert!(
            outcome
                .stderr
                .contains("context staging (https://127.0.0.1:")
                && outcome.stderr.contains("the API server cannot be reached"),
            "{args:?}: {outcome:?}"
        );
        // Nothing judged under guessed facts, nothing written.
        assert!(outcome.stdout.is_empty(), "{args:?}: {outcome:?}");
    }
}

#[test]
fn a_missing_kubeconfig_or_context_is_named() {
    let workspace = Workspace::new();
    let kubeconfig = unreachable_kubeconfig(&workspace);
    let outcome = workspace.run(&["constraint", "--kubeconfig", "nowhere.kubeconfig"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("--kubeconfig nowhere.kubeconfig"),
        "{outcome:?}"
    );
    let outcome = workspace.run(&[
        "constraint",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--context",
        "production",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("context production"), "{outcome:?}");
}

#[test]
fn constraint_without_facts_names_the_flags_and_from_cluster() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&["constraint"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("--kubernetes <VERSION>")
            && outcome.stderr.contains("--from-cluster"),
        "{outcome:?}"
    );
}

/// The printed ClusterRole grants exactly what the reader asks for: read verbs only, on the
/// resources the reader lists or gets.
#[test]
fn the_facts_reader_cluster_role_is_what_the_reader_reads() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&[
        "install",
        "facts-reader",
        "--group",
        "platform:admins",
        "--service-account",
        "ci/deployer",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&outcome.stdout)
        .map(|document| <serde_json::Value as serde::Deserialize>::deserialize(document).unwrap())
        .collect();
    assert_eq!(documents[0]["kind"], "ClusterRole");
    let rules = documents[0]["rules"].as_array().unwrap();
    let granted: Vec<(String, String, Vec<String>)> = rules
        .iter()
        .map(|rule| {
            (
                rule["apiGroups"][0].as_str().unwrap().to_string(),
                rule["resources"][0].as_str().unwrap().to_string(),
                serde_json::from_value(rule["verbs"].clone()).unwrap(),
            )
        })
        .collect();
    let asked: Vec<(String, String, Vec<String>)> = meshlife::cluster::reader::PERMISSIONS
        .iter()
        .map(|permission| {
            (
                permission.group.to_string(),
                permission.resource.to_string(),
                permission
                    .verbs
                    .iter()
                    .map(|verb| verb.to_string())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(granted, asked);
    assert!(
        granted
            .iter()
            .flat_map(|(_, _, verbs)| verbs)
            .all(|verb| verb == "get" || verb == "list")
    );
    assert!(
        granted.iter().all(|(_, resource, _)| resource != "secrets"),
        "{granted:?}"
    );
    assert_eq!(documents[1]["kind"], "ClusterRoleBinding");
    assert_eq!(documents[1]["subjects"][0]["name"], "platform:admins");
    assert_eq!(documents[1]["subjects"][1]["namespace"], "ci");
    let bad = workspace.run(&["install", "facts-reader", "--service-account", "deployer"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("NAMESPACE/NAME"), "{bad:?}");
}

/// `meshlife constraint --kubeconfig` and `check --kubeconfig` against an API server on a real
/// socket: a native Istio install and the webhooks beside it. Each webhook that sees pods after
/// the injector is said on one line, naming its configuration and webhook; none fails the run.
#[test]
fn reading_a_cluster_names_the_webhooks_after_a_native_injector_without_failing() {
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/mesh-installs/istio-1.27-native-webhooks.yaml"
    ))
    .unwrap();
    let server = fake_api_server::FakeApiServer::serve(&fixture, "v1.33.2");
    let workspace = Workspace::new();
    let kubeconfig = server.kubeconfig(workspace.path());
    let kubeconfig = kubeconfig.to_str().unwrap();
    let notices = |outcome: &Outcome| -> Vec<String> {
        outcome
            .stderr
            .lines()
            .filter_map(|line| line.strip_prefix("meshlife: note: native sidecars: "))
            .map(str::to_string)
            .collect()
    };

    let outcome = workspace.run(&[
        "constraint",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "constraint.yaml",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let said = notices(&outcome);
    assert_eq!(said.len(), 3, "{outcome:?}");
    assert!(
        said[0].starts_with(
            "MutatingWebhookConfiguration datadog-webhook, webhook datadog.webhook.agent.config: \
             matches Pod CREATE and sorts before Istio's injector (istio-sidecar-injector) but \
             has reinvocationPolicy: IfNeeded, so it runs again after it; the Datadog Cluster \
             Agent's admission controller"
        ),
        "{said:#?}"
    );
    assert!(
        said[1].starts_with(
            "MutatingWebhookConfiguration pod-identity-webhook, webhook \
             iam-for-pods.amazonaws.com: matches Pod CREATE and runs after Istio's injector \
             (istio-sidecar-injector); the EKS pod identity webhook"
        ),
        "{said:#?}"
    );
    assert_eq!(
        said[2],
        "MutatingWebhookConfiguration vault-agent-injector-cfg, webhook vault.hashicorp.com: \
         matches Pod CREATE and runs after Istio's injector (istio-sidecar-injector); it may \
         change pods after the injector; if pods fail with \"may not be set for init containers \
         without restartPolicy=Always\", check it"
    );
    assert!(
        !outcome
            .stderr
            .contains("gatekeeper-mutating-webhook-configuration")
            && !outcome.stderr.contains("service-defaults-webhook"),
        "{outcome:?}"
    );
    // The facts were read over the socket, the webhooks among them.
    let requests = server.requests();
    assert!(
        requests.iter().any(|request| request
            .starts_with("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")),
        "{requests:#?}"
    );
    let written = std::fs::read_to_string(workspace.path().join("constraint.yaml")).unwrap();
    assert!(written.contains("nativeSidecars: true"), "{written}");

    // `check` says the same, and a workload without findings still passes: notices never fail
    // a run.
    workspace.write("web.yaml", &plain_deployment("web", "tools"));
    let outcome = workspace.run(&["check", "web.yaml", "--kubeconfig", kubeconfig]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert_eq!(notices(&outcome).len(), 3, "{outcome:?}");
}
