//! Splitting a file into documents: YAML streams (with the line of each document's first key)
//! and JSON streams, each parse error placed in its document.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::errors::InputError;
use super::loaded::FileContents;
use super::objects::add_document;
use super::{nesting, values};

pub(super) fn parse_json_stream(file: &str, text: &str, contents: &mut FileContents) {
    // Nothing left from another file read on this thread.
    values::take_problem();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<values::Checked>();
    let mut index = 0;
    // Lines are counted from the previous document on, so a long stream stays linear.
    let mut counted = LineCounter::default();
    loop {
        let start = stream.byte_offset();
        let first_line = counted.line_at(text, first_key(text, skip_whitespace(text, start)));
        match stream.next() {
            None => break,
            Some(Ok(values::Checked(value))) => {
                add_document(file, index, first_line, value, contents)
            }
            Some(Err(error)) => {
                // After an error the rest of the stream cannot be resynchronised.
                let error = match values::take_problem() {
                    Some(problem) => InputError {
                        line: Some(error.line()),
                        ..InputError::document(file, index, first_line, problem.message)
                    }
                    .with_field(problem.field),
                    None => InputError {
                        line: Some(error.line()),
                        ..InputError::document(
                            file,
                            index,
                            first_line,
                            format!("invalid JSON: {error}"),
                        )
                    },
                };
                contents.errors.push(error);
                break;
            }
        }
        index += 1;
    }
}

/// Where the first key of the JSON object at `offset` is (the `{` itself when it has none,
/// `offset` when it is not an object), so that reports point at the object's first key.
pub(super) fn first_key(text: &str, offset: usize) -> usize {
    if !text[offset..].starts_with('{') {
        return offset;
    }
    let key = skip_whitespace(text, offset + 1);
    if text[key..].starts_with('"') {
        key
    } else {
        offset
    }
}

pub(super) fn skip_whitespace(text: &str, offset: usize) -> usize {
    text[offset..]
        .find(|character: char| !character.is_whitespace())
        .map_or(text.len(), |skip| offset + skip)
}

/// 1-based line numbers of increasing offsets, counting each newline once.
#[derive(Default)]
pub(super) struct LineCounter {
    pub(super) offset: usize,
    pub(super) newlines: usize,
}

impl LineCounter {
    pub(super) fn line_at(&mut self, text: &str, offset: usize) -> usize {
        let offset = offset.min(text.len());
        if offset >= self.offset {
            self.newlines += text.as_bytes()[self.offset..offset]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.offset = offset;
            self.newlines + 1
        } else {
            line_of_offset(text, offset)
        }
    }
}

pub(super) fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count()
        + 1
}

/// One YAML document's text and where it sits in the file.
pub(super) struct YamlDocument<'a> {
    pub(super) index: usize,
    /// 1-based line of the document's first key: its first line that is not blank, a comment
    /// or a directive (the `---` line itself when the content starts on it, `--- kind: Pod`);
    /// the `---` line for an empty document.
    pub(super) first_line: usize,
    /// 1-based file line of `text`'s first line, to translate parser line numbers.
    pub(super) text_first_line: usize,
    pub(super) text: std::borrow::Cow<'a, str>,
}

/// Splits a YAML stream at its document markers, so that one broken document does not hide
/// the others (a YAML parser gives up on the rest of the stream after a syntax error).
/// `---` and `...` at column 0 are always markers: the YAML spec forbids them inside scalars.
/// Document numbering matches a YAML parser's: explicit documents count even when empty, the
/// implicit document before the first `---` counts only when it holds content.
pub(super) fn split_yaml_documents<'a>(text: &'a str) -> Vec<YamlDocument<'a>> {
    struct Pending {
        start_line: usize,
        start_offset: usize,
        end_offset: usize,
        /// Text after `--- ` on the marker line, which belongs to the document.
        inline_head: Option<String>,
        explicit: bool,
    }
    let mut documents = Vec::new();
    let finish = |pending: Pending, documents: &mut Vec<YamlDocument<'a>>| {
        let body = &text[pending.start_offset..pending.end_offset];
        let (text, text_first_line): (std::borrow::Cow<'a, str>, usize) = match pending.inline_head
        {
            Some(head) => (format!("{head}\n{body}").into(), pending.start_line),
            None if pending.explicit => (body.into(), pending.start_line + 1),
            None => (body.into(), pending.start_line),
        };
        if pending.explicit || has_yaml_content(&text) {
            let index = documents.len();
            let first_line = text
                .lines()
                .position(is_content_line)
                .map_or(pending.start_line, |position| text_first_line + position);
            documents.push(YamlDocument {
                index,
                first_line,
                text_first_line,
                text,
            });
        }
    };

    let mut pending = Pending {
        start_line: 1,
        start_offset: 0,
        end_offset: 0,
        inline_head: None,
        explicit: false,
    };
    // Directives (`%YAML`) and comments before `---` belong to the next document, not a new one.
    let mut offset = 0;
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        let line_number = line_index + 1;
        let content = line.trim_end_matches(['\n', '\r']);
        let is_start_marker =
            content == "---" || content.starts_with("--- ") || content.starts_with("---\t");
        let is_end_marker =
            content == "..." || content.starts_with("... ") || content.starts_with("...\t");
        if is_start_marker {
            pending.end_offset = offset;
            let previous = std::mem::replace(
                &mut pending,
                Pending {
                    start_line: line_number,
                    start_offset: offset + line.len(),
                    end_offset: offset + line.len(),
                    inline_head: None,
                    explicit: true,
                },
            );
            let previous_is_only_directives = !previous.explicit
                && text[previous.start_offset..previous.end_offset]
                    .lines()
                    .all(|line| {
                        line.trim().is_empty()
                            || line.trim_start().starts_with('#')
                            || line.starts_with('%')
                    });
            if !previous_is_only_directives {
                finish(previous, &mut documents);
            }
            let head = content[3..].trim();
            if !head.is_empty() && !head.starts_with('#') {
                pending.inline_head = Some(head.to_string());
            }
        } else if is_end_marker {
            pending.end_offset = offset;
            let previous = std::mem::replace(
                &mut pending,
                Pending {
                    start_line: line_number + 1,
                    start_offset: offset + line.len(),
                    end_offset: offset + line.len(),
                    inline_head: None,
                    explicit: false,
                },
            );
            finish(previous, &mut documents);
        }
        offset += line.len();
    }
    pending.end_offset = text.len();
    finish(pending, &mut documents);
    documents
}

