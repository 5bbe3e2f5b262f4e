//! `meshlife check` on a whole repository: only manifests are read, templates and YAML that is
//! not Kubernetes are skipped and said, `--exclude` and `.meshlifeignore` leave parts out.

use crate::cli_support;

use cli_support::*;

const HELM_TEMPLATE: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
spec:
  template:
    spec:
      containers:
        - name: migrate
          image: {{ .Values.image }}
"#;

/// Files of the repository checked, as the JSON findings name them.
fn files_with_findings(outcome: &Outcome) -> Vec<String> {
    let mut files: Vec<String> = outcome
        .json()
        .iter()
        .map(|finding| {
            finding["file"]
                .as_str()
                .unwrap_or_default()
                .replace('\\', "/")
        })
        .collect();
    files.dedup();
    files
}

#[test]
fn only_yaml_and_json_files_are_read_from_folders() {
    let workspace = Workspace::new();
    workspace.write("repo/app.yaml", &meshed_deployment("web", "shop"));
    for name in [
        "app.yaml.j2",
        "app.yaml.tmpl",
        "app.yaml.disabled",
        "app.yaml.example",
        "app.yaml.injected",
    ] {
        workspace.write(&format!("repo/{name}"), &meshed_deployment("copy", "shop"));
    }
    let outcome = workspace.run(&["check", "repo", "-o", "json"]);
    assert_eq!(
        files_with_findings(&outcome),
        ["repo/app.yaml"],
        "{outcome:?}"
    );
    // Named on the command line, any file is read.
    let outcome = workspace.run(&["check", "repo/app.yaml.example", "-o", "json"]);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
}

