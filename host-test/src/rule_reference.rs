//! The rule reference behind `meshlife rules`, SARIF's rule help and the "did you mean" of a
//! misspelt rule: `meshlife_policy::catalogue` (the table the policy itself selects rules by)
//! and docs/rules.md, embedded at build time so the CLI and the reference cannot drift apart.

use std::fmt::Write as _;

use meshlife_policy::catalogue::{self, RULES, Rule};

/// The rule reference, as the repository has it.
const RULES_MD: &str = include_str!("../embedded/rules.md");

/// The full entry of the rule named by `wanted` (id or name), or an error with a suggestion:
/// plain text (no Markdown emphasis, links reduced to their words), since it is read in a
/// terminal, and the address of the entry in the published docs, since an installed binary has
/// no repository beside it.
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
        plain(&severity_phrase(rule)),
        rule.summary,
        plain(section.trim())
    );
    let _ = writeln!(out, "Examples and the full reference: {}", docs_url(rule));
    Ok(out)
}

/// A rule's reference as SARIF's reportingDescriptor wants it: the full description (the summary
/// and what goes wrong at runtime), the entry as plain text and as Markdown whose links work
/// outside the repository, and the entry's published address.
pub struct RuleHelp {
    pub full_description: String,
    pub text: String,
    pub markdown: String,
    pub uri: String,
}

pub fn help(id: &str) -> Option<RuleHelp> {
    let rule = catalogue::find(id)?;
    let heading = format!("### {} {}", rule.id, rule.name);
    let section = section(RULES_MD, &heading)?.trim();
    let uri = docs_url(rule);
    let what_goes_wrong = section
        .split("\n\n")
        .find(|paragraph| paragraph.starts_with("**What goes wrong"))
        .map(|paragraph| {
            plain(paragraph)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        });
    let full_description = match what_goes_wrong {
        Some(paragraph) => format!("{} {paragraph}", rule.summary),
        None => rule.summary.to_string(),
    };
    let page = uri.split('#').next().unwrap_or_default();
    Some(RuleHelp {
        full_description,
        text: format!(
            "{}\n\nExamples and the full reference: {uri}",
            plain(section)
        ),
        markdown: format!(
            "{}\n\n[Examples and the full reference]({uri})",
            section.replace("](#", &format!("]({page}#"))
        ),
        uri,
    })
}

/// Where a rule's entry is published: its section of docs/rules.md in the repository.
pub fn docs_url(rule: &Rule) -> String {
    format!(
        "{}/blob/main/docs/rules.md#{}",
        env!("CARGO_PKG_REPOSITORY"),
        anchor(rule)
    )
}

/// The severity column of the rule's row in docs/rules.md's table (`warning (error when the wait
/// reaches the grace period)`): the catalogue holds the usual severity only, and the table says
/// when a finding is raised or lowered. The catalogue's severity when the row is missing.
fn severity_text(rule: &Rule) -> String {
    let row_start = format!("| [{}](", rule.id);
    RULES_MD
        .lines()
        .find(|line| line.starts_with(&row_start))
        .and_then(|row| row.split('|').nth(3))
        .map(|column| column.trim().to_string())
        .unwrap_or_else(|| rule.severity.as_str().to_string())
}

/// A Markdown table as `header: value` lines, one block per row: a terminal does not align it.
fn plain_tables(markdown: &str) -> String {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|cell| cell.trim().to_string())
            .collect()
    };
    let mut out = String::with_capacity(markdown.len());
    let mut header: Option<Vec<String>> = None;
    for line in markdown.split_inclusive('\n') {
        if !line.trim_start().starts_with('|') {
            header = None;
            out.push_str(line);
            continue;
        }
        let row = cells(line);
        match &header {
            None => header = Some(row),
            Some(_)
                if row
                    .iter()
                    .all(|cell| cell.chars().all(|c| c == '-' || c == ':')) => {}
            Some(names) => {
                for (name, value) in names.iter().zip(&row) {
                    let name = name[..1].to_ascii_uppercase() + &name[1..];
                    let _ = writeln!(out, "{name}: {value}");
                }
            }
        }
    }
    out
}

