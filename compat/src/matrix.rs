//! What each host said of each fixture, judged against the native build, and the printed matrix.

use std::fmt::Write as _;

use crate::fixtures::{Fixture, GROUPS};

/// What a host returned for one fixture.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The `msg` strings of the result set, in the host's order.
    Msgs(Vec<String>),
    /// The host threw, trapped or could not read the result.
    Error(String),
    /// The host cannot be given this fixture at all (say, an absent input to a host that always
    /// serialises a value); shown as n/a with the reason, never counted as agreement.
    NotApplicable(String),
}

/// The judgement of one cell.
#[derive(Clone, Debug)]
pub enum Verdict {
    Agrees,
    /// The host was configured with a memory maximum or an input size limit that the input
    /// exceeds, and it refused cleanly (the module's out-of-memory abort, a refused
    /// `memory.grow`, the host's size guard).
    MemoryLimit,
    NotApplicable(String),
    Differs(String),
}

/// Inputs above this size may exhaust a host configured with a small memory maximum or input
/// limit.
const LARGE_INPUT: usize = 128 << 10;

/// Compares a host's `msg` strings with the native ones as sets.
pub fn judge(fixture: &Fixture, outcome: Outcome, memory_capped: bool) -> Verdict {
    judge_against(
        &fixture.expected,
        fixture.input_len(),
        outcome,
        memory_capped,
    )
}

/// [`judge`] against the native answer for the bytes the host actually sent, when the host's
/// own serialisation changed the input (JavaScript numbers are doubles).
pub fn judge_against(
    expected: &[String],
    input_len: usize,
    outcome: Outcome,
    memory_capped: bool,
) -> Verdict {
    match outcome {
        Outcome::Msgs(msgs) => {
            let mut msgs: Vec<String> = msgs.iter().map(|msg| mask_positions(msg)).collect();
            msgs.sort();
            msgs.dedup();
            let mut masked: Vec<String> = expected.iter().map(|msg| mask_positions(msg)).collect();
            masked.sort();
            if msgs == masked {
                Verdict::Agrees
            } else {
                Verdict::Differs(format!("expected {expected:?}, got {msgs:?}"))
            }
        }
        Outcome::Error(error)
            if memory_capped && input_len > LARGE_INPUT && is_host_limit(&error) =>
        {
            Verdict::MemoryLimit
        }
        Outcome::Error(error) => {
            Verdict::Differs(format!("expected {expected:?}, the host failed: {error}"))
        }
        Outcome::NotApplicable(reason) => Verdict::NotApplicable(reason),
    }
}

/// Whether a host's error on an input of `input_len` bytes is a clean refusal at a limit the
/// host was configured with (for harnesses that judge outcomes their own way).
pub fn is_limit_refusal(input_len: usize, error: &str) -> bool {
    input_len > LARGE_INPUT && is_host_limit(error)
}

/// The module's out-of-memory abort, a refused `memory.grow`, or a host's own input size limit.
fn is_host_limit(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    ["out of memory", "grow", "rangeerror", "byte limit"]
        .iter()
        .any(|sign| error.contains(sign))
}

/// The memory maximum, in 64 KiB pages, of the "refusals then valid inputs" columns: 1 MiB holds
/// the exhausting input (`fixtures::exhausting_input`) but not its evaluation, and the 2 MB
/// fixture not at all.
pub const CAPPED_PAGES: u32 = 16;

/// The way of calling of those columns (with the host's own words after it).
pub const REFUSALS_HOW: &str =
    "memory capped at 16 pages, an out-of-memory refusal before every fixture";

/// How a host refused the exhausting input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The module's own `opa_abort("meshlife: out of memory")`, after its `memory.grow` failed.
    ModuleAbort,
    /// The host could not grow the memory to write the input (or refused at its size guard).
    HostLimit,
}

/// Reads what a host answered for the exhausting input. Only a clean refusal counts: an answer
/// means the cap did not bite (the column would prove nothing), and any other error (a trap such
/// as "memory access out of bounds") is the defect these columns look for.
pub fn refusal(outcome: &Outcome) -> Result<Refusal, String> {
    match outcome {
        Outcome::Error(error) if error.to_ascii_lowercase().contains("out of memory") => {
            Ok(Refusal::ModuleAbort)
        }
        Outcome::Error(error) if is_host_limit(error) => Ok(Refusal::HostLimit),
        Outcome::Error(error) => Err(format!("failed, but not at the memory cap: {error:.300}")),
        Outcome::Msgs(msgs) => Err(format!(
            "answered ({} msgs): the cap did not bite, so the column proves nothing",
            msgs.len()
        )),
        Outcome::NotApplicable(reason) => Err(format!("not sent: {reason}")),
    }
}

