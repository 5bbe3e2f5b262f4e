//! `meshlife verify`: the real binary on gator-format suites in temporary folders, the shipped
//! examples, and the ConstraintTemplate's schema against the parameters the module accepts.

use std::path::{Path, PathBuf};
use std::process::Command;

use meshlife::module::engine::Engine;
use serde::Deserialize as _;
use serde_json::{Value, json};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn template_text() -> String {
    std::fs::read_to_string(workspace_root().join("constraints/gatekeeper/template.yaml"))
        .expect("the template")
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn meshlife(folder: &Path, args: &[&str]) -> Outcome {
    let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(args)
        .current_dir(folder)
        .env("NO_COLOR", "1")
        .output()
        .expect("the meshlife binary runs");
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A temporary folder with the meshlife template, two constraints and a few objects.
struct Suites {
    folder: tempfile::TempDir,
}

const NAMESPACE_SHOP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio-injection: enabled\n";

const DEPLOYMENT_NO_HOLD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels: {app: checkout}
  template:
    metadata:
      labels: {app: checkout}
    spec:
      containers:
      - name: checkout
        image: registry.example.com/checkout:2.1.0
";

const JOB_NO_EXIT: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: report
  namespace: shop
spec:
  template:
    metadata:
      annotations:
        proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}'
    spec:
      restartPolicy: Never
      containers:
      - name: report
        image: registry.example.com/report:5.2
";

impl Suites {
    fn new() -> Suites {
        let suites = Suites {
            folder: tempfile::tempdir().expect("a temporary folder"),
        };
        suites.write("policy/template.yaml", &template_text());
        suites.write(
            "policy/default.yaml",
            "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: default}\nspec: {}\n",
        );
        suites.write(
            "policy/typo.yaml",
            "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: typo}\n\
             spec:\n  parameters:\n    istio:\n      holdApplicationUntilProxyStart: true\n",
        );
        suites.write(
            "policy/jobs-only.yaml",
            "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\nmetadata: {name: jobs}\n\
             spec:\n  match:\n    kinds: [{apiGroups: [batch], kinds: [Job]}]\n",
        );
        suites.write(
            "objects/deployment.yaml",
            &format!("{NAMESPACE_SHOP}---\n{DEPLOYMENT_NO_HOLD}"),
        );
        suites.write("objects/bare-deployment.yaml", DEPLOYMENT_NO_HOLD);
        suites.write("objects/namespace.yaml", NAMESPACE_SHOP);
        suites.write(
            "objects/job.yaml",
            &format!("{NAMESPACE_SHOP}---\n{JOB_NO_EXIT}"),
        );
        suites
    }

    fn path(&self) -> &Path {
        self.folder.path()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
        std::fs::write(path, text).expect("a written file");
    }

    /// A suite file whose `tests:` list is `tests` (YAML, indented as a list at column 0).
    fn suite(&self, relative: &str, tests: &str) {
        self.write(
            relative,
            &format!("apiVersion: test.gatekeeper.sh/v1alpha1\nkind: Suite\nmetadata:\n  name: s\ntests:\n{tests}"),
        );
    }

    fn verify(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        meshlife(self.path(), &all)
    }
}

const STARTUP_TEST: &str = "- name: startup
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: no-hold
    object: objects/deployment.yaml
    assertions:
    - violations: 1
      message: '^\\[ML101 startup-no-hold\\] container \"checkout\"'
    - violations: \"no\"
      message: ML3
  - name: job
    object: objects/job.yaml
    assertions:
    - violations: 2
    - message: ML301
    - violations: 1
      message: ML303
";

#[test]
fn a_passing_suite_prints_ok_and_pass() {
    let suites = Suites::new();
    suites.suite("startup.yaml", STARTUP_TEST);
    let outcome = suites.verify(&["startup.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.starts_with("ok\tstartup.yaml\t"),
        "{outcome:?}"
    );
    assert!(outcome.stdout.ends_with("\nPASS\n"), "{outcome:?}");
    assert!(!outcome.stdout.contains("=== RUN"), "{outcome:?}");

    let verbose = suites.verify(&["-v", "startup.yaml"]);
    assert_eq!(verbose.code, 0, "{verbose:?}");
    for line in [
        "=== RUN   startup\n",
        "    === RUN   startup/no-hold\n",
        "    --- PASS: startup/job\t(",
        "--- PASS: startup\t(",
    ] {
        assert!(
            verbose.stdout.contains(line),
            "missing {line:?}: {verbose:?}"
        );
    }
}

#[test]
fn a_failing_assertion_names_the_test_the_case_and_why() {
    let suites = Suites::new();
    suites.suite(
        "suites/failing.yaml",
        "- name: batch
  template: ../policy/template.yaml
  constraint: ../policy/default.yaml
  cases:
  - name: job-has-a-deadline
    object: ../objects/job.yaml
    assertions:
    - violations: no
      message: ML303
  - name: job-fires
    object: ../objects/job.yaml
    assertions:
    - message: ML301
  - name: no-assertions-means-none
    object: ../objects/deployment.yaml
",
    );
    let outcome = suites.verify(&["suites/failing.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let stdout = &outcome.stdout;
    assert!(
        stdout.contains("    --- FAIL: batch/job-has-a-deadline\t("),
        "{outcome:?}"
    );
    assert!(
        stdout.contains("unexpected number of violations: got 1 violations containing \"ML303\" but want none; got messages:"),
        "{outcome:?}"
    );
    assert!(
        stdout.contains("[ML303 job-no-deadline]"),
        "the messages are listed: {outcome:?}"
    );
    assert!(
        !stdout.contains("batch/job-fires"),
        "passing cases are quiet: {outcome:?}"
    );
    assert!(
        stdout.contains("    --- FAIL: batch/no-assertions-means-none\t("),
        "{outcome:?}"
    );
    assert!(
        stdout.contains("got 1 violations but want none (the case has no assertions)"),
        "{outcome:?}"
    );
    assert!(stdout.contains("--- FAIL: batch\t("), "{outcome:?}");
    assert!(
        stdout.contains("FAIL\tsuites/failing.yaml\t"),
        "{outcome:?}"
    );
    assert!(stdout.ends_with("\nFAIL\n"), "{outcome:?}");
}

#[test]
fn invalid_true_expects_the_misspelt_parameter_to_be_rejected() {
    let suites = Suites::new();
    suites.suite(
        "invalid.yaml",
        "- name: typo-is-rejected
  template: policy/template.yaml
  constraint: policy/typo.yaml
  invalid: true
",
    );
    let outcome = suites.verify(&["-v", "invalid.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("--- PASS: typo-is-rejected"),
        "{outcome:?}"
    );

    // A valid constraint under `invalid: true` fails the test.
    suites.suite(
        "valid.yaml",
        "- name: default-is-not-invalid
  template: policy/template.yaml
  constraint: policy/default.yaml
  invalid: true
",
    );
    let outcome = suites.verify(&["valid.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stdout.contains("--- FAIL: default-is-not-invalid"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stdout
            .contains("was accepted, but the test sets invalid: true"),
        "{outcome:?}"
    );

    // The typo without `invalid: true` fails the test and names the field.
    suites.suite(
        "typo.yaml",
        "- name: typo
  template: policy/template.yaml
  constraint: policy/typo.yaml
  cases:
  - name: any
    object: objects/deployment.yaml
",
    );
    let outcome = suites.verify(&["typo.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stdout.contains("invalid constraint:"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stdout
            .contains("spec.parameters.istio.holdApplicationUntilProxyStart"),
        "{outcome:?}"
    );
}

#[test]
fn skipped_suites_tests_and_cases_do_not_run() {
    let suites = Suites::new();
    let failing_case = "  - name: wrong
    object: objects/deployment.yaml
    assertions:
    - violations: 5
";
    suites.suite(
        "skips.yaml",
        &format!(
            "- name: skipped-test
  skip: true
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
{failing_case}- name: skipped-case
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: runs
    object: objects/deployment.yaml
    assertions:
    - violations: 1
{}",
            failing_case.replace("    object:", "    skip: true\n    object:")
        ),
    );
    let outcome = suites.verify(&["-v", "skips.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("=== SKIP  skipped-test\n"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stdout
            .contains("    === SKIP  skipped-case/wrong\n"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stdout
            .contains("    --- PASS: skipped-case/runs\t("),
        "{outcome:?}"
    );

    suites.write(
        "skipped-suite.yaml",
        &format!(
            "apiVersion: test.gatekeeper.sh/v1alpha1\nkind: Suite\nskip: true\ntests:\n- name: t\n  template: policy/template.yaml\n  constraint: policy/default.yaml\n  cases:\n{failing_case}"
        ),
    );
    let outcome = suites.verify(&["skipped-suite.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .contains("ok\tskipped-suite.yaml\t0.000s\t[skipped]"),
        "{outcome:?}"
    );
}

#[test]
fn run_filters_tests_and_cases_like_gator() {
    let suites = Suites::new();
    suites.suite(
        "filter.yaml",
        "- name: startup
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: good
    object: objects/deployment.yaml
    assertions:
    - message: ML101
  - name: bad
    object: objects/deployment.yaml
    assertions:
    - violations: 7
- name: batch
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: bad
    object: objects/job.yaml
    assertions:
    - violations: 7
",
    );
    assert_eq!(suites.verify(&["filter.yaml"]).code, 1);

    let outcome = suites.verify(&["-v", "--run", "startup//good", "filter.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("    --- PASS: startup/good\t("),
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("    === SKIP  startup/bad\n"),
        "{outcome:?}"
    );
    assert!(outcome.stdout.contains("=== SKIP  batch\n"), "{outcome:?}");

    // One regex matches test or case names: "bad" selects both failing cases.
    let outcome = suites.verify(&["--run", "bad", "filter.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stdout.contains("--- FAIL: startup/bad"),
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("--- FAIL: batch/bad"),
        "{outcome:?}"
    );

    let outcome = suites.verify(&["--run", "a//b//c", "filter.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("at most one \"//\""), "{outcome:?}");

    // A filter that selects nothing verified nothing: not a pass.
    let outcome = suites.verify(&["--run", "nomatch", "filter.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stdout.ends_with("FAIL\n"), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("no test ran: 1 suite(s) with 2 test(s) found, and --run \"nomatch\" matches none of them"),
        "{outcome:?}"
    );
}

#[test]
fn a_missing_object_file_exits_2_naming_the_file() {
    let suites = Suites::new();
    suites.suite(
        "missing.yaml",
        "- name: startup
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: gone
    object: objects/does-not-exist.yaml
  - name: fine
    object: objects/deployment.yaml
    assertions:
    - message: ML101
",
    );
    let outcome = suites.verify(&["missing.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stdout.contains("--- FAIL: startup/gone"),
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("objects/does-not-exist.yaml"),
        "{outcome:?}"
    );
    assert!(
        !outcome.stdout.contains("startup/fine"),
        "the other case still runs and passes: {outcome:?}"
    );
}

#[test]
fn unusable_suites_exit_2_with_a_clear_error() {
    let suites = Suites::new();
    suites.write(
        "policy/other-template.yaml",
        "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata: {name: k8srequiredlabels}\n\
         spec:\n  crd:\n    spec:\n      names: {kind: K8sRequiredLabels}\n  targets:\n  - target: admission.k8s.gatekeeper.sh\n    rego: 'package k8srequiredlabels'\n",
    );
    suites.suite(
        "other.yaml",
        "- name: labels
  template: policy/other-template.yaml
  constraint: policy/default.yaml
",
    );
    let outcome = suites.verify(&["other.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .contains("defines kind \"K8sRequiredLabels\""),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stdout
            .contains("only the meshlife ConstraintTemplate (kind MeshLifecycle)"),
        "{outcome:?}"
    );

    let absolute = suites.path().join("objects/deployment.yaml");
    suites.suite(
        "absolute.yaml",
        &format!(
            "- name: t\n  template: policy/template.yaml\n  constraint: policy/default.yaml\n  cases:\n  - name: c\n    object: {}\n",
            absolute.display()
        ),
    );
    let outcome = suites.verify(&["absolute.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stdout.contains("is absolute"), "{outcome:?}");

    suites.suite(
        "typo-in-suite.yaml",
        "- name: t\n  template: policy/template.yaml\n  constraint: policy/default.yaml\n  cases:\n  - name: c\n    object: objects/job.yaml\n    assertion:\n    - violations: 0\n",
    );
    let outcome = suites.verify(&["typo-in-suite.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("unknown field `assertion`"),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.stdout, "FAIL\n",
        "a suite that cannot be read does not pass: {outcome:?}"
    );

    let outcome = suites.verify(&["objects/deployment.yaml"]);
    assert_eq!(outcome.code, 2, "a named file without a Suite: {outcome:?}");
    assert!(outcome.stderr.contains("holds no Suite"), "{outcome:?}");
}

#[test]
fn folders_are_searched_recursively_and_other_yaml_is_ignored() {
    let suites = Suites::new();
    suites.suite(
        "tests/deep/startup.yaml",
        &STARTUP_TEST
            .replace("policy/", "../../policy/")
            .replace("objects/", "../../objects/"),
    );
    suites.write(
        "tests/values.yaml",
        "replicaCount: 3\nimage:\n  tag: [unclosed\n",
    );
    suites.write("tests/notes.txt", "not yaml at all: [");
    let outcome = suites.verify(&["tests"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert_eq!(
        outcome
            .stdout
            .lines()
            .filter(|line| line.starts_with("ok\t"))
            .count(),
        1,
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("ok\ttests/deep/startup.yaml\t"),
        "{outcome:?}"
    );

    // The whole folder: the manifests, constraints and template are not suites either.
    let outcome = suites.verify(&["."]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
}

#[test]
fn inventory_namespaces_become_the_namespace_object_and_match_is_honoured() {
    let suites = Suites::new();
    suites.suite(
        "inventory.yaml",
        "- name: namespaces
  template: policy/template.yaml
  constraint: policy/default.yaml
  cases:
  - name: meshed-by-the-inventory-namespace
    object: objects/bare-deployment.yaml
    inventory: [objects/namespace.yaml]
    assertions:
    - violations: 1
      message: ML101
  - name: not-meshed-without-it
    object: objects/bare-deployment.yaml
- name: match
  template: policy/template.yaml
  constraint: policy/jobs-only.yaml
  cases:
  - name: deployment-not-matched
    object: objects/deployment.yaml
  - name: job-matched
    object: objects/job.yaml
    assertions:
    - violations: 2
",
    );
    let outcome = suites.verify(&["inventory.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
}

#[test]
fn the_shipped_examples_pass() {
    let root = workspace_root();
    let outcome = meshlife(&root, &["verify", "examples/"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.stdout.ends_with("PASS\n"), "{outcome:?}");
    assert!(
        outcome
            .stdout
            .lines()
            .filter(|line| line.starts_with("ok\texamples/suites/"))
            .count()
            >= 6,
        "{outcome:?}"
    );
}

/// The documents of a YAML stream that are not empty (comments only, or nothing).
fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).expect("valid YAML"))
        .filter(|document| !document.is_null())
        .collect()
}

/// The shipped suites are valid gator suites as written, not only under meshlife verify's
/// lenient reading: every case names one object file holding exactly one object, and has at
/// least one assertion (gator v3.23.0 refuses the case otherwise); every namespaced object's
/// Namespace comes from the case's inventory, which is where gator and Gatekeeper look.
#[test]
fn the_shipped_suites_are_gator_shaped() {
    let suites_dir = workspace_root().join("examples/suites");
    let mut cases = 0;
    for entry in std::fs::read_dir(&suites_dir).expect("examples/suites") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|extension| extension != "yaml") {
            continue;
        }
        let suite: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if suite["kind"] != "Suite" {
            continue;
        }
        for test in suite["tests"].as_array().expect("tests") {
            for case in test["cases"].as_array().into_iter().flatten() {
                cases += 1;
                let name = format!("{}: {}/{}", path.display(), test["name"], case["name"]);
                let assertions = case["assertions"].as_array();
                assert!(
                    assertions.is_some_and(|list| !list.is_empty()),
                    "{name} has no assertions"
                );
                let object_file = suites_dir.join(case["object"].as_str().expect("an object"));
                let objects = yaml_documents(&std::fs::read_to_string(&object_file).unwrap());
                assert_eq!(objects.len(), 1, "{name}: {} objects", objects.len());
                let namespace = objects[0]["metadata"]["namespace"]
                    .as_str()
                    .or(objects[0]["request"]["namespace"].as_str());
                let inventory: Vec<Value> = case["inventory"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|file| {
                        let text = std::fs::read_to_string(suites_dir.join(file.as_str().unwrap()))
                            .unwrap();
                        yaml_documents(&text)
                    })
                    .collect();
                let has_namespace = |wanted: &str| {
                    inventory.iter().any(|object| {
                        object["kind"] == "Namespace" && object["metadata"]["name"] == wanted
                    })
                };
                if let Some(namespace) = namespace
                    && !case["name"]
                        .as_str()
                        .unwrap()
                        .contains("without-its-namespace")
                {
                    assert!(
                        has_namespace(namespace),
                        "{name}: no Namespace {namespace} in the inventory"
                    );
                }
            }
        }
    }
    assert!(cases >= 70, "{cases} cases");
}

/// `examples/suites/.objects/` holds the workload of each example manifest the suites review,
/// without its Namespace (gator reviews exactly one object per file), byte for byte; the
/// Namespace is in `examples/suites/objects/namespaces.yaml`. The folder is hidden so that
/// `meshlife check examples/` does not report every finding twice. With
/// `MESHLIFE_UPDATE_SUITE_OBJECTS=1` this test rewrites the copies from the examples.
#[test]
fn the_suite_objects_are_the_example_workloads() {
    let examples = workspace_root().join("examples");
    let copies = examples.join("suites/.objects");
    let update = std::env::var_os("MESHLIFE_UPDATE_SUITE_OBJECTS").is_some();
    let namespaces = yaml_documents(
        &std::fs::read_to_string(examples.join("suites/objects/namespaces.yaml")).unwrap(),
    );
    let mut referenced = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(examples.join("suites")).expect("examples/suites") {
        let path = entry.expect("an entry").path();
        if path
            .extension()
            .is_some_and(|extension| extension == "yaml")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                if let Some(copy) = line.trim().strip_prefix("object: .objects/") {
                    referenced.insert(copy.to_string());
                }
            }
        }
    }
    assert!(referenced.len() >= 50, "{referenced:?}");
    for relative in &referenced {
        let source = std::fs::read_to_string(examples.join(relative))
            .unwrap_or_else(|error| panic!("examples/{relative}: {error}"));
        let (namespace, workload) = source
            .split_once("\n---\n")
            .unwrap_or_else(|| panic!("examples/{relative} is not a Namespace then a workload"));
        let namespace = yaml_documents(namespace);
        assert_eq!(namespace.len(), 1, "examples/{relative}");
        assert!(
            namespaces.contains(&namespace[0]),
            "the Namespace of examples/{relative} is not in examples/suites/objects/namespaces.yaml"
        );
        let expected = format!(
            "# Generated from ../../../{relative}, without its Namespace: gator verify\n\
             # reviews exactly one object per file, and the cases take the Namespace from their\n\
             # inventory, ../../objects/namespaces.yaml. To refresh after editing the example:\n\
             # MESHLIFE_UPDATE_SUITE_OBJECTS=1 cargo test -p meshlife --test cli_verify\n{workload}"
        );
        let copy = copies.join(relative);
        if update {
            std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
            std::fs::write(&copy, &expected).unwrap();
        } else {
            let actual = std::fs::read_to_string(&copy).unwrap_or_default();
            assert!(
                actual == expected,
                "examples/suites/.objects/{relative} is not the workload of examples/{relative}; \
                 run MESHLIFE_UPDATE_SUITE_OBJECTS=1 cargo test -p meshlife --test cli_verify"
            );
        }
    }
    for mesh in std::fs::read_dir(&copies).expect("examples/suites/.objects") {
        let mesh = mesh.unwrap().path();
        for file in std::fs::read_dir(&mesh).unwrap() {
            let file = file.unwrap().path();
            let relative = file
                .strip_prefix(&copies)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert!(
                referenced.contains(&relative),
                "examples/suites/.objects/{relative} is used by no suite case"
            );
        }
    }
}

/// Every property of the template's `openAPIV3Schema` is a parameter the module accepts (with
/// its default value), and every parameter the module accepts is in the schema.
#[test]
fn the_template_schema_describes_exactly_the_module_parameters() {
    let template: Value = serde_yaml_ng::from_str(&template_text()).expect("the template is YAML");
    let schema = &template["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"];
    assert_eq!(template["metadata"]["name"], "meshlifecycle");
    assert_eq!(
        template["spec"]["crd"]["spec"]["names"]["kind"],
        "MeshLifecycle"
    );
    let engine = Engine::embedded().expect("the embedded module");
    let problems = |parameters: Value| -> Vec<String> {
        let input = json!({
            "review": {"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "parameters": parameters,
        });
        let violations = engine
            .evaluate(&serde_json::to_vec(&input).expect("JSON"))
            .expect("an evaluation");
        violations
            .into_iter()
            .filter(|violation| violation.details.rule == "ML000")
            .map(|violation| violation.msg)
            .collect()
    };

    // Every level: the defaults are accepted, a misspelt key is refused, and the module's list
    // of known keys is the schema's property list.
    fn check_level(schema: &Value, path: &[&str], problems: &dyn Fn(Value) -> Vec<String>) {
        let properties = schema["properties"]
            .as_object()
            .expect("structural: properties");
        assert_eq!(schema["type"], "object", "{path:?}");
        let wrap = |value: Value| {
            path.iter()
                .rev()
                .fold(value, |inner, key| json!({ *key: inner }))
        };
        let defaults: serde_json::Map<String, Value> = properties
            .iter()
            .filter_map(|(key, property)| {
                property
                    .get("default")
                    .map(|value| (key.clone(), value.clone()))
            })
            .collect();
        assert_eq!(
            problems(wrap(Value::Object(defaults))),
            Vec::<String>::new(),
            "defaults at {path:?}"
        );

        let refused = problems(wrap(json!({"misspeltParameter": true})));
        assert_eq!(refused.len(), 1, "{path:?}: {refused:?}");
        let known = refused[0]
            .split("expected one of ")
            .nth(1)
            .expect("the known keys")
            .split(';')
            .next()
            .expect("a list");
        let mut module_keys: Vec<&str> = known.split(", ").collect();
        let mut schema_keys: Vec<&str> = properties.keys().map(String::as_str).collect();
        module_keys.sort_unstable();
        schema_keys.sort_unstable();
        assert_eq!(schema_keys, module_keys, "properties at {path:?}");

        for (key, property) in properties {
            assert!(
                property.get("type").is_some(),
                "structural: {path:?}.{key} has a type"
            );
            assert!(
                property.get("description").is_some(),
                "{path:?}.{key} has a description"
            );
            if property["type"] == "object" {
                let mut inner = path.to_vec();
                inner.push(key);
                check_level(property, &inner, problems);
            }
        }
    }
    check_level(schema, &[], &problems);
    assert_eq!(
        schema["properties"]["minSeverity"]["enum"],
        json!(["info", "warning", "error"])
    );
    for severity in ["info", "warning", "error"] {
        assert!(problems(json!({"minSeverity": severity})).is_empty());
    }
}

#[test]
fn a_path_holding_no_suite_fails_with_exit_2_naming_it() {
    let suites = Suites::new();
    // `objects/` holds manifests but no Suite; an empty folder holds nothing at all.
    let outcome = suites.verify(&["objects"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("error: objects: no test.gatekeeper.sh Suite found"),
        "{outcome:?}"
    );
    assert_eq!(outcome.stdout, "FAIL\n", "{outcome:?}");
    std::fs::create_dir_all(suites.path().join("empty")).unwrap();
    let outcome = suites.verify(&["empty"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("empty: no test.gatekeeper.sh Suite found"),
        "{outcome:?}"
    );

    // One path with suites does not excuse another without.
    suites.suite(
        "tests/startup.yaml",
        &STARTUP_TEST
            .replace("policy/", "../policy/")
            .replace("objects/", "../objects/"),
    );
    let outcome = suites.verify(&["tests", "empty"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("empty: no test.gatekeeper.sh Suite found"),
        "{outcome:?}"
    );
    assert_eq!(suites.verify(&["tests"]).code, 0);
}
