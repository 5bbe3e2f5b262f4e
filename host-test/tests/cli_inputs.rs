//! Every input form `meshlife check` reads, and what happens when one cannot be read.
//! Findings are predicted from rules.md (see the fixtures in cli_support).

mod cli_support;

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
    let outcome = workspace.run(&["check", "list.yaml"]);
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
fn an_empty_folder_checks_nothing_and_says_so() {
    let workspace = Workspace::new();
    std::fs::create_dir_all(workspace.path().join("empty")).unwrap();
    let outcome = workspace.run(&["check", "empty"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("empty: no .yaml, .yml or .json files found"),
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("0 objects checked in 0 files"),
        "{outcome:?}"
    );
}

#[test]
fn empty_stdin_and_empty_documents_are_fine() {
    let workspace = Workspace::new();
    let outcome = workspace.run_with_stdin(&["check", "-"], "");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    // Said, though: an empty pipe is what a failed `helm template` leaves.
    assert!(
        outcome.stderr.contains(
            "skipped <stdin>: no document on stdin (did the command before the pipe fail?)"
        ),
        "{outcome:?}"
    );
    assert!(outcome.stdout.contains("1 input skipped"), "{outcome:?}");
    let outcome = workspace.run_with_stdin(&["check", "-"], "---\n---\n# nothing\n...\n");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let outcome = workspace.run_with_stdin(&["check", "-", "--strict"], "");
    assert_eq!(outcome.code, 2, "{outcome:?}");
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
