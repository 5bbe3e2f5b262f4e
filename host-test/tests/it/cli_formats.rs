//! Every `-o` format, parsed and checked structurally.

use crate::cli_support;

use cli_support::*;
use quick_xml::events::Event;
use serde_json::Value;

/// A meshed Job (ML101, ML301, ML303) and a clean ConfigMap in one file, a meshed Deployment
/// (ML101) in another.
fn fixture() -> Workspace {
    let workspace = Workspace::new();
    workspace.write(
        "jobs.yaml",
        &stream(&[
            meshed_job("migrate", "shop"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n"
                .to_string(),
        ]),
    );
    workspace.write("web.yaml", &meshed_deployment("web", "shop"));
    workspace
}

#[test]
fn json_findings_carry_every_documented_field() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let findings = outcome.json();
    assert!(!findings.is_empty());
    for finding in &findings {
        for field in [
            "file",
            "document",
            "apiVersion",
            "kind",
            "namespace",
            "name",
            "rule",
            "check",
            "severity",
            "msg",
            "path",
            "fix",
            "enforcementAction",
        ] {
            assert!(finding.get(field).is_some(), "missing {field} in {finding}");
        }
        assert_eq!(finding["enforcementAction"], "deny");
        assert!(["error", "warning", "info"].contains(&finding["severity"].as_str().unwrap()));
        let msg = finding["msg"].as_str().unwrap();
        let rule = finding["rule"].as_str().unwrap();
        let check = finding["check"].as_str().unwrap();
        assert!(msg.starts_with(&format!("[{rule} {check}]")), "{msg}");
    }
    let job_rules = sorted(
        findings
            .iter()
            .filter(|f| f["name"] == "migrate")
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect(),
    );
    assert_eq!(job_rules, vec!["ML101", "ML301", "ML303"]);
    let ml301 = findings.iter().find(|f| f["rule"] == "ML301").unwrap();
    assert_eq!(ml301["check"], "job-sidecar-never-exits");
    assert_eq!(ml301["severity"], "error");
    assert_eq!(ml301["apiVersion"], "batch/v1");
    assert_eq!(ml301["file"], "jobs.yaml");
    assert_eq!(ml301["document"], 1, "documents count from 1");
}

