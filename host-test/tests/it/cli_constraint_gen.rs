//! `meshlife constraint`: the written constraint is one `meshlife check --constraint` accepts,
//! its parameters are exactly what the flags imply (versions derive the native-sidecar
//! defaults), its comments explain the facts, and bad flags are clear errors (exit 2).
//!
//! Command lines are written as one string and split at whitespace (`--flag=` gives an empty
//! value).

use crate::cli_support;

use std::path::PathBuf;

use cli_support::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// The repository's `examples/` folder.
fn examples() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .display()
        .to_string()
}

fn example(relative: &str) -> String {
    format!("{}/{relative}", examples())
}

/// Runs `meshlife constraint FLAGS` in a fresh folder; the YAML is on stdout.
fn generate(flags: &str) -> Outcome {
    let mut args = vec!["constraint"];
    args.extend(flags.split_whitespace());
    Workspace::new().run(&args)
}

/// The generated constraint, parsed; panics (with the output) unless it was written. One
/// constraint: `--enforcement deny` unless the flags choose an action (without one, `meshlife
/// constraint` writes the pair, tested by `the_default_is_the_pair_the_cluster_files_use`).
fn constraint(flags: &str) -> Value {
    let flags = if flags.contains("--enforcement") {
        flags.to_string()
    } else {
        format!("{flags} --enforcement deny")
    };
    let outcome = generate(&flags);
    assert_eq!(outcome.code, 0, "{flags}: {outcome:?}");
    serde_yaml_ng::from_str(&outcome.stdout)
        .unwrap_or_else(|error| panic!("not YAML ({error}):\n{}", outcome.stdout))
}

fn parameters(flags: &str) -> Value {
    constraint(flags)["spec"]["parameters"].clone()
}

/// Writes the constraint with `-o`, then runs `meshlife check --constraint it -o json PATHS`.
fn check_under(flags: &str, paths: &[&str]) -> Outcome {
    let workspace = Workspace::new();
    let mut args = vec!["constraint", "-o", "generated.yaml"];
    args.extend(flags.split_whitespace());
    let written = workspace.run(&args);
    assert_eq!(written.code, 0, "{flags}: {written:?}");
    assert_eq!(written.stdout, "", "-o FILE writes nothing to stdout");
    let mut check = vec!["check", "--constraint", "generated.yaml", "-o", "json"];
    check.extend_from_slice(paths);
    workspace.run(&check)
}

/// The rules `check` reports for an example under the constraint FLAGS make, with the example's
/// classic-sidecar opt-out taken off, so that the versions decide the sidecar mode.
fn rules_under(flags: &str, file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(example(file)).unwrap();
    let workspace = Workspace::new();
    let path = workspace.write("example.yaml", &cli_support::without_classic_opt_out(&text));
    check_under(flags, &[path.to_str().unwrap()]).rules()
}

#[test]
fn every_generated_constraint_is_accepted_by_check_on_the_examples() {
    let cases = [
        ("--kubernetes 1.31 --istio 1.26", "mesh-lifecycle"),
        (
            "--kubernetes 1.33 --istio 1.27 --enforcement warn",
            "mesh-lifecycle",
        ),
        (
            "--kubernetes 1.31 --istio 1.26.3 --istio-cni --istio-hold --istio-hold-forced \
             --istio-drain 1m30s --istio-injected-namespaces shop,* \
             --istio-ambient-namespaces edge \
             --istio-proxy-uid 1000650000 --name prod-mesh --enforcement dryrun \
             --min-severity warning",
            "prod-mesh",
        ),
        (
            "--kubernetes v1.30.4-eks-1 --linkerd stable-2.14.10 --linkerd-await disabled \
             --linkerd-cni --linkerd-shutdown-endpoint --linkerd-injected-namespaces batch \
             --linkerd-proxy-uid 2103 --min-available 2 --exclude-rules ML404,job-no-deadline \
             --exempt-namespaces team-* --exempt-images registry.local/tools/* \
             --exit-markers kill-sidecar --name linkerd.prod",
            "linkerd.prod",
        ),
        (
            "--kubernetes 1.28 --istio 1.22 --istio-native-sidecars true --linkerd 2.20 \
             --rules ML104,startup-no-hold --exclude-namespaces=",
            "mesh-lifecycle",
        ),
    ];
    for (flags, name) in cases {
        let outcome = check_under(flags, &[&examples()]);
        // 0 or 1: the constraint was used; 2 would mean it (or an object) was refused.
        assert!(
            outcome.code == 0 || outcome.code == 1,
            "{flags}: {outcome:?}"
        );
        assert!(
            !outcome.rules().contains(&"ML000".to_string()),
            "{flags}: {outcome:?}"
        );
        // Findings were really produced, and under the generated constraint.
        let findings = outcome.json();
        assert!(!findings.is_empty(), "{flags}: {outcome:?}");
        let names = if flags.contains("--enforcement") {
            vec![name.to_string()]
        } else {
            vec![format!("{name}-errors"), format!("{name}-warnings")]
        };
        assert!(
            findings
                .iter()
                .all(|finding| names.iter().any(|name| finding["constraint"] == *name)),
            "{flags}: {outcome:?}"
        );
    }
}

