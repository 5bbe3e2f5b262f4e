//! Every input form `meshlife check` reads, and what happens when one cannot be read.
//! Findings are predicted from rules.md (see the fixtures in cli_support).

use crate::cli_support;

use cli_support::*;
use serde_json::Value;

#[test]
fn multi_document_yaml_reports_each_document_with_its_index() {
    let workspace = Workspace::new();
    let text = stream(&[
        plain_deployment("quiet", "shop"),
        meshed_deployment("web", "shop"),
        "# only a comment\n".to_string(),
        "apiVersion: example.com/v1\nkind: Foo\nmetadata: {name: foo}\n".to_string(),
        meshed_job("migrate", "shop"),
    ]);
    workspace.write("stream.yaml", &text);
    let outcome = workspace.run(&["check", "stream.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    let located: Vec<(u64, &str, &str)> = findings
        .iter()
        .map(|f| {
            (
                f["document"].as_u64().unwrap(),
                f["name"].as_str().unwrap(),
                f["rule"].as_str().unwrap(),
            )
        })
        .collect();
    // The comment-only document keeps its number, and `kind: Foo` gives nothing.
    // Documents count from 1.
    assert!(located.contains(&(2, "web", "ML101")), "{located:?}");
    assert!(located.contains(&(5, "migrate", "ML301")), "{located:?}");
    assert!(
        located
            .iter()
            .all(|(document, ..)| *document == 2 || *document == 5),
        "{located:?}"
    );
}

#[test]
fn json_files_and_json_streams() {
    let workspace = Workspace::new();
    let job: Value = serde_yaml_ng::from_str(&meshed_job("batch", "jobs")).unwrap();
    let config_map =
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    workspace.write(
        "objects.json",
        &format!(
            "{config_map}\n{}",
            serde_json::to_string_pretty(&job).unwrap()
        ),
    );
    let outcome = workspace.run(&["check", "objects.json", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings
            .iter()
            .any(|f| f["rule"] == "ML301" && f["document"] == 2 && f["kind"] == "Job"),
        "{outcome:?}"
    );
}

#[test]
fn lists_are_expanded_with_item_indexes() {
    let workspace = Workspace::new();
    let job: Value = serde_yaml_ng::from_str(&meshed_job("batch", "jobs")).unwrap();
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, job],
    });
    workspace.write("list.yaml", &serde_yaml_ng::to_string(&list).unwrap());
    // `*List` kinds with items (as `kubectl get -o yaml` writes them) too.
    let deployment_list = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "DeploymentList",
        "items": [serde_yaml_ng::from_str::<Value>(&meshed_deployment("web", "shop")).unwrap()],
    });
    workspace.write("deployments.json", &deployment_list.to_string());
    let outcome = workspace.run(&["check", "list.yaml", "deployments.json", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings
            .iter()
            .any(|f| f["file"] == "list.yaml" && f["item"] == 2 && f["rule"] == "ML301"),
        "{outcome:?}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["file"] == "deployments.json" && f["item"] == 1 && f["rule"] == "ML101"),
        "{outcome:?}"
    );
    assert!(outcome.stdout.contains("\"item\""));
}

#[test]
fn a_list_inside_a_list_is_checked() {
    let workspace = Workspace::new();
    let job: Value = serde_yaml_ng::from_str(&meshed_job("batch", "jobs")).unwrap();
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [{"apiVersion": "batch/v1", "kind": "JobList", "items": [job]}],
    });
    workspace.write("lists.yaml", &serde_yaml_ng::to_string(&list).unwrap());
    let outcome = workspace.run(&["check", "lists.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings.iter().any(|f| f["rule"] == "ML301"
            && f["item"] == 1
            && f["innerItems"] == serde_json::json!([1])),
        "{outcome:?}"
    );
    let outcome = workspace.run(&["check", "lists.yaml"]);
    assert!(
        outcome.stdout.contains("document 1, item 1, item 1"),
        "{outcome:?}"
    );
}