#[test]
fn json_is_an_empty_array_without_findings() {
    let workspace = Workspace::new();
    workspace.write("ok.yaml", &plain_deployment("a", "b"));
    let outcome = workspace.run(&["check", "ok.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert_eq!(outcome.json(), Vec::<Value>::new());
}

/// `-o json` printed `[]` with exit 2 for a run whose inputs could not be read or were skipped:
/// a machine saw a clean run. The envelope carries the input errors, skipped inputs, workloads
/// not judged and the summary beside the findings; `-o json-array` keeps the bare array.
#[test]
fn json_is_an_envelope_with_errors_skipped_not_judged_and_a_summary() {
    let workspace = Workspace::new();
    workspace.write("broken.yaml", "kind: [unclosed\n");
    workspace.write(
        "mixed.yaml",
        &stream(&[
            meshed_job("migrate", "shop"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n".to_string(),
            plain_deployment("quiet", "shop"),
        ]),
    );
    let outcome = workspace.run(&["check", "broken.yaml", "mixed.yaml", "-o", "json"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    let envelope = outcome.json_envelope();
    assert_eq!(envelope["formatVersion"], 1, "{envelope}");
    let rules: Vec<&str> = envelope["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        sorted(rules.iter().map(|r| r.to_string()).collect()),
        ["ML101", "ML301", "ML303"]
    );
    let errors = envelope["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{envelope}");
    assert_eq!(errors[0]["file"], "broken.yaml");
    assert_eq!(errors[0]["document"], 1);
    assert!(
        errors[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("broken.yaml: document 1")
    );
    let skipped = envelope["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{envelope}");
    assert_eq!(skipped[0]["file"], "mixed.yaml");
    assert_eq!(skipped[0]["document"], 2);
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("Helm or Jinja template"),
        "{envelope}"
    );
    let not_judged = envelope["notJudged"].as_array().unwrap();
    assert_eq!(not_judged.len(), 1, "{envelope}");
    assert_eq!(not_judged[0]["kind"], "not-meshed");
    assert!(
        not_judged[0]["objects"][0]
            .as_str()
            .unwrap()
            .contains("Deployment shop/quiet"),
        "{envelope}"
    );
    let summary = &envelope["summary"];
    assert_eq!(summary["objects"], 2, "{envelope}");
    assert_eq!(summary["files"], 2, "{envelope}");
    assert_eq!(summary["errors"], 1, "{envelope}");
    assert_eq!(summary["warnings"], 1, "{envelope}");
    assert_eq!(summary["info"], 1, "{envelope}");
    assert_eq!(summary["inputErrors"], 1, "{envelope}");
    assert_eq!(summary["skipped"], 1, "{envelope}");
    assert_eq!(summary["notJudged"], 1, "{envelope}");

    // Today's bare array, for one release.
    let array = workspace.run(&["check", "broken.yaml", "mixed.yaml", "-o", "json-array"]);
    let array: Vec<Value> = serde_json::from_str(&array.stdout).expect("an array");
    assert_eq!(array, envelope["findings"].as_array().unwrap().clone());
}

#[test]
fn text_groups_by_file_and_ends_with_a_summary() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let text = &outcome.stdout;
    assert!(!text.contains('\x1b'), "no colour off a terminal: {text}");
    let jobs = text.find("jobs.yaml\n").expect("a jobs.yaml heading");
    let web = text.find("web.yaml\n").expect("a web.yaml heading");
    assert!(jobs < web);
    assert!(text.contains("Job shop/migrate (document 1)"), "{text}");
    assert!(text.contains("ML301 job-sidecar-never-exits"), "{text}");
    assert!(text.contains("fix:"), "{text}");
    // The clean ConfigMap is not listed.
    assert!(!text.contains("settings"), "{text}");
    let summary = text.lines().last().unwrap();
    assert_eq!(
        summary,
        "3 objects checked in 2 files: 1 error, 2 warnings, 1 info finding (1 not failing the run)"
    );
}

#[test]
fn exemptions_in_use_are_listed_with_their_reason() {
    let workspace = Workspace::new();
    let exempted = meshed_deployment("legacy", "shop").replace(
        "      annotations:\n",
        "      annotations:\n        meshlife.io/exempt: ML101\n        meshlife.io/exempt-reason: \"waits for its own readiness gate, see TICKET-12\"\n",
    );
    let unexplained = meshed_deployment("other", "shop").replace(
        "      annotations:\n",
        "      annotations:\n        meshlife.io/exempt: \"*\"\n",
    );
    workspace.write("exempt.yaml", &stream(&[exempted, unexplained]));
    let outcome = workspace.run(&["check", "exempt.yaml"]);
    assert_eq!(
        outcome.code, 0,
        "exempted findings do not fail the run: {outcome:?}"
    );
    let text = &outcome.stdout;
    assert!(text.contains("Exemptions in use:"), "{text}");
    assert!(text.contains("Deployment shop/legacy (document 1): ML101 — reason: waits for its own readiness gate, see TICKET-12"), "{text}");
    assert!(
        text.contains("Deployment shop/other (document 2): * — no reason given"),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().contains("2 exemptions in use"),
        "{text}"
    );
}

/// A misspelt rule in `meshlife.io/exempt` exempts nothing: it was listed and counted as in
/// use. Now it is a warning naming the nearest rule, and only exemptions the policy applies are
/// counted (one on a controller's own metadata, which the policy ignores, is not).
#[test]
fn misspelt_and_misplaced_exemptions_are_not_counted_and_the_misspelling_is_a_warning() {
    let workspace = Workspace::new();
    let misspelt = meshed_deployment("legacy", "shop").replace(
        "      annotations:\n",
        "      annotations:\n        meshlife.io/exempt: ML11\n        meshlife.io/exempt-reason: \"legacy\"\n",
    );
    let misplaced = meshed_deployment("other", "shop").replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    meshlife.io/exempt: ML101\n",
        1,
    );
    let applied = meshed_deployment("third", "shop").replace(
        "      annotations:\n",
        "      annotations:\n        meshlife.io/exempt: ML101\n",
    );
    workspace.write("exempt.yaml", &stream(&[misspelt, misplaced, applied]));
    let outcome = workspace.run(&["check", "exempt.yaml"]);
    let text = &outcome.stdout;
    assert!(
        outcome.stderr.contains(
            "meshlife: warning: exempt.yaml: Deployment shop/legacy (document 1): \
             meshlife.io/exempt names \"ML11\", which is not a rule, so it exempts nothing (did \
             you mean ML101 (startup-no-hold)?)"
        ),
        "{outcome:?}"
    );
    assert!(
        text.contains("ML11 — reason: legacy [not a rule, exempting nothing: ML11]"),
        "{text}"
    );
    // The misspelt one did not exempt its ML101, the misplaced one neither.
    assert_eq!(
        text.matches("warning ML101 startup-no-hold").count(),
        2,
        "{text}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap()
            .ends_with("; 1 exemption in use"),
        "{text}"
    );
}

/// A minimal element tree from quick-xml events: enough to check the JUnit structure.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
    text: String,
}

impl Element {
    fn attribute(&self, name: &str) -> &str {
        self.attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .unwrap_or_else(|| {
                panic!("<{}> has no attribute {name}", self.name);
            })
    }

    fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |child| child.name == name)
    }
}

