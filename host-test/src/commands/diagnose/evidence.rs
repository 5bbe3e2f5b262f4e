//! What an observation rests on: a file and a line (logs, describe text) or a field (a pod's
//! status, an event), with the text or value read there.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// The file as named on the command line, or what the API server was asked
    /// (`pod/web (API server)`).
    pub file: String,
    /// 1-based, for text inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The field of a JSON or YAML input (`status.containerStatuses[1].state.terminated.finishedAt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The line or value itself, cut to a readable length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Longest text kept with a piece of evidence.
const KEPT_TEXT: usize = 240;

impl Evidence {
    pub fn field(file: &str, field: &str) -> Evidence {
        Evidence {
            file: file.into(),
            field: (!field.is_empty()).then(|| field.to_string()),
            ..Evidence::default()
        }
    }

    pub fn line(file: &str, line: usize, text: &str) -> Evidence {
        Evidence {
            file: file.into(),
            line: Some(line),
            text: Some(cut(text.trim_end())),
            ..Evidence::default()
        }
    }

    /// `app.log:12`, `pod.json status.containerStatuses[0].state`.
    pub fn place(&self) -> String {
        match (&self.line, &self.field) {
            (Some(line), _) => format!("{}:{line}", self.file),
            (None, Some(field)) => format!("{} {field}", self.file),
            (None, None) => self.file.clone(),
        }
    }
}

fn cut(text: &str) -> String {
    if text.len() <= KEPT_TEXT {
        return text.to_string();
    }
    let mut end = KEPT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
