//! `-o sarif`: SARIF 2.1.0 for code scanning, each rule with its description, help and address.

use std::collections::BTreeMap;

use meshlife_policy::Severity;
use serde_json::{Value, json};

use super::{Finding, Report};
use crate::inputs::manifests::ObjectIdentity;

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

pub(super) fn render_sarif(report: &Report) -> String {
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
            if let Some(help) = crate::rule_reference::help(id) {
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

#[cfg(test)]
mod tests {
    #[test]
    fn uris() {
        assert_eq!(super::sarif_uri("./dir/a b.yaml"), "dir/a%20b.yaml");
        assert_eq!(super::sarif_uri("/abs/x.yaml"), "file:///abs/x.yaml");
    }
}
