//! The YAML that `proxy.istio.io/config` annotations are written in: block mappings and
//! sequences, flow collections, plain and quoted scalars, block scalars and comments.
//!
//! Why not a YAML library: yaml-rust2 0.13 added 183 KB to the module at opt-level 3 (543 KB
//! against 360 KB) and 162 KB at opt-level "s", more than the whole rule engine. ProxyConfig
//! values are small maps, so this reader covers what users write there; anchors, aliases, tags
//! and multi-line plain scalars are reported as unsupported rather than guessed. JSON is
//! parsed by serde_json before this reader is tried.
//!
//! Where it reads YAML at all, it reads it as Istio does. Istio hands the annotation to
//! `protomarshal.ApplyYAML` (istio/istio pkg/config/mesh/mesh.go `MergeProxyConfig`, from the
//! injector's pkg/kube/inject/webhook.go and the agent's pilot/cmd/pilot-agent/config), which
//! is sigs.k8s.io/yaml's `YAMLToJSON` (yaml.go: go-yaml v2's `Unmarshal`, then
//! `encoding/json`) followed by golang/protobuf's jsonpb. Hence, from go-yaml v2 (the copy in
//! kubernetes-sigs/yaml goyaml.v2/, the code of go.yaml.in/yaml/v2):
//! - only the first document counts: `unmarshal` (yaml.go) calls `parser.parse()` once, which
//!   reads one document node and never parses what follows its end;
//! - a byte order mark before the text is skipped (readerc.go,
//!   `yaml_parser_determine_encoding`);
//! - CR, LF, CR LF, NEL, LS and PS all end a line (yamlprivateh.go, `is_break`);
//! - a flow entry with no node, `[1,,2]`, is an error ("did not find expected node content",
//!   parserc.go `yaml_parser_parse_flow_sequence_entry` / `_flow_mapping_key` then
//!   `yaml_parser_parse_node`), while a trailing comma and an empty mapping value are not.
//!
//! And from jsonpb (jsonpb/decode.go): a top-level `null` (an empty document) changes nothing.
use serde_json::{Map, Number, Value};

/// Part of the error for valid YAML this reader does not support.
pub const UNSUPPORTED_YAML: &str =
    "anchors, aliases and tags are not supported by meshlife's YAML reader";

/// Nesting beyond this is not a ProxyConfig; the bound also keeps recursion off the small stack.
const MAX_DEPTH: usize = 32;

struct Line<'t> {
    number: usize,
    indent: usize,
    text: &'t str,
}

/// Parses the first YAML document of `source` into JSON (`null` when it is empty).
pub fn parse_yaml(source: &str) -> Result<Value, String> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let mut lines = Vec::new();
    // Whether a `---` opened the first document before any content.
    let mut opened = false;
    for (index, raw) in yaml_lines(source).enumerate() {
        let number = index + 1;
        let content = strip_comment(raw).trim_end();
        let trimmed = content.trim_start();
        // Document markers count only at the start of a line and followed by a blank or the
        // end (go-yaml's scanner, `yaml_parser_fetch_next_token`): anything else is content.
        let marker = |mark: &str| {
            content
                .strip_prefix(mark)
                .filter(|after| after.is_empty() || after.starts_with([' ', '\t']))
                .map(str::trim_start)
        };
        if let Some(after) = marker("---") {
            if !lines.is_empty() || opened {
                break;
            }
            opened = true;
            if after.is_empty() {
                continue;
            }
            // `--- value`: the document's content starts on the marker's line.
            lines.push(Line {
                number,
                indent: content.len() - after.len(),
                text: after,
            });
            continue;
        }
        if marker("...").is_some() {
            if !lines.is_empty() || opened {
                break;
            }
            continue;
        }
        if trimmed.is_empty() || (lines.is_empty() && !opened && content.starts_with('%')) {
            // Blank lines, comments, and directives (`%YAML 1.1`) before the document.
            continue;
        }
        let indent_text = &content[..content.len() - trimmed.len()];
        if indent_text.contains('\t') {
            return Err(format!(
                "line {number}: tabs are not allowed for indentation in YAML"
            ));
        }
        if trimmed.starts_with('&') || trimmed.starts_with('*') || trimmed.starts_with('!') {
            return Err(format!("line {number}: {UNSUPPORTED_YAML}"));
        }
        lines.push(Line {
            number,
            indent: indent_text.len(),
            text: trimmed,
        });
    }
    if lines.is_empty() {
        return Ok(Value::Null);
    }
    let mut parser = BlockParser { lines, position: 0 };
    let indent = parser.lines[0].indent;
    let value = parser.block(indent, 0)?;
    match parser.lines.get(parser.position) {
        Some(line) => Err(format!("line {}: unexpected indentation", line.number)),
        None => Ok(value),
    }
}