#[test]
fn a_deep_field_the_module_never_reads_gets_the_clusters_verdict() {
    let workspace = Workspace::new();
    let mut job: Value = serde_yaml_ng::from_str(&meshed_job("deep", "jobs")).unwrap();
    let mut status = serde_json::json!(1);
    for _ in 0..200 {
        status = serde_json::json!({ "a": status });
    }
    job["status"] = status;
    // serde_json writes any depth; as YAML on stdin it is flow YAML 200 levels deep.
    let text = serde_json::to_string(&job).unwrap();
    workspace.write("deep.json", &text);
    for outcome in [
        workspace.run(&["check", "deep.json", "-o", "json"]),
        workspace.run_with_stdin(&["check", "-", "-o", "json"], &text),
    ] {
        assert_eq!(outcome.code, 1, "{outcome:?}");
        assert!(
            outcome.rules().contains(&"ML301".to_string()),
            "{outcome:?}"
        );
    }
}

#[test]
fn values_the_api_server_refuses_are_input_errors_naming_the_field() {
    let workspace = Workspace::new();
    let job = meshed_job("j", "jobs").replacen("spec:\n", "spec:\n  parallelism: .inf\n", 1);
    workspace.write("inf.yaml", &job);
    let outcome = workspace.run(&["check", "inf.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("field `spec.parallelism`: `.inf`"),
        "{outcome:?}"
    );
    workspace.write(
        "dup.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
    );
    let outcome = workspace.run(&["check", "dup.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("dup.yaml: document 1 (line 5): field `metadata.name`: duplicate key `name`"),
        "{outcome:?}"
    );
}

#[test]
fn flow_nesting_too_deep_is_refused_naming_the_line() {
    let workspace = Workspace::new();
    let outcome = workspace.run_with_stdin(
        &["check", "-"],
        &format!("kind: ConfigMap\ndata: {}", "[".repeat(100_000)),
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("<stdin>: document 1 (line 2): refused before parsing: nests deeper than"),
        "{outcome:?}"
    );
}

#[test]
fn admission_reviews_are_checked_as_their_request() {
    let workspace = Workspace::new();
    let job: Value = serde_yaml_ng::from_str(&meshed_job("reviewed", "jobs")).unwrap();
    let review = |operation: &str| {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "7b6b8c1e",
                "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "name": "reviewed",
                "namespace": "jobs",
                "operation": operation,
                "object": job,
            }
        })
    };
    workspace.write("create.json", &review("CREATE").to_string());
    workspace.write("delete.json", &review("DELETE").to_string());
    let outcome = workspace.run(&["check", "create.json", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings
            .iter()
            .any(|f| f["rule"] == "ML301" && f["name"] == "reviewed" && f["namespace"] == "jobs")
    );
    // The policy never reports on DELETE: the request's operation reached it unchanged.
    let outcome = workspace.run(&["check", "delete.json", "-o", "json"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.json().is_empty());
}

#[test]
fn an_admission_review_with_only_an_old_object_is_judged_on_it_with_a_warning() {
    let workspace = Workspace::new();
    let job: serde_json::Value = serde_yaml_ng::from_str(&meshed_job("reviewed", "jobs")).unwrap();
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7b6b8c1e",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "name": "reviewed",
            "namespace": "jobs",
            "operation": "UPDATE",
            "oldObject": job,
        }
    });
    workspace.write("update.json", &review.to_string());
    let outcome = workspace.run(&["check", "update.json", "-o", "json"]);
    let findings = outcome.json();
    let rules: Vec<&str> = findings.iter().filter_map(|f| f["rule"].as_str()).collect();
    assert!(
        rules.contains(&"ML301") && rules.contains(&"ML000"),
        "judged on the old object, with the module's warning: {outcome:?}"
    );
    let warning = findings.iter().find(|f| f["rule"] == "ML000").unwrap();
    assert_eq!(warning["severity"], "warning", "{warning}");
    assert_eq!(warning["path"], "review.object", "{warning}");
}

