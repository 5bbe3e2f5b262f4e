//! `--constraint`: parameters, Gatekeeper match semantics, enforcementAction, and errors.

use crate::cli_support;

use cli_support::*;

const HEADER: &str = "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata:\n  name: mesh-lifecycle\n";

fn with_constraint(spec: &str) -> Workspace {
    let workspace = Workspace::new();
    workspace.write("constraint.yaml", &format!("{HEADER}spec:\n{spec}"));
    workspace.write(
        "app.yaml",
        &stream(&[
            meshed_deployment("web", "shop"),
            meshed_job("migrate", "batch"),
            plain_deployment("quiet", "shop"),
        ]),
    );
    workspace
}

fn check(workspace: &Workspace) -> Outcome {
    workspace.run(&[
        "check",
        "app.yaml",
        "--constraint",
        "constraint.yaml",
        "-o",
        "json",
    ])
}

#[test]
fn parameters_reach_the_policy() {
    // With hold on by default, classic pods are held: ML101 disappears everywhere.
    let workspace =
        with_constraint("  parameters:\n    istio:\n      holdApplicationUntilProxyStarts: true\n");
    let outcome = check(&workspace);
    assert!(
        !outcome.rules().contains(&"ML101".to_string()),
        "{outcome:?}"
    );
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
}

#[test]
fn a_typo_in_a_parameter_is_a_constraint_error_naming_file_and_field() {
    let workspace =
        with_constraint("  parameters:\n    istio:\n      holdApplicationUntilProxyStart: true\n");
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("constraint constraint.yaml"),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains("holdApplicationUntilProxyStart"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("spec.parameters"), "{outcome:?}");
    // Nothing is checked under a constraint that says something else than it means.
    assert_eq!(outcome.stdout, "");
}

#[test]
fn a_wrongly_typed_parameter_is_a_constraint_error() {
    let workspace = with_constraint("  parameters:\n    kubernetesMinorVersion: \"33\"\n");
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("kubernetesMinorVersion"),
        "{outcome:?}"
    );
}

#[test]
fn parameters_nested_deeper_than_the_module_reads_fail_the_constraint_check() {
    // 100 deep: YAML the CLI reads, under a key the module reads, deeper than its 64 levels.
    let deep = format!("{}1{}", "{a: ".repeat(100), "}".repeat(100));
    let workspace = with_constraint(&format!("  parameters:\n    istio: {deep}\n"));
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("constraint constraint.yaml")
            && outcome.stderr.contains("spec.parameters"),
        "names the constraint and the field: {outcome:?}"
    );
    assert_eq!(outcome.stdout, "", "nothing is checked under it");
}

#[test]
fn invalid_selectors_and_namespace_patterns_exit_2_naming_the_field() {
    let cases = [
        (
            "  match:\n    labelSelector: {matchLabels: {'bad key!!': x}}\n",
            "spec.match.labelSelector.matchLabels.bad key!!",
        ),
        (
            "  match:\n    namespaceSelector: {matchExpressions: [{key: env, operator: In, values: ['has space']}]}\n",
            "spec.match.namespaceSelector.matchExpressions[0].values[0]",
        ),
        (
            "  match:\n    namespaces: [Shop]\n",
            "spec.match.namespaces[0]",
        ),
    ];
    for (spec, field) in cases {
        let outcome = check(&with_constraint(spec));
        assert_eq!(outcome.code, 2, "{spec}: {outcome:?}");
        assert!(outcome.stderr.contains(field), "{spec}: {outcome:?}");
        assert_eq!(outcome.stdout, "", "{spec}");
    }
}

