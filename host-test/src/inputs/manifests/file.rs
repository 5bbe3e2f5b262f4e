//! One input file read into objects: its bytes, its documents (YAML or JSON), each document's
//! objects, placeholders skipped, parsed a batch of documents at a time in parallel.

use std::path::Path;

use rayon::prelude::*;

use super::documents::{
    document_error, parse_json_stream, parse_yaml_document, split_yaml_documents,
};
use super::errors::InputError;
use super::loaded::FileContents;
use super::objects::add_document;
use super::templates::{
    has_helm_expression, holds_helm_expression, template_directive_line, template_expression_line,
    template_skip,
};
use crate::inputs::files::{self, ReadLimit};

/// Documents of one stream parsed in parallel before their results are merged.
pub(super) const DOCUMENTS_PARSED_TOGETHER: usize = 4096;

pub(super) fn read_file(path: &Path, name: &str, limit: ReadLimit) -> FileContents {
    // Regular files only, capped: a FIFO or /dev/zero named on the command line is refused.
    let text = match files::read_text(path, limit) {
        Ok(text) => text,
        Err(error) => {
            return FileContents {
                errors: vec![InputError::file(name, error.to_string())],
                ..Default::default()
            };
        }
    };
    let is_json = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"));
    parse_text(name, &text, is_json)
}

/// Parses a whole file (or stdin). JSON files may hold several concatenated values.
pub(super) fn parse_text(file: &str, text: &str, is_json: bool) -> FileContents {
    let mut contents = FileContents::default();
    // A UTF-8 byte order mark is legal in both formats but neither parser skips it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_json {
        parse_json_stream(file, text, &mut contents);
    } else {
        // Documents are parsed in parallel: one rendered stream on stdin (a whole Helm
        // release) would otherwise keep every core but one idle. A chunk at a time, merged in
        // document order: each document's results, held for all of a long stream before the
        // merge, were most of the reader's memory.
        let documents = split_yaml_documents(text);
        // Mostly one object per document: room for them all at once, not by doubling, which
        // held up to three times the objects' size while the array moved.
        contents.objects.reserve_exact(documents.len());
        for chunk in documents.chunks(DOCUMENTS_PARSED_TOGETHER) {
            let parsed: Vec<FileContents> = chunk
                .par_iter()
                .map(|document| {
                    let mut parsed = FileContents::default();
                    match parse_yaml_document(document) {
                        // A document that parses is a chart's template only when a one-line
                        // string holds a Helm expression (`name: "{{ .Release.Name }}-x"`);
                        // Argo's quoted `"{{inputs.parameters.x}}"` is a value.
                        Ok(Some(value))
                            if document.text.contains("{{") && holds_helm_expression(&value) =>
                        {
                            let line = document
                                .text
                                .lines()
                                .position(has_helm_expression)
                                .map_or(document.first_line, |index| {
                                    document.text_first_line + index
                                });
                            parsed
                                .skipped
                                .push(template_skip(file, Some(document.index), line));
                        }
                        Ok(Some(value)) => add_document(
                            file,
                            document.index,
                            document.first_line,
                            value,
                            &mut parsed,
                        ),
                        Ok(None) => {}
                        // A template rarely parses (`image: {{ .Values.image }}`, `{{- if }}`
                        // lines): that document is skipped, the others of the file judged.
                        Err(error) => match template_directive_line(&document.text)
                            .or_else(|| template_expression_line(&document.text))
                        {
                            Some(index) => parsed.skipped.push(template_skip(
                                file,
                                Some(document.index),
                                document.text_first_line + index - 1,
                            )),
                            None => parsed.errors.push(document_error(file, document, &error)),
                        },
                    }
                    parsed
                })
                .collect();
            for document in parsed {
                contents.objects.extend(document.objects);
                contents.errors.extend(document.errors);
                contents.skipped.extend(document.skipped);
            }
        }
        contents.objects.shrink_to_fit();
    }
    contents
}