fn parse_xml(text: &str) -> Element {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut stack: Vec<Element> = vec![Element::default()];
    let element_of = |start: &quick_xml::events::BytesStart<'_>| Element {
        name: start.name().as_ref().to_string(),
        attributes: start
            .attributes()
            .map(|attribute| {
                let attribute = attribute.expect("well-formed attribute");
                (
                    attribute.key.as_ref().to_string(),
                    attribute
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .expect("valid escapes")
                        .into_owned(),
                )
            })
            .collect(),
        ..Element::default()
    };
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(start) => stack.push(element_of(&start)),
            Event::Empty(start) => {
                let element = element_of(&start);
                stack.last_mut().unwrap().children.push(element);
            }
            Event::End(_) => {
                let element = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(element);
            }
            Event::Text(text) => stack
                .last_mut()
                .unwrap()
                .text
                .push_str(&text.xml10_content()),
            Event::GeneralRef(reference) => {
                let name = reference.xml10_content().into_owned();
                let resolved = quick_xml::escape::unescape(&format!("&{name};"))
                    .expect("known entity")
                    .into_owned();
                stack.last_mut().unwrap().text.push_str(&resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "every element is closed");
    stack.pop().unwrap()
}

#[test]
fn junit_has_a_suite_per_file_a_case_per_object_and_a_failure_per_failing_finding() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "junit"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
    );
    let document = parse_xml(&outcome.stdout);
    let root = document
        .children_named("testsuites")
        .next()
        .expect("<testsuites>");
    assert_eq!(root.attribute("tests"), "3");
    // `failures` counts failing test cases, not findings: the Job (ML301 and ML101 fail the run
    // at --fail-on warning, ML303 does not) and the Deployment (ML101); the ConfigMap passes.
    assert_eq!(root.attribute("failures"), "2");
    assert_eq!(root.attribute("errors"), "0");
    let suites: Vec<&Element> = root.children_named("testsuite").collect();
    let names: Vec<&str> = suites.iter().map(|suite| suite.attribute("name")).collect();
    assert_eq!(names, vec!["jobs.yaml", "web.yaml"]);
    let jobs = suites[0];
    assert_eq!(jobs.attribute("tests"), "2");
    assert_eq!(jobs.attribute("failures"), "1");
    assert_eq!(suites[1].attribute("failures"), "1");
    let cases: Vec<&Element> = jobs.children_named("testcase").collect();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0].attribute("name"), "Job shop/migrate (document 1)");
    assert_eq!(cases[0].attribute("classname"), "jobs.yaml");
    let failure_types: Vec<&str> = cases[0]
        .children_named("failure")
        .map(|failure| failure.attribute("type"))
        .collect();
    assert_eq!(
        sorted(failure_types.iter().map(|s| s.to_string()).collect()),
        vec!["ML101", "ML301"]
    );
    let ml301 = cases[0]
        .children_named("failure")
        .find(|failure| failure.attribute("type") == "ML301")
        .unwrap();
    assert!(
        ml301
            .attribute("message")
            .starts_with("[ML301 job-sidecar-never-exits]")
    );
    assert!(ml301.text.contains("fix:"), "{}", ml301.text);
    let system_out = cases[0]
        .children_named("system-out")
        .next()
        .expect("the info finding");
    assert!(system_out.text.contains("ML303"), "{}", system_out.text);
    assert!(cases[1].children.is_empty(), "the ConfigMap passes");
}

