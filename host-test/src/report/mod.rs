//! The output formats of `meshlife check`: text, JSON, JUnit XML, SARIF 2.1.0, TAP 13 and
//! GitHub Actions workflow commands. Every renderer reads the same [`Report`].
//!
//! Input errors are always written to stderr by the CLI; formats that have a place for them
//! (JUnit `<error>`, SARIF tool notifications, TAP `not ok`, GitHub `::error`) carry them too,
//! so a CI system that only reads the report still sees that something could not be checked.

pub mod coverage;
mod github;
mod json;
mod junit;
mod sarif;
mod tap;
mod text;

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use json::JSON_FORMAT_VERSION;
use meshlife_policy::catalogue::RULES;
use meshlife_policy::{Severity, Violation};
use serde_json::Value;

use crate::constraints::constraint::{Constraint, EnforcementAction};
use crate::inputs::manifests::{InputError, ManifestObject, ObjectIdentity, STDIN_NAME};
use crate::report::coverage::Coverage;

/// The annotation listing exempted rules (ids, names or `*`), and the one giving the reason.
pub const EXEMPT_ANNOTATION: &str = "meshlife.io/exempt";
pub const EXEMPT_REASON_ANNOTATION: &str = "meshlife.io/exempt-reason";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    /// The envelope: findings, input errors, skipped inputs, what was not judged, exemptions
    /// and the summary (docs/cli.md, `json`).
    Json,
    /// The bare array of findings `-o json` printed before the envelope, kept for one release.
    JsonArray,
    Junit,
    Sarif,
    Tap,
    Github,
}

/// One violation of one object under one constraint.
#[derive(Clone, Debug)]
pub struct Finding {
    pub rule: String,
    pub check: String,
    pub severity: Severity,
    pub msg: String,
    pub path: String,
    pub fix: String,
    pub mesh: Option<String>,
    pub container: Option<String>,
    pub enforcement_action: EnforcementAction,
    /// `metadata.name` of the constraint, empty without `--constraint`.
    pub constraint: String,
    /// Deny and at or above `--fail-on`: this finding makes the run exit 1.
    pub fails_run: bool,
    /// Where `check --explain` drew it on the object's timeline, in words.
    pub timeline_place: Option<String>,
    /// 1-based line and column of `path` in the file, when its text could be followed there
    /// (`crate::inputs::source_location`); reports fall back to the object's first line.
    pub location: Option<(usize, usize)>,
}

impl Finding {
    /// `fail_on` is the lowest failing severity; `None` (`--fail-on none`): nothing fails.
    pub fn new(
        violation: Violation,
        constraint: &Constraint,
        fail_on: Option<Severity>,
    ) -> Finding {
        let details = violation.details;
        let fails_run = constraint.enforcement_action == EnforcementAction::Deny
            && fail_on.is_some_and(|fail_on| details.severity >= fail_on);
        Finding {
            rule: details.rule,
            check: details.name,
            severity: details.severity,
            msg: violation.msg,
            path: details.path,
            fix: details.fix,
            mesh: details.mesh,
            container: details.container,
            enforcement_action: constraint.enforcement_action,
            constraint: constraint.name.clone(),
            fails_run,
            timeline_place: None,
            location: None,
        }
    }
}

/// An object that was checked, with its findings (possibly none).
#[derive(Clone, Debug)]
pub struct ObjectReport {
    pub identity: ObjectIdentity,
    pub findings: Vec<Finding>,
}

/// A `meshlife.io/exempt` annotation in use, listed so exemptions stay visible in review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemption {
    pub identity: ObjectIdentity,
    pub rules: String,
    pub reason: Option<String>,
    /// The annotation sits on a controller's own metadata, where the policy does not read it.
    pub misplaced: bool,
    /// Entries that name no rule (`ML31`): they exempt nothing.
    pub unknown: Vec<String>,
}