/// The lines of `source`, split at every YAML 1.1 line break: CR LF, LF, CR, NEL, LS and PS.
pub fn yaml_lines(source: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(source);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}']) {
            Some(at) => {
                let break_len = if text[at..].starts_with("\r\n") {
                    2
                } else {
                    text[at..].chars().next().map_or(1, char::len_utf8)
                };
                let next = &text[at + break_len..];
                // Like `str::lines`, a final line break does not start another line.
                rest = (!next.is_empty()).then_some(next);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// Drops a `#` comment that starts the line or follows whitespace, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return &line[..at],
            None => {}
        }
        previous = c;
    }
    line
}

struct BlockParser<'t> {
    lines: Vec<Line<'t>>,
    position: usize,
}

impl<'t> BlockParser<'t> {
    fn block(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        let first = &self.lines[self.position];
        if is_sequence_item(first.text) {
            self.sequence(indent, depth)
        } else if split_key(first.text).is_none() {
            // A scalar or flow collection standing alone.
            let (number, text) = (first.number, first.text);
            self.position += 1;
            inline_value(text, depth).map_err(|problem| format!("line {number}: {problem}"))
        } else {
            self.mapping(indent, depth)
        }
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut map = Map::new();
        while let Some(line) = self.lines.get(self.position) {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return Err(format!("line {}: unexpected indentation", line.number));
            }
            if is_sequence_item(line.text) {
                break;
            }
            let number = line.number;
            let (key, rest) = split_key(line.text)
                .ok_or_else(|| format!("line {number}: expected `key: value`"))?;
            let key = scalar_text(key).map_err(|problem| format!("line {number}: {problem}"))?;
            self.position += 1;
            let value = self.value_after_key(rest, indent, number, depth)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    fn value_after_key(
        &mut self,
        rest: &str,
        indent: usize,
        number: usize,
        depth: usize,
    ) -> Result<Value, String> {
        if rest.is_empty() {
            return match self.lines.get(self.position) {
                Some(next) if next.indent > indent => {
                    let nested = next.indent;
                    self.block(nested, depth + 1)
                }
                // A sequence may sit at the same indentation as its key.
                Some(next) if next.indent == indent && is_sequence_item(next.text) => {
                    self.sequence(indent, depth + 1)
                }
                _ => Ok(Value::Null),
            };
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            return Ok(Value::String(
                self.block_scalar(rest.starts_with('|'), indent),
            ));
        }
        inline_value(rest, depth).map_err(|problem| format!("line {number}: {problem}"))
    }

    fn block_scalar(&mut self, literal: bool, indent: usize) -> String {
        let mut parts = Vec::new();
        while let Some(line) = self
            .lines
            .get(self.position)
            .filter(|line| line.indent > indent)
        {
            parts.push(line.text);
            self.position += 1;
        }
        let mut text = parts.join(if literal { "\n" } else { " " });
        text.push('\n');
        text
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.position) {
            if line.indent != indent || !is_sequence_item(line.text) {
                if line.indent > indent {
                    return Err(format!("line {}: unexpected indentation", line.number));
                }
                break;
            }
            let number = line.number;
            let item = line.text[1..].trim_start();
            if item.is_empty() {
                self.position += 1;
                match self.lines.get(self.position) {
                    Some(next) if next.indent > indent => {
                        let nested = next.indent;
                        items.push(self.block(nested, depth + 1)?);
                    }
                    _ => items.push(Value::Null),
                }
            } else if split_key(item).is_some() && !item.starts_with('{') && !item.starts_with('[')
            {
                // `- key: value` starts a mapping whose keys line up with `key`.
                let item_indent = indent + (line.text.len() - item.len());
                self.lines[self.position] = Line {
                    number,
                    indent: item_indent,
                    text: item,
                };
                items.push(self.mapping(item_indent, depth + 1)?);
            } else {
                self.position += 1;
                items.push(
                    inline_value(item, depth)
                        .map_err(|problem| format!("line {number}: {problem}"))?,
                );
            }
        }
        Ok(Value::Array(items))
    }
}