#[test]
fn junit_reports_unreadable_documents_as_errors() {
    let workspace = Workspace::new();
    workspace.write("broken.yaml", "apiVersion: v1\nkind: [\n");
    let outcome = workspace.run(&["check", "broken.yaml", "-o", "junit"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    let document = parse_xml(&outcome.stdout);
    let root = document.children_named("testsuites").next().unwrap();
    assert_eq!(root.attribute("errors"), "1");
    let suite = root.children_named("testsuite").next().unwrap();
    let case = suite.children_named("testcase").next().unwrap();
    assert_eq!(case.attribute("name"), "document 1");
    let error = case.children_named("error").next().expect("<error>");
    assert!(error.attribute("message").contains("invalid YAML"));
}

#[test]
fn sarif_is_version_2_1_0_with_rules_results_and_locations() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "sarif"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let sarif: Value = serde_json::from_str(&outcome.stdout).expect("SARIF is JSON");
    assert_eq!(sarif["version"], "2.1.0");
    assert!(sarif["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let runs = sarif["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "meshlife");
    let rules = driver["rules"].as_array().expect("rules");
    let rule_ids: Vec<&str> = rules
        .iter()
        .map(|rule| rule["id"].as_str().unwrap())
        .collect();
    assert_eq!(rule_ids, vec!["ML101", "ML301", "ML303"]);
    let results = runs[0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 4);
    for result in results {
        let rule_id = result["ruleId"].as_str().unwrap();
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], rule_id);
        assert!(["error", "warning", "note"].contains(&result["level"].as_str().unwrap()));
        assert!(
            result["message"]["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("[{rule_id}"))
        );
        let location = &result["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().unwrap();
        assert!(uri == "jobs.yaml" || uri == "web.yaml", "{uri}");
        assert!(location["region"]["startLine"].as_u64().unwrap() >= 1);
    }
    let level_of = |rule: &str| {
        results.iter().find(|r| r["ruleId"] == rule).unwrap()["level"]
            .as_str()
            .unwrap()
    };
    assert_eq!(level_of("ML301"), "error");
    assert_eq!(level_of("ML101"), "warning");
    assert_eq!(level_of("ML303"), "note");
    assert_eq!(runs[0]["invocations"][0]["executionSuccessful"], true);
}

/// Code-scanning UIs show a rule's help beside each alert: the descriptor carried only the id
/// and name.
#[test]
fn sarif_rules_carry_their_description_help_and_address() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "sarif"]);
    let sarif: Value = serde_json::from_str(&outcome.stdout).expect("SARIF is JSON");
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    let ml301 = rules
        .iter()
        .find(|rule| rule["id"] == "ML301")
        .expect("ML301");
    let full = ml301["fullDescription"]["text"].as_str().unwrap();
    assert!(
        full.starts_with("Batch pod with a classic proxy and nothing that stops it")
            && full.contains("What goes wrong at runtime. A Job completes when every container"),
        "{full}"
    );
    let help = ml301["help"]["text"].as_str().unwrap();
    assert!(
        help.contains("Fix, one of:") && help.contains("quitquitquit"),
        "{help}"
    );
    assert!(!help.contains("**"), "{help}");
    let markdown = ml301["help"]["markdown"].as_str().unwrap();
    assert!(markdown.contains("**Fix**"), "{markdown}");
    assert!(
        !markdown.contains("](#"),
        "anchors resolve outside the repository: {markdown}"
    );
    assert_eq!(
        ml301["helpUri"],
        "https://github.com/meshlife/meshlife/blob/main/docs/rules.md#ml301-job-sidecar-never-exits"
    );
    for rule in rules {
        for field in ["fullDescription", "help", "helpUri"] {
            assert!(rule.get(field).is_some(), "{field} in {rule}");
        }
    }
}

