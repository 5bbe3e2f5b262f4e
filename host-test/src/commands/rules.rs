//! `meshlife rules`: the rule catalogue on the command line, one line per rule, or one rule's
//! entry of docs/rules.md as plain text (`rule_reference` reads both).

use std::fmt::Write as _;

use clap::Args;
use meshlife_policy::catalogue::RULES;

use crate::rule_reference::{entry, severities};
use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error};

#[derive(Args, Debug)]
pub struct RulesArgs {
    /// A rule id (`ML301`, any case) or name (`job-sidecar-never-exits`): print its full entry.
    #[arg(
        value_name = "RULE",
        value_parser = crate::rule_reference::RuleNames,
        hide_possible_values = true
    )]
    pub rule: Option<String>,
}

fn print_reference(text: &str) -> u8 {
    match crate::terminal::write_stdout(text) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            print_error(error);
            EXIT_ERROR
        }
    }
}

pub fn run(args: &RulesArgs) -> u8 {
    match &args.rule {
        None => print_reference(&list()),
        Some(wanted) => match entry(wanted) {
            Ok(text) => print_reference(&text),
            Err(message) => {
                print_error(message);
                EXIT_ERROR
            }
        },
    }
}

/// `ML301  job-sidecar-never-exits  error          The classic sidecar ...`, one line per rule;
/// a rule that fires at more than one severity shows them all, its usual one first
/// (`warning/error`).
pub fn list() -> String {
    let name_width = RULES.iter().map(|rule| rule.name.len()).max().unwrap_or(0);
    let severities: Vec<String> = RULES.iter().map(severities).collect();
    let severity_width = severities.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (rule, severity) in RULES.iter().zip(&severities) {
        let _ = writeln!(
            out,
            "{}  {:<name_width$}  {:<severity_width$}  {}",
            rule.id, rule.name, severity, rule.summary
        );
    }
    out
}