#[test]
fn templates_get_one_line_saying_to_render_them_first() {
    let workspace = Workspace::new();
    workspace.write("chart/templates/job.yaml", HELM_TEMPLATE);
    workspace.write(
        "chart/templates/hpa.yaml",
        "{{- if .Values.autoscaling }}\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\n{{- end }}\n",
    );
    workspace.write("role.yaml.j2", "{% for ns in namespaces %}\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ ns }}\n{% endfor %}\n");
    let outcome = workspace.run(&["check", "chart", "role.yaml.j2"]);
    // Templates alone hold no object to check: said per file, and the run fails for it.
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: the input: no Kubernetes object to check (3 files read, 3 skipped"),
        "{outcome:?}"
    );
    assert!(!outcome.stderr.contains("invalid YAML"), "{outcome:?}");
    for file in [
        "chart/templates/job.yaml: document 1 (line 4)",
        "chart/templates/hpa.yaml: document 1 (line 1)",
        "role.yaml.j2: document 1 (line 1)",
    ] {
        assert!(
            outcome.stderr.contains(&format!(
                "skipped {file}: a Helm or Jinja template, not a manifest: render it first"
            )),
            "{file}: {outcome:?}"
        );
    }
    assert!(outcome.stdout.contains("3 inputs skipped"), "{outcome:?}");
    let outcome = workspace.run(&["check", "chart", "--strict"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
}

/// A template in one document hid the whole file: the valid Rollout before it went unjudged
/// (exit 2, "no Kubernetes object"). Only that document is skipped, named by number and line.
#[test]
fn a_template_in_one_document_skips_only_that_document() {
    let workspace = Workspace::new();
    workspace.write(
        "mixed.yaml",
        &stream(&[
            meshed_deployment("web", "shop"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\n"
                .to_string(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n".to_string(),
        ]),
    );
    let outcome = workspace.run(&["check", "mixed.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    let third_line = meshed_deployment("web", "shop").lines().count() + 1 + 5 + 1 + 4;
    assert!(
        outcome.stderr.contains(&format!(
            "skipped mixed.yaml: document 3 (line {third_line}): a Helm or Jinja template"
        )),
        "{outcome:?}"
    );
}

/// A placeholder inside a quoted string is a string (Argo Workflows' `"{{inputs.parameters.x}}"`),
/// even when another document of the file does not parse: that document is the file's error,
/// and the Job is judged.
#[test]
fn quoted_placeholders_are_values_even_beside_a_broken_document() {
    let workspace = Workspace::new();
    workspace.write(
        "workflow.yaml",
        &stream(&[
            meshed_job("step", "shop").replace(
                "image: registry.example/task:1",
                "image: \"{{inputs.parameters.image}}\"",
            ),
            "kind: [unclosed\n".to_string(),
        ]),
    );
    let outcome = workspace.run(&["check", "workflow.yaml", "-o", "json"]);
    assert_eq!(
        outcome.code, 2,
        "the broken document is an error: {outcome:?}"
    );
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
    assert!(!outcome.stderr.contains("Helm or Jinja"), "{outcome:?}");
    assert!(
        outcome.stderr.contains("workflow.yaml: document 2"),
        "{outcome:?}"
    );
}

#[test]
fn valid_manifests_with_template_expressions_in_strings_are_checked() {
    let workspace = Workspace::new();
    // Alerting rules carry Go templates in their strings; they are still manifests.
    let deployment = meshed_deployment("web", "shop").replace(
        "  name: web\n",
        "  name: web\n  annotations:\n    summary: \"{{ $labels.instance }} is down\"\n",
    );
    workspace.write("deploy.yaml", &deployment);
    let outcome = workspace.run(&["check", "deploy.yaml", "-o", "json"]);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
}

#[test]
fn yaml_that_is_not_kubernetes_is_listed_as_skipped_not_as_an_error() {
    let workspace = Workspace::new();
    workspace.write("repo/deploy.yaml", &meshed_deployment("web", "shop"));
    workspace.write(
        "repo/chart/values.yaml",
        "replicaCount: 2\nimage: {tag: x}\n",
    );
    workspace.write(
        "repo/docker-compose.yml",
        "services:\n  web:\n    image: nginx\n",
    );
    workspace.write(
        "repo/package.json",
        "{\"name\": \"site\", \"version\": \"1.0.0\"}",
    );
    let outcome = workspace.run(&["check", "repo"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(!outcome.stderr.contains("error:"), "{outcome:?}");
    for file in [
        "repo/chart/values.yaml",
        "repo/docker-compose.yml",
        "repo/package.json",
    ] {
        assert!(
            outcome.stderr.contains(&format!("skipped {file}: document 1 (line 1): not a Kubernetes object (no apiVersion or kind)")),
            "{file}: {outcome:?}"
        );
    }
    let outcome = workspace.run(&["check", "repo", "--strict"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("error: repo/docker-compose.yml"),
        "{outcome:?}"
    );
}

#[test]
fn exclude_globs_and_meshlifeignore_leave_files_out() {
    let workspace = Workspace::new();
    workspace.write("repo/deploy/web.yaml", &meshed_deployment("web", "shop"));
    workspace.write(
        "repo/vendor/lib.yaml",
        &meshed_deployment("vendored", "shop"),
    );
    workspace.write(
        "repo/generated/out.yaml",
        &meshed_deployment("generated", "shop"),
    );
    workspace.write("repo/deploy/old.yaml", &meshed_deployment("old", "shop"));
    let outcome = workspace.run(&["check", "repo", "-o", "json"]);
    assert_eq!(files_with_findings(&outcome).len(), 4, "{outcome:?}");

    let outcome = workspace.run(&[
        "check",
        "repo",
        "--exclude",
        "vendor/",
        "--exclude",
        "old.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(
        files_with_findings(&outcome),
        ["repo/deploy/web.yaml", "repo/generated/out.yaml"],
        "{outcome:?}"
    );

    workspace.write("repo/.meshlifeignore", "# not ours\nvendor/\ngenerated/\n");
    workspace.write("repo/deploy/.meshlifeignore", "old.yaml\n");
    let outcome = workspace.run(&["check", "repo", "-o", "json"]);
    assert_eq!(
        files_with_findings(&outcome),
        ["repo/deploy/web.yaml"],
        "{outcome:?}"
    );

    let outcome = workspace.run(&["check", "repo", "--exclude", "[oops"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("--exclude \"[oops\" is not a valid glob"),
        "{outcome:?}"
    );
}

/// A folder holding an executable `name` that prints `output` and records its arguments in
/// `args.txt` beside it: the renderer meshlife finds on the PATH, standing in for kustomize,
/// kubectl or helm, none of which the Rust toolchain brings.
fn renderer_on_path(workspace: &Workspace, name: &str, output: &str) -> std::path::PathBuf {
    let bin = workspace.path().join(format!("bin-{name}"));
    std::fs::create_dir_all(&bin).unwrap();
    let rendered = bin.join("rendered.yaml");
    std::fs::write(&rendered, output).unwrap();
    let script = bin.join(name);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\nexec /bin/cat '{}'\n",
            bin.join("args.txt").display(),
            rendered.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A Helm chart read as plain files: Chart.yaml "not a Kubernetes object", each template skipped
/// on its own. It is one input: rendered with `helm template` when helm is on the PATH, and
/// otherwise skipped as a whole with the command to run.
#[test]
fn a_helm_chart_is_rendered_by_helm_or_skipped_whole_with_the_command() {
    let workspace = Workspace::new();
    workspace.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
    );
    workspace.write(
        "chart/templates/job.yaml",
        &meshed_job("migrate", "shop")
            .replace("name: migrate", "name: \"{{ .Release.Name }}-migrate\""),
    );
    let no_tools = workspace.path().join("no-tools");
    std::fs::create_dir_all(&no_tools).unwrap();
    let outcome = workspace.run_with_path(&["check", "chart", "--allow-empty"], &no_tools);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "skipped chart: a Helm chart (Chart.yaml), not manifests until rendered: render it \
             first (`helm template chart | meshlife check -`), or put helm on the PATH"
        ),
        "{outcome:?}"
    );
    assert!(
        !outcome.stderr.contains("Chart.yaml: document 1"),
        "{outcome:?}"
    );

    let helm = renderer_on_path(&workspace, "helm", &meshed_job("release-migrate", "shop"));
    let outcome = workspace.run_with_path(&["check", "chart", "-o", "json"], &helm);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(helm.join("args.txt"))
            .unwrap()
            .trim(),
        "template chart"
    );
    assert!(
        outcome.rules().contains(&"ML301".to_string()),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.json()[0]["file"],
        "helm template chart",
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("note: chart: a Helm chart (Chart.yaml) rendered with `helm template chart`"),
        "{outcome:?}"
    );
}

/// A Kustomize folder read as plain files: the Kustomization counted as an object, its
/// `namespace:` ignored, the Job in `default`, "not meshed", exit 0. Rendered with kustomize
/// (or `kubectl kustomize`) when one is on the PATH; otherwise skipped whole.
#[test]
fn a_kustomize_folder_is_rendered_or_skipped_whole_with_the_command() {
    let workspace = Workspace::new();
    workspace.write(
        "app/overlays/prod/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources:\n- job.yaml\n",
    );
    workspace.write(
        "app/overlays/prod/job.yaml",
        &meshed_job("migrate", "shop").replace("  namespace: shop\n", ""),
    );
    workspace.write("app/web.yaml", &meshed_deployment("web", "shop"));
    let no_tools = workspace.path().join("no-tools");
    std::fs::create_dir_all(&no_tools).unwrap();
    let outcome = workspace.run_with_path(&["check", "app", "-o", "json"], &no_tools);
    // web.yaml is judged; the Kustomize folder is one skipped input, not files.
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "skipped app/overlays/prod: a Kustomize folder (kustomization.yaml), not manifests \
             until rendered: render it first (`kubectl kustomize app/overlays/prod | meshlife \
             check -`), or put kustomize or kubectl on the PATH"
        ),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.json_envelope()["summary"]["objects"],
        1,
        "{outcome:?}"
    );

    // kustomize first; the rendered Job is where its kustomization put it.
    let kustomize = renderer_on_path(&workspace, "kustomize", &meshed_job("migrate", "shop"));
    let outcome = workspace.run_with_path(&["check", "app", "-o", "json"], &kustomize);
    assert_eq!(
        std::fs::read_to_string(kustomize.join("args.txt"))
            .unwrap()
            .trim(),
        "build app/overlays/prod"
    );
    let envelope = outcome.json_envelope();
    let job: Vec<&serde_json::Value> = envelope["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["kind"] == "Job")
        .collect();
    assert!(!job.is_empty(), "{outcome:?}");
    assert!(
        job.iter().all(|finding| finding["namespace"] == "shop"
            && finding["file"] == "kustomize build app/overlays/prod"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("rendered with `kustomize build app/overlays/prod`"),
        "{outcome:?}"
    );

    // Without kustomize, kubectl's built-in kustomize.
    let kubectl = renderer_on_path(&workspace, "kubectl", &meshed_job("migrate", "shop"));
    let outcome = workspace.run_with_path(&["check", "app/overlays/prod"], &kubectl);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(kubectl.join("args.txt"))
            .unwrap()
            .trim(),
        "kustomize app/overlays/prod"
    );

    // A renderer that fails is an input error naming the folder and what it said.
    let failing = workspace.path().join("bin-failing");
    std::fs::create_dir_all(&failing).unwrap();
    std::fs::write(
        failing.join("kustomize"),
        "#!/bin/sh\necho 'Error: accumulating resources: missing.yaml' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        failing.join("kustomize"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let outcome = workspace.run_with_path(&["check", "app/overlays/prod"], &failing);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "app/overlays/prod: a Kustomize folder (kustomization.yaml): `kustomize build \
             app/overlays/prod` failed"
        ) && outcome
            .stderr
            .contains("accumulating resources: missing.yaml"),
        "{outcome:?}"
    );
}

#[test]
fn templates_inside_block_scalars_are_data_and_the_file_is_checked() {
    let workspace = Workspace::new();
    // An IstioOperator or a ConfigMap may carry Go templates of its own in a block scalar.
    let text = stream(&[
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: templates\n  namespace: shop\ndata:\n  sidecar.tmpl: |\n    {{- range $key, $value := .Values.env }}\n    - name: {{ $key }}\n    {{- end }}\n".to_string(),
        meshed_deployment("web", "shop"),
    ]);
    workspace.write("bundle.yaml", &text);
    let outcome = workspace.run(&["check", "bundle.yaml", "-o", "json"]);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    assert!(!outcome.stderr.contains("skipped"), "{outcome:?}");
}

/// A folder holding an executable `name` running `script` (sh), standing in for a renderer.
fn script_on_path(workspace: &Workspace, name: &str, script: &str) -> std::path::PathBuf {
    let bin = workspace.path().join(format!("bin-script-{name}"));
    std::fs::create_dir_all(&bin).unwrap();
    let file = bin.join(name);
    std::fs::write(&file, format!("#!/bin/sh\n{script}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// What a renderer cannot render alone is skipped with its reason, never an input error: a
/// library chart (helm is not even asked), a Kustomize Component, and a chart whose `helm
/// template` refuses for want of values (its words kept); `--strict` makes them errors. A
/// renderer printing without end is stopped at --max-file-size.
#[test]
fn what_a_renderer_cannot_render_alone_is_skipped_with_the_reason() {
    let workspace = Workspace::new();
    workspace.write(
        "repo/charts/common/Chart.yaml",
        "apiVersion: v2\nname: common\ntype: library\nversion: 1.0.0\n",
    );
    workspace.write(
        "repo/components/probes/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
    );
    workspace.write(
        "repo/charts/shop/Chart.yaml",
        "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
    );
    workspace.write("repo/web.yaml", &meshed_deployment("web", "shop"));
    let helm = script_on_path(
        &workspace,
        "helm",
        "echo \"$@\" >> \"${0%/helm}/args.txt\"\n\
         echo 'Error: execution error at (shop/templates/job.yaml:4:11): image.tag is required' >&2\n\
         exit 1",
    );
    let outcome = workspace.run_with_path(&["check", "repo", "-o", "json"], &helm);
    assert_eq!(outcome.rules(), ["ML101"], "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(helm.join("args.txt"))
            .unwrap()
            .trim(),
        "template repo/charts/shop",
        "a library chart is not handed to helm"
    );
    for said in [
        "skipped repo/charts/common: a Helm library chart (type: library), which renders nothing alone",
        "skipped repo/components/probes: a Kustomize Component (kind: Component), applied only through a kustomization",
        "skipped repo/charts/shop: a Helm chart (Chart.yaml): `helm template repo/charts/shop` failed (exit status: 1): Error: execution error at (shop/templates/job.yaml:4:11): image.tag is required",
    ] {
        assert!(outcome.stderr.contains(said), "{said}\n{outcome:?}");
    }
    let strict = workspace.run_with_path(&["check", "repo", "--strict"], &helm);
    assert_eq!(strict.code, 2, "{strict:?}");

    // A kustomization that does not build is broken as applied: an input error.
    workspace.write(
        "broken/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [missing.yaml]\n",
    );
    let failing = script_on_path(
        &workspace,
        "kubectl",
        "echo 'error: accumulating resources: missing.yaml: no such file' >&2\nexit 1",
    );
    let outcome = workspace.run_with_path(&["check", "broken"], &failing);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "a Kustomize folder (kustomization.yaml): `kubectl kustomize broken` failed (exit \
             status: 1): error: accumulating resources: missing.yaml: no such file"
        ),
        "{outcome:?}"
    );

    let endless = script_on_path(&workspace, "kustomize", "exec /usr/bin/yes 'kind: Pod'");
    workspace.write(
        "app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
    );
    let outcome = workspace.run_with_path(&["check", "app", "--max-file-size", "1k"], &endless);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "a Kustomize folder (kustomization.yaml): `kustomize build app` printed more than \
             --max-file-size (1024 bytes)"
        ),
        "{outcome:?}"
    );
}
