//! `meshlife rules`: the rule catalogue on the command line. Without an argument, one line per
//! rule (id, name, usual severity, summary) from `meshlife_policy::catalogue`, the table the
//! policy itself selects rules by; with an id or a name, that rule's entry of docs/rules.md
//! (what goes wrong, when it fires, the fix, how to exempt), embedded at build time so the CLI
//! and the reference cannot drift apart. The examples stay in docs/rules.md, which the entry
//! links to.

use std::fmt::Write as _;

use clap::Args;
use meshlife_policy::catalogue::{self, RULES, Rule};

use crate::cli::{EXIT_INPUT_ERROR, EXIT_OK};

/// The rule reference, as the repository has it.
const RULES_MD: &str = include_str!("../../docs/rules.md");

#[derive(Args, Debug)]
pub struct RulesArgs {
    /// A rule id (`ML301`, any case) or name (`job-sidecar-never-exits`): print its full entry.
    #[arg(value_name = "RULE")]
    pub rule: Option<String>,
}

fn print_reference(text: &str) -> u8 {
    match crate::output::write_stdout(text) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            eprintln!("meshlife: error: {error}");
            EXIT_INPUT_ERROR
        }
    }
}

pub fn run_rules(args: &RulesArgs) -> u8 {
    match &args.rule {
        None => print_reference(&list()),
        Some(wanted) => match entry(wanted) {
            Ok(text) => print_reference(&text),
            Err(message) => {
                eprintln!("meshlife: error: {message}");
                EXIT_INPUT_ERROR
            }
        },
    }
}

/// `ML301  job-sidecar-never-exits  error    The classic sidecar ...`, one line per rule.
pub fn list() -> String {
    let name_width = RULES.iter().map(|rule| rule.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for rule in RULES {
        let _ = writeln!(
            out,
            "{}  {:<name_width$}  {:<7}  {}",
            rule.id,
            rule.name,
            rule.severity.as_str(),
            rule.summary
        );
    }
    out
}

/// The full entry of the rule named by `wanted` (id or name), or an error with a suggestion.
pub fn entry(wanted: &str) -> Result<String, String> {
    let rule = catalogue::find(wanted).ok_or_else(|| unknown(wanted))?;
    let heading = format!("### {} {}", rule.id, rule.name);
    let section = section(RULES_MD, &heading).ok_or_else(|| {
        format!("docs/rules.md, as built into this binary, has no section `{heading}`")
    })?;
    let mut out = format!(
        "{} {} ({})\n{}\n\n{}\n\n",
        rule.id,
        rule.name,
        rule.severity.as_str(),
        rule.summary,
        section.trim()
    );
    let _ = writeln!(
        out,
        "Examples and the full reference: docs/rules.md#{}",
        anchor(rule)
    );
    Ok(out)
}

/// The text under `heading` up to the first example (or the next heading).
fn section<'a>(markdown: &'a str, heading: &str) -> Option<&'a str> {
    let start = markdown
        .match_indices(heading)
        .find(|(at, _)| *at == 0 || markdown.as_bytes()[at - 1] == b'\n')
        .map(|(at, _)| at + heading.len())?;
    let body = &markdown[start..];
    let mut end = body.len();
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        if offset > 0 && (line.starts_with("**Example") || line.starts_with('#')) {
            end = offset;
            break;
        }
        offset += line.len();
    }
    Some(&body[..end])
}

/// GitHub's anchor for `### ML301 job-sidecar-never-exits`.
fn anchor(rule: &Rule) -> String {
    format!("{}-{}", rule.id.to_ascii_lowercase(), rule.name)
}

fn unknown(wanted: &str) -> String {
    match nearest_rules(wanted) {
        Some(candidates) => format!(
            "no rule `{wanted}`; did you mean {candidates}? (`meshlife rules` lists them all)"
        ),
        None => {
            let ids: Vec<&str> = RULES.iter().map(|rule| rule.id).collect();
            format!(
                "no rule `{wanted}`; the rules are: {} (ids or names; `meshlife rules` lists them)",
                ids.join(", ")
            )
        }
    }
}

/// The rules nearest to a misspelt id or name (`ML301 (job-sidecar-never-exits)`, joined by
/// "or"), when one is near enough to be what was meant.
pub fn nearest_rules(wanted: &str) -> Option<String> {
    let wanted_lower = wanted.trim().to_ascii_lowercase();
    let distance_to = |rule: &Rule| {
        edit_distance(&wanted_lower, &rule.id.to_ascii_lowercase())
            .min(edit_distance(&wanted_lower, rule.name))
    };
    let best = RULES.iter().map(distance_to).min()?;
    if best > 2.max(wanted_lower.len() / 4) {
        return None;
    }
    let candidates: Vec<String> = RULES
        .iter()
        .filter(|rule| distance_to(rule) == best)
        .map(|rule| format!("{} ({})", rule.id, rule.name))
        .collect();
    Some(candidates.join(" or "))
}

/// Edit distance counting a swap of two neighbours as one edit (`ML310` is one from `ML301`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut table = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in table.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in table[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (table[i - 1][j] + 1)
                .min(table[i][j - 1] + 1)
                .min(table[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(table[i - 2][j - 2] + 1);
            }
            table[i][j] = best;
        }
    }
    table[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("ml310", "ml301"), 1);
        assert_eq!(edit_distance("ml310", "ml303"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
    }

    #[test]
    fn every_catalogue_rule_has_a_section_in_rules_md() {
        for rule in RULES {
            let heading = format!("### {} {}", rule.id, rule.name);
            assert!(section(RULES_MD, &heading).is_some(), "{heading}");
        }
    }
}
