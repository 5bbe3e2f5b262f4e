//! What could not be read (an [`InputError`] naming file, document, line and field) and what
//! was skipped on purpose (a [`Skipped`] input, with why).

use std::fmt;

/// A document or file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub document: Option<usize>,
    pub item: Option<usize>,
    /// Indexes in nested Lists, as [`ManifestObject::inner_items`].
    pub inner_items: Vec<usize>,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// The offending field (`kind`, `items`, `request`, ...), when the problem is one field.
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn file(file: &str, message: impl Into<String>) -> InputError {
        InputError {
            file: file.into(),
            document: None,
            item: None,
            inner_items: Vec::new(),
            line: None,
            field: None,
            message: message.into(),
        }
    }

    pub(super) fn document(
        file: &str,
        document: usize,
        line: usize,
        message: impl Into<String>,
    ) -> InputError {
        InputError {
            file: file.into(),
            document: Some(document),
            item: None,
            inner_items: Vec::new(),
            line: Some(line),
            field: None,
            message: message.into(),
        }
    }

    pub(super) fn with_field(mut self, field: impl Into<String>) -> InputError {
        self.field = Some(field.into());
        self
    }

    pub(super) fn with_item(mut self, item: Option<usize>) -> InputError {
        self.item = item;
        self
    }

    pub(super) fn with_items(mut self, items: &[usize]) -> InputError {
        if let Some((&item, inner)) = items.split_first() {
            self.item = Some(item);
            self.inner_items = inner.to_vec();
        }
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.file)?;
        // Indexes are 0-based, the numbers people read 1-based.
        if let Some(document) = self.document {
            write!(formatter, ": document {}", document + 1)?;
        }
        write!(formatter, "{}", item_text(self.item, &self.inner_items))?;
        if let Some(line) = self.line {
            write!(formatter, " (line {line})")?;
        }
        if let Some(field) = &self.field {
            write!(formatter, ": field `{field}`")?;
        }
        write!(formatter, ": {}", self.message)
    }
}

/// `, item 2, item 1` for an object of a List (and of the Lists nested in it), counted from 1.
pub fn item_text(item: Option<usize>, inner_items: &[usize]) -> String {
    item.iter()
        .chain(inner_items)
        .map(|index| format!(", item {}", index + 1))
        .collect()
}

/// Why stdin was skipped when nothing at all came through the pipe.
pub const EMPTY_STDIN: &str = "no document on stdin (did the command before the pipe fail?)";

/// A file or document that was read but holds nothing to judge: a template to render first,
/// or YAML that is not a Kubernetes object (`values.yaml`, a compose file). Listed, never
/// silent; `--strict` makes each an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    /// `None` when the whole file is skipped.
    pub document: Option<usize>,
    pub line: Option<usize>,
    pub reason: String,
}

impl Skipped {
    pub fn into_error(self) -> InputError {
        InputError {
            file: self.file,
            document: self.document,
            item: None,
            inner_items: Vec::new(),
            line: self.line,
            field: None,
            message: self.reason,
        }
    }
}

/// Said the way an input error is, so a skipped input and its `--strict` error read alike.
impl fmt::Display for Skipped {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.clone().into_error().fmt(formatter)
    }
}