/// The check of a "refusals then valid inputs" column: every exhausting input refused cleanly on
/// the one instance, and every fixture after a refusal judged as in any other column. `refusals`
/// holds what the host answered for the exhausting input sent before each fixture.
pub fn refusals_check(host: &str, how: &str, refusals: &[Outcome], verdicts: &[Verdict]) -> Check {
    let name = format!("refusals then valid inputs ({how})");
    let (mut aborts, mut limits, mut refused) = (0, 0, Vec::new());
    for (index, outcome) in refusals.iter().enumerate() {
        match refusal(outcome) {
            Ok(Refusal::ModuleAbort) => aborts += 1,
            Ok(Refusal::HostLimit) => limits += 1,
            Err(why) => refused.push((index, why)),
        }
    }
    let (mut agree, mut at_limit, mut not_applicable, mut differ) = (0, 0, 0, Vec::new());
    for (index, verdict) in verdicts.iter().enumerate() {
        match verdict {
            Verdict::Agrees => agree += 1,
            Verdict::MemoryLimit => at_limit += 1,
            Verdict::NotApplicable(_) => not_applicable += 1,
            Verdict::Differs(_) => differ.push(index),
        }
    }
    let summary = format!(
        "{} exhausting inputs on one instance: {aborts} refused by the module's out-of-memory \
         abort, {limits} by the host's memory limit, {} not refused; after them {agree} fixtures \
         agree, {at_limit} refused at the cap, {not_applicable} n/a, {} differ",
        refusals.len(),
        refused.len(),
        differ.len()
    );
    let outcome = if refusals.is_empty() {
        Err("no exhausting input was sent".to_string())
    } else if let Some((index, why)) = refused.first() {
        Err(format!(
            "{summary}; the first, before fixture {index}, {why}"
        ))
    } else if let Some(index) = differ.first() {
        Err(format!("{summary}; the first differs at fixture {index}"))
    } else {
        Ok(summary)
    };
    Check::new(host, &name, outcome)
}

/// ML000 messages point at `line L column C` of the input text, and each host serialises the
/// input its own way (spaces after `:` in Python, Go's Rego text), so positions are compared
/// masked; everything else in the message must match exactly.
pub fn mask_positions(msg: &str) -> String {
    let mut masked = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(found) = ["line ", "column "]
        .iter()
        .filter_map(|word| rest.find(word).map(|at| (at, word.len())))
        .min()
    {
        let (at, word) = found;
        let after = at + word;
        let digits = rest[after..].bytes().take_while(u8::is_ascii_digit).count();
        masked.push_str(&rest[..after]);
        if digits > 0 {
            masked.push('#');
        }
        rest = &rest[after + digits..];
    }
    masked.push_str(rest);
    masked
}

/// One host, one way of calling it: a row of the matrix.
pub struct Column {
    pub host: String,
    pub version: String,
    /// How it was called: the memory, the ABI path, the data.
    pub how: String,
    /// One verdict per fixture, in fixture order.
    pub verdicts: Vec<Verdict>,
}

/// A property of a host beyond single evaluations (memory stability, load-time checks).
pub struct Check {
    pub host: String,
    pub name: String,
    pub outcome: Result<String, String>,
}

impl Check {
    pub fn new(host: &str, name: &str, outcome: Result<String, String>) -> Check {
        Check {
            host: host.into(),
            name: name.into(),
            outcome,
        }
    }
}

/// Counts of one row in one group.
#[derive(Default, Clone, Copy)]
struct Tally {
    agree: usize,
    limit: usize,
    not_applicable: usize,
    differ: usize,
}

impl Tally {
    fn cell(&self) -> String {
        let total = self.agree + self.limit + self.differ;
        if total == 0 {
            return "n/a".into();
        }
        if self.differ > 0 {
            return format!("{}✗", self.differ);
        }
        if self.limit > 0 {
            return format!("{}+{}L", self.agree, self.limit);
        }
        format!("{}", self.agree)
    }
}

pub struct Report {
    pub text: String,
    pub failures: usize,
}