#[test]
fn the_document_is_a_mesh_lifecycle_constraint() {
    let document = constraint("--kubernetes 1.31 --istio 1.26 --name prod-mesh --enforcement warn");
    assert_eq!(document["apiVersion"], "constraints.gatekeeper.sh/v1beta1");
    assert_eq!(document["kind"], "MeshLifecycle");
    assert_eq!(document["metadata"], json!({"name": "prod-mesh"}));
    assert_eq!(document["spec"]["enforcementAction"], "warn");
    assert_eq!(document["spec"]["match"]["scope"], "*");
    assert_eq!(
        document["spec"]["match"]["kinds"],
        json!([
            {"apiGroups": [""], "kinds": ["Pod", "ReplicationController"]},
            {
                "apiGroups": ["apps"],
                "kinds": ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]
            },
            {"apiGroups": ["batch"], "kinds": ["Job", "CronJob"]},
            {
                "apiGroups": ["argoproj.io"],
                "kinds": ["Rollout", "AnalysisTemplate", "ClusterAnalysisTemplate"]
            },
            {
                "apiGroups": ["kubeflow.org"],
                "kinds": ["Experiment", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"]
            },
            {"apiGroups": ["jobset.x-k8s.io"], "kinds": ["JobSet"]},
            {"apiGroups": ["batch.volcano.sh"], "kinds": ["Job"]},
            {"apiGroups": ["networking.k8s.io"], "kinds": ["NetworkPolicy"]},
        ])
    );
    let keys: Vec<&String> = document["spec"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["enforcementAction", "match", "parameters"]);
}

#[test]
fn parameters_are_exactly_what_the_flags_imply() {
    assert_eq!(
        parameters(
            "--kubernetes 1.31 --istio 1.26 --istio-cni --istio-hold --istio-drain 20s \
             --istio-drain-duration 30s \
             --istio-injected-namespaces shop,payments --istio-ambient-namespaces edge \
             --istio-proxy-uid 1000 --min-severity warning --min-available 2"
        ),
        json!({
            "kubernetesMinorVersion": 31,
            "istio": {
                "nativeSidecars": false,
                "holdApplicationUntilProxyStarts": true,
                "holdForced": false,
                "cni": true,
                "terminationDrainDuration": "20s",
                "drainDuration": "30s",
                "injectedNamespaces": ["shop", "payments"],
                "ambientNamespaces": ["edge"],
                "proxyUID": 1000,
            },
            "minSeverity": "warning",
            "minAvailable": 2,
            "providerFailure": "ignore",
        })
    );
    assert_eq!(
        parameters(
            "--kubernetes 1.32 --linkerd 2.19 --linkerd-await false --linkerd-cni \
             --linkerd-shutdown-endpoint --linkerd-injected-namespaces * --linkerd-proxy-uid 2103 \
             --rules ML301 --rules job-no-deadline --exclude-rules ml404 \
             --exempt-namespaces team-*,sandbox --exempt-images registry.local/tools/* \
             --exit-markers kill-sidecar"
        ),
        json!({
            "kubernetesMinorVersion": 32,
            "linkerd": {
                "nativeSidecars": false,
                "proxyAwait": false,
                "cni": true,
                "shutdownEndpoint": true,
                "injectedNamespaces": ["*"],
                "proxyUID": 2103,
            },
            "rules": ["ML301", "job-no-deadline"],
            "excludeRules": ["ml404"],
            "exemptNamespaces": ["team-*", "sandbox"],
            "exemptImages": ["registry.local/tools/*"],
            "exitMarkers": ["kill-sidecar"],
            "providerFailure": "ignore",
        })
    );
    // Only the versions: both meshes' lifecycle facts are written at their defaults.
    assert_eq!(
        parameters("--kubernetes 1.33 --istio 1.26 --linkerd 2.19"),
        json!({
            "kubernetesMinorVersion": 33,
            "istio": {
                "nativeSidecars": false,
                "holdApplicationUntilProxyStarts": false,
                "holdForced": false,
                "cni": false,
                "terminationDrainDuration": "5s",
            },
            "linkerd": {
                "nativeSidecars": false,
                "proxyAwait": true,
                "cni": false,
                "shutdownEndpoint": false,
            },
            "providerFailure": "ignore",
        })
    );
}