/// `warning; error when the wait reaches the grace period`, for the entry's first line.
fn severity_phrase(rule: &Rule) -> String {
    let text = severity_text(rule);
    match text.strip_suffix(')').and_then(|t| t.split_once(" (")) {
        Some((usual, when)) => format!("{usual}; {when}"),
        None => text,
    }
}

/// Every severity the rule fires at, its usual one first: `warning/error`.
pub(crate) fn severities(rule: &Rule) -> String {
    let text = severity_text(rule);
    let mut found = vec![rule.severity.as_str()];
    for word in text.split(|c: char| !c.is_ascii_alphabetic()) {
        if ["error", "warning", "info"].contains(&word) && !found.contains(&word) {
            found.push(word);
        }
    }
    found.join("/")
}

/// Markdown as a terminal shows it: `**bold**` and `*em*` markers dropped, `[words](target)`
/// reduced to `words` (the targets are this document's anchors or files of the repository, which
/// an installed binary does not have), backquotes kept (they mark values to type).
fn plain(markdown: &str) -> String {
    let without_emphasis = plain_tables(&markdown.replace("**", ""));
    let mut out = String::with_capacity(without_emphasis.len());
    let mut rest = without_emphasis.as_str();
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find("](").and_then(|close| {
            let target = &after[close + 2..];
            target.find(')').map(|end| (close, close + 2 + end + 1))
        });
        match link {
            Some((close, consumed)) if !after[..close].contains(['[', ']', '\n']) => {
                out.push_str(&rest[..open]);
                out.push_str(&after[..close]);
                rest = &after[consumed..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
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
    // No rule name is longer; beyond this no rule is near, and an exemption entry (user input)
    // of megabytes would otherwise cost a table of its length times each rule's.
    const LONGEST_NEAR: usize = 64;
    if wanted_lower.len() > LONGEST_NEAR {
        return None;
    }
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
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
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

/// The value parser of every flag that names rules (`--rules`, `--exclude-rules`, `meshlife
/// rules RULE`): it takes any text, as the command says "did you mean" itself, and offers the
/// rule ids and names to shell completions (`meshlife completions`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleNames;

impl clap::builder::TypedValueParser for RuleNames {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(RULES.iter().flat_map(|rule| {
            [
                clap::builder::PossibleValue::new(rule.id).help(rule.summary),
                clap::builder::PossibleValue::new(rule.name).help(rule.summary),
            ]
        })))
    }
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
    fn a_table_becomes_one_line_per_cell() {
        assert_eq!(
            plain("Intro\n\n| severity | meshes |\n|---|---|\n| error | Istio, Linkerd |\n\nAfter"),
            "Intro\n\nSeverity: error\nMeshes: Istio, Linkerd\n\nAfter"
        );
    }

    #[test]
    fn markdown_links_and_emphasis_become_plain_words() {
        assert_eq!(
            plain(
                "**Fix**: `c[1]` see [Kyverno conflicts](#conflicts) and [the CLI](cli.md), `x[0]` [a]"
            ),
            "Fix: `c[1]` see Kyverno conflicts and the CLI, `x[0]` [a]"
        );
    }

    #[test]
    fn every_catalogue_rule_has_a_row_whose_severities_start_with_its_usual_one() {
        for rule in RULES {
            let row_start = format!("| [{}](", rule.id);
            assert!(RULES_MD.contains(&row_start), "{} has no row", rule.id);
            assert!(
                severity_text(rule).starts_with(rule.severity.as_str()),
                "{}: {}",
                rule.id,
                severity_text(rule)
            );
        }
    }

    #[test]
    fn every_catalogue_rule_has_a_section_in_rules_md() {
        for rule in RULES {
            let heading = format!("### {} {}", rule.id, rule.name);
            assert!(section(RULES_MD, &heading).is_some(), "{heading}");
        }
    }
}
