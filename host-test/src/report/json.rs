//! `-o json` (the envelope: findings, errors, skipped inputs, what was not judged, exemptions,
//! the summary) and `-o json-array` (the bare array of findings, kept for one release).

use meshlife_policy::Severity;
use serde::Serialize;
use serde_json::{Value, json};

use super::Report;

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
pub(super) fn render_json_envelope(report: &Report) -> String {
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
    let mut envelope = json!({
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
    if let (Some(config), Some(fields)) = (&report.config, envelope.as_object_mut()) {
        fields.insert("config".into(), json!(config));
    }
    if let (Some(facts_read), Some(fields)) = (&report.facts_read, envelope.as_object_mut()) {
        fields.insert("clusterFacts".into(), json!(facts_read));
    }
    let mut out = serde_json::to_string_pretty(&envelope).unwrap_or_else(|_| "{}".into());
    out.push('\n');
    out
}

pub(super) fn render_json(report: &Report) -> String {
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
