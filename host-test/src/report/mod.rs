//! The output formats of `meshlife check`: text, JSON, JUnit XML, SARIF 2.1.0, TAP 13 and
//! GitHub Actions workflow commands. Every renderer reads the same [`Report`].
//!
//! Input errors are always written to stderr by the CLI; formats that have a place for them
//! (JUnit `<error>`, SARIF tool notifications, TAP `not ok`, GitHub `::error`) carry them too,
//! so a CI system that only reads the report still sees that something could not be checked.

pub mod coverage;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use meshlife_policy::catalogue::RULES;
use meshlife_policy::{Severity, Violation};
use serde::Serialize;
use serde_json::{Value, json};

use crate::constraints::constraint::{Constraint, EnforcementAction};
use crate::inputs::manifests::{InputError, ManifestObject};
use crate::terminal::printable;

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

/// Where an object came from and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectIdentity {
    pub file: String,
    pub document: usize,
    pub item: Option<usize>,
    pub inner_items: Vec<usize>,
    pub line: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectIdentity {
    pub fn of(object: &ManifestObject) -> ObjectIdentity {
        ObjectIdentity::from(object.clone())
    }

    /// `Deployment shop/web (document 1)`: documents and items counted from 1.
    pub fn title(&self) -> String {
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        let location = format!(
            "document {}{}",
            self.document + 1,
            crate::inputs::manifests::item_text(self.item, &self.inner_items)
        );
        if self.namespace.is_empty() {
            format!("{} {name} ({location})", self.kind)
        } else {
            format!("{} {}/{name} ({location})", self.kind, self.namespace)
        }
    }
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

impl From<ManifestObject> for ObjectIdentity {
    fn from(object: ManifestObject) -> ObjectIdentity {
        ObjectIdentity {
            file: object.file,
            document: object.document,
            item: object.item,
            inner_items: object.inner_items,
            line: object.line,
            api_version: object.api_version,
            kind: object.kind,
            namespace: object.namespace,
            name: object.name,
        }
    }
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
        let template_metadata = match object.kind.as_str() {
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
            identity: ObjectIdentity::of(object),
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
                let suggestion = match crate::commands::rules::nearest_rules(entry) {
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
}

impl Report {
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
        Format::Text => render_text(report, colour),
        Format::Json => render_json_envelope(report),
        Format::JsonArray => render_json(report),
        Format::Junit => render_junit(report),
        Format::Sarif => render_sarif(report),
        Format::Tap => render_tap(report),
        Format::Github => render_github(report),
    }
}

struct Palette {
    colour: bool,
}

impl Palette {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn severity(&self, severity: Severity) -> String {
        let code = match severity {
            Severity::Error => "1;31",
            Severity::Warning => "1;33",
            Severity::Info => "1;36",
        };
        self.paint(code, &format!("{:<7}", severity.as_str()))
    }
}

fn render_text(report: &Report, colour: bool) -> String {
    let palette = Palette { colour };
    let mut out = String::new();
    for group in report.by_file() {
        let objects_with_findings: Vec<_> = group
            .objects
            .iter()
            .filter(|object| !object.findings.is_empty())
            .collect();
        // Input errors are not repeated here: the CLI has written them to stderr already.
        if objects_with_findings.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}", palette.paint("1", &printable(group.file)));
        for object in objects_with_findings {
            let _ = writeln!(out, "  {}", printable(&object.identity.title()));
            for finding in &object.findings {
                let mut marker = String::new();
                if finding.enforcement_action != EnforcementAction::Deny {
                    let _ = write!(marker, " [{}]", finding.enforcement_action.as_str());
                }
                if !finding.constraint.is_empty() {
                    let _ = write!(marker, " (constraint {})", printable(&finding.constraint));
                }
                let (line, column) = finding.location.unwrap_or((object.identity.line.max(1), 1));
                let _ = writeln!(
                    out,
                    "    {}:{line}:{column}: {} {} {}{}  at {}",
                    printable(group.file),
                    palette.severity(finding.severity),
                    printable(&finding.rule),
                    printable(&finding.check),
                    marker,
                    if finding.path.is_empty() {
                        "(object)".into()
                    } else {
                        printable(&finding.path)
                    }
                );
                // The message repeats the `[ML301 job-sidecar-never-exits]` just printed above
                // it (other formats need it: a message stands alone there).
                let header = format!("[{} {}] ", finding.rule, finding.check);
                let message = finding.msg.strip_prefix(&header).unwrap_or(&finding.msg);
                let _ = writeln!(out, "      {}", printable(message));
                if !finding.fix.is_empty() {
                    let fix = printable(&finding.fix);
                    let _ = writeln!(out, "      {} {fix}", palette.paint("2", "fix:"));
                }
                if let Some(place) = &finding.timeline_place {
                    let _ = writeln!(
                        out,
                        "      {} {} (drawn below)",
                        palette.paint("2", "timeline:"),
                        printable(place)
                    );
                }
            }
        }
        out.push('\n');
    }
    if !report.exemptions.is_empty() {
        let _ = writeln!(out, "{}", palette.paint("1", "Exemptions in use:"));
        for exemption in &report.exemptions {
            let reason = match &exemption.reason {
                Some(reason) => format!("reason: {}", printable(reason)),
                None => format!("no reason given ({EXEMPT_REASON_ANNOTATION} is not set)"),
            };
            let misplaced = if exemption.misplaced {
                " [on the controller's metadata, where meshlife does not read it: move it to the pod template]".to_string()
            } else if !exemption.unknown.is_empty() {
                format!(
                    " [not a rule, exempting nothing: {}]",
                    exemption.unknown.join(", ")
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {}: {}: {} — {reason}{misplaced}",
                printable(&exemption.identity.file),
                printable(&exemption.identity.title()),
                printable(&exemption.rules)
            );
        }
        out.push('\n');
    }
    let summary = report.summary_line();
    let summary = if report.fails() || !report.errors.is_empty() {
        palette.paint("1;31", &summary)
    } else {
        palette.paint("1;32", &summary)
    };
    let _ = writeln!(out, "{summary}");
    out
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

/// The JSON shape of one finding (`-o json` is an array of these). `document` and `item`
/// count from 1, as the text says them; `line` is the 1-based line of the document's first key.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonFinding<'a> {
    file: &'a str,
    document: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<usize>,
    /// Items of Lists nested in that item, outermost first, counted from 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inner_items: Vec<usize>,
    line: usize,
    /// Where the field `path` names is (or the nearest key above it), as the text, SARIF and
    /// GitHub formats point: 1-based line and column; absent for stdin and List items.
    #[serde(skip_serializing_if = "Option::is_none")]
    field_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field_column: Option<usize>,
    api_version: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    rule: &'a str,
    check: &'a str,
    severity: &'a str,
    msg: &'a str,
    path: &'a str,
    fix: &'a str,
    enforcement_action: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    constraint: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mesh: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    fails_run: bool,
}

/// The version of `-o json`'s envelope: raised when a field changes meaning or goes away (new
/// fields may be added within a version).
pub const JSON_FORMAT_VERSION: u32 = 1;

/// `-o json`: everything a machine needs to tell a clean run from one that judged nothing,
/// in one object, as kube-linter's and conftest's JSON carry their errors beside the findings.
fn render_json_envelope(report: &Report) -> String {
    let count = |severity: Severity| {
        report
            .findings()
            .filter(|(_, finding)| finding.severity == severity)
            .count()
    };
    let errors: Vec<Value> = report
        .errors
        .iter()
        .map(|error| {
            json!({
                "file": error.file,
                "document": error.document.map(|document| document + 1),
                "item": error.item.map(|item| item + 1),
                "line": error.line,
                "field": error.field,
                "message": error.message,
                "text": error.to_string(),
            })
        })
        .collect();
    let skipped: Vec<Value> = report
        .skipped
        .iter()
        .map(|skipped| {
            json!({
                "file": skipped.file,
                "document": skipped.document.map(|document| document + 1),
                "line": skipped.line,
                "reason": skipped.reason,
            })
        })
        .collect();
    let exemptions: Vec<Value> = report
        .exemptions
        .iter()
        .map(|exemption| {
            json!({
                "file": exemption.identity.file,
                "document": exemption.identity.document + 1,
                "object": exemption.identity.title(),
                "rules": exemption.rules,
                "reason": exemption.reason,
                "applies": exemption.applies(),
                "unknownRules": exemption.unknown,
                "misplaced": exemption.misplaced,
            })
        })
        .collect();
    let not_judged_objects: usize = report
        .not_judged_groups
        .iter()
        .map(|group| group.objects.len())
        .sum();
    let envelope = json!({
        "formatVersion": JSON_FORMAT_VERSION,
        "findings": json_findings(report),
        "errors": errors,
        "skipped": skipped,
        "notJudged": report.not_judged_groups,
        "exemptions": exemptions,
        "summary": {
            "objects": report.objects.len(),
            "files": report.files.len(),
            "errors": count(Severity::Error),
            "warnings": count(Severity::Warning),
            "info": count(Severity::Info),
            "failing": report.findings().filter(|(_, finding)| finding.fails_run).count(),
            "inputErrors": report.errors.len(),
            "skipped": report.skipped.len(),
            "notJudged": not_judged_objects,
            "exemptionsInUse": report.exemptions.iter().filter(|e| e.applies()).count(),
            "text": report.summary_line(),
        },
    });
    let mut out = serde_json::to_string_pretty(&envelope).unwrap_or_else(|_| "{}".into());
    out.push('\n');
    out
}

fn render_json(report: &Report) -> String {
    let mut out =
        serde_json::to_string_pretty(&json_findings(report)).unwrap_or_else(|_| "[]".into());
    out.push('\n');
    out
}

fn json_findings(report: &Report) -> Vec<JsonFinding<'_>> {
    report
        .findings()
        .map(|(identity, finding)| JsonFinding {
            file: &identity.file,
            document: identity.document + 1,
            item: identity.item.map(|item| item + 1),
            inner_items: identity.inner_items.iter().map(|item| item + 1).collect(),
            line: identity.line,
            field_line: finding.location.map(|(line, _)| line),
            field_column: finding.location.map(|(_, column)| column),
            api_version: &identity.api_version,
            kind: &identity.kind,
            namespace: &identity.namespace,
            name: &identity.name,
            rule: &finding.rule,
            check: &finding.check,
            severity: finding.severity.as_str(),
            msg: &finding.msg,
            path: &finding.path,
            fix: &finding.fix,
            enforcement_action: finding.enforcement_action.as_str(),
            constraint: &finding.constraint,
            mesh: finding.mesh.as_deref(),
            container: finding.container.as_deref(),
            fails_run: finding.fails_run,
        })
        .collect()
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

/// JUnit XML: a testsuite per file, a testcase per object, a `<failure>` per finding that
/// fails the run (the `failures` counts are of failing testcases); findings that do not (below `--fail-on`, or from a warn/dryrun constraint)
/// are listed in the testcase's `<system-out>` so the test does not turn red for them.
/// Unreadable documents are testcases with an `<error>`.
fn render_junit(report: &Report) -> String {
    let groups = report.by_file();
    // `failures` counts failing test cases (objects), as JUnit readers do, not findings.
    let fails = |object: &ObjectReport| object.findings.iter().any(|finding| finding.fails_run);
    let failures = report.objects.iter().filter(|object| fails(object)).count();
    let tests = report.objects.len() + report.errors.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"meshlife\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        report.errors.len()
    );
    for group in groups {
        let suite_failures = group.objects.iter().filter(|object| fails(object)).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{suite_failures}\" errors=\"{}\">",
            xml_escape(group.file),
            group.objects.len() + group.errors.len(),
            group.errors.len()
        );
        for object in &group.objects {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml_escape(group.file),
                xml_escape(&object.identity.title())
            );
            if object.findings.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            let mut not_failing = String::new();
            for finding in &object.findings {
                let body = format!(
                    "{} {} ({}) at {}\n{}\nfix: {}\nenforcementAction: {}",
                    finding.rule,
                    finding.check,
                    finding.severity.as_str(),
                    finding.path,
                    finding.msg,
                    finding.fix,
                    finding.enforcement_action.as_str()
                );
                if finding.fails_run {
                    let _ = writeln!(
                        out,
                        "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                        xml_escape(&finding.msg),
                        xml_escape(&finding.rule),
                        xml_escape(&body)
                    );
                } else {
                    not_failing.push_str(&body);
                    not_failing.push_str("\n\n");
                }
            }
            if !not_failing.is_empty() {
                let _ = writeln!(
                    out,
                    "      <system-out>{}</system-out>",
                    xml_escape(not_failing.trim_end())
                );
            }
            out.push_str("    </testcase>\n");
        }
        for error in &group.errors {
            let name = match error.document {
                Some(document) => format!("document {}", document + 1),
                None => "file".to_string(),
            };
            let _ = writeln!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\">\n      <error message=\"{}\" type=\"input-error\"/>\n    </testcase>",
                xml_escape(group.file),
                xml_escape(&name),
                xml_escape(&error_location_and_message(error))
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A file name as a SARIF `artifactLocation.uri`: relative paths stay relative (to the
/// working directory, which is what code scanning expects), absolute ones become `file://`.
fn sarif_uri(file: &str) -> String {
    let mut uri = String::with_capacity(file.len());
    for character in file.replace('\\', "/").chars() {
        match character {
            ' ' => uri.push_str("%20"),
            '%' => uri.push_str("%25"),
            '#' => uri.push_str("%23"),
            '?' => uri.push_str("%3F"),
            character => uri.push(character),
        }
    }
    if uri.starts_with('/') {
        format!("file://{uri}")
    } else {
        uri.trim_start_matches("./").to_string()
    }
}

/// The finding's field when the file's text was followed there, else the object's first line.
fn sarif_region(identity: &ObjectIdentity, finding: &Finding) -> Value {
    match finding.location {
        Some((line, column)) => json!({"startLine": line, "startColumn": column}),
        None => json!({"startLine": identity.line.max(1)}),
    }
}

fn render_sarif(report: &Report) -> String {
    // Rules come from the findings: a rule table of the whole catalogue would list rules
    // the module at hand may not have.
    let mut rules: BTreeMap<&str, (&str, Severity)> = BTreeMap::new();
    for (_, finding) in report.findings() {
        rules
            .entry(&finding.rule)
            .or_insert((&finding.check, finding.severity));
    }
    let rule_index: BTreeMap<&str, usize> = rules
        .keys()
        .enumerate()
        .map(|(index, rule)| (*rule, index))
        .collect();
    // Code-scanning UIs show a rule's help beside each alert: the fix, not only the name.
    let rule_descriptors: Vec<Value> = rules
        .iter()
        .map(|(id, (name, severity))| {
            let mut descriptor = json!({
                "id": id,
                "name": name,
                "shortDescription": {"text": format!("{id} {name}")},
                "defaultConfiguration": {"level": sarif_level(*severity)},
            });
            if let Some(help) = crate::commands::rules::help(id) {
                descriptor["fullDescription"] = json!({"text": help.full_description});
                descriptor["help"] = json!({"text": help.text, "markdown": help.markdown});
                descriptor["helpUri"] = json!(help.uri);
            }
            descriptor
        })
        .collect();
    let results: Vec<Value> = report
        .findings()
        .map(|(identity, finding)| {
            let qualified_name = if identity.namespace.is_empty() {
                format!("{}/{}", identity.kind, identity.name)
            } else {
                format!("{}/{}/{}", identity.kind, identity.namespace, identity.name)
            };
            json!({
                "ruleId": finding.rule,
                "ruleIndex": rule_index.get(finding.rule.as_str()).copied().unwrap_or(0),
                "level": sarif_level(finding.severity),
                "message": {"text": finding.msg},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": sarif_uri(&identity.file)},
                        "region": sarif_region(identity, finding),
                    },
                    "logicalLocations": [{
                        "fullyQualifiedName": format!("{qualified_name}:{}", finding.path),
                        "kind": "object",
                    }],
                }],
                "properties": {
                    "check": finding.check,
                    "path": finding.path,
                    "fix": finding.fix,
                    "document": identity.document + 1,
                    "apiVersion": identity.api_version,
                    "enforcementAction": finding.enforcement_action.as_str(),
                    "failsRun": finding.fails_run,
                },
            })
        })
        .collect();
    let notifications: Vec<Value> = report
        .errors
        .iter()
        .map(|error| {
            json!({
                "level": "error",
                "message": {"text": error.to_string()},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": sarif_uri(&error.file)},
                        "region": {"startLine": error.line.unwrap_or(1).max(1)},
                    },
                }],
            })
        })
        .collect();
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "meshlife",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/meshlife/meshlife",
                "rules": rule_descriptors,
            }},
            "invocations": [{
                "executionSuccessful": report.errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    });
    let mut out = serde_json::to_string_pretty(&sarif).unwrap_or_default();
    out.push('\n');
    out
}