fn is_sequence_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Splits `key: rest` at the first `:` that is followed by a space or ends the line, outside
/// quotes and flow collections.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let mut quote = None;
    let bytes = text.as_bytes();
    for (at, &byte) in bytes.iter().enumerate() {
        match quote {
            Some(q) if byte == q => quote = None,
            Some(_) => {}
            None if (byte == b'"' || byte == b'\'') && at == 0 => quote = Some(byte),
            None if byte == b'{' || byte == b'[' => return None,
            None if byte == b':' && (at + 1 == bytes.len() || bytes[at + 1] == b' ') => {
                return Some((text[..at].trim_end(), text[at + 1..].trim()));
            }
            None => {}
        }
    }
    None
}

/// A key, or a scalar that must be text: quoted or plain.
fn scalar_text(text: &str) -> Result<String, String> {
    match inline_value(text, 0)? {
        Value::String(text) => Ok(text),
        Value::Null => Ok(String::new()),
        other => Ok(other.to_string()),
    }
}

fn inline_value(text: &str, depth: usize) -> Result<Value, String> {
    let mut flow = Flow { text, position: 0 };
    let value = flow.value(depth, false)?;
    flow.skip_spaces();
    if flow.position < text.len() {
        return Err(format!(
            "unexpected text after the value: `{}`",
            &text[flow.position..]
        ));
    }
    Ok(value)
}

struct Flow<'t> {
    text: &'t str,
    position: usize,
}