#[test]
fn sarif_carries_input_errors_as_notifications() {
    let workspace = Workspace::new();
    workspace.write("broken.yaml", "kind: [\n");
    let outcome = workspace.run(&["check", "broken.yaml", "-o", "sarif"]);
    assert_eq!(outcome.code, 2);
    let sarif: Value = serde_json::from_str(&outcome.stdout).unwrap();
    let invocation = &sarif["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let notification = &invocation["toolExecutionNotifications"][0];
    assert_eq!(notification["level"], "error");
    assert!(
        notification["message"]["text"]
            .as_str()
            .unwrap()
            .contains("broken.yaml: document 1")
    );
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 0);
}

#[test]
fn tap_13_has_a_plan_and_a_test_point_per_object() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "tap"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], "TAP version 13");
    assert_eq!(lines[1], "1..3");
    let points: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|line| line.starts_with("ok ") || line.starts_with("not ok "))
        .collect();
    assert_eq!(points.len(), 3);
    assert!(
        points[0].starts_with("not ok 1 - jobs.yaml: Job shop/migrate"),
        "{}",
        points[0]
    );
    assert!(
        points[1].starts_with("ok 2 - jobs.yaml: ConfigMap shop/settings"),
        "{}",
        points[1]
    );
    assert!(
        points[2].starts_with("not ok 3 - web.yaml: Deployment shop/web"),
        "{}",
        points[2]
    );
    // The YAML diagnostic block lists the findings.
    assert!(
        outcome
            .stdout
            .contains("  ---\n  findings:\n    - rule: \"ML101\""),
        "{}",
        outcome.stdout
    );
    assert!(outcome.stdout.contains("  ...\n"));
}

/// Annotations point at the field the finding names (`spec.template.spec`), so the pull
/// request shows them on that line; ML303's absent `spec.activeDeadlineSeconds` at `spec`.
#[test]
fn github_annotations_point_at_file_and_line() {
    let outcome = fixture().run(&["check", "jobs.yaml", "web.yaml", "-o", "github"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let commands: Vec<&str> = outcome
        .stdout
        .lines()
        .filter(|line| line.starts_with("::"))
        .collect();
    assert_eq!(commands.len(), 4, "{}", outcome.stdout);
    assert!(commands.iter().any(|c| {
        c.starts_with("::error file=jobs.yaml,line=13,col=5,title=ML301 job-sidecar-never-exits")
    }));
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("::warning file=web.yaml,line=16,col=5,title=ML101"))
    );
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("::notice file=jobs.yaml,line=6,col=1,title=ML303"))
    );
    for command in &commands {
        let (properties, message) = command[2..]
            .split_once("::")
            .expect("::command props::message");
        assert!(!properties.contains('\n') && !message.contains('\n'));
        assert!(message.contains("%0Afix: "), "{message}");
    }
    assert!(
        outcome
            .stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("3 objects checked in 2 files")
    );
}

#[test]
fn github_line_counts_from_the_top_of_the_file_not_the_document() {
    let workspace = Workspace::new();
    workspace.write(
        "two.yaml",
        &stream(&[plain_deployment("a", "b"), meshed_job("j", "b")]),
    );
    let outcome = workspace.run(&["check", "two.yaml", "-o", "github"]);
    let plain_lines = plain_deployment("a", "b").lines().count();
    // Line plain_lines + 1 is the `---`; the Job's `apiVersion` is the line after it, and its
    // `spec.template.spec` twelve lines further.
    let expected = format!("::error file=two.yaml,line={},col=5,", plain_lines + 2 + 12);
    assert!(
        outcome.stdout.contains(&expected),
        "{expected} in {}",
        outcome.stdout
    );
}