/// A provider outage never blocks by default: a deny constraint ignores it, a warn or dryrun
/// one reports it; `--provider-failure` chooses otherwise, and the comment says what it does.
#[test]
fn provider_failure_follows_the_enforcement_unless_given() {
    let mode = |flags: &str| parameters(flags)["providerFailure"].clone();
    assert_eq!(mode("--kubernetes 1.31 --istio 1.26"), "ignore");
    assert_eq!(
        mode("--kubernetes 1.31 --istio 1.26 --enforcement warn"),
        "report"
    );
    assert_eq!(
        mode("--kubernetes 1.31 --istio 1.26 --enforcement dryrun"),
        "report"
    );
    assert_eq!(
        mode("--kubernetes 1.31 --istio 1.26 --provider-failure report"),
        "report"
    );
    assert_eq!(
        mode("--kubernetes 1.31 --istio 1.26 --enforcement warn --provider-failure ignore"),
        "ignore"
    );
    let text = unwrapped(&generate("--kubernetes 1.31 --istio 1.26").stdout);
    assert!(text.contains("fail open"), "{text}");
    let text =
        unwrapped(&generate("--kubernetes 1.31 --istio 1.26 --provider-failure report").stdout);
    assert!(text.contains("fail closed"), "{text}");
    let outcome = generate("--kubernetes 1.31 --istio 1.26 --provider-failure deny");
    assert_eq!(outcome.code, 2, "{outcome:?}");
}

#[test]
fn istio_native_sidecars_follow_the_istio_and_kubernetes_versions() {
    let native = |flags: &str| parameters(flags)["istio"]["nativeSidecars"].clone();
    // ENABLE_NATIVE_SIDECARS=false up to 1.26; auto from 1.27 needs every kubelet >= 1.33.
    assert_eq!(native("--kubernetes 1.31 --istio 1.26"), false);
    assert_eq!(native("--kubernetes 1.33 --istio 1.26"), false);
    assert_eq!(native("--kubernetes 1.31 --istio 1.27"), false);
    assert_eq!(native("--kubernetes 1.33 --istio 1.27"), true);
    assert_eq!(native("--kubernetes v1.34.1 --istio 1.28.1"), true);
    // The flag overrides the derivation both ways.
    assert_eq!(
        native("--kubernetes 1.31 --istio 1.26 --istio-native-sidecars true"),
        true
    );
    assert_eq!(
        native("--kubernetes 1.33 --istio 1.27 --istio-native-sidecars false"),
        false
    );
}

#[test]
fn linkerd_defaults_follow_the_linkerd_version() {
    let linkerd = |flags: &str| {
        let parameters = parameters(&format!("--kubernetes 1.31 {flags}"));
        (
            parameters["linkerd"]["nativeSidecars"].clone(),
            parameters["linkerd"]["proxyAwait"].clone(),
        )
    };
    assert_eq!(linkerd("--linkerd 2.19"), (json!(false), json!(true)));
    assert_eq!(linkerd("--linkerd 2.20"), (json!(true), json!(true)));
    assert_eq!(
        linkerd("--linkerd stable-2.14.10"),
        (json!(false), json!(true))
    );
    assert_eq!(linkerd("--linkerd edge-26.5.2"), (json!(true), json!(true)));
    assert_eq!(
        linkerd("--linkerd edge-25.10.2"),
        (json!(false), json!(true))
    );
    // No proxy-await before 2.11.
    assert_eq!(linkerd("--linkerd 2.10.2"), (json!(false), json!(false)));
    assert_eq!(
        linkerd("--linkerd 2.20 --linkerd-native-sidecars false --linkerd-await disabled"),
        (json!(false), json!(false))
    );
}