impl Flow<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.position).copied()
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ')) {
            self.position += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_spaces();
        if self.peek() == Some(byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` in a flow collection", byte as char))
        }
    }

    /// A comma where a flow entry (an item, or a key) must start: `[1,,2]`, `[,1]`, `{a: 1,,}`.
    fn no_empty_entry(&self) -> Result<(), String> {
        if self.peek() == Some(b',') {
            return Err(
                "did not find expected node content: a flow collection holds an empty entry (`,,`)"
                    .into(),
            );
        }
        Ok(())
    }

    fn value(&mut self, depth: usize, in_flow: bool) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.skip_spaces();
        match self.peek() {
            Some(b'{') => self.mapping(depth),
            Some(b'[') => self.sequence(depth),
            Some(b'"') => self.double_quoted().map(Value::String),
            Some(b'\'') => self.single_quoted().map(Value::String),
            Some(b'&' | b'*' | b'!') => Err(UNSUPPORTED_YAML.into()),
            _ => Ok(resolve_plain(self.plain(in_flow))),
        }
    }

    fn mapping(&mut self, depth: usize) -> Result<Value, String> {
        self.position += 1;
        let mut map = Map::new();
        loop {
            self.skip_spaces();
            if self.peek() == Some(b'}') {
                self.position += 1;
                return Ok(Value::Object(map));
            }
            self.no_empty_entry()?;
            let key = match self.value(depth + 1, true)? {
                Value::String(text) => text,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            self.expect(b':')?;
            let value = self.value(depth + 1, true)?;
            map.insert(key, value);
            self.skip_spaces();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') => {}
                _ => return Err("expected `,` or `}` in a flow mapping".into()),
            }
        }
    }

    fn sequence(&mut self, depth: usize) -> Result<Value, String> {
        self.position += 1;
        let mut items = Vec::new();
        loop {
            self.skip_spaces();
            if self.peek() == Some(b']') {
                self.position += 1;
                return Ok(Value::Array(items));
            }
            self.no_empty_entry()?;
            items.push(self.value(depth + 1, true)?);
            self.skip_spaces();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {}
                _ => return Err("expected `,` or `]` in a flow sequence".into()),
            }
        }
    }

    /// A plain scalar: up to the end, or in a flow collection up to `,` `]` `}` or `: `.
    fn plain(&mut self, in_flow: bool) -> &str {
        let start = self.position;
        let bytes = self.text.as_bytes();
        while let Some(&byte) = bytes.get(self.position) {
            if in_flow {
                let ends_key = byte == b':'
                    && matches!(
                        bytes.get(self.position + 1),
                        None | Some(b' ' | b',' | b'}' | b']')
                    );
                if matches!(byte, b',' | b']' | b'}') || ends_key {
                    break;
                }
            }
            self.position += 1;
        }
        self.text[start..self.position].trim()
    }

    fn double_quoted(&mut self) -> Result<String, String> {
        let start = self.position;
        self.position += 1;
        let bytes = self.text.as_bytes();
        while let Some(&byte) = bytes.get(self.position) {
            self.position += 1;
            match byte {
                b'\\' => self.position += 1,
                b'"' => {
                    // YAML's double-quoted escapes are a superset of JSON's common ones.
                    return serde_json::from_str(&self.text[start..self.position])
                        .map_err(|_| "unsupported escape in a double-quoted string".to_string());
                }
                _ => {}
            }
        }
        Err("unterminated double-quoted string".into())
    }

    fn single_quoted(&mut self) -> Result<String, String> {
        self.position += 1;
        let mut text = String::new();
        let rest = &self.text[self.position..];
        let mut chars = rest.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            if c == '\'' {
                if matches!(chars.peek(), Some((_, '\''))) {
                    chars.next();
                    text.push('\'');
                    continue;
                }
                self.position += at + 1;
                return Ok(text);
            }
            text.push(c);
        }
        Err("unterminated single-quoted string".into())
    }
}

/// YAML 1.2 core schema for plain scalars. Floats stay text: no ProxyConfig lifecycle field
/// is a float, and keeping them avoids float parsing code in the module.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => {
            let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
            if !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && let Ok(number) = text.parse::<i64>()
            {
                return Value::Number(Number::from(number));
            }
            Value::String(text.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_block_mappings_sequences_and_scalars() {
        let yaml = "# proxy settings\nholdApplicationUntilProxyStarts: true\nterminationDrainDuration: 45s # drain\nconcurrency: 2\nproxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true'\n  MINIMUM_DRAIN_DURATION: \"10s\"\ntracing:\n  sampling: 1.5\nproxyStatsMatcher:\n  inclusionPrefixes:\n  - cluster.outbound\n  - listener\nextra:\n  - name: a\n    value: b\n  - {name: c}\n";
        assert_eq!(
            parse_yaml(yaml).unwrap(),
            json!({
                "holdApplicationUntilProxyStarts": true,
                "terminationDrainDuration": "45s",
                "concurrency": 2,
                "proxyMetadata": {"EXIT_ON_ZERO_ACTIVE_CONNECTIONS": "true", "MINIMUM_DRAIN_DURATION": "10s"},
                "tracing": {"sampling": "1.5"},
                "proxyStatsMatcher": {"inclusionPrefixes": ["cluster.outbound", "listener"]},
                "extra": [{"name": "a", "value": "b"}, {"name": "c"}]
            })
        );
    }

    #[test]
    fn reads_flow_style() {
        assert_eq!(
            parse_yaml(
                "{holdApplicationUntilProxyStarts: true, proxyMetadata: {A: 'x', B: [1, two]}}"
            )
            .unwrap(),
            json!({"holdApplicationUntilProxyStarts": true, "proxyMetadata": {"A": "x", "B": [1, "two"]}})
        );
        assert_eq!(parse_yaml("key: 'it''s'").unwrap(), json!({"key": "it's"}));
        assert_eq!(
            parse_yaml("url: http://a:80/x").unwrap(),
            json!({"url": "http://a:80/x"})
        );
    }

    #[test]
    fn reads_scalars_and_block_scalars() {
        assert_eq!(parse_yaml("just a string").unwrap(), json!("just a string"));
        assert_eq!(
            parse_yaml("a: |\n  line one\n  line two\nb: ~").unwrap(),
            json!({"a": "line one\nline two\n", "b": null})
        );
    }

    #[test]
    fn refuses_what_it_does_not_read() {
        assert!(parse_yaml("a: &anchor 1\nb: *anchor").is_err());
        assert!(parse_yaml("a:\n\tb: 1").is_err());
        assert!(parse_yaml("a: {b: 1").is_err());
        assert!(parse_yaml("a: 1\n   b: 2").is_err());
        assert!(parse_yaml("- a\nb: 1").is_err());
        assert!(parse_yaml(&"[".repeat(100)).is_err());
    }
}