#[test]
fn malformed_constraints_exit_2_naming_the_field() {
    let cases = [
        ("  enforcementAction: block\n", "spec.enforcementAction"),
        (
            "  match:\n    excludeNamespaces: [kube-system]\n",
            "spec.match.excludeNamespaces",
        ),
        ("  match:\n    kinds: Deployment\n", "spec.match.kinds"),
        (
            "  match:\n    labelSelector:\n      matchExpressions: [{key: a, operator: Has}]\n",
            "operator",
        ),
        ("  parameters: [istio]\n", "spec.parameters"),
    ];
    for (spec, field) in cases {
        let outcome = check(&with_constraint(spec));
        assert_eq!(outcome.code, 2, "{spec}: {outcome:?}");
        assert!(
            outcome.stderr.contains("constraint.yaml: document 1"),
            "{spec}: {outcome:?}"
        );
        assert!(
            outcome.stderr.contains(field),
            "{spec}: expected {field} in {outcome:?}"
        );
    }
}

#[test]
fn constraints_of_another_kind_or_version_are_rejected() {
    let workspace = Workspace::new();
    workspace.write("app.yaml", &plain_deployment("a", "b"));
    workspace.write("other.yaml", "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sRequiredLabels\nmetadata: {name: x}\n");
    let outcome = workspace.run(&["check", "app.yaml", "--constraint", "other.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("field `kind`"), "{outcome:?}");

    workspace.write(
        "old.yaml",
        "apiVersion: constraints.gatekeeper.sh/v9\nkind: MeshLifecycle\nmetadata: {name: x}\n",
    );
    let outcome = workspace.run(&["check", "app.yaml", "--constraint", "old.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("field `apiVersion`"), "{outcome:?}");

    let outcome = workspace.run(&["check", "app.yaml", "--constraint", "missing.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("constraint missing.yaml: cannot read"),
        "{outcome:?}"
    );

    workspace.write("broken.yaml", &format!("{HEADER}spec: [\n"));
    let outcome = workspace.run(&["check", "app.yaml", "--constraint", "broken.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("constraint broken.yaml: document 1"),
        "{outcome:?}"
    );
}

#[test]
fn a_template_beside_the_constraint_is_skipped() {
    let workspace = with_constraint("  enforcementAction: deny\n");
    let template = "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata: {name: meshlifecycle}\nspec: {}\n";
    let constraint = std::fs::read_to_string(workspace.path().join("constraint.yaml")).unwrap();
    workspace.write("constraint.yaml", &format!("{template}---\n{constraint}"));
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 1, "{outcome:?}");
}

#[test]
fn warn_and_dryrun_findings_are_reported_but_do_not_fail() {
    for action in ["warn", "dryrun"] {
        let workspace = with_constraint(&format!("  enforcementAction: {action}\n"));
        let outcome = check(&workspace);
        assert_eq!(outcome.code, 0, "{action}: {outcome:?}");
        let findings = outcome.json();
        assert!(
            findings.iter().any(|f| f["rule"] == "ML301"),
            "{action}: {outcome:?}"
        );
        assert!(
            findings
                .iter()
                .all(|f| f["enforcementAction"] == action && f["constraint"] == "mesh-lifecycle")
        );
    }
}

#[test]
fn excluded_namespaces_with_a_prefix_glob() {
    let workspace = with_constraint("  match:\n    excludedNamespaces: [bat*]\n");
    let outcome = check(&workspace);
    let names: Vec<String> = outcome
        .json()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.iter().all(|name| name == "web"), "{outcome:?}");
    assert_eq!(outcome.code, 1);
}

#[test]
fn namespaces_and_kinds() {
    let workspace = with_constraint(
        "  match:\n    namespaces: [batch]\n    kinds:\n    - apiGroups: [batch]\n      kinds: [Job]\n",
    );
    let outcome = check(&workspace);
    assert!(
        outcome.json().iter().all(|f| f["name"] == "migrate"),
        "{outcome:?}"
    );
    assert!(outcome.rules().contains(&"ML301".to_string()));

    let workspace =
        with_constraint("  match:\n    kinds:\n    - apiGroups: [\"*\"]\n      kinds: [CronJob]\n");
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.json().is_empty());
}

#[test]
fn label_selector_and_name() {
    let workspace =
        with_constraint("  match:\n    labelSelector:\n      matchLabels: {tier: web}\n");
    workspace.write(
        "app.yaml",
        &stream(&[
            meshed_deployment("web", "shop").replacen(
                "  namespace: shop\n",
                "  namespace: shop\n  labels: {tier: web}\n",
                1,
            ),
            meshed_job("migrate", "batch"),
        ]),
    );
    let outcome = check(&workspace);
    assert!(
        outcome.json().iter().all(|f| f["name"] == "web"),
        "{outcome:?}"
    );
    assert_eq!(outcome.code, 1);

    let workspace = with_constraint("  match:\n    name: mig*\n");
    let outcome = check(&workspace);
    assert!(
        outcome.json().iter().all(|f| f["name"] == "migrate"),
        "{outcome:?}"
    );
}

#[test]
fn namespace_selector_reads_namespaces_from_the_input() {
    let workspace = with_constraint(
        "  match:\n    namespaceSelector:\n      matchExpressions: [{key: team, operator: In, values: [payments]}]\n",
    );
    workspace.write(
        "app.yaml",
        &stream(&[
            namespace("shop", "team: payments"),
            namespace("batch", "team: data"),
            meshed_deployment("web", "shop"),
            meshed_job("migrate", "batch"),
        ]),
    );
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.json().iter().all(|f| f["name"] == "web"),
        "{outcome:?}"
    );

    // Without the Namespace its labels are unknown: an error, as in Gatekeeper, not a guess.
    workspace.write("app.yaml", &meshed_deployment("web", "unknown"));
    let outcome = check(&workspace);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("app.yaml: document 1"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("namespaceSelector"), "{outcome:?}");
}

#[test]
fn several_constraints_each_apply_where_they_match() {
    let workspace =
        with_constraint("  enforcementAction: warn\n  match:\n    namespaces: [shop]\n");
    workspace.write(
        "strict.yaml",
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: strict-batch}\nspec:\n  match:\n    namespaces: [batch]\n",
    );
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--constraint",
        "constraint.yaml",
        "--constraint",
        "strict.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings
            .iter()
            .filter(|f| f["name"] == "web")
            .all(|f| f["constraint"] == "mesh-lifecycle" && f["enforcementAction"] == "warn")
    );
    assert!(
        findings
            .iter()
            .filter(|f| f["name"] == "migrate")
            .all(|f| f["constraint"] == "strict-batch" && f["enforcementAction"] == "deny")
    );
}