#[test]
fn versions_change_what_check_reports() {
    let no_hold = "istio/deployment-no-hold.yaml";
    // Classic on 1.26, and on 1.27 while a kubelet is older than 1.33: the startup race.
    let classic = rules_under("--kubernetes 1.31 --istio 1.26", no_hold);
    assert!(classic.contains(&"ML101".into()), "{classic:?}");
    let classic = rules_under("--kubernetes 1.31 --istio 1.27", no_hold);
    assert!(classic.contains(&"ML101".into()), "{classic:?}");
    // Native on 1.27 once every kubelet is 1.33: no race.
    let native = rules_under("--kubernetes 1.33 --istio 1.27", no_hold);
    assert!(!native.contains(&"ML101".into()), "{native:?}");
    // Native requested on Kubernetes 1.28: ML104.
    let old = rules_under(
        "--kubernetes 1.28 --istio 1.26 --istio-native-sidecars true",
        no_hold,
    );
    assert!(old.contains(&"ML104".into()), "{old:?}");

    // A Linkerd Job that does not stop its proxy: classic keeps it running, native does not.
    let job = "linkerd/job-no-shutdown.yaml";
    let classic = rules_under("--kubernetes 1.31 --linkerd 2.19", job);
    assert!(classic.contains(&"ML301".into()), "{classic:?}");
    let native = rules_under("--kubernetes 1.31 --linkerd 2.20", job);
    assert!(!native.contains(&"ML301".into()), "{native:?}");
    let old = rules_under("--kubernetes 1.28 --linkerd 2.20", job);
    assert!(old.contains(&"ML104".into()), "{old:?}");
}

/// Comment blocks joined into one line each, so phrases can be searched across line wraps.
fn unwrapped(text: &str) -> String {
    let mut joined = String::new();
    let mut in_comment = false;
    for line in text.lines() {
        match line.trim_start().strip_prefix("# ") {
            Some(comment) => {
                joined.push_str(if in_comment { " " } else { "\n# " });
                joined.push_str(comment);
                in_comment = true;
            }
            None => {
                joined.push('\n');
                joined.push_str(line);
                in_comment = false;
            }
        }
    }
    joined
}