/// Every format counts documents from 1 and points at the object's first key: here the Job is
/// document 2, and its `apiVersion` is on line `job_line`, after a `---`, a comment and a blank.
#[test]
fn every_format_counts_documents_from_1_and_points_at_the_first_key() {
    let workspace = Workspace::new();
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n";
    let text = format!(
        "{config_map}---\n# the batch job\n\n{}",
        meshed_job("migrate", "shop")
    );
    let job_line = config_map.lines().count() + 4;
    assert!(
        text.lines()
            .nth(job_line - 1)
            .unwrap()
            .starts_with("apiVersion: batch/v1")
    );
    workspace.write("jobs.yaml", &text);
    let run = |format: &str| {
        let outcome = workspace.run(&["check", "jobs.yaml", "-o", format]);
        assert_eq!(outcome.code, 1, "{outcome:?}");
        outcome.stdout
    };

    let text = run("text");
    assert!(text.contains("Job shop/migrate (document 2)"), "{text}");

    let json: Vec<Value> = serde_json::from_str(&run("json-array")).unwrap();
    assert!(!json.is_empty());
    for finding in &json {
        assert_eq!(finding["document"], 2, "{finding}");
        assert_eq!(finding["line"], job_line as u64, "{finding}");
    }

    // SARIF and GitHub point at the field the finding names (`spec.template.spec` for ML101 and
    // ML301; ML303's `spec.activeDeadlineSeconds` is absent, so its parent `spec`).
    let field_position = |rule: &str| match rule {
        "ML303" => (job_line + 5, 1),
        _ => (job_line + 12, 5),
    };
    let sarif: Value = serde_json::from_str(&run("sarif")).unwrap();
    for result in sarif["runs"][0]["results"].as_array().unwrap() {
        assert_eq!(result["properties"]["document"], 2, "{result}");
        let (line, column) = field_position(result["ruleId"].as_str().unwrap());
        let region = &result["locations"][0]["physicalLocation"]["region"];
        assert_eq!(region["startLine"], line as u64, "{result}");
        assert_eq!(region["startColumn"], column as u64, "{result}");
    }

    let junit = run("junit");
    assert!(
        junit.contains("name=\"Job shop/migrate (document 2)\""),
        "{junit}"
    );

    let tap = run("tap");
    assert!(
        tap.contains("not ok 2 - jobs.yaml: Job shop/migrate (document 2)"),
        "{tap}"
    );

    let github = run("github");
    for line in github.lines().filter(|line| line.starts_with("::")) {
        let rule = &line[line.find("title=").unwrap() + 6..][..5];
        let (field_line, column) = field_position(rule);
        assert!(
            line.contains(&format!(",line={field_line},col={column},")),
            "{line}"
        );
        assert!(line.contains("(document 2)"), "{line}");
    }

    // JSON: the same place as fieldLine and fieldColumn.
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    for finding in json["findings"].as_array().unwrap() {
        let (line, column) = field_position(finding["rule"].as_str().unwrap());
        assert_eq!(
            (
                finding["fieldLine"].as_u64(),
                finding["fieldColumn"].as_u64()
            ),
            (Some(line as u64), Some(column as u64)),
            "{finding}"
        );
    }

    // Text: `file:line:column:` on every finding, and the message without the
    // `[ML301 job-sidecar-never-exits]` printed just before it.
    let text = run("text");
    let findings: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("    jobs.yaml:"))
        .collect();
    assert_eq!(findings.len(), 3, "{text}");
    for rule in ["ML101", "ML301", "ML303"] {
        let (line, column) = field_position(rule);
        assert!(
            findings.iter().any(|finding| finding
                .starts_with(&format!("    jobs.yaml:{line}:{column}: "))
                && finding.contains(rule)),
            "{rule} at {line}:{column} in {text}"
        );
    }
    assert!(!text.contains("      [ML"), "{text}");

    // Errors count the same way, with the line the parser names or the document's first key.
    workspace.write(
        "broken.yaml",
        &format!("{config_map}---\n# an object without apiVersion\nkind: Pod\n"),
    );
    let outcome = workspace.run(&["check", "broken.yaml", "-o", "junit"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    let broken_line = config_map.lines().count() + 3;
    assert!(
        outcome.stderr.contains(&format!(
            "broken.yaml: document 2 (line {broken_line}): field `apiVersion`"
        )),
        "{outcome:?}"
    );
    assert!(
        outcome.stdout.contains("name=\"document 2\""),
        "{outcome:?}"
    );
}

/// A flow-style YAML document and a JSON manifest had every finding at the document's first
/// line; they point at the field, as block-style YAML does.
#[test]
fn flow_style_and_json_findings_point_at_the_field() {
    let workspace = Workspace::new();
    let flow = "# one line per level\n{apiVersion: batch/v1, kind: Job, metadata: {name: migrate, namespace: shop},\n spec: {template: {metadata: {labels: {sidecar.istio.io/inject: \"true\"}, annotations: {sidecar.istio.io/nativeSidecar: \"false\"}},\n   spec: {restartPolicy: Never,\n     containers: [{name: task, image: \"registry.example/task:1\"}]}}}}\n";
    workspace.write("flow.yaml", flow);
    let json = r#"{
  "apiVersion": "batch/v1",
  "kind": "Job",
  "metadata": {"name": "migrate", "namespace": "shop"},
  "spec": {
    "template": {
      "metadata": {"labels": {"sidecar.istio.io/inject": "true"}, "annotations": {"sidecar.istio.io/nativeSidecar": "false"}},
      "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "task", "image": "registry.example/task:1"}]
      }
    }
  }
}
"#;
    workspace.write("job.json", json);
    let positions = |file: &str| -> Vec<(String, u64, u64)> {
        let outcome = workspace.run(&["check", file, "-o", "json"]);
        assert_eq!(outcome.code, 1, "{outcome:?}");
        let json: Value = serde_json::from_str(&outcome.stdout).unwrap();
        let mut found: Vec<(String, u64, u64)> = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|finding| {
                (
                    finding["rule"].as_str().unwrap().to_string(),
                    finding["fieldLine"].as_u64().unwrap(),
                    finding["fieldColumn"].as_u64().unwrap(),
                )
            })
            .collect();
        found.sort();
        found
    };
    // ML101 and ML301 name spec.template.spec; ML303's spec.activeDeadlineSeconds is absent, so
    // its parent spec.
    assert_eq!(
        positions("flow.yaml"),
        [
            ("ML101".to_string(), 4, 4),
            ("ML301".to_string(), 4, 4),
            ("ML303".to_string(), 3, 2),
        ]
    );
    assert_eq!(
        positions("job.json"),
        [
            ("ML101".to_string(), 8, 7),
            ("ML301".to_string(), 8, 7),
            ("ML303".to_string(), 5, 3),
        ]
    );
}

/// JSON input too: the line is the first key's, and items of a List count from 1.
#[test]
fn json_documents_and_list_items_count_from_1() {
    let workspace = Workspace::new();
    let job: Value = serde_yaml_ng::from_str(&meshed_job("batch", "jobs")).unwrap();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, job]});
    workspace.write(
        "objects.json",
        &format!("\n{{}}\n{}", serde_json::to_string_pretty(&list).unwrap()).replacen(
            "{}",
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}",
            1,
        ),
    );
    let outcome = workspace.run(&["check", "objects.json", "-o", "json"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    for finding in outcome.json() {
        assert_eq!(finding["document"], 2, "{finding}");
        assert_eq!(finding["item"], 2, "{finding}");
        // Line 3 holds the List's `{`, line 4 its first key.
        assert_eq!(finding["line"], 4, "{finding}");
    }
    let text = workspace.run(&["check", "objects.json"]).stdout;
    assert!(
        text.contains("Job jobs/batch (document 2, item 2)"),
        "{text}"
    );
}