#[test]
fn two_constraints_with_the_same_name_are_refused_naming_both_files() {
    let workspace = with_constraint("  enforcementAction: deny\n");
    workspace.write(
        "other.yaml",
        &format!("{HEADER}spec:\n  enforcementAction: warn\n"),
    );
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--constraint",
        "constraint.yaml",
        "--constraint",
        "other.yaml",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stdout.is_empty(), "nothing is checked: {outcome:?}");
    let error = outcome.stderr.lines().next().unwrap_or_default();
    assert!(error.contains("constraint other.yaml"), "{outcome:?}");
    assert!(error.contains("field `metadata.name`"), "{outcome:?}");
    assert!(error.contains("`mesh-lifecycle`"), "{outcome:?}");
    assert!(error.contains("constraint.yaml"), "{outcome:?}");

    // The same file given twice, and two documents of one file.
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--constraint",
        "constraint.yaml",
        "--constraint",
        "constraint.yaml",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    workspace.write(
        "both.yaml",
        &format!("{HEADER}spec: {{}}\n---\n{HEADER}spec: {{}}\n"),
    );
    let outcome = workspace.run(&["check", "app.yaml", "--constraint", "both.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("constraint both.yaml: document 2")
            && outcome.stderr.contains("both.yaml (document 1)"),
        "{outcome:?}"
    );

    // Different names load side by side.
    workspace.write(
        "other.yaml",
        &format!(
            "{}spec:\n  enforcementAction: warn\n",
            HEADER.replace("name: mesh-lifecycle", "name: mesh-warnings")
        ),
    );
    let outcome = workspace.run(&[
        "check",
        "app.yaml",
        "--constraint",
        "constraint.yaml",
        "--constraint",
        "other.yaml",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
}