/// The matrix (a row per host and way of calling it, a column per fixture group, each cell the
/// number of fixtures that agree), then the legend, the checks and every difference.
pub fn render(fixtures: &[Fixture], columns: &[Column], checks: &[Check]) -> Report {
    let mut text = String::new();
    let mut failures = 0;
    let group_sizes: Vec<usize> = GROUPS
        .iter()
        .map(|group| fixtures.iter().filter(|f| f.group == *group).count())
        .collect();
    let label_width = 6;
    let widths: Vec<usize> = GROUPS
        .iter()
        .map(|group| group.chars().count().clamp(5, 8) + 1)
        .collect();
    let _ = write!(text, "{:label_width$}", "");
    for (group, width) in GROUPS.iter().zip(&widths) {
        let _ = write!(text, "{:>width$}", abbreviate(group, *width - 1));
    }
    let _ = writeln!(text, "{:>8}", "total");
    let _ = write!(text, "{:label_width$}", "");
    for (size, width) in group_sizes.iter().zip(&widths) {
        let _ = write!(text, "{:>width$}", size);
    }
    let _ = writeln!(text, "{:>8}", fixtures.len());
    for (row, column) in columns.iter().enumerate() {
        let mut total = Tally::default();
        let _ = write!(text, "{:<label_width$}", row_name(row));
        for (group, width) in GROUPS.iter().zip(&widths) {
            let mut tally = Tally::default();
            for (fixture, verdict) in fixtures.iter().zip(&column.verdicts) {
                if fixture.group != *group {
                    continue;
                }
                match verdict {
                    Verdict::Agrees => tally.agree += 1,
                    Verdict::MemoryLimit => tally.limit += 1,
                    Verdict::NotApplicable(_) => tally.not_applicable += 1,
                    Verdict::Differs(_) => tally.differ += 1,
                }
            }
            total.agree += tally.agree;
            total.limit += tally.limit;
            total.not_applicable += tally.not_applicable;
            total.differ += tally.differ;
            let _ = write!(text, "{:>width$}", tally.cell());
        }
        let _ = writeln!(text, "{:>8}", total.cell());
        failures += total.differ;
    }

    let _ = writeln!(
        text,
        "\nCells: fixtures whose msg set equals the native build's; N✗ = N differ; \
         +NL = N refused cleanly at a memory or input limit the host was configured with; \
         n/a = cannot be expressed in that host. Positions (line/column) in ML000 messages \
         depend on each host's serialisation and are compared masked."
    );
    for (row, column) in columns.iter().enumerate() {
        let _ = writeln!(
            text,
            "{:<5} {} {}: {}",
            row_name(row),
            column.host,
            column.version,
            column.how
        );
        let mut reasons: Vec<&str> = column
            .verdicts
            .iter()
            .filter_map(|verdict| match verdict {
                Verdict::NotApplicable(reason) => Some(reason.as_str()),
                _ => None,
            })
            .collect();
        reasons.sort();
        reasons.dedup();
        for reason in reasons {
            let _ = writeln!(text, "      n/a: {reason}");
        }
    }

    let _ = writeln!(text, "\nChecks");
    for check in checks {
        match &check.outcome {
            Ok(detail) => {
                let _ = writeln!(text, "  ok    {}: {}: {detail}", check.host, check.name);
            }
            Err(detail) => {
                failures += 1;
                let _ = writeln!(text, "  FAIL  {}: {}: {detail}", check.host, check.name);
            }
        }
    }

    let mut differences = String::new();
    for (row, column) in columns.iter().enumerate() {
        for (fixture, verdict) in fixtures.iter().zip(&column.verdicts) {
            if let Verdict::Differs(detail) = verdict {
                let _ = writeln!(
                    differences,
                    "  {} ({} {}) on {} [{}]: {detail}",
                    row_name(row),
                    column.host,
                    column.how,
                    fixture.label,
                    fixture.id
                );
            }
        }
    }
    if !differences.is_empty() {
        let _ = writeln!(text, "\nDifferences\n{differences}");
    }
    Report { text, failures }
}

/// Row names: `A`, `B`, ... then `AA`.
fn row_name(row: usize) -> String {
    let letter = |index: usize| char::from(b'A' + (index % 26) as u8);
    if row < 26 {
        letter(row).to_string()
    } else {
        format!("{}{}", letter(row / 26 - 1), letter(row))
    }
}