#[test]
fn admission_review_without_request_names_the_field() {
    let workspace = Workspace::new();
    workspace.write(
        "review.yaml",
        "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n",
    );
    let outcome = workspace.run(&["check", "review.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("review.yaml: document 1"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("`request`"), "{outcome:?}");
}

#[test]
fn stdin_reads_a_rendered_stream() {
    let workspace = Workspace::new();
    let rendered = stream(&[plain_deployment("a", "shop"), meshed_job("b", "shop")]);
    let outcome = workspace.run_with_stdin(&["check", "-", "-o", "json"], &rendered);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(
        findings.iter().all(|f| f["file"] == "<stdin>"),
        "{outcome:?}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["rule"] == "ML301" && f["document"] == 2)
    );
}

#[test]
fn folders_are_searched_recursively_for_manifest_extensions_only() {
    let workspace = Workspace::new();
    workspace.write("deploy/app/web.yaml", &meshed_deployment("web", "shop"));
    workspace.write("deploy/jobs/job.yml", &meshed_job("job", "shop"));
    workspace.write(
        "deploy/cm.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
    );
    workspace.write("deploy/README.md", "not: [a manifest");
    workspace.write("deploy/notes.txt", "kind: [broken");
    // Hidden folders (.git, .github workflows) hold YAML that is not Kubernetes.
    workspace.write("deploy/.github/workflows/ci.yml", "on: push\njobs: {}\n");
    let outcome = workspace.run(&["check", "deploy", "-o", "json", "--stats"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let mut files: Vec<String> = outcome
        .json()
        .iter()
        .map(|f| f["file"].as_str().unwrap().replace('\\', "/"))
        .collect();
    files.dedup();
    assert_eq!(
        files,
        vec!["deploy/app/web.yaml", "deploy/jobs/job.yml"],
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("3 objects, 3 files"), "{outcome:?}");
}

#[test]
fn a_namespace_in_the_input_is_the_namespace_object_of_its_objects() {
    let workspace = Workspace::new();
    let text = stream(&[
        namespace("meshed", "istio-injection: enabled"),
        unlabelled_deployment("web", "meshed"),
        unlabelled_deployment("api", "elsewhere"),
    ]);
    workspace.write("app.yaml", &text);
    let outcome = workspace.run(&["check", "app.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    let names: Vec<&str> = findings
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["web"], "{outcome:?}");
    assert_eq!(findings[0]["rule"], "ML101");

    // Without the Namespace nothing says the namespace injects.
    workspace.write("alone.yaml", &unlabelled_deployment("web", "meshed"));
    let outcome = workspace.run(&["check", "alone.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
}

#[test]
fn a_namespace_in_another_file_counts_too() {
    let workspace = Workspace::new();
    workspace.write("ns.yaml", &namespace("meshed", "istio-injection: enabled"));
    workspace.write("app.yaml", &unlabelled_deployment("web", "meshed"));
    let outcome = workspace.run(&["check", "ns.yaml", "app.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(outcome.rules(), vec!["ML101"]);
}

#[test]
fn unreadable_yaml_names_file_document_and_line_and_loses_nothing_else() {
    let workspace = Workspace::new();
    let text = stream(&[
        plain_deployment("first", "shop"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n".to_string(),
        meshed_job("after", "shop"),
    ]);
    workspace.write("broken.yaml", &text);
    workspace.write("good.yaml", &meshed_deployment("web", "shop"));
    let outcome = workspace.run(&["check", "broken.yaml", "good.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("broken.yaml: document 2"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("line"), "{outcome:?}");
    // The documents after the broken one, and the other file, are still checked.
    let findings = outcome.json();
    assert!(
        findings
            .iter()
            .any(|f| f["file"] == "broken.yaml" && f["name"] == "after" && f["rule"] == "ML301")
    );
    assert!(
        findings
            .iter()
            .any(|f| f["file"] == "good.yaml" && f["rule"] == "ML101")
    );
}

#[test]
fn documents_that_are_broken_kubernetes_objects_are_errors_naming_the_field() {
    let workspace = Workspace::new();
    workspace.write("broken.yaml", "kind: Deployment\nmetadata: {name: web}\n");
    let outcome = workspace.run(&["check", "broken.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("broken.yaml: document 1"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("`apiVersion`"), "{outcome:?}");

    // YAML that is not Kubernetes at all is skipped and said; `--strict` makes it an error.
    workspace.write("list.yaml", "- a\n- b\n");
    // Alone it holds no object at all, which fails a run unless allowed (tested below).
    let outcome = workspace.run(&["check", "list.yaml", "--allow-empty"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stderr.contains("skipped list.yaml: document 1 (line 1): not a Kubernetes object (a list, not a mapping)"),
        "{outcome:?}"
    );
    let outcome = workspace.run(&["check", "list.yaml", "--strict"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: list.yaml: document 1 (line 1): not a Kubernetes object"),
        "{outcome:?}"
    );
}

#[test]
fn invalid_json_names_file_document_and_line() {
    let workspace = Workspace::new();
    workspace.write("bad.json", "{\"apiVersion\": \"v1\",\n \"kind\": }");
    let outcome = workspace.run(&["check", "bad.json"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("bad.json: document 1 (line 2)"),
        "{outcome:?}"
    );
}

#[test]
fn a_missing_path_is_an_input_error_and_the_rest_is_still_checked() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &meshed_job("j", "x"));
    let outcome = workspace.run(&["check", "does-not-exist.yaml", "job.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("does-not-exist.yaml: cannot read"),
        "{outcome:?}"
    );
    assert!(outcome.rules().contains(&"ML301".to_string()));
}

#[test]
fn an_empty_folder_is_said_and_fails_the_run_unless_empty_is_allowed() {
    let workspace = Workspace::new();
    std::fs::create_dir_all(workspace.path().join("empty")).unwrap();
    let outcome = workspace.run(&["check", "empty"]);
    // A wrong path, or a render that went elsewhere: not a pass with nothing checked.
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("empty: no .yaml, .yml or .json files found"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("error: empty: no Kubernetes object to check (no manifest file found)"),
        "{outcome:?}"
    );
    let outcome = workspace.run(&["check", "empty", "--allow-empty"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("0 objects checked in 0 files"),
        "{outcome:?}"
    );
}

#[test]
fn ten_thousand_objects_in_one_stream() {
    let workspace = Workspace::new();
    let mut documents = Vec::with_capacity(10_000);
    for index in 0..10_000 {
        documents.push(if index % 2 == 0 {
            meshed_deployment(&format!("web-{index}"), "shop")
        } else {
            plain_deployment(&format!("quiet-{index}"), "shop")
        });
    }
    let outcome = workspace.run_with_stdin(
        &["check", "-", "-o", "json", "--stats"],
        &stream(&documents),
    );
    assert_eq!(outcome.code, 1, "{}", outcome.stderr);
    let findings = outcome.json();
    assert_eq!(findings.len(), 5_000);
    assert!(findings.iter().all(|f| f["rule"] == "ML101"));
    // Reported in input order although evaluated in parallel.
    let documents: Vec<u64> = findings
        .iter()
        .map(|f| f["document"].as_u64().unwrap())
        .collect();
    assert!(documents.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(
        outcome.stderr.contains("10000 objects"),
        "{}",
        outcome.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Files that are not regular files, files over the cap, entries a walk cannot read, and inputs
// that hold no object (issue 13, items 2 and 6). Runs are bounded: a hang or a read that grows
// without end kills the run and fails the test.

/// Long enough for a loaded machine; a run that hangs is killed after it.
const BOUND: std::time::Duration = std::time::Duration::from_secs(60);

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
fn bounded(workspace: &Workspace, args: &[&str]) -> Outcome {
    run_bounded(workspace.path(), args, std::process::Stdio::null(), BOUND)
}

#[cfg(unix)]
fn stdin_from(path: &str) -> std::process::Stdio {
    std::process::Stdio::from(std::fs::File::open(path).expect("opens for stdin"))
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_device_named_as_input_is_an_error_naming_it() {
    let workspace = Workspace::new();
    mkfifo(&workspace.path().join("x.yaml"));
    workspace.write("job.yaml", &meshed_job("j", "x"));
    let outcome = bounded(
        &workspace,
        &["check", "x.yaml", "/dev/zero", "job.yaml", "-o", "json"],
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: x.yaml: not a regular file but a FIFO (named pipe): not read"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("error: /dev/zero: not a regular file but a character device: not read"),
        "{outcome:?}"
    );
    // The rest is still checked.
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_folder_yields_regular_files_only_and_says_what_it_left_out() {
    let workspace = Workspace::new();
    workspace.write("deploy/job.yaml", &meshed_job("j", "x"));
    workspace.write("elsewhere/web.yaml", &meshed_deployment("web", "shop"));
    mkfifo(&workspace.path().join("deploy/fifo.yaml"));
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, workspace.path().join(name)).expect("symlink")
    };
    link("/dev/zero", "deploy/zero.yaml");
    // A symlink to a regular file is that file.
    link("../elsewhere/web.yaml", "deploy/web.yaml");
    let outcome = bounded(&workspace, &["check", "deploy", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    for (file, kind) in [
        ("deploy/fifo.yaml", "a FIFO (named pipe)"),
        ("deploy/zero.yaml", "a character device"),
    ] {
        assert!(
            outcome.stderr.contains(&format!(
                "note: skipped {file}: not a regular file but {kind}: a folder's files are read \
                 only when they are regular files (or symlinks to one)"
            )),
            "{outcome:?}"
        );
    }
    let mut rules = outcome.rules();
    rules.sort();
    assert_eq!(
        rules,
        vec!["ML101", "ML101", "ML301", "ML303"],
        "{outcome:?}"
    );
    // --strict makes each an error.
    let outcome = bounded(&workspace, &["check", "deploy", "--strict"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: deploy/zero.yaml: not a regular file"),
        "{outcome:?}"
    );
}

#[cfg(unix)]
#[test]
fn stdin_is_read_with_the_cap_and_a_folder_or_a_device_on_it_is_handled() {
    let workspace = Workspace::new();
    let outcome = run_bounded(
        workspace.path(),
        &["check", "-", "--max-file-size", "1MiB"],
        stdin_from("/dev/zero"),
        BOUND,
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: <stdin>: larger than 1 MiB (the --max-file-size cap): not read"),
        "{outcome:?}"
    );
    let folder = workspace.path().display().to_string();
    let outcome = run_bounded(
        workspace.path(),
        &["check", "-"],
        stdin_from(&folder),
        BOUND,
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: <stdin>: not a regular file but a folder: not read"),
        "{outcome:?}"
    );
}

#[test]
fn a_file_over_the_cap_is_an_error_naming_it_and_the_cap_and_the_rest_is_checked() {
    let workspace = Workspace::new();
    let big = stream(&vec![meshed_deployment("web", "shop"); 20]);
    assert!(big.len() > 4096);
    workspace.write("big.yaml", &big);
    workspace.write("job.yaml", &meshed_job("j", "x"));
    let outcome = workspace.run(&[
        "check",
        "big.yaml",
        "job.yaml",
        "-o",
        "json",
        "--max-file-size",
        "4k",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: big.yaml: larger than 4 KiB (the --max-file-size cap): not read"),
        "{outcome:?}"
    );
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
    // At the cap exactly it is read.
    let size = std::fs::metadata(workspace.path().join("big.yaml"))
        .unwrap()
        .len()
        .to_string();
    let outcome = workspace.run(&["check", "big.yaml", "--max-file-size", &size]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let outcome = workspace.run(&["check", "big.yaml", "--max-file-size", "lots"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("--max-file-size"), "{outcome:?}");
}

#[cfg(unix)]
#[test]
fn constraint_and_module_files_must_be_regular_files_within_the_cap() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &meshed_job("j", "x"));
    mkfifo(&workspace.path().join("c.yaml"));
    let outcome = bounded(&workspace, &["check", "job.yaml", "--constraint", "c.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("c.yaml: not a regular file but a FIFO (named pipe): not read"),
        "{outcome:?}"
    );
    let outcome = bounded(
        &workspace,
        &["check", "job.yaml", "--constraint", "/dev/zero"],
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("/dev/zero: not a regular file"),
        "{outcome:?}"
    );
    let outcome = bounded(&workspace, &["check", "job.yaml", "--module", "/dev/zero"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("cannot read module /dev/zero: not a regular file but a character device"),
        "{outcome:?}"
    );
    workspace.write_constraint("mesh.yaml", &["--kubernetes", "1.31", "--istio", "1.26"]);
    let outcome = bounded(
        &workspace,
        &[
            "check",
            "job.yaml",
            "--constraint",
            "mesh.yaml",
            "--max-file-size",
            "100",
        ],
    );
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("mesh.yaml: larger than 100 bytes (the --max-file-size cap): not read"),
        "{outcome:?}"
    );
}

#[cfg(unix)]
#[test]
fn verify_reads_regular_files_only() {
    let workspace = Workspace::new();
    let suites = workspace.path().join("suites");
    std::fs::create_dir_all(&suites).unwrap();
    mkfifo(&suites.join("fifo.yaml"));
    let outcome = bounded(&workspace, &["verify", "suites"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("suites/fifo.yaml: not a regular file but a FIFO (named pipe): not read"),
        "{outcome:?}"
    );
    // A suite whose object file is a device: that test is broken, nothing hangs.
    workspace.write(
        "named/suite.yaml",
        "apiVersion: test.gatekeeper.sh/v1alpha1\nkind: Suite\ntests:\n- name: t\n  template: \
         template.yaml\n  constraint: constraint.yaml\n  cases:\n  - name: c\n    object: \
         zero.yaml\n",
    );
    std::os::unix::fs::symlink("/dev/zero", workspace.path().join("named/zero.yaml")).unwrap();
    let template = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../constraints/gatekeeper/template.yaml"),
    )
    .expect("the repository's template");
    workspace.write("named/template.yaml", &template);
    workspace.write(
        "named/constraint.yaml",
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: m}\n",
    );
    let outcome = bounded(&workspace, &["verify", "named/suite.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .contains("not a regular file but a character device"),
        "{outcome:?}"
    );
    mkfifo(&workspace.path().join("alone.yaml"));
    let outcome = bounded(&workspace, &["verify", "alone.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("alone.yaml: not a regular file"),
        "{outcome:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_walk_reports_dangling_symlinks_loops_and_names_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let workspace = Workspace::new();
    workspace.write("deploy/job.yaml", &meshed_job("j", "x"));
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, workspace.path().join(name)).expect("symlink")
    };
    link("nowhere.yaml", "deploy/dangling.yaml");
    link("b.yaml", "deploy/a.yaml");
    link("a.yaml", "deploy/b.yaml");
    // Not a manifest's name: maybe a folder, maybe a README; a note, not an error.
    link("missing", "deploy/charts");
    // Back up the tree: that folder is read already.
    link("..", "deploy/up");
    let odd = workspace
        .path()
        .join(std::ffi::OsStr::from_bytes(b"deploy/caf\xe9.yaml"));
    std::fs::write(&odd, meshed_job("k", "x")).unwrap();
    let outcome = bounded(&workspace, &["check", "deploy", "-o", "json"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    for expected in [
        "error: deploy/dangling.yaml: not read: a symlink to nowhere.yaml, which does not exist",
        "error: deploy/a.yaml: not read: a symlink that cannot be followed",
        "error: deploy/b.yaml: not read: a symlink that cannot be followed",
        "error: deploy/caf\\xe9.yaml: not read: the file's path is not UTF-8",
        "note: deploy/charts: not read: a symlink to missing, which does not exist",
        "note: deploy/up: not followed: a symlink to a folder above it, which is read already",
    ] {
        assert!(outcome.stderr.contains(expected), "{expected}\n{outcome:?}");
    }
    assert!(!outcome.stderr.contains("no .yaml"), "{outcome:?}");
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
}

#[test]
fn an_input_without_any_object_is_an_error_unless_allowed() {
    let workspace = Workspace::new();
    // What a failed `helm template ... |` leaves.
    let outcome = workspace.run_with_stdin(&["check", "-"], "");
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "note: skipped <stdin>: no document on stdin (did the command before the pipe fail?)"
        ),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains(
            "error: <stdin>: no Kubernetes object to check (1 file read, 1 skipped (see the \
             notes above)); an empty stdin is what a failed command before the pipe leaves"
        ),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("--allow-empty"), "{outcome:?}");
    // Something came through the pipe, just not Kubernetes: no talk of an empty stdin.
    let outcome = workspace.run_with_stdin(&["check", "-"], "{\"foo\":1}\n");
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(!outcome.stderr.contains("empty stdin"), "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "stdin held documents, none of them a Kubernetes object (each needs apiVersion and kind)"
        ),
        "{outcome:?}"
    );
    let outcome = workspace.run_with_stdin(&["check", "-", "--allow-empty"], "");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.stdout.contains("1 input skipped"), "{outcome:?}");
    let outcome = workspace.run_with_stdin(&["check", "-", "--strict"], "");
    assert_eq!(outcome.code, 2, "{outcome:?}");

    // An empty file, and one of `---` only, likewise; each is said.
    workspace.write("empty.yaml", "");
    workspace.write("markers.yaml", "---\n---\n# nothing\n...\n");
    let outcome = workspace.run(&["check", "empty.yaml", "markers.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    for file in ["empty.yaml", "markers.yaml"] {
        assert!(
            outcome.stderr.contains(&format!(
                "skipped {file}: no document in the file (empty, or only comments and `---`)"
            )),
            "{outcome:?}"
        );
    }
    assert!(
        outcome
            .stderr
            .contains("error: the input: no Kubernetes object to check (2 files read, 2 skipped"),
        "{outcome:?}"
    );
    let outcome = workspace.run(&["check", "empty.yaml", "markers.yaml", "--allow-empty"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");

    // One object anywhere is enough.
    workspace.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    let outcome = workspace.run(&["check", "empty.yaml", "cm.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
}
