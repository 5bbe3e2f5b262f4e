//! `.meshlife.yaml`, the repository config, as a new user meets it: written by `meshlife init`,
//! found from a subfolder, overridden by flags, and its mistakes named by file, line and the
//! nearest key.

use crate::cli_support;

use cli_support::*;

/// A repository (a folder holding `.git`) with one meshed Deployment (ML101, a warning) in
/// `repo/deploy/app/`.
fn repository() -> Workspace {
    let workspace = Workspace::new();
    std::fs::create_dir_all(workspace.path().join("repo/.git")).expect("a .git folder");
    workspace.write(
        "repo/deploy/app/web.yaml",
        &meshed_deployment("web", "shop"),
    );
    workspace
}

#[test]
fn the_config_is_found_from_a_subfolder_and_the_report_names_it() {
    let workspace = repository();
    let outcome = workspace.run(&["check", "repo/deploy/app"]);
    assert_eq!(outcome.code, 1, "a warning fails by default: {outcome:?}");
    assert!(!outcome.stdout.contains("Config:"), "{outcome:?}");

    workspace.write("repo/.meshlife.yaml", "failOn: error\n");
    let outcome = workspace.run(&["check", "repo/deploy/app"]);
    assert_eq!(
        outcome.code, 0,
        "failOn: error lets a warning pass: {outcome:?}"
    );
    assert!(
        outcome.stdout.starts_with("Config: repo/.meshlife.yaml\n"),
        "{outcome:?}"
    );
    let outcome = workspace.run(&["check", "repo/deploy/app/web.yaml", "-o", "json"]);
    assert_eq!(outcome.json_envelope()["config"], "repo/.meshlife.yaml");
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");

    // From inside the repository, stdin included.
    let inside = workspace.path().join("repo/deploy");
    let outcome = run_in(
        &inside,
        &["check", "-"],
        Some(&meshed_deployment("api", "shop")),
    );
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.stdout.contains("Config: "), "{outcome:?}");
}

