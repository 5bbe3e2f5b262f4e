//! JSON rendered the way OPA's Go host renders input: `ast.Term.String()`, with strings quoted
//! by Go's `strconv.Quote`. The module has to read it, escapes such as `\x1f`, `\a`, `\v` and
//! `\U0001f600`-style forms included.

use std::fmt::Write as _;

use serde_json::Value;

pub fn go_term_string(value: &Value) -> String {
    let mut text = String::new();
    write_term(&mut text, value);
    text
}

fn write_term(text: &mut String, value: &Value) {
    match value {
        Value::Null => text.push_str("null"),
        Value::Bool(flag) => text.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => text.push_str(&number.to_string()),
        Value::String(string) => go_quote(text, string),
        Value::Array(items) => {
            text.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    text.push_str(", ");
                }
                write_term(text, item);
            }
            text.push(']');
        }
        Value::Object(fields) => {
            text.push('{');
            for (index, (key, item)) in fields.iter().enumerate() {
                if index > 0 {
                    text.push_str(", ");
                }
                go_quote(text, key);
                text.push_str(": ");
                write_term(text, item);
            }
            text.push('}');
        }
    }
}

/// `strconv.Quote`: printable characters as they are, the C escapes Go knows, `\xNN` for other
/// ASCII controls, `\uNNNN` / `\UNNNNNNNN` for non-printable code points.
fn go_quote(text: &mut String, string: &str) {
    text.push('"');
    for character in string.chars() {
        match character {
            '"' => text.push_str("\\\""),
            '\\' => text.push_str("\\\\"),
            '\u{7}' => text.push_str("\\a"),
            '\u{8}' => text.push_str("\\b"),
            '\u{c}' => text.push_str("\\f"),
            '\n' => text.push_str("\\n"),
            '\r' => text.push_str("\\r"),
            '\t' => text.push_str("\\t"),
            '\u{b}' => text.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(text, "\\x{:02x}", c as u32);
            }
            c if is_go_printable(c) => text.push(c),
            c if (c as u32) <= 0xffff => {
                let _ = write!(text, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(text, "\\U{:08x}", c as u32);
            }
        }
    }
    text.push('"');
}

/// An approximation of Go's `unicode.IsPrint` that covers what Kubernetes objects carry: space
/// is printable, other white space, controls and format characters are not.
fn is_go_printable(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0001}'..='\u{e007f}'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_take_go_escapes() {
        let value = json!({"a": "x\u{1f}\u{7}\u{b}\u{a0}é😀\"\\", "b": [1, null, true]});
        assert_eq!(
            go_term_string(&value),
            r#"{"a": "x\x1f\a\v\u00a0é😀\"\\", "b": [1, null, true]}"#
        );
    }
}