/// Whether a document holds anything but blank lines, comments and directives.
pub(super) fn has_yaml_content(text: &str) -> bool {
    text.lines().any(is_content_line)
}

/// A line that is not blank, a comment or a directive.
pub(super) fn is_content_line(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty() && !trimmed.starts_with('#') && !line.starts_with('%')
}

/// Why a YAML document could not be read.
pub(super) enum DocumentError {
    /// Refused before parsing: nested deeper than the parsers are given.
    TooDeep(nesting::TooDeep),
    /// The parser's error, with the value problem behind it when it was one of ours.
    Yaml(serde_yaml_ng::Error, Option<values::ValueProblem>),
}

/// `Ok(None)` for an empty document (only comments, or `null`).
pub(super) fn parse_yaml_document(
    document: &YamlDocument<'_>,
) -> Result<Option<Value>, DocumentError> {
    if !has_yaml_content(&document.text) {
        return Ok(None);
    }
    nesting::check(&document.text).map_err(DocumentError::TooDeep)?;
    // Every document is read directly first, so duplicate keys, `.inf` and the like are found
    // (with their line) the same way whatever else the document holds. Merge keys (`<<:
    // *defaults`) are resolved by `apply_merge` on the YAML value model only, so a document
    // that has one is read again that way.
    let direct = values::read(serde_yaml_ng::Deserializer::from_str(&document.text))
        .map_err(|(error, problem)| DocumentError::Yaml(error, problem))?;
    let value = if document.text.contains("<<") && holds_merge_key(&direct) {
        let mut yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&document.text)
            .map_err(|error| DocumentError::Yaml(error, None))?;
        yaml.apply_merge()
            .map_err(|error| DocumentError::Yaml(error, None))?;
        values::read(yaml).map_err(|(error, problem)| DocumentError::Yaml(error, problem))?
    } else {
        direct
    };
    Ok(if value.is_null() { None } else { Some(value) })
}

/// Whether a mapping of `value` has a `<<` key (the value is at most `values::KEPT_DEPTH` deep).
pub(super) fn holds_merge_key(value: &Value) -> bool {
    match value {
        Value::Object(fields) => fields.contains_key("<<") || fields.values().any(holds_merge_key),
        Value::Array(items) => items.iter().any(holds_merge_key),
        _ => false,
    }
}

/// A document's reading error, named by file, document, line and (for a value) field.
pub(super) fn document_error(
    file: &str,
    document: &YamlDocument<'_>,
    error: &DocumentError,
) -> InputError {
    match error {
        DocumentError::TooDeep(too_deep) => InputError {
            line: Some(document.text_first_line + too_deep.line),
            ..InputError::document(
                file,
                document.index,
                document.first_line,
                format!("refused before parsing: {}", too_deep.message),
            )
        },
        DocumentError::Yaml(error, None) => yaml_error(file, document, error),
        DocumentError::Yaml(error, Some(problem)) => {
            let located = yaml_error(file, document, error);
            let error = InputError {
                line: located.line,
                ..InputError::document(
                    file,
                    document.index,
                    document.first_line,
                    problem.message.clone(),
                )
            };
            if problem.field.is_empty() {
                error
            } else {
                error.with_field(problem.field.clone())
            }
        }
    }
}

/// A YAML error with its line moved from the document's numbering to the file's.
pub(super) fn yaml_error(
    file: &str,
    document: &YamlDocument<'_>,
    error: &serde_yaml_ng::Error,
) -> InputError {
    static LOCATION: OnceLock<Regex> = OnceLock::new();
    let location =
        LOCATION.get_or_init(|| Regex::new(r" at line (\d+) column (\d+)").expect("valid regex"));
    let lines_before = document.text_first_line - 1;
    let file_line = error
        .location()
        .map(|location| location.line() + lines_before);
    let message = error.to_string();
    let message = match file_line {
        // The message may name several positions ("... while parsing a flow sequence at line 4").
        Some(_) => location
            .replace_all(&message, |captures: &regex::Captures<'_>| {
                let line = captures[1]
                    .parse::<usize>()
                    .map_or(0, |line| line + lines_before);
                format!(" at line {line} column {}", &captures[2])
            })
            .into_owned(),
        None => message,
    };
    InputError {
        line: file_line.or(Some(document.first_line)),
        ..InputError::document(
            file,
            document.index,
            document.first_line,
            format!("invalid YAML: {message}"),
        )
    }
}