#[test]
fn a_flag_wins_over_its_key_and_says_so() {
    let workspace = repository();
    workspace.write("repo/.meshlife.yaml", "failOn: error\noutput: json\n");
    let outcome = workspace.run(&["check", "repo", "--fail-on", "warning"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("`failOn` left out: --fail-on on the command line wins"),
        "{outcome:?}"
    );
    assert_eq!(outcome.json_envelope()["config"], "repo/.meshlife.yaml");
    let outcome = workspace.run(&["check", "repo", "--no-config"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(outcome.stdout.contains("ML101"), "text again: {outcome:?}");
}

#[test]
fn the_search_stops_at_the_repository_root() {
    let workspace = repository();
    workspace.write(".meshlife.yaml", "failOn: none\n");
    let outcome = workspace.run(&["check", "repo/deploy"]);
    assert_eq!(
        outcome.code, 1,
        "a config above the repository is not used: {outcome:?}"
    );
    // Named, any file is used.
    let outcome = workspace.run(&["check", "repo/deploy", "--config", ".meshlife.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
}

#[test]
fn inputs_under_two_configs_are_an_error() {
    let workspace = repository();
    workspace.write("repo/deploy/app/.meshlife.yaml", "failOn: error\n");
    workspace.write(
        "repo/deploy/other/web.yaml",
        &meshed_deployment("other", "shop"),
    );
    workspace.write("repo/.meshlife.yaml", "failOn: none\n");
    let outcome = workspace.run(&["check", "repo/deploy/app", "repo/deploy/other"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("one run judges under one config"),
        "{outcome:?}"
    );
}

#[test]
fn mistakes_are_named_by_file_line_and_nearest_key() {
    let workspace = repository();
    for (config, expected) in [
        (
            "exclude: [vendor]\nfailon: error\n",
            "repo/.meshlife.yaml:2: unknown key `failon`; did you mean `failOn`?",
        ),
        (
            "facts:\n  istio: \"1.26\"\n  istoHold: true\n",
            "repo/.meshlife.yaml:3: unknown key `facts.istoHold`; did you mean `facts.istioHold`?",
        ),
        (
            "failOn: never\n",
            "repo/.meshlife.yaml:1: `failOn`: invalid value 'never'",
        ),
        (
            "facts:\n  kubernetes: 1.30\n",
            "repo/.meshlife.yaml:2: `facts.kubernetes`: write the version in quotes",
        ),
        (
            "requireMesh: yes please\n",
            "repo/.meshlife.yaml:1: `requireMesh`: true or false",
        ),
        (
            "facts:\n  istio: \"not a version\"\n",
            "repo/.meshlife.yaml:2: `facts.istio`: invalid value 'not a version'",
        ),
        ("- a list\n", "repo/.meshlife.yaml: a config is a mapping"),
    ] {
        workspace.write("repo/.meshlife.yaml", config);
        let outcome = workspace.run(&["check", "repo/deploy"]);
        assert_eq!(outcome.code, 2, "{config}: {outcome:?}");
        assert!(outcome.stderr.contains(expected), "{config}: {outcome:?}");
        assert!(outcome.stdout.is_empty(), "{config}: {outcome:?}");
    }
}

#[test]
fn init_writes_the_facts_that_check_then_judges_under() {
    let workspace = repository();
    workspace.write("repo/deploy/jobs/job.yaml", &meshed_job("migrate", "shop"));
    let facts = [
        "--kubernetes",
        "1.33",
        "--istio",
        "1.26",
        "--istio-hold",
        "--istio-injected-namespaces",
        "shop,payments",
        "--exclude-rules",
        "ML303",
    ];
    let outcome = workspace.run(&[&["init", "repo/.meshlife.yaml"][..], &facts].concat());
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let written = std::fs::read_to_string(workspace.path().join("repo/.meshlife.yaml")).unwrap();
    assert!(written.contains("  istio: \"1.26\"\n"), "{written}");
    assert!(
        written.contains("  # Installed Istio version"),
        "each fact commented: {written}"
    );
    assert!(written.contains("excludeRules: [\"ML303\"]"), "{written}");

    let with_config = workspace.run(&["check", "repo/deploy", "-o", "json"]);
    let with_flags = workspace.run(
        &[
            &["check", "repo/deploy", "-o", "json", "--no-config"][..],
            &facts,
        ]
        .concat(),
    );
    assert_eq!(with_config.code, with_flags.code, "{with_config:?}");
    assert_eq!(with_config.json(), with_flags.json(), "{with_config:?}");
    assert!(
        !with_config.rules().contains(&"ML303".to_string()),
        "{with_config:?}"
    );

    let again = workspace.run(&["init", "repo/.meshlife.yaml", "--istio", "1.27"]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(
        again.stderr.contains("exists; --force replaces it"),
        "{again:?}"
    );
    let nothing = workspace.run(&["init", "-"]);
    assert_eq!(nothing.code, 2, "{nothing:?}");
    assert!(nothing.stderr.contains("--from-cluster"), "{nothing:?}");
}

#[test]
fn constraint_files_are_relative_to_the_config() {
    let workspace = repository();
    workspace.write_constraint(
        "repo/cluster/prod.yaml",
        &["--kubernetes", "1.33", "--istio", "1.26", "--istio-hold"],
    );
    workspace.write("repo/.meshlife.yaml", "constraints: [cluster/prod.yaml]\n");
    // Hold on: no ML101.
    let outcome = run_in(
        &workspace.path().join("repo/deploy/app"),
        &["check", "web.yaml", "-o", "json"],
        None,
    );
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.rules().is_empty(), "{outcome:?}");
    // A fact flag describes another cluster: the config's constraints are left out whole.
    let outcome = run_in(
        &workspace.path().join("repo/deploy/app"),
        &["check", "web.yaml", "-o", "json", "--istio", "1.26"],
        None,
    );
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("the command line describes the cluster"),
        "{outcome:?}"
    );
    // The note names the flag as typed, not the argument's id (`constraints`).
    workspace.write("repo/.meshlife.yaml", "facts:\n  istio: \"1.26\"\n");
    let outcome = workspace.run(&[
        "check",
        "repo/deploy",
        "--constraint",
        "repo/cluster/prod.yaml",
    ]);
    assert!(
        outcome.stderr.contains(
            "`facts.istio` left out: the command line describes the cluster (--constraint)"
        ),
        "{outcome:?}"
    );
}

#[test]
fn the_schema_for_editors_is_the_one_the_cli_defines() {
    let outcome = run_in(std::path::Path::new("."), &["init", "--schema"], None);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config.schema.json"),
    )
    .expect("docs/config.schema.json");
    assert_eq!(
        committed, outcome.stdout,
        "docs/config.schema.json is stale: `meshlife init --schema > docs/config.schema.json`"
    );
}