/// TAP descriptions end at `#` (it starts a directive), so it is escaped.
fn tap_description(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('#', "\\#")
        .replace('\n', " ")
}

/// A YAML double-quoted scalar for TAP's diagnostic blocks.
fn yaml_quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// TAP 13: a test point per object (`not ok` when a finding fails the run) and per input
/// error, each followed by a YAML block with the findings.
fn render_tap(report: &Report) -> String {
    let mut out = String::from("TAP version 13\n");
    let _ = writeln!(out, "1..{}", report.objects.len() + report.errors.len());
    let mut number = 0;
    for object in &report.objects {
        number += 1;
        let failed = object.findings.iter().any(|finding| finding.fails_run);
        let _ = writeln!(
            out,
            "{} {number} - {}",
            if failed { "not ok" } else { "ok" },
            tap_description(&format!(
                "{}: {}",
                object.identity.file,
                object.identity.title()
            ))
        );
        if object.findings.is_empty() {
            continue;
        }
        out.push_str("  ---\n  findings:\n");
        for finding in &object.findings {
            let _ = writeln!(out, "    - rule: {}", yaml_quoted(&finding.rule));
            let _ = writeln!(out, "      check: {}", yaml_quoted(&finding.check));
            let _ = writeln!(out, "      severity: {}", finding.severity.as_str());
            let _ = writeln!(out, "      path: {}", yaml_quoted(&finding.path));
            let _ = writeln!(out, "      message: {}", yaml_quoted(&finding.msg));
            let _ = writeln!(out, "      fix: {}", yaml_quoted(&finding.fix));
            let _ = writeln!(
                out,
                "      enforcementAction: {}",
                finding.enforcement_action.as_str()
            );
            let _ = writeln!(out, "      failsRun: {}", finding.fails_run);
        }
        out.push_str("  ...\n");
    }
    for error in &report.errors {
        number += 1;
        let _ = writeln!(
            out,
            "not ok {number} - {}",
            tap_description(&format!("{}: cannot read", error.file))
        );
        out.push_str("  ---\n");
        let _ = writeln!(out, "  message: {}", yaml_quoted(&error.to_string()));
        out.push_str("  ...\n");
    }
    out
}