fn abbreviate(group: &str, width: usize) -> String {
    group.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(expected: &[&str], input_len: usize) -> Fixture {
        Fixture {
            id: "f0000".into(),
            label: "test".into(),
            group: "empty",
            input: Some(vec![b' '; input_len]),
            expected: expected.iter().map(|msg| msg.to_string()).collect(),
        }
    }

    #[test]
    fn msg_sets_compare_without_order_and_differ_on_any_change() {
        let fixture = fixture(&["a", "b"], 10);
        let same = Outcome::Msgs(vec!["b".into(), "a".into()]);
        assert!(matches!(judge(&fixture, same, false), Verdict::Agrees));
        let missing = Outcome::Msgs(vec!["a".into()]);
        assert!(matches!(
            judge(&fixture, missing, false),
            Verdict::Differs(_)
        ));
        let empty = Outcome::Msgs(Vec::new());
        assert!(matches!(judge(&fixture, empty, false), Verdict::Differs(_)));
    }

    #[test]
    fn a_limit_is_accepted_only_for_large_inputs_in_capped_hosts() {
        let error = || Outcome::Error("opa_abort: meshlife: out of memory".into());
        let large = fixture(&["a"], LARGE_INPUT + 1);
        assert!(matches!(judge(&large, error(), true), Verdict::MemoryLimit));
        assert!(matches!(judge(&large, error(), false), Verdict::Differs(_)));
        let small = fixture(&["a"], 100);
        assert!(matches!(judge(&small, error(), true), Verdict::Differs(_)));
        let other = Outcome::Error("TypeError: undefined".into());
        assert!(matches!(judge(&large, other, true), Verdict::Differs(_)));
    }

    #[test]
    fn only_a_clean_refusal_of_the_exhausting_input_counts() {
        let error = |text: &str| Outcome::Error(text.into());
        assert_eq!(
            refusal(&error("opa_abort: meshlife: out of memory")),
            Ok(Refusal::ModuleAbort)
        );
        assert_eq!(
            refusal(&error(
                "RangeError: WebAssembly.Memory.grow(): Maximum memory size exceeded"
            )),
            Ok(Refusal::HostLimit)
        );
        // The defect before the fix: a trap instead of the abort.
        assert!(refusal(&error("RuntimeError: memory access out of bounds")).is_err());
        assert!(refusal(&Outcome::Msgs(vec!["a".into()])).is_err());

        let abort = || error("opa_abort: meshlife: out of memory");
        let passing = refusals_check("h", "x", &[abort(), abort()], &[Verdict::Agrees]);
        assert!(passing.outcome.is_ok(), "{:?}", passing.outcome);
        let answered = refusals_check("h", "x", &[abort(), Outcome::Msgs(vec![])], &[]);
        assert!(answered.outcome.is_err());
        let later = refusals_check("h", "x", &[abort()], &[Verdict::Differs("no".into())]);
        assert!(later.outcome.is_err());
        assert!(
            refusals_check("h", "x", &[], &[Verdict::Agrees])
                .outcome
                .is_err()
        );
    }

    #[test]
    fn only_positions_are_masked() {
        assert_eq!(
            mask_positions("nests deeper at line 1 column 199; stop"),
            "nests deeper at line # column #; stop"
        );
        let fixture = fixture(&["x at line 1 column 199"], 10);
        let moved = Outcome::Msgs(vec!["x at line 1 column 213".into()]);
        assert!(matches!(judge(&fixture, moved, false), Verdict::Agrees));
        let reworded = Outcome::Msgs(vec!["y at line 1 column 199".into()]);
        assert!(matches!(
            judge(&fixture, reworded, false),
            Verdict::Differs(_)
        ));
    }

    #[test]
    fn a_difference_fails_the_report() {
        let fixtures = vec![fixture(&["a"], 10)];
        let column = |verdict| Column {
            host: "h".into(),
            version: "1".into(),
            how: "x".into(),
            verdicts: vec![verdict],
        };
        let passing = render(&fixtures, &[column(Verdict::Agrees)], &[]);
        assert_eq!(passing.failures, 0);
        let failing = render(&fixtures, &[column(Verdict::Differs("no".into()))], &[]);
        assert_eq!(failing.failures, 1);
        assert!(failing.text.contains("Differences"));
        let failed_check = Check::new("h", "memory", Err("grew".into()));
        assert_eq!(render(&fixtures, &[], &[failed_check]).failures, 1);
    }
}
