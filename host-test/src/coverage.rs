//! What a `meshlife check` run did not judge, and why, so that "0 findings" is never read as
//! "checked and clean" when it was not: files skipped (templates, YAML that is not Kubernetes),
//! objects no constraint matched, workloads judged as not meshed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::manifests::Skipped;

/// Lines listed per reason before the rest is only counted.
const LISTED_PER_REASON: usize = 5;

/// Objects put aside, grouped by the reason, each named by its location and identity.
#[derive(Debug, Default)]
pub struct Coverage {
    pub skipped: Vec<Skipped>,
    /// Reason → objects (`file: document N: Kind ns/name`).
    pub unmatched: BTreeMap<String, Vec<String>>,
    /// Reason → workloads judged as not meshed.
    pub not_meshed: BTreeMap<String, Vec<String>>,
}

impl Coverage {
    pub fn not_meshed_count(&self) -> usize {
        self.not_meshed.values().map(Vec::len).sum()
    }

    fn unmatched_count(&self) -> usize {
        self.unmatched.values().map(Vec::len).sum()
    }

    /// The counts, for the summary line: `; not judged: 1 file skipped, ...`; empty when the
    /// run judged everything.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.skipped.is_empty() {
            parts.push(plural(self.skipped.len(), "input", "inputs") + " skipped");
        }
        if self.unmatched_count() > 0 {
            parts.push(
                plural(self.unmatched_count(), "object", "objects") + " outside every constraint",
            );
        }
        if self.not_meshed_count() > 0 {
            parts.push(
                plural(self.not_meshed_count(), "workload", "workloads") + " judged as not meshed",
            );
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("; {} (see the notes above)", parts.join(", "))
        }
    }

    /// One note per skipped input and per reason, with a few of the objects named.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .skipped
            .iter()
            .map(|skipped| format!("skipped {skipped} (--strict makes this an error)"))
            .collect();
        let mut grouped = |heading: &str, groups: &BTreeMap<String, Vec<String>>| {
            for (reason, objects) in groups {
                let mut note = format!(
                    "{} {heading}: {reason}: ",
                    plural(objects.len(), "object", "objects")
                );
                let listed: Vec<&str> = objects
                    .iter()
                    .take(LISTED_PER_REASON)
                    .map(String::as_str)
                    .collect();
                note.push_str(&listed.join("; "));
                if objects.len() > LISTED_PER_REASON {
                    let _ = write!(note, "; and {} more", objects.len() - LISTED_PER_REASON);
                }
                notes.push(note);
            }
        };
        grouped(
            "not checked, outside every constraint's match",
            &self.unmatched,
        );
        grouped(
            "judged as not meshed, so no mesh rule applies",
            &self.not_meshed,
        );
        notes
    }
}

fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_judged_everything_says_nothing_more() {
        let coverage = Coverage::default();
        assert_eq!(coverage.summary(), "");
        assert!(coverage.notes().is_empty());
    }

    #[test]
    fn reasons_are_counted_and_the_first_objects_named() {
        let mut coverage = Coverage::default();
        let objects: Vec<String> = (1..=7).map(|n| format!("a.yaml: document {n}")).collect();
        coverage.not_meshed.insert("no mesh signal".into(), objects);
        assert_eq!(
            coverage.summary(),
            "; 7 workloads judged as not meshed (see the notes above)"
        );
        let notes = coverage.notes();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with(
            "7 objects judged as not meshed, so no mesh rule applies: no mesh signal: a.yaml: document 1;"
        ));
        assert!(notes[0].ends_with("; and 2 more"), "{}", notes[0]);
    }
}