/// Workflow command escaping: data escapes `%`, CR, LF; properties also `:` and `,`.
fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}

fn render_github(report: &Report) -> String {
    let mut out = String::new();
    for (identity, finding) in report.findings() {
        let command = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let title = format!("{} {} ({})", finding.rule, finding.check, identity.title());
        let mut message = finding.msg.clone();
        if !finding.fix.is_empty() {
            message.push_str("\nfix: ");
            message.push_str(&finding.fix);
        }
        let position = match finding.location {
            Some((line, column)) => format!("line={line},col={column}"),
            None => format!("line={}", identity.line.max(1)),
        };
        let _ = writeln!(
            out,
            "::{command} file={},{position},title={}::{}",
            github_property(&identity.file),
            github_property(&title),
            github_data(&message)
        );
    }
    for error in &report.errors {
        let _ = writeln!(
            out,
            "::error file={},line={},title={}::{}",
            github_property(&error.file),
            error.line.unwrap_or(1).max(1),
            github_property("meshlife: cannot read input"),
            github_data(&error.to_string())
        );
    }
    let _ = writeln!(out, "{}", report.summary_line());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            xml_escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{fffd}"
        );
        assert_eq!(github_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(tap_description("x # y"), "x \\# y");
        assert_eq!(sarif_uri("./dir/a b.yaml"), "dir/a%20b.yaml");
        assert_eq!(sarif_uri("/abs/x.yaml"), "file:///abs/x.yaml");
    }
}
