//! Where a path is in flow-style YAML or JSON: `{kind: Pod, spec: {containers: [...]}}`, a
//! `.json` manifest, or a block document's flow value (`exec: {command: [sleep, "5"]}`). The
//! text is scanned from the collection's opening bracket, skipping what the path does not enter,
//! until the path's deepest key or item present; the result is that token's byte offset.
//!
//! Lenient by design: the reader already parsed the document and reported its errors, so a
//! malformed stretch ends the walk (the caller keeps the deepest place found before it) instead
//! of being diagnosed here.

use super::Segment;

/// The byte offset in `text` of the deepest key or item of `segments` found in the flow
/// collection that starts at `from` (its `{` or `[`); `None` when not even the first is there.
pub(super) fn locate(text: &str, from: usize, segments: &[Segment]) -> Option<usize> {
    Scanner {
        bytes: text.as_bytes(),
        at: from,
    }
    .find(segments)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn after_blank(&self) -> bool {
        self.at == 0 || matches!(self.bytes[self.at - 1], b' ' | b'\t' | b'\n' | b'\r')
    }

    /// Past spaces, line breaks and comments (a `#` after a blank runs to the line's end).
    fn skip_blank(&mut self) {
        while let Some(byte) = self.peek() {
            match byte {
                b' ' | b'\t' | b'\r' | b'\n' => self.at += 1,
                b'#' if self.after_blank() => {
                    while self.peek().is_some_and(|byte| byte != b'\n') {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// The deepest key or item of `segments` in the value at the scanner's place.
    fn find(&mut self, segments: &[Segment]) -> Option<usize> {
        let (first, deeper) = segments.split_first()?;
        self.skip_blank();
        match (self.peek()?, first) {
            (b'{', Segment::Key(key)) => {
                self.at += 1;
                loop {
                    self.skip_blank();
                    let entry_at = self.at;
                    match self.peek()? {
                        b'}' => return None,
                        b',' => {
                            self.at += 1;
                            continue;
                        }
                        _ => {}
                    }
                    let key_at = self.at;
                    let name = self.scalar(true)?;
                    self.skip_blank();
                    let has_value = self.peek() == Some(b':');
                    if has_value {
                        self.at += 1;
                    }
                    if name == *key {
                        if !has_value || deeper.is_empty() {
                            return Some(key_at);
                        }
                        return Some(self.find(deeper).unwrap_or(key_at));
                    }
                    if has_value {
                        self.skip_value()?;
                    }
                    // Text this scanner does not follow (it is not a parser): stop, never spin.
                    if self.at == entry_at {
                        return None;
                    }
                }
            }
            (b'[', Segment::Index(wanted)) => {
                self.at += 1;
                let mut index = 0;
                loop {
                    self.skip_blank();
                    match self.peek()? {
                        b']' => return None,
                        b',' => {
                            self.at += 1;
                            continue;
                        }
                        _ => {}
                    }
                    let item_at = self.at;
                    if index == *wanted {
                        if deeper.is_empty() {
                            return Some(item_at);
                        }
                        return Some(self.find(deeper).unwrap_or(item_at));
                    }
                    self.skip_value()?;
                    if self.at == item_at {
                        return None;
                    }
                    index += 1;
                }
            }
            _ => None,
        }
    }

    /// Past one value: a collection to its closing bracket, or a scalar.
    fn skip_value(&mut self) -> Option<()> {
        self.skip_blank();
        match self.peek()? {
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'{' | b'[' => {
                            depth += 1;
                            self.at += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.at += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        b'"' | b'\'' => {
                            self.scalar(false)?;
                        }
                        b'#' if self.after_blank() => self.skip_blank(),
                        _ => self.at += 1,
                    }
                }
            }
            _ => self.scalar(false).map(|_| ()),
        }
    }

    /// A quoted or plain scalar, unquoted. A plain one ends at a flow indicator, at a comment,
    /// or, as a key (`key`), at a `:` followed by a blank or an indicator (`http://x` stays whole).
    fn scalar(&mut self, key: bool) -> Option<String> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                let mut value = Vec::new();
                loop {
                    match self.peek()? {
                        b'"' => break,
                        b'\\' => {
                            self.at += 1;
                            value.push(self.peek()?);
                        }
                        byte => value.push(byte),
                    }
                    self.at += 1;
                }
                self.at += 1;
                String::from_utf8(value).ok()
            }
            b'\'' => {
                self.at += 1;
                let mut value = Vec::new();
                loop {
                    match self.peek()? {
                        b'\'' if self.bytes.get(self.at + 1) == Some(&b'\'') => {
                            value.push(b'\'');
                            self.at += 1;
                        }
                        b'\'' => break,
                        byte => value.push(byte),
                    }
                    self.at += 1;
                }
                self.at += 1;
                String::from_utf8(value).ok()
            }
            _ => {
                let start = self.at;
                while let Some(byte) = self.peek() {
                    let ends_key = byte == b':'
                        && self.bytes.get(self.at + 1).is_none_or(|next| {
                            matches!(
                                next,
                                b' ' | b'\t' | b'\r' | b'\n' | b',' | b'[' | b']' | b'{' | b'}'
                            )
                        });
                    if matches!(byte, b',' | b'[' | b']' | b'{' | b'}')
                        || (key && ends_key)
                        || (byte == b'#' && self.after_blank())
                    {
                        break;
                    }
                    self.at += 1;
                }
                let value = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
                Some(value.trim_end().to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::segments;
    use super::*;

    /// The token at the path's offset, for readable assertions.
    fn at<'a>(text: &'a str, path: &str) -> Option<&'a str> {
        let offset = locate(text, text.find(['{', '['])?, &segments(path)?)?;
        let rest = &text[offset..];
        Some(&rest[..rest.find([':', ',', '\n']).unwrap_or(rest.len())])
    }

    #[test]
    fn yaml_flow_and_json_are_followed_to_the_deepest_key() {
        let yaml = "{kind: Pod, metadata: {name: web, annotations: {\"proxy.istio.io/config\": '{}'}},\n spec: {containers: [{name: app, image: 'x:1'}, {name: b, # the second\n   lifecycle: {preStop: {exec: {command: [sleep, \"5\"]}}}}]}}";
        assert_eq!(
            at(yaml, "spec.containers[1].lifecycle.preStop"),
            Some("preStop")
        );
        assert_eq!(at(yaml, "spec.containers[0]"), Some("{name"));
        assert_eq!(
            at(yaml, r#"metadata.annotations["proxy.istio.io/config"]"#),
            Some("\"proxy.istio.io/config\"")
        );
        // Text the scanner does not follow ends the walk; it never spins.
        assert_eq!(at("{a: [x, }], b: 1}", "b"), None);
        assert_eq!(at("[a, }, b]", "[2]"), None);
        // A key that is not there: the deepest one that is.
        assert_eq!(at(yaml, "spec.containers[1].env"), Some("{name"));
        assert_eq!(at(yaml, "spec.activeDeadlineSeconds"), Some("spec"));
        assert_eq!(at(yaml, "status"), None);
        let json = r#"{"kind": "Job", "spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["http://x:80", "]"]}, {"name": "proxy"}]}}}}"#;
        assert_eq!(
            at(json, "spec.template.spec.containers[1]"),
            Some("{\"name\"")
        );
        assert_eq!(at(json, "spec.template.spec"), Some("\"spec\""));
    }
}