#[test]
fn comments_explain_each_fact() {
    let classic = generate("--kubernetes 1.31 --istio 1.26 --istio-cni");
    let text = unwrapped(&classic.stdout);
    for expected in [
        "# istio 1.26: istiod injects classic sidecars (ENABLE_NATIVE_SIDECARS=false before 1.27), \
         so ML101 (startup-no-hold), ML301 (job-sidecar-never-exits), ML201",
        "# kubernetes 1.31 (lowest kubelet): native sidecars run",
        "# istio-cni: traffic is captured before the init containers run",
        "# meshConfig.defaultConfig.terminationDrainDuration 5s (the default): ML401",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // Every line of the parameters, in each constraint of the pair, has a comment right above
    // it (or is one).
    let documents: Vec<&str> = classic.stdout.split("\n---\n").collect();
    assert_eq!(documents.len(), 2, "{classic:?}");
    for document in documents {
        let lines: Vec<&str> = document.lines().collect();
        let start = lines
            .iter()
            .position(|line| line.trim() == "parameters:")
            .unwrap();
        for index in start + 1..lines.len() {
            if !lines[index].trim_start().starts_with('#') {
                assert!(
                    lines[index - 1].trim_start().starts_with('#'),
                    "no comment above {:?}:\n{}",
                    lines[index],
                    classic.stdout
                );
            }
        }
    }

    let old = generate("--kubernetes 1.28 --istio 1.27 --istio-native-sidecars true");
    let text = unwrapped(&old.stdout);
    assert!(
        text.contains("# kubernetes 1.28 (lowest kubelet): native sidecars unsupported"),
        "{old:?}"
    );
    assert!(text.contains("any native request is ML104"), "{old:?}");
    assert!(
        text.contains("but kubernetes 1.28 cannot run them"),
        "{old:?}"
    );
    assert!(
        old.stderr.contains("warning") && old.stderr.contains("ML104"),
        "{old:?}"
    );

    let auto = generate("--kubernetes 1.31 --istio 1.27 --linkerd 2.20");
    let text = unwrapped(&auto.stdout);
    assert!(
        text.contains(
            "ENABLE_NATIVE_SIDECARS=auto injects native sidecars only when every kubelet is 1.33 \
             or later, and the lowest here is 1.31"
        ),
        "{auto:?}"
    );
    assert!(
        text.contains("# linkerd 2.20: native sidecars by default"),
        "{auto:?}"
    );
    // Lines stay within 100 columns.
    assert!(
        auto.stdout.lines().all(|line| line.chars().count() <= 100),
        "{auto:?}"
    );
}

#[test]
fn excluded_namespaces_default_to_the_system_and_mesh_namespaces() {
    let excluded = |flags: &str| constraint(flags)["spec"]["match"]["excludedNamespaces"].clone();
    assert_eq!(
        excluded("--kubernetes 1.31 --istio 1.26"),
        json!([
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "istio-system",
            "istio-ingress",
            "istio-egress",
            "gatekeeper-system",
        ])
    );
    assert_eq!(
        excluded("--kubernetes 1.31 --linkerd 2.19 --linkerd-cni"),
        json!([
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "linkerd",
            "linkerd-viz",
            "linkerd-jaeger",
            "linkerd-multicluster",
            "linkerd-cni",
            "gatekeeper-system",
        ])
    );
    assert_eq!(
        excluded("--kubernetes 1.31 --istio 1.26 --exclude-namespaces kube-*,legacy"),
        json!(["kube-*", "legacy"])
    );
    assert_eq!(
        excluded("--kubernetes 1.31 --istio 1.26 --exclude-namespaces="),
        Value::Null
    );
}

#[test]
fn excluded_namespaces_are_not_checked() {
    let file = example("istio/deployment-no-hold.yaml");
    let flags = "--kubernetes 1.31 --istio 1.26";
    assert!(
        check_under(flags, &[&file])
            .rules()
            .contains(&"ML101".into())
    );
    let outcome = check_under(&format!("{flags} --exclude-namespaces shop"), &[&file]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert_eq!(outcome.json(), Vec::<Value>::new());
}

#[test]
fn warn_and_dryrun_never_fail_check() {
    for action in ["warn", "dryrun"] {
        let outcome = check_under(
            &format!("--kubernetes 1.31 --istio 1.26 --enforcement {action}"),
            &[&examples()],
        );
        assert_eq!(outcome.code, 0, "{action}: {outcome:?}");
        assert!(
            outcome
                .json()
                .iter()
                .all(|finding| finding["enforcementAction"] == action),
            "{outcome:?}"
        );
    }
}

#[test]
fn bad_versions_are_clear_errors() {
    for (flags, flag, message) in [
        (
            "--kubernetes 1.x --istio 1.26",
            "--kubernetes",
            "not a Kubernetes version",
        ),
        (
            "--kubernetes 1.31 --istio 1.x",
            "--istio",
            "not an Istio version",
        ),
        (
            "--kubernetes 1.31 --linkerd 1.x",
            "--linkerd",
            "not a Linkerd version",
        ),
    ] {
        let outcome = generate(flags);
        assert_eq!(outcome.code, 2, "{flags}: {outcome:?}");
        assert!(outcome.stderr.contains("'1.x'"), "{outcome:?}");
        assert!(outcome.stderr.contains(flag), "{outcome:?}");
        assert!(outcome.stderr.contains(message), "{outcome:?}");
        assert_eq!(outcome.stdout, "");
    }
    let outcome = generate("--kubernetes 2.31 --istio 1.26");
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("Kubernetes 2.x does not exist"),
        "{outcome:?}"
    );
}

#[test]
fn other_bad_flags_are_errors_naming_the_flag() {
    let base = "--kubernetes 1.31 --istio 1.26";
    let cases = [
        (format!("{base} --istio-drain 5x"), "--istio-drain"),
        (
            format!("{base} --istio-drain-duration 45"),
            "--istio-drain-duration",
        ),
        (format!("{base} --rules ML999"), "--rules"),
        (
            format!("{base} --istio-injected-namespaces Shop"),
            "--istio-injected-namespaces",
        ),
        (format!("{base} --name Prod_Mesh"), "--name"),
        (format!("{base} --enforcement block"), "--enforcement"),
        (
            format!("{base} --istio-native-sidecars auto"),
            "--istio-native-sidecars",
        ),
        (format!("{base} --istio-proxy-uid=-1"), "--istio-proxy-uid"),
        (format!("{base} --unknown-flag"), "--unknown-flag"),
        // A mesh's settings need that mesh.
        (format!("{base} --linkerd-cni"), "--linkerd"),
        // A mesh is required, and so is the Kubernetes version.
        ("--kubernetes 1.31".to_string(), "--istio"),
        ("--istio 1.26".to_string(), "--kubernetes"),
    ];
    for (flags, flag) in cases {
        let outcome = generate(&flags);
        assert_eq!(outcome.code, 2, "{flags}: {outcome:?}");
        assert!(outcome.stderr.contains(flag), "{flags}: {outcome:?}");
        assert_eq!(outcome.stdout, "", "{flags}");
    }
}

#[test]
fn a_misspelt_rule_gets_the_nearest_one_suggested() {
    let outcome = generate("--kubernetes 1.31 --istio 1.26 --rules ML31");
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "--rules: \"ML31\" is not a rule id or name; did you mean ML301 (job-sidecar-never-exits)?"
        ),
        "{outcome:?}"
    );
    // As `meshlife rules ML31` suggests.
    let workspace = Workspace::new();
    let outcome = workspace.run(&["rules", "ML31"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("did you mean ML301 (job-sidecar-never-exits)?"),
        "{outcome:?}"
    );
}