impl Exemption {
    /// The exemption of `object`, read where the policy reads it: the Pod's own metadata or
    /// the pod template's.
    pub fn of(object: &ManifestObject) -> Option<Exemption> {
        let template_metadata = match object.identity.kind.as_str() {
            "Pod" => "/metadata",
            "CronJob" => "/spec/jobTemplate/spec/template/metadata",
            _ => "/spec/template/metadata",
        };
        // Parsed only for the few objects that mention the annotation at all.
        if !object.object.mentions(EXEMPT_ANNOTATION) {
            return None;
        }
        let value = object.object.value();
        let annotation = |metadata: &str, key: &str| {
            value
                .pointer(metadata)
                .and_then(|metadata| metadata.get("annotations"))
                .and_then(|annotations| annotations.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (metadata, misplaced) = if annotation(template_metadata, EXEMPT_ANNOTATION).is_some() {
            (template_metadata, false)
        } else if annotation("/metadata", EXEMPT_ANNOTATION).is_some() {
            ("/metadata", true)
        } else {
            return None;
        };
        let rules = annotation(metadata, EXEMPT_ANNOTATION).unwrap_or_default();
        // Split as the policy splits it (policy/src/evaluate.rs).
        let unknown = rules
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty() && *entry != "*")
            .filter(|entry| !RULES.iter().any(|rule| rule.is_named_by(entry)))
            .map(str::to_string)
            .collect();
        Some(Exemption {
            identity: object.identity.clone(),
            rules,
            reason: annotation(metadata, EXEMPT_REASON_ANNOTATION)
                .filter(|reason| !reason.trim().is_empty()),
            misplaced,
            unknown,
        })
    }

    /// Whether the policy exempts anything by it: read where it reads it, naming at least one
    /// rule (or `*`).
    pub fn applies(&self) -> bool {
        let named = self
            .rules
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .count();
        !self.misplaced && named > self.unknown.len()
    }

    /// `meshlife.io/exempt names "ML31", which is not a rule (did you mean ML301
    /// (job-sidecar-never-exits)?)`, one per unknown entry.
    pub fn unknown_entry_warnings(&self) -> Vec<String> {
        self.unknown
            .iter()
            .map(|entry| {
                let suggestion = match crate::rule_reference::nearest_rules(entry) {
                    Some(nearest) => format!("did you mean {nearest}?"),
                    None => "`meshlife rules` lists the ids and names".to_string(),
                };
                format!(
                    "{}: {}: {EXEMPT_ANNOTATION} names {entry:?}, which is not a rule, so it \
                     exempts nothing ({suggestion})",
                    self.identity.file,
                    self.identity.title()
                )
            })
            .collect()
    }
}

/// Everything one `meshlife check` run found.
#[derive(Clone, Debug)]
pub struct Report {
    pub files: Vec<String>,
    pub objects: Vec<ObjectReport>,
    /// Inputs that could not be read or evaluated.
    pub errors: Vec<InputError>,
    pub exemptions: Vec<Exemption>,
    /// `None` for `--fail-on none`.
    pub fail_on: Option<Severity>,
    /// What the run did not judge, as counts for the summary line (empty: everything judged).
    pub not_judged: String,
    /// Inputs skipped (templates, YAML that is not Kubernetes, empty files).
    pub skipped: Vec<crate::inputs::manifests::Skipped>,
    /// Objects not judged, by reason.
    pub not_judged_groups: Vec<crate::report::coverage::NotJudgedGroup>,
    /// The facts read from a cluster (`check --kubeconfig`), said first.
    pub facts_read: Option<FactsRead>,
    /// The repository config the run used (`.meshlife.yaml`), as found or named.
    pub config: Option<String>,
}

/// Which cluster the facts were read from, and each fact with its source.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FactsRead {
    pub cluster: String,
    pub facts: Vec<String>,
}

impl Report {
    /// A run's report: each object with its findings, located in their files where the text
    /// can be read again, and the exemptions its annotations declare. `errors` are the inputs
    /// that could not be read, matched or evaluated.
    pub fn new(
        files: Vec<String>,
        objects: Vec<ManifestObject>,
        mut findings: Vec<Vec<Finding>>,
        errors: Vec<InputError>,
        coverage: &Coverage,
        fail_on: Option<Severity>,
    ) -> Report {
        locate_findings(&objects, &mut findings);
        let exemptions = objects.iter().filter_map(Exemption::of).collect();
        // Moved, not copied: a long stream's objects are most of what the run holds.
        let objects = objects
            .into_iter()
            .zip(findings)
            .map(|(object, findings)| ObjectReport {
                identity: object.identity,
                findings,
            })
            .collect();
        Report {
            files,
            objects,
            errors,
            exemptions,
            fail_on,
            not_judged: coverage.summary(),
            skipped: coverage.skipped.clone(),
            not_judged_groups: coverage.groups(),
            facts_read: None,
            config: None,
        }
    }

    pub fn findings(&self) -> impl Iterator<Item = (&ObjectIdentity, &Finding)> {
        self.objects.iter().flat_map(|object| {
            object
                .findings
                .iter()
                .map(move |finding| (&object.identity, finding))
        })
    }

    pub fn fails(&self) -> bool {
        self.findings().any(|(_, finding)| finding.fails_run)
    }

    fn count(&self, severity: Severity) -> usize {
        self.findings()
            .filter(|(_, finding)| finding.severity == severity)
            .count()
    }

