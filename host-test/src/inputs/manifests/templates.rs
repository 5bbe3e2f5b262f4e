//! Template placeholders (`{{ ... }}`): a document holding one is skipped, named by number and
//! line; a placeholder inside a quoted string is a value.

use serde_json::Value;

use super::errors::Skipped;

pub(super) fn template_skip(file: &str, document: Option<usize>, line: usize) -> Skipped {
    Skipped {
        file: file.into(),
        document,
        line: Some(line),
        reason: "a Helm or Jinja template, not a manifest: render it first (`helm template \
                 CHART | meshlife check -`, or your templating tool's output)"
            .into(),
    }
}

/// Helm's own objects and functions inside `{{ }}`: an expression using one is a chart's, not a
/// value a manifest carries (alerting rules' `{{ $labels.x }}`, Argo's `{{inputs.parameters.x}}`).
pub(super) const HELM_MARKERS: [&str; 8] = [
    ".Values",
    ".Release.",
    ".Chart.",
    ".Capabilities.",
    ".Files.",
    "include \"",
    "toYaml",
    "template \"",
];

pub(super) fn has_helm_expression(text: &str) -> bool {
    text.split("{{").skip(1).any(|expression| {
        let expression = expression.split("}}").next().unwrap_or("");
        HELM_MARKERS
            .iter()
            .any(|marker| expression.contains(marker))
    })
}

/// A document that parsed but still is a chart's template: a one-line string of it holds a Helm
/// expression (`name: "{{ .Release.Name }}-migrate"`). Multi-line strings are data (an
/// IstioOperator's or a ConfigMap's own templates) and are left alone.
pub(super) fn holds_helm_expression(value: &Value) -> bool {
    match value {
        Value::String(text) => !text.contains('\n') && has_helm_expression(text),
        Value::Array(items) => items.iter().any(holds_helm_expression),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| has_helm_expression(key) || holds_helm_expression(value)),
        _ => false,
    }
}

/// The first line that is a template directive on its own (`{{- if .Values.x }}`, `{% for %}`),
/// asked only of files that do not parse (inside a block scalar such a line is data).
pub(super) fn template_directive_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.starts_with("{{") || line.starts_with("{%") || line.starts_with("{#")
        })
        .map(|index| index + 1)
}

/// The first line with a template expression outside quotes; asked only of documents that do
/// not parse, since valid manifests carry `{{ }}` in quoted strings too (alerting rules, Argo
/// workflows' `"{{inputs.parameters.x}}"`).
pub(super) fn template_expression_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = unquoted(line.trim_start());
            !line.starts_with('#')
                && ((line.contains("{{") && line.contains("}}"))
                    || (line.contains("{%") && line.contains("%}")))
        })
        .map(|index| index + 1)
}

/// A line with its single- and double-quoted strings removed.
pub(super) fn unquoted(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for character in line.chars() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if character == '\\' => escaped = true,
            Some(open) if character == open => quote = None,
            Some(_) => {}
            None if character == '"' || character == '\'' => quote = Some(character),
            None => out.push(character),
        }
    }
    out
}
