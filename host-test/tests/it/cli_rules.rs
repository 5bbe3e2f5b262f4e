//! `meshlife rules`: the rule list, one rule's full entry, and unknown rules.

use crate::cli_support;

use cli_support::*;
use meshlife_policy::catalogue::RULES;

#[test]
fn rules_lists_every_rule_with_id_name_severity_and_summary() {
    let outcome = Workspace::new().run(&["rules"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), RULES.len(), "one line per rule: {outcome:?}");
    for (line, rule) in lines.iter().zip(RULES) {
        let columns: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(columns[0], rule.id, "{line}");
        assert_eq!(columns[1], rule.name, "{line}");
        assert!(
            columns[2].split('/').next() == Some(rule.severity.as_str()),
            "the usual severity first: {line}"
        );
        assert!(line.trim_end().ends_with(rule.summary), "{line}");
    }
}

/// ML403 is a warning that fires as an error when Linkerd's wait reaches the grace period; the
/// list said "warning" only.
#[test]
fn rules_lists_every_severity_a_rule_fires_at() {
    let outcome = Workspace::new().run(&["rules"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let severity_of = |id: &str| {
        let line = outcome
            .stdout
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("{id} in {outcome:?}"));
        line.split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(severity_of("ML403"), "warning/error");
    assert_eq!(severity_of("ML401"), "error/warning");
    assert_eq!(severity_of("ML201"), "warning/info");
    assert_eq!(severity_of("ML301"), "error");

    let entry = Workspace::new().run(&["rules", "ML403"]);
    assert!(
        entry.stdout.starts_with(
            "ML403 linkerd-app-shutdown-unprotected (warning; error when the wait reaches the grace period)\n"
        ),
        "{entry:?}"
    );
}

#[test]
fn rules_with_an_id_or_a_name_shows_the_full_entry() {
    let workspace = Workspace::new();
    let by_id = workspace.run(&["rules", "ML301"]);
    assert_eq!(by_id.code, 0, "{by_id:?}");
    let text = &by_id.stdout;
    assert!(
        text.starts_with("ML301 job-sidecar-never-exits (error)\n"),
        "{by_id:?}"
    );
    for part in [
        "What goes wrong at runtime.",
        "Fires when",
        "Fix",
        "Exempt a workload.",
        "quitquitquit",
        "Kyverno conflicts)",
        "Severity: error\nMeshes: Istio, Linkerd\n",
        "Examples and the full reference: https://github.com/meshlife/meshlife/blob/main/docs/rules.md#ml301-job-sidecar-never-exits\n",
    ] {
        assert!(text.contains(part), "{part} in {by_id:?}");
    }
    for markdown in ["**", "](#", ".md)", "|---"] {
        assert!(
            !text.contains(markdown),
            "plain text, not Markdown ({markdown}): {by_id:?}"
        );
    }
    assert!(
        !text.contains("**Example"),
        "examples stay in docs/rules.md: {by_id:?}"
    );
    assert!(!text.contains("### ML302"), "only the one rule: {by_id:?}");

    let by_name = workspace.run(&["rules", "job-sidecar-never-exits"]);
    assert_eq!(by_name.code, 0, "{by_name:?}");
    assert_eq!(by_name.stdout, by_id.stdout);
    assert_eq!(workspace.run(&["rules", "ml301"]).stdout, by_id.stdout);
}

#[test]
fn every_rule_has_an_entry_with_what_goes_wrong_when_it_fires_and_the_fix() {
    let workspace = Workspace::new();
    for rule in RULES {
        let outcome = workspace.run(&["rules", rule.id]);
        assert_eq!(outcome.code, 0, "{outcome:?}");
        for part in ["What goes wrong", "Fires when", "Fix"] {
            assert!(
                outcome.stdout.contains(part),
                "{} lacks {part}: {outcome:?}",
                rule.id
            );
        }
    }
}

#[test]
fn an_unknown_rule_exits_2_with_a_suggestion_or_the_list() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&["rules", "ML310"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stdout.is_empty(), "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "meshlife: error: no rule `ML310`; did you mean ML301 (job-sidecar-never-exits)?"
        ),
        "{outcome:?}"
    );

    let outcome = workspace.run(&["rules", "job-sidecar-never-exit"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("did you mean ML301"), "{outcome:?}");

    let outcome = workspace.run(&["rules", "nothing-like-it-at-all"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("no rule `nothing-like-it-at-all`; the rules are: ML000"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("ML601"), "{outcome:?}");
}