#[test]
fn output_file_and_stdout() {
    let workspace = Workspace::new();
    let args = ["constraint", "--kubernetes", "1.31", "--istio", "1.26"];
    let to_stdout = workspace.run(&args);
    assert_eq!(to_stdout.code, 0, "{to_stdout:?}");
    let with = |extra: &[&'static str]| {
        let mut full = args.to_vec();
        full.extend_from_slice(extra);
        workspace.run(&full)
    };
    let to_file = with(&["-o", "c.yaml"]);
    assert_eq!(to_file.code, 0, "{to_file:?}");
    assert_eq!(to_file.stdout, "");
    let written = std::fs::read_to_string(workspace.path().join("c.yaml")).unwrap();
    assert_eq!(written, to_stdout.stdout);
    // `-o -` is stdout.
    assert_eq!(with(&["-o", "-"]).stdout, to_stdout.stdout);
    // A folder that does not exist is an error, and nothing is written.
    let outcome = with(&["-o", "no/such/folder/c.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("cannot write"), "{outcome:?}");
}

#[test]
fn deny_without_min_severity_warns_about_info_findings() {
    let deny = generate("--kubernetes 1.31 --istio 1.26 --enforcement deny");
    assert!(deny.stderr.contains("--min-severity"), "{deny:?}");
    let quiet =
        generate("--kubernetes 1.31 --istio 1.26 --enforcement deny --min-severity warning");
    assert_eq!(quiet.stderr, "", "{quiet:?}");
    // The default pair denies errors only: nothing to warn about.
    let pair = generate("--kubernetes 1.31 --istio 1.26");
    assert_eq!(pair.stderr, "", "{pair:?}");
}

/// Every generated document, parsed.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).expect("a YAML document"))
        .collect()
}

/// Without `--enforcement`, the pair the cluster files use: one deny constraint for the error
/// findings with a provider outage admitting, one warn constraint for the rest with the outage
/// reported. It wrote one deny constraint at minSeverity info, which blocks on info findings.
#[test]
fn the_default_is_the_pair_the_cluster_files_use() {
    let outcome = generate("--kubernetes 1.31 --istio 1.26 --exclude-rules ML404 --name prod");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let pair = documents(&outcome.stdout);
    assert_eq!(pair.len(), 2, "{outcome:?}");
    let (errors, warnings) = (&pair[0], &pair[1]);
    assert_eq!(errors["metadata"]["name"], "prod-errors");
    assert_eq!(errors["spec"]["enforcementAction"], "deny");
    assert_eq!(errors["spec"]["parameters"]["minSeverity"], "error");
    assert_eq!(
        errors["spec"]["parameters"]["excludeRules"],
        json!(["ML404"])
    );
    assert_eq!(errors["spec"]["parameters"]["providerFailure"], "ignore");
    assert_eq!(warnings["metadata"]["name"], "prod-warnings");
    assert_eq!(warnings["spec"]["enforcementAction"], "warn");
    assert!(warnings["spec"]["parameters"].get("minSeverity").is_none());
    assert_eq!(
        warnings["spec"]["parameters"]["excludeRules"],
        json!(["ML404", "ML104", "ML301", "ML302", "ML304", "ML405"])
    );
    assert_eq!(warnings["spec"]["parameters"]["providerFailure"], "report");
    // The same facts and the same match in both.
    assert_eq!(errors["spec"]["match"], warnings["spec"]["match"]);
    assert_eq!(
        errors["spec"]["parameters"]["istio"],
        warnings["spec"]["parameters"]["istio"]
    );
    // Fail closed on request: the deny constraint reports an outage; warnings always do.
    let closed =
        documents(&generate("--kubernetes 1.31 --istio 1.26 --provider-failure report").stdout);
    assert_eq!(closed[0]["spec"]["parameters"]["providerFailure"], "report");
    assert_eq!(closed[1]["spec"]["parameters"]["providerFailure"], "report");

    // Under the pair, an info finding never fails `check` (it would under a deny constraint at
    // minSeverity info), and an error finding does.
    let info_only = check_under(
        "--kubernetes 1.31 --istio 1.26",
        &[&example("istio/job-quitquitquit-no-deadline.yaml")],
    );
    let rules = info_only.rules();
    assert!(rules.contains(&"ML303".to_string()), "{info_only:?}");
    assert_eq!(info_only.code, 0, "{info_only:?}");
    let job = check_under(
        "--kubernetes 1.31 --istio 1.26",
        &[&example("istio/job-classic-no-exit.yaml")],
    );
    assert_eq!(job.code, 1, "{job:?}");
    assert!(
        job.json().iter().any(|finding| finding["rule"] == "ML301"
            && finding["constraint"] == "mesh-lifecycle-errors"),
        "{job:?}"
    );
}

/// `meshlife check` with fact flags judges under the constraint `meshlife constraint
/// --enforcement deny` writes for those flags: the same findings, messages, constraint name and
/// exit code as `check --constraint` on the written file. (The flags build that constraint in
/// memory; this holds them to the file a cluster is given.)
#[test]
fn fact_flags_judge_as_the_written_constraint_does() {
    let cases = [
        ("--kubernetes 1.31 --istio 1.26", false),
        ("--kubernetes 1.33 --istio 1.27", false),
        (
            "--kubernetes 1.31 --istio 1.26.3 --istio-cni --istio-hold --istio-hold-forced \
             --istio-drain 1m30s --istio-injected-namespaces shop,* \
             --istio-ambient-namespaces edge --istio-proxy-uid 1000650000 \
             --min-severity warning",
            false,
        ),
        (
            "--kubernetes v1.30.4-eks-1 --linkerd stable-2.14.10 --linkerd-await disabled \
             --linkerd-cni --linkerd-shutdown-endpoint --linkerd-injected-namespaces batch \
             --linkerd-proxy-uid 2103 --min-available 2 --exclude-rules ML404,job-no-deadline \
             --exempt-namespaces team-* --exempt-images registry.local/tools/* \
             --exit-markers kill-sidecar",
            false,
        ),
        (
            "--kubernetes 1.28 --istio 1.22 --istio-native-sidecars true --linkerd 2.20 \
             --rules ML104,startup-no-hold",
            false,
        ),
        ("--kubernetes 1.34 --istio 1.28 --linkerd 2.19", true),
    ];
    for (flags, include_control_planes) in cases {
        let workspace = Workspace::new();
        let mut written = vec![
            "constraint",
            "--enforcement",
            "deny",
            "-o",
            "generated.yaml",
        ];
        if include_control_planes {
            // What --include-control-planes leaves excluded.
            written.extend([
                "--exclude-namespaces",
                "kube-system,kube-public,kube-node-lease,gatekeeper-system",
            ]);
        }
        written.extend(flags.split_whitespace());
        let written = workspace.run(&written);
        assert_eq!(written.code, 0, "{flags}: {written:?}");

        let examples = examples();
        let mut from_file = vec!["check", "--constraint", "generated.yaml", "-o", "json"];
        let mut from_flags = vec!["check", "-o", "json"];
        from_flags.extend(flags.split_whitespace());
        if include_control_planes {
            from_file.push("--include-control-planes");
            from_flags.push("--include-control-planes");
        }
        from_file.push(&examples);
        from_flags.push(&examples);
        let from_file = workspace.run(&from_file);
        let from_flags = workspace.run(&from_flags);
        assert!(
            !from_file.json().is_empty(),
            "{flags}: nothing to compare: {from_file:?}"
        );
        assert_eq!(
            (from_flags.code, &from_flags.stdout),
            (from_file.code, &from_file.stdout),
            "{flags}: the flags and the written constraint disagree"
        );
    }
}
