//! The suite runner's unit tests.

use std::path::Path;
use std::time::Duration;

use meshlife_policy::{Severity, Violation};
use serde_json::Value;

use super::assertions::check_assertion;
use super::outcome::{CaseResult, Problem, TestResult};
use super::suite::{AssertionDocument, CaseDocument, TestDocument, resolve};
use super::*;

fn violation(msg: &str) -> Violation {
    Violation {
        msg: msg.into(),
        details: meshlife_policy::violation::Details {
            rule: "ML101".into(),
            name: "startup-no-hold".into(),
            severity: Severity::Warning,
            path: "spec".into(),
            fix: "fix".into(),
            mesh: None,
            container: None,
        },
    }
}

fn assertion(violations: Option<Value>, message: Option<&str>) -> AssertionDocument {
    AssertionDocument {
        violations,
        message: message.map(str::to_string),
    }
}

#[test]
fn filters_follow_gator() {
    let test = |name: &str, cases: &[&str]| TestDocument {
        name: name.into(),
        cases: cases
            .iter()
            .map(|case| CaseDocument {
                name: (*case).into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let either = Filter::new("quit").unwrap();
    assert!(either.matches_test(&test("batch", &["job-quitquitquit"])));
    assert!(!either.matches_test(&test("batch", &["job-no-exit"])));
    assert!(either.matches_case("batch", "job-quitquitquit"));
    assert!(!either.matches_case("batch", "job-no-exit"));
    assert!(either.matches_case("quit-tests", "anything"));

    let both = Filter::new("^batch$//no-exit").unwrap();
    assert!(both.matches_test(&test("batch", &[])));
    assert!(!both.matches_test(&test("batch-linkerd", &[])));
    assert!(both.matches_case("batch", "job-no-exit"));
    assert!(!both.matches_case("batch", "job-quitquitquit"));

    assert!(Filter::new("a//b//c").is_err());
    assert!(Filter::new("(").is_err());
    assert!(matches!(Filter::new("").unwrap(), Filter::All));
}

#[test]
fn assertions_count_matching_messages() {
    let found = [
        violation("[ML101 startup-no-hold] a"),
        violation("[ML404 long-lived-streams] b"),
    ];
    assert!(check_assertion(&assertion(None, None), &found).is_ok());
    assert!(check_assertion(&assertion(Some("no".into()), Some("ML3")), &found).is_ok());
    assert!(check_assertion(&assertion(Some(1.into()), Some("ML101")), &found).is_ok());
    assert!(check_assertion(&assertion(Some(2.into()), None), &found).is_ok());
    let failure =
        check_assertion(&assertion(Some("yes".into()), Some("ML301")), &found).unwrap_err();
    assert!(
        matches!(&failure, Problem::Failed(message)
        if message.starts_with(r#"unexpected number of violations: got 0 violations containing "ML301" but want at least 1; got messages:"#)
            && message.contains("[ML404 long-lived-streams] b")),
        "{failure:?}"
    );
    let failure = check_assertion(&assertion(Some(0.into()), None), &found).unwrap_err();
    assert!(
        failure
            .message()
            .contains("got 2 violations but want exactly 0"),
        "{failure:?}"
    );
    assert!(check_assertion(&assertion(Some("no".into()), None), &[]).is_ok());
}

#[test]
fn malformed_assertions_are_broken_not_failed() {
    assert!(
        check_assertion(&assertion(Some("maybe".into()), None), &[])
            .unwrap_err()
            .is_broken()
    );
    assert!(
        check_assertion(&assertion(Some((-1).into()), None), &[])
            .unwrap_err()
            .is_broken()
    );
    assert!(
        check_assertion(&assertion(Some(true.into()), None), &[])
            .unwrap_err()
            .is_broken()
    );
    assert!(
        check_assertion(&assertion(None, Some("(")), &[])
            .unwrap_err()
            .is_broken()
    );
}

#[test]
fn paths_are_relative_to_the_suite() {
    assert_eq!(
        resolve(Path::new("suites"), "object", "../x.yaml").unwrap(),
        Path::new("suites/../x.yaml")
    );
    assert!(
        resolve(Path::new("suites"), "object", "/etc/x.yaml")
            .unwrap_err()
            .message()
            .contains("absolute")
    );
    assert_eq!(
        resolve(Path::new("suites"), "template", "").unwrap_err(),
        Problem::Broken("missing template".into())
    );
}

#[test]
fn report_mimics_go_test() {
    let results = vec![SuiteResult {
        path: "suites/batch.yaml".into(),
        skipped: false,
        runtime: Duration::from_millis(12),
        tests: vec![
            TestResult {
                name: "batch".into(),
                skipped: false,
                problem: None,
                runtime: Duration::from_millis(10),
                cases: vec![
                    CaseResult {
                        name: "fires".into(),
                        skipped: false,
                        problem: None,
                        runtime: Duration::from_millis(1),
                    },
                    CaseResult {
                        name: "near-miss".into(),
                        skipped: false,
                        problem: Some(Problem::Failed("why\nmore".into())),
                        runtime: Duration::from_millis(2),
                    },
                    CaseResult {
                        name: "later".into(),
                        skipped: true,
                        problem: None,
                        runtime: Duration::ZERO,
                    },
                ],
            },
            TestResult {
                name: "off".into(),
                skipped: true,
                problem: None,
                runtime: Duration::ZERO,
                cases: vec![],
            },
        ],
    }];
    assert_eq!(
        render(&results, false),
        "    --- FAIL: batch/near-miss\t(0.002s)\n        why\n        more\n--- FAIL: batch\t(0.010s)\nFAIL\tsuites/batch.yaml\t0.012s\nFAIL\n"
    );
    let verbose = render(&results, true);
    assert!(
        verbose.starts_with(
            "=== RUN   batch\n    === RUN   batch/fires\n    --- PASS: batch/fires\t(0.001s)\n"
        ),
        "{verbose}"
    );
    assert!(verbose.contains("    === SKIP  batch/later\n"), "{verbose}");
    assert!(verbose.contains("=== SKIP  off\n"), "{verbose}");
}