    /// The closing line of the text and GitHub formats.
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{} checked in {}: {}, {}, {}",
            plural(self.objects.len(), "object"),
            plural(self.files.len(), "file"),
            plural(self.count(Severity::Error), "error"),
            plural(self.count(Severity::Warning), "warning"),
            plural(self.count(Severity::Info), "info finding"),
        );
        let not_failing = self
            .findings()
            .filter(|(_, finding)| !finding.fails_run)
            .count();
        if not_failing > 0 && not_failing < self.findings().count() {
            let _ = write!(line, " ({not_failing} not failing the run)");
        } else if not_failing > 0 {
            line.push_str(" (none failing the run)");
        }
        // Only the exemptions the policy applies: a misplaced or misspelt one exempts nothing.
        let applied = self
            .exemptions
            .iter()
            .filter(|exemption| exemption.applies())
            .count();
        if applied > 0 {
            let _ = write!(line, "; {} in use", plural(applied, "exemption"));
        }
        line.push_str(&self.not_judged);
        if !self.errors.is_empty() {
            let _ = write!(
                line,
                "; {} could not be checked (see the errors above)",
                plural(self.errors.len(), "input")
            );
        }
        line
    }

    /// Objects and errors grouped by file, in input order.
    fn by_file(&self) -> Vec<FileGroup<'_>> {
        let mut groups: Vec<FileGroup<'_>> = Vec::new();
        let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
        fn group_index<'r>(
            file: &'r str,
            groups: &mut Vec<FileGroup<'r>>,
            index_of: &mut BTreeMap<&'r str, usize>,
        ) -> usize {
            *index_of.entry(file).or_insert_with(|| {
                groups.push(FileGroup {
                    file,
                    objects: Vec::new(),
                    errors: Vec::new(),
                });
                groups.len() - 1
            })
        }
        for file in &self.files {
            group_index(file, &mut groups, &mut index_of);
        }
        for object in &self.objects {
            let index = group_index(&object.identity.file, &mut groups, &mut index_of);
            groups[index].objects.push(object);
        }
        for error in &self.errors {
            let index = group_index(&error.file, &mut groups, &mut index_of);
            groups[index].errors.push(error);
        }
        groups
    }
}

struct FileGroup<'a> {
    file: &'a str,
    objects: Vec<&'a ObjectReport>,
    errors: Vec<&'a InputError>,
}

/// Each finding's line and column in its file, for the files that can be read again (not stdin)
/// and objects that are documents of their own (a List item's path starts inside the List).
fn locate_findings(objects: &[ManifestObject], findings: &mut [Vec<Finding>]) {
    use crate::inputs::source_location::{DocumentLines, line_starts};
    let mut texts: BTreeMap<&str, Option<(String, Vec<usize>)>> = BTreeMap::new();
    for (object, findings) in objects.iter().zip(findings.iter_mut()) {
        if findings.is_empty()
            || object.identity.item.is_some()
            || object.identity.file == STDIN_NAME
        {
            continue;
        }
        let text = texts
            .entry(object.identity.file.as_str())
            .or_insert_with(|| {
                let text = std::fs::read_to_string(&object.identity.file).ok()?;
                let starts = line_starts(&text);
                Some((text, starts))
            });
        let Some((text, starts)) = text else {
            continue;
        };
        let document = DocumentLines::new(text, starts, object.identity.line);
        for finding in findings.iter_mut() {
            finding.location = document.locate(&finding.path);
        }
    }
}

pub fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// Renders `report` in `format`. `colour` only affects the text format.
pub fn render(report: &Report, format: Format, colour: bool) -> String {
    match format {
        Format::Text => text::render_text(report, colour),
        Format::Json => json::render_json_envelope(report),
        Format::JsonArray => json::render_json(report),
        Format::Junit => junit::render_junit(report),
        Format::Sarif => sarif::render_sarif(report),
        Format::Tap => tap::render_tap(report),
        Format::Github => github::render_github(report),
    }
}

fn error_location_and_message(error: &InputError) -> String {
    let mut text = String::new();
    if let Some(document) = error.document {
        let _ = write!(text, "document {}", document + 1);
        text.push_str(&crate::inputs::manifests::item_text(
            error.item,
            &error.inner_items,
        ));
    }
    if let Some(line) = error.line {
        let _ = write!(text, " (line {line})");
    }
    if let Some(field) = &error.field {
        let _ = write!(text, " field `{field}`");
    }
    if text.is_empty() {
        error.message.clone()
    } else {
        format!("{}: {}", text.trim_start(), error.message)
    }
}

/// Escapes text for XML attributes and content; characters XML 1.0 forbids are replaced.
pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => {
                let _ = write!(out, "&#{};", character as u32);
            }
            character
                if (character as u32) < 0x20
                    || character == '\u{fffe}'
                    || character == '\u{ffff}' =>
            {
                out.push('\u{fffd}')
            }
            character => out.push(character),
        }
    }
    out
}
