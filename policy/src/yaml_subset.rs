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

/// One line of the first document. `text` is the line without its indentation and trailing
/// blanks (comments are left for the scalar readers, which know where a `#` starts one);
/// `raw` is the whole line, for block scalars, whose content is everything past their indent.
#[derive(Clone, Copy)]
struct Line<'t> {
    number: usize,
    raw: &'t str,
    indent: usize,
    text: &'t str,
    /// Whether the indentation holds a tab, which YAML refuses where indentation counts.
    tab_indent: bool,
}

/// YAML's blanks: space and tab only (`str::trim` would also take NBSP and other Unicode
/// spaces, which are content in YAML).
const BLANKS: [char; 2] = [' ', '\t'];

fn is_blank(byte: Option<&u8>) -> bool {
    matches!(byte, None | Some(b' ' | b'\t'))
}

/// Parses the first YAML document of `source` into JSON (`null` when it is empty).
pub fn parse_yaml(source: &str) -> Result<Value, String> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    check_characters(source)?;
    let mut lines: Vec<Line> = Vec::new();
    // Whether a `---` opened the first document before any content.
    let mut opened = false;
    // Whether the last line kept in `lines` ends with a line break (block scalars keep it).
    let mut last_line_ends = true;
    // Whether `lines` holds more than blank and comment lines.
    let mut content = false;
    let mut all = yaml_lines(source).enumerate().peekable();
    while let Some((index, raw)) = all.next() {
        let number = index + 1;
        // Document markers count only at the start of a line and followed by a blank or the
        // end (go-yaml's scanner, `yaml_parser_fetch_next_token`): anything else is content,
        // an indented `---` or `...` too (a plain scalar).
        let marker = |mark: &str| {
            raw.strip_prefix(mark)
                .filter(|after| after.is_empty() || after.starts_with(BLANKS))
                .map(|after| after.trim_start_matches(BLANKS))
        };
        if let Some(after) = marker("---") {
            if content || opened {
                break;
            }
            opened = true;
            // Blank lines before the marker go, but a tab starting one is still an error.
            if let Some(line) = lines.iter().find(|line| line.tab_indent) {
                return Err(format!(
                    "line {}: tabs are not allowed for indentation in YAML",
                    line.number
                ));
            }
            lines.clear();
            if is_blank_line(after) {
                continue;
            }
            // `--- value`: the document's content starts on the marker's line; a block
            // collection cannot (go-yaml: "mapping values are not allowed in this context").
            if split_key(after).is_some() || is_sequence_item(after) {
                return Err(format!(
                    "line {number}: a block mapping or sequence cannot start on the `---` line"
                ));
            }
            content = true;
            lines.push(Line {
                number,
                raw,
                indent: raw.len() - after.len(),
                text: after.trim_end_matches(BLANKS),
                tab_indent: false,
            });
            continue;
        }
        if marker("...").is_some() {
            if content || opened {
                break;
            }
            // go-yaml: a document end with no document before it is "did not find expected
            // node content".
            return Err(format!(
                "line {number}: `...` ends a document that never started"
            ));
        }
        if raw.starts_with('\u{feff}') {
            // libyaml skips a byte order mark that starts a line, not only the first; rare
            // enough past the first line (stripped above) to refuse.
            return Err(format!(
                "line {number}: a byte order mark inside the text is not supported"
            ));
        }
        if !content && !opened && raw.starts_with('%') {
            // `%YAML 1.1` or `%TAG`: go-yaml v2 refuses any version but 1.1 and libyaml any
            // unknown directive; none belongs in an annotation, so none is read.
            return Err(format!(
                "line {number}: directives (`%YAML`, `%TAG`) are not supported"
            ));
        }
        let spaces = raw.len() - raw.trim_start_matches(' ').len();
        let text = raw.trim_matches(BLANKS);
        content |= !is_blank_line(text);
        lines.push(Line {
            number,
            raw,
            indent: spaces,
            text,
            tab_indent: raw[spaces..].starts_with('\t'),
        });
        last_line_ends = all.peek().is_some() || source.ends_with(is_line_break);
    }
    if !content {
        // Blank lines only, but one starting with a tab, which go-yaml refuses (`peek`).
        if let Some(line) = lines.iter().find(|line| line.tab_indent) {
            return Err(format!(
                "line {}: tabs are not allowed for indentation in YAML",
                line.number
            ));
        }
        return Ok(Value::Null);
    }
    let unusual_breaks = source.contains(['\u{2028}', '\u{2029}']);
    let mut parser = BlockParser {
        lines,
        position: 0,
        last_line_ends,
        unusual_breaks,
    };
    let Some(first) = parser.peek()? else {
        return Ok(Value::Null);
    };
    let value = parser.block(first.indent, 0)?;
    match parser.peek()? {
        Some(line) => Err(format!("line {}: unexpected indentation", line.number)),
        None => Ok(value),
    }
}

fn is_line_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// A line holding nothing but blanks or a comment.
fn is_blank_line(text: &str) -> bool {
    let text = text.trim_start_matches(BLANKS);
    text.is_empty() || text.starts_with('#')
}

/// YAML refuses a stream holding a character outside its printable set (go-yaml v2
/// readerc.go `yaml_parser_update_buffer`: "control characters are not allowed"), wherever
/// it is, so the whole text is checked, not only the first document.
fn check_characters(source: &str) -> Result<(), String> {
    for (index, line) in yaml_lines(source).enumerate() {
        if let Some(c) = line.chars().find(|&c| {
            !matches!(c, '\t' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        }) {
            return Err(format!(
                "line {}: control character U+{:04X} is not allowed in YAML",
                index + 1,
                c as u32
            ));
        }
    }
    Ok(())
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

struct BlockParser<'t> {
    lines: Vec<Line<'t>>,
    position: usize,
    last_line_ends: bool,
    /// LS or PS in the text: a block scalar keeps them as they are (libyaml `READ_LINE`), which
    /// the line splitting has lost, so block scalars are refused then.
    unusual_breaks: bool,
}

impl<'t> BlockParser<'t> {
    /// The next line holding structure, past blank and comment-only lines.
    fn peek(&mut self) -> Result<Option<Line<'t>>, String> {
        while let Some(line) = self.lines.get(self.position) {
            // go-yaml refuses a tab at a line's start even on a blank or comment line
            // ("found character that cannot start any token"), but for a few it reads as
            // part of a plain scalar: refused alike.
            if line.tab_indent {
                return Err(format!(
                    "line {}: tabs are not allowed for indentation in YAML",
                    line.number
                ));
            }
            if is_blank_line(line.text) {
                self.position += 1;
                continue;
            }
            return Ok(Some(*line));
        }
        Ok(None)
    }

    fn block(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        let Some(first) = self.peek()? else {
            return Ok(Value::Null);
        };
        if is_sequence_item(first.text) {
            self.sequence(indent, depth)
        } else if split_key(first.text).is_none() {
            // A scalar or flow collection standing alone.
            let (number, text) = (first.number, first.text);
            if text.starts_with(['|', '>']) {
                // Its indentation would count from the parent node's (libyaml's
                // `parser.indent`), which a line alone does not say.
                return Err(format!(
                    "line {number}: a block scalar (`|`, `>`) is read only after `key:` or `-` on its line"
                ));
            }
            self.position += 1;
            inline_value(text, depth).map_err(|problem| format!("line {number}: {problem}"))
        } else {
            self.mapping(indent, depth)
        }
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut map = Map::new();
        while let Some(line) = self.peek()? {
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
            let key = key_text(key).map_err(|problem| format!("line {number}: {problem}"))?;
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
        if is_blank_line(rest) {
            return match self.peek()? {
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
        if rest.starts_with(['|', '>']) {
            return self
                .block_scalar(rest, indent)
                .map(Value::String)
                .map_err(|problem| format!("line {number}: {problem}"));
        }
        inline_value(rest, depth).map_err(|problem| format!("line {number}: {problem}"))
    }

    /// A literal (`|`) or folded (`>`) scalar whose header is `header`, under a node indented
    /// by `parent`, as libyaml reads it (scannerc.c `yaml_parser_scan_block_scalar`): the
    /// content's indentation is that of its first non-empty line, chomping `-` drops the final
    /// line break, `+` keeps it and the trailing empty lines, none keeps the break only.
    fn block_scalar(&mut self, header: &str, parent: usize) -> Result<String, String> {
        let literal = header.starts_with('|');
        let indicators = &header[1..];
        let chomping = match indicators.bytes().next() {
            Some(b'-') => -1,
            Some(b'+') => 1,
            _ => 0,
        };
        let after = &indicators[usize::from(chomping != 0)..];
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(
                "block scalars with an indentation indicator (`|2`) are not supported".into(),
            );
        }
        if !is_blank_line(after) || !(after.is_empty() || after.starts_with(BLANKS)) {
            return Err(format!("unexpected text after a block scalar's `{header}`"));
        }
        if self.unusual_breaks {
            return Err(
                "block scalars in a text with LS or PS line breaks are not supported".into(),
            );
        }
        // Auto-detected indentation: the deepest of the leading empty lines and the first
        // non-empty one, at least one more than the parent's.
        let mut indent = parent + 1;
        let mut leading_empty = 0;
        for line in &self.lines[self.position..] {
            let spaces = line.raw.len() - line.raw.trim_start_matches(' ').len();
            if line.raw[spaces..].starts_with('\t') {
                return Err(format!(
                    "line {}: a tab where a block scalar's indentation is expected",
                    line.number
                ));
            }
            if spaces == line.raw.len() {
                leading_empty = leading_empty.max(spaces);
                continue;
            }
            if spaces < leading_empty && spaces >= indent {
                return Err(format!(
                    "line {}: a block scalar's leading empty lines are indented more than its first line",
                    line.number
                ));
            }
            indent = indent.max(spaces);
            break;
        }
        // With no text at all, the empty lines alone set it (libyaml's `max_indent`).
        indent = indent.max(leading_empty);
        let mut text = String::new();
        let mut leading_break = false;
        let mut trailing_breaks = 0;
        let mut leading_blank = false;
        while let Some(line) = self.lines.get(self.position) {
            let spaces = line.raw.len() - line.raw.trim_start_matches(' ').len();
            if spaces < indent && line.raw[spaces..].starts_with('\t') {
                return Err(format!(
                    "line {}: a tab where a block scalar's indentation is expected",
                    line.number
                ));
            }
            if spaces <= indent && spaces == line.raw.len() {
                // An empty line: a line break, placed when the next content comes; the
                // text's last line is one only if a break ends it.
                if self.position + 1 < self.lines.len() || self.last_line_ends {
                    trailing_breaks += 1;
                }
                self.position += 1;
                continue;
            }
            if spaces < indent {
                break;
            }
            let content = &line.raw[indent..];
            let trailing_blank = content.starts_with(BLANKS);
            if !literal && leading_break && !leading_blank && !trailing_blank {
                // Folding: one line break between two lines of text becomes a space.
                if trailing_breaks == 0 {
                    text.push(' ');
                }
            } else if leading_break {
                text.push('\n');
            }
            text.extend(std::iter::repeat_n('\n', trailing_breaks));
            trailing_breaks = 0;
            leading_blank = trailing_blank;
            text.push_str(content);
            self.position += 1;
            leading_break = self.position < self.lines.len() || self.last_line_ends;
        }
        if chomping != -1 && leading_break {
            text.push('\n');
        }
        if chomping == 1 {
            text.extend(std::iter::repeat_n('\n', trailing_breaks));
        }
        Ok(text)
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        let mut items = Vec::new();
        while let Some(line) = self.peek()? {
            if line.indent != indent || !is_sequence_item(line.text) {
                if line.indent > indent {
                    return Err(format!("line {}: unexpected indentation", line.number));
                }
                break;
            }
            let number = line.number;
            // After `-` a tab is no separator to go-yaml (its scanner skips tabs only where a
            // simple key cannot start, and one can after `-`): `-\ta` and `- \ta` are errors.
            // `raw` from the line's indentation holds `text` and what trimming took off.
            let after_dash = &line.raw[line.indent + 1..];
            let blanks = after_dash.len() - after_dash.trim_start_matches(BLANKS).len();
            if after_dash[..blanks].contains('\t') {
                return Err(format!(
                    "line {number}: a tab after `-` is not allowed in YAML"
                ));
            }
            let item = line.text[1..].trim_start_matches(BLANKS);
            let item_indent = indent + (line.text.len() - item.len());
            if is_blank_line(item) {
                self.position += 1;
                match self.peek()? {
                    Some(next) if next.indent > indent => {
                        let nested = next.indent;
                        items.push(self.block(nested, depth + 1)?);
                    }
                    _ => items.push(Value::Null),
                }
            } else if item.starts_with(['|', '>']) {
                self.position += 1;
                let text = self
                    .block_scalar(item, indent)
                    .map_err(|problem| format!("line {number}: {problem}"))?;
                items.push(Value::String(text));
            } else if is_sequence_item(item)
                || (split_key(item).is_some() && !item.starts_with(['{', '[']))
            {
                // `- - a` starts a sequence, `- key: value` a mapping, whose further entries
                // line up with the item.
                self.lines[self.position] = Line {
                    indent: item_indent,
                    text: item,
                    ..line
                };
                items.push(self.block(item_indent, depth + 1)?);
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
    text.strip_prefix('-')
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(BLANKS))
}

/// Splits `key: rest` at the `:` that ends the key: the first one followed by a blank or the
/// end, outside a quoted key. A plain key may hold `[`, `{` and quotes (only a scalar's first
/// character opens a quoted or flow node); a `#` after a blank starts a comment, so no key.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut at = 0;
    match bytes.first() {
        Some(b'[' | b'{') | None => return None,
        Some(&quote @ (b'"' | b'\'')) => {
            at = 1;
            loop {
                match bytes.get(at)? {
                    b'\\' if quote == b'"' => at += 1,
                    b'\'' if quote == b'\'' && bytes.get(at + 1) == Some(&b'\'') => at += 1,
                    &byte if byte == quote => break,
                    _ => {}
                }
                at += 1;
            }
            at += 1;
            while is_blank(bytes.get(at)) && at < bytes.len() {
                at += 1;
            }
            if bytes.get(at) != Some(&b':') || !is_blank(bytes.get(at + 1)) {
                return None;
            }
        }
        Some(_) => loop {
            match bytes.get(at)? {
                b':' if is_blank(bytes.get(at + 1)) => break,
                b'#' if at > 0 && is_blank(bytes.get(at - 1)) => return None,
                _ => at += 1,
            }
        },
    }
    Some((
        text[..at].trim_end_matches(BLANKS),
        text[at + 1..].trim_start_matches(BLANKS),
    ))
}

/// A mapping key as sigs.k8s.io/yaml turns it into a JSON key (yaml.go
/// `convertToJSONableObject`): strings as they are, integers and booleans spelled out; a null
/// key is an error there, and a float key is spelled by Go's `FormatFloat`, which this
/// reader does not copy, so both are refused.
fn key_text(key: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("a mapping key is empty (`: value`)".into());
    }
    let mut flow = Flow {
        text: key,
        position: 0,
        plain: false,
    };
    let value = flow.value(0, false)?;
    flow.end()?;
    if flow.plain && key == "<<" {
        // go-yaml v2 merges the value's mapping into this one (or fails on anything else).
        return Err("merge keys (`<<`) are not supported".into());
    }
    // go-yaml v2 reads these as uint64, a key type sigs.k8s.io/yaml refuses.
    let unsigned_only = i128::from(i64::MAX) + 1..=i128::from(u64::MAX);
    if flow.plain && go_wide_integer(key).is_some_and(|number| unsigned_only.contains(&number)) {
        return Err(format!(
            "the integer key `{key}` is past int64 (Istio's YAML reader refuses it)"
        ));
    }
    // `08` too: a float to go-yaml, and so spelled `FormatFloat(8, 'g', -1, 32)` as a key.
    if flow.plain && is_go_float(key) {
        return Err(format!(
            "the float key `{key}` is not supported (quote it to make it text)"
        ));
    }
    match value {
        Value::String(text) => Ok(text),
        Value::Null => Err(format!(
            "the null key `{key}` has no JSON spelling (Istio's YAML reader refuses it)"
        )),
        Value::Bool(_) | Value::Number(_) => Ok(value.to_string()),
        Value::Array(_) | Value::Object(_) => Err("a collection as a key is not supported".into()),
    }
}

fn inline_value(text: &str, depth: usize) -> Result<Value, String> {
    let mut flow = Flow {
        text,
        position: 0,
        plain: false,
    };
    let value = flow.value(depth, false)?;
    flow.end()?;
    Ok(value)
}

struct Flow<'t> {
    text: &'t str,
    position: usize,
    /// Whether the last scalar read was plain (so its spelling decided its type).
    plain: bool,
}

impl<'t> Flow<'t> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.position).copied()
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.position += 1;
        }
    }

    /// The end of a line's value: blanks, then nothing or a comment.
    fn end(&mut self) -> Result<(), String> {
        self.skip_spaces();
        let rest = &self.text[self.position..];
        // A `#` starts a comment only after a blank (`a: "b"#c` is an error in YAML).
        let comment = rest.starts_with('#')
            && (self.position == 0 || is_blank(self.text.as_bytes().get(self.position - 1)));
        if !rest.is_empty() && !comment {
            return Err(format!("unexpected text after the value: `{rest}`"));
        }
        Ok(())
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
        self.plain = false;
        let bytes = self.text.as_bytes();
        let next_blank = is_blank(bytes.get(self.position + 1));
        match self.peek() {
            Some(b'{') => self.mapping(depth),
            Some(b'[') => self.sequence(depth),
            Some(b'"') => self.double_quoted().map(Value::String),
            Some(b'\'') => self.single_quoted().map(Value::String),
            Some(b'&' | b'*' | b'!') => Err(UNSUPPORTED_YAML.into()),
            // In a flow collection these end an empty node (`{a: }`); on a line of their own
            // they cannot start a plain scalar.
            Some(b',' | b']' | b'}') if in_flow => Ok(Value::Null),
            // Indicators that cannot start a plain scalar (YAML's `c-indicator`; `%`, `@` and
            // the backquote are reserved), `- ` as a sequence entry where none may start, `? `
            // as an explicit key (`? a`), and `:` as a value with no key: all errors in YAML
            // or constructs this reader does not read.
            Some(byte @ (b',' | b']' | b'}' | b'#' | b'%' | b'@' | b'`' | b'|' | b'>' | b':')) => {
                Err(format!(
                    "a plain value cannot start with `{}`",
                    byte as char
                ))
            }
            Some(b'-') if next_blank => Err("a sequence entry (`- `) cannot start here".into()),
            Some(b'?') if next_blank || in_flow => {
                Err("explicit keys (`? key`) are not supported".into())
            }
            _ => {
                let text = self.plain(in_flow)?;
                self.plain = true;
                resolve_plain(text)
            }
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
            let start = self.position;
            let key = self.value(depth + 1, true)?;
            let spelling = self.text[start..self.position].trim_matches(BLANKS);
            let key = match key {
                _ if self.plain && spelling == "<<" => {
                    return Err("merge keys (`<<`) are not supported".into());
                }
                _ if self.plain && is_go_float(spelling) => {
                    return Err(format!(
                        "the float key `{spelling}` is not supported (quote it to make it text)"
                    ));
                }
                Value::String(text) => text,
                Value::Bool(_) | Value::Number(_) => key.to_string(),
                _ => {
                    // As in `key_text`.
                    return Err(format!(
                        "the key `{}` is not supported in a flow mapping",
                        self.text[start..self.position].trim_matches(BLANKS)
                    ));
                }
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

    /// A plain scalar, up to a comment (`#` after a blank) or the end of the line, and in a
    /// flow collection up to `,` `]` `}` or a `:` before a blank. A `: ` inside it on a line of
    /// its own (`a: b: c`) is an error in YAML; in a flow collection, go-yaml v2 refuses a
    /// `:` before anything but a blank, and ends the scalar at `?` `[` `{` where libyaml
    /// goes on: all refused.
    fn plain(&mut self, in_flow: bool) -> Result<&'t str, String> {
        let start = self.position;
        let text = self.text;
        let bytes = text.as_bytes();
        while let Some(&byte) = bytes.get(self.position) {
            let after_blank = self.position > start && is_blank(bytes.get(self.position - 1));
            if byte == b'#' && after_blank {
                break;
            }
            if byte == b':' {
                if in_flow && is_blank(bytes.get(self.position + 1)) {
                    break;
                }
                if in_flow || is_blank(bytes.get(self.position + 1)) {
                    return Err(
                        "a `:` inside a plain value (`a: b: c`) is not YAML (quote the value)"
                            .into(),
                    );
                }
            }
            if in_flow && matches!(byte, b',' | b']' | b'}') {
                break;
            }
            if in_flow && matches!(byte, b'[' | b'{' | b'?') {
                return Err(format!(
                    "a `{}` inside a plain value in a flow collection is not supported (quote the value)",
                    byte as char
                ));
            }
            self.position += 1;
        }
        Ok(text[start..self.position].trim_matches(BLANKS))
    }

    /// A double-quoted scalar on one line, with YAML's escapes (go-yaml v2 scannerc.go
    /// `yaml_parser_scan_flow_scalar`); a code point that is a surrogate or beyond Unicode is
    /// an error there, as `char::from_u32` has it.
    fn double_quoted(&mut self) -> Result<String, String> {
        self.position += 1;
        let rest = &self.text[self.position..];
        let mut text = String::new();
        let mut chars = rest.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.position += at + 1;
                    return Ok(text);
                }
                '\\' => {
                    let Some((_, escape)) = chars.next() else {
                        break;
                    };
                    let digits = match escape {
                        'x' => 2,
                        'u' => 4,
                        'U' => 8,
                        _ => 0,
                    };
                    let decoded = if digits > 0 {
                        let hex: String = chars.by_ref().take(digits).map(|(_, c)| c).collect();
                        (hex.len() == digits && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                            .then(|| u32::from_str_radix(&hex, 16).ok())
                            .flatten()
                            .and_then(char::from_u32)
                    } else {
                        match escape {
                            '0' => Some('\0'),
                            'a' => Some('\u{7}'),
                            'b' => Some('\u{8}'),
                            't' | '\t' => Some('\t'),
                            'n' => Some('\n'),
                            'v' => Some('\u{b}'),
                            'f' => Some('\u{c}'),
                            'r' => Some('\r'),
                            'e' => Some('\u{1b}'),
                            // No `\/`: YAML 1.2 added it, go-yaml v2 refuses it.
                            ' ' | '"' | '\\' => Some(escape),
                            'N' => Some('\u{85}'),
                            '_' => Some('\u{a0}'),
                            'L' => Some('\u{2028}'),
                            'P' => Some('\u{2029}'),
                            _ => None,
                        }
                    };
                    text.push(decoded.ok_or_else(|| {
                        format!("unknown escape `\\{escape}` in a double-quoted string")
                    })?);
                }
                _ => text.push(c),
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

/// A plain scalar's value as go-yaml v2 resolves it (resolve.go `resolve`, which is what
/// Istio reads with), where that differs from YAML 1.2's core schema (serde_yaml_ng's):
/// YAML 1.1's booleans (`yes`, `on`, `y`, ...), and integers as Go's `strconv.ParseInt` with
/// base 0 reads them after dropping `_`: `0x1F`, `0o17` (both also 1.2 core integers; Go has
/// read `0o` since 1.13, as go-yaml v3 does too), but also `010` (octal 8), `0X1F`, `0b101`,
/// `-0x1F` and `1_000`, which YAML 1.2 reads as text. Floats stay text: no ProxyConfig
/// lifecycle field is a float, and keeping them avoids float parsing code in the module; but
/// `.inf` and `.nan`, which `encoding/json` cannot write, make Istio's reading fail, so they
/// are refused.
fn resolve_plain(text: &str) -> Result<Value, String> {
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Value::Bool(false)
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(format!(
                "`{text}` is not a number JSON can hold (Istio's YAML reader refuses it)"
            ));
        }
        _ => match go_integer(text).or_else(|| leading_zero_decimal(text)) {
            Some(number) => Value::Number(Number::from(number)),
            None => Value::String(text.to_string()),
        },
    })
}

/// `text` as go-yaml v2 reads an integer: `_` dropped, then `strconv.ParseInt(text, 0, 64)`
/// (a sign, then `0x`/`0X`, `0o`/`0O`, `0b`/`0B` or a leading `0` for octal). Beyond i64 it
/// is `None`: such numbers stay text here.
fn go_integer(text: &str) -> Option<i64> {
    i64::try_from(go_wide_integer(text)?).ok()
}

/// What `strconv.ParseInt(text, 0, 128)` would read, for telling go-yaml v2's `uint64`s (past
/// i64, up to u64) from its `int64`s.
fn go_wide_integer(text: &str) -> Option<i128> {
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        return None;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let (negative, unsigned) = match plain.as_bytes().first() {
        Some(b'-') => (true, &plain[1..]),
        Some(b'+') => (false, &plain[1..]),
        _ => (false, &plain[..]),
    };
    let lower = unsigned.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, &unsigned[2..]),
        Some("0o") => (8, &unsigned[2..]),
        Some("0b") => (2, &unsigned[2..]),
        _ if unsigned.len() > 1 && unsigned.starts_with('0') => (8, &unsigned[1..]),
        _ => (10, unsigned),
    };
    // go-yaml v2 parses what follows `0b` with `ParseInt(rest, 2)`, which takes a sign:
    // `0b-101` is -5 there.
    let (negative, digits) = match digits.strip_prefix(['-', '+']) {
        Some(rest) if radix == 2 && unsigned.len() == plain.len() => {
            (digits.starts_with('-'), rest)
        }
        _ => (negative, digits),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// `08`, `-019`: not octal, so go-yaml v2 reads a float (its `yamlStyleFloat`), which
/// `encoding/json` writes as the integer it is; exact in f64 below 2^53, so only there.
fn leading_zero_decimal(text: &str) -> Option<i64> {
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        return None;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let unsigned = plain.strip_prefix(['+', '-']).unwrap_or(&plain);
    if !(unsigned.len() > 1
        && unsigned.starts_with('0')
        && unsigned.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let number: i64 = plain.parse().ok()?;
    (number.unsigned_abs() < 1 << 53).then_some(number)
}

/// Whether go-yaml v2 reads a plain `text` as a float (resolve.go: its `yamlStyleFloat`
/// after `_` is dropped for text starting with a digit or sign, `strconv.ParseFloat` for text
/// starting with `.`, and the `.inf`/`.nan` spellings).
fn is_go_float(text: &str) -> bool {
    let plain: String = if text.starts_with('.') {
        text.to_string()
    } else if text.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        text.chars().filter(|&c| c != '_').collect()
    } else {
        return false;
    };
    let unsigned = plain.trim_start_matches(['+', '-']);
    if plain.len() - unsigned.len() > 1 || go_integer(text).is_some() {
        return false;
    }
    if matches!(
        unsigned,
        ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN"
    ) {
        return true;
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let digits = e.trim_start_matches(['+', '-']);
        e.len() - digits.len() <= 1
            && !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
    });
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && digits(fraction)
        && (!whole.is_empty() || !fraction.is_empty())
        && (!whole.is_empty() || mantissa.contains('.'));
    exponent_ok && mantissa_ok
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

    // One test per finding of the yaml_subset fuzz target (fuzz/regressions/yaml_subset/):
    // each was read differently from YAML, or accepted where YAML refuses.

    #[test]
    fn refuses_control_characters() {
        // accepts-control-character.yaml
        let error = parse_yaml("a: b\u{1}c").unwrap_err();
        assert!(error.contains("control character U+0001"), "{error}");
        assert!(parse_yaml("a: b\u{7f}").is_err());
        assert!(parse_yaml("a: 1\n---\nb: \u{9b}").is_err());
        // Tabs, NEL and text beyond the BMP are printable in YAML.
        assert_eq!(parse_yaml("a: b\tc").unwrap(), json!({"a": "b\tc"}));
        assert_eq!(
            parse_yaml("a: \u{1f600}").unwrap(),
            json!({"a": "\u{1f600}"})
        );
    }

    #[test]
    fn refuses_a_colon_and_space_inside_a_plain_value() {
        // accepts-colon-space-in-plain-value.yaml: "mapping values are not allowed here".
        assert!(parse_yaml("a: b: c").is_err());
        assert!(parse_yaml("- a: b: c").is_err());
        assert!(parse_yaml("a: b:").is_err());
        assert_eq!(
            parse_yaml("a: b:c").unwrap(),
            json!({"a": "b:c"}),
            "a colon before anything but a blank is text"
        );
    }

    #[test]
    fn refuses_directives() {
        // accepts-directive-as-plain-scalar.yaml
        assert!(parse_yaml("%a").is_err());
        assert!(parse_yaml("%YAML 1.1\n---\na: 1").is_err());
        assert!(parse_yaml("a: %b").is_err());
    }

    #[test]
    fn refuses_empty_and_null_keys() {
        // accepts-empty-key.yaml; a null key is an error in sigs.k8s.io/yaml's conversion.
        assert!(parse_yaml(": x").is_err());
        assert!(parse_yaml("a: 1\n: x").is_err());
        assert!(parse_yaml("~: x").is_err());
        assert!(parse_yaml("{null: x}").is_err());
        assert_eq!(parse_yaml("'': x").unwrap(), json!({"": "x"}));
    }

    #[test]
    fn refuses_integer_keys_that_go_yaml_reads_as_unsigned() {
        // Found by the yaml_subset fuzz target: go-yaml v2 reads these as uint64, a key type
        // sigs.k8s.io/yaml refuses; past u64 they are text again, as at or below i64::MAX.
        let past_int64 = format!("0b1{}", "0".repeat(63));
        for key in [
            "9223372036854775808",
            "0x8000000000000000",
            &past_int64,
            "18446744073709551615",
        ] {
            let problem = parse_yaml(&format!("{key}: x")).unwrap_err();
            assert!(problem.contains("past int64"), "{key}: {problem}");
        }
        assert_eq!(
            parse_yaml("9223372036854775807: x").unwrap(),
            json!({"9223372036854775807": "x"})
        );
        let past_uint64 = format!("0b1{}", "0".repeat(64));
        assert_eq!(
            parse_yaml(&format!("{past_uint64}: x")).unwrap(),
            json!({past_uint64: "x"})
        );
    }

    #[test]
    fn refuses_plain_values_starting_with_an_indicator() {
        // accepts-flow-indicator-starting-plain-value.yaml, accepts-reserved-indicator.yaml
        for text in [
            "a: ]x", "a: }x", "a: ,x", "a: `b", "a: @b", "a: - b", "a: |x", "[|]", "[a, @]",
        ] {
            assert!(
                parse_yaml(text).is_err(),
                "{text:?} read as {:?}",
                parse_yaml(text)
            );
        }
        assert_eq!(parse_yaml("a: -b").unwrap(), json!({"a": "-b"}));
        assert_eq!(parse_yaml("a: b]`@").unwrap(), json!({"a": "b]`@"}));
    }

    #[test]
    fn reads_block_scalar_chomping() {
        // misreads-block-scalar-chomping.yaml
        assert_eq!(parse_yaml("a: |-\n  x\n").unwrap(), json!({"a": "x"}));
        assert_eq!(
            parse_yaml("a: |+\n  x\n\n\nb: 1").unwrap(),
            json!({"a": "x\n\n\n", "b": 1})
        );
        assert_eq!(
            parse_yaml("a: |\n  x\n\n\nb: 1").unwrap(),
            json!({"a": "x\n", "b": 1})
        );
        assert_eq!(
            parse_yaml("a: >-\n  x\n  y\n").unwrap(),
            json!({"a": "x y"})
        );
        assert_eq!(parse_yaml("a: >+\n  x\n").unwrap(), json!({"a": "x\n"}));
        assert_eq!(parse_yaml("a: |-2\n  x\n").map_err(|_| ()), Err(()));
        assert_eq!(parse_yaml("a: |+\n  x\n ").unwrap(), json!({"a": "x\n"}));
        // Only empty lines: the deepest sets the indentation, so none of them is text.
        assert_eq!(parse_yaml("a: |\n  ").unwrap(), json!({"a": ""}));
        assert_eq!(
            parse_yaml("a: >\n  \n\nb: 1").unwrap(),
            json!({"a": "", "b": 1})
        );
        // No line break after the last line: none to keep.
        assert_eq!(parse_yaml("a: |\n  x").unwrap(), json!({"a": "x"}));
        assert_eq!(parse_yaml("a: |\nb: 1").unwrap(), json!({"a": "", "b": 1}));
    }

    #[test]
    fn reads_block_scalar_indentation_blank_lines_and_comments() {
        // misreads-block-scalar-indentation.yaml
        assert_eq!(
            parse_yaml("a: |\n  x\n    y\n").unwrap(),
            json!({"a": "x\n  y\n"})
        );
        assert_eq!(
            parse_yaml("a: |\n  x\n\n  # not a comment\n  &y\nb: 2 # a comment").unwrap(),
            json!({"a": "x\n\n# not a comment\n&y\n", "b": 2})
        );
        // Folding: a break between two lines is a space, empty lines are breaks, and lines
        // indented more keep theirs.
        assert_eq!(
            parse_yaml("a: >\n  x\n  y\n\n  z\n    w\n  v\n").unwrap(),
            json!({"a": "x y\nz\n  w\nv\n"})
        );
        assert_eq!(
            parse_yaml("- |\n  x\n- >-\n   y\n- k: |\n    z\n").unwrap(),
            json!(["x\n", "y", {"k": "z\n"}])
        );
        assert!(parse_yaml("a: |\n\tx").is_err(), "a tab as indentation");
        assert!(parse_yaml("|\n x").is_err(), "a block scalar alone");
    }

    #[test]
    fn reads_brackets_inside_a_plain_key() {
        // misreads-bracket-inside-plain-key.yaml
        assert_eq!(parse_yaml("a[b: 1").unwrap(), json!({"a[b": 1}));
        assert_eq!(parse_yaml("a{b}: [1]").unwrap(), json!({"a{b}": [1]}));
        assert_eq!(parse_yaml("- a]: 1").unwrap(), json!([{"a]": 1}]));
    }

    #[test]
    fn ends_a_plain_scalar_at_a_comment_after_a_quote_inside_it() {
        // misreads-comment-after-quote-inside-plain-scalar.yaml
        assert_eq!(parse_yaml("a: b'c # d").unwrap(), json!({"a": "b'c"}));
        assert_eq!(
            parse_yaml("a: don't # note").unwrap(),
            json!({"a": "don't"})
        );
        assert_eq!(parse_yaml("- x\"y # z").unwrap(), json!(["x\"y"]));
        assert_eq!(parse_yaml("a: 'b # c' # d").unwrap(), json!({"a": "b # c"}));
        assert_eq!(parse_yaml("a: b#c").unwrap(), json!({"a": "b#c"}));
        assert_eq!(parse_yaml("a # b: c").unwrap(), json!("a"));
    }

    #[test]
    fn refuses_explicit_keys() {
        // misreads-explicit-key.yaml
        assert!(parse_yaml("? a\n: b").is_err());
        assert!(parse_yaml("x: 1\n? a\n: b").is_err());
        assert!(parse_yaml("{? a: b}").is_err());
        assert!(parse_yaml("?").is_err());
        assert_eq!(parse_yaml("a: ?b").unwrap(), json!({"a": "?b"}));
    }

    #[test]
    fn reads_an_indented_document_marker_as_a_plain_scalar() {
        // misreads-indented-document-marker.yaml
        assert_eq!(parse_yaml("a:\n  ...").unwrap(), json!({"a": "..."}));
        assert_eq!(parse_yaml("a:\n  ---").unwrap(), json!({"a": "---"}));
        assert_eq!(
            parse_yaml("a: |\n  x\n---\nb: 1").unwrap(),
            json!({"a": "x\n"})
        );
    }

    #[test]
    fn reads_a_sequence_in_a_sequence_on_one_line() {
        // misreads-nested-sequence-on-one-line.yaml
        assert_eq!(parse_yaml("- - a").unwrap(), json!([["a"]]));
        assert_eq!(
            parse_yaml("- - a\n  - b\n- - - c\n    - d: 1\n      e: 2").unwrap(),
            json!([["a", "b"], [["c", {"d": 1, "e": 2}]]])
        );
        assert!(parse_yaml(&"- ".repeat(100)).is_err(), "beyond MAX_DEPTH");
    }

    #[test]
    fn reads_integers_as_go_yaml_v2_does() {
        // misreads-octal-and-hex-integers.yaml. go-yaml v2 (Istio's reader) and v3 and YAML
        // 1.2 agree on 0o17 and 0x1F; where YAML 1.2 (serde_yaml_ng) reads text, go-yaml v2
        // reads an integer, and Istio's reading is the one that counts.
        assert_eq!(
            parse_yaml("a: 0o17\nb: 0x1F\nc: -0x1f\nd: 010\ne: 0X1F\nf: 0b101\ng: 1_000\nh: +7")
                .unwrap(),
            json!({"a": 15, "b": 31, "c": -31, "d": 8, "e": 31, "f": 5, "g": 1000, "h": 7})
        );
        for text in [
            "0x",
            "0o8",
            "1_0x",
            "0x1G",
            "99999999999999999999",
            "1.5",
            "0x1p3",
        ] {
            assert_eq!(parse_yaml(text).unwrap(), json!(text), "{text}");
        }
        assert_eq!(parse_yaml("010: a").unwrap(), json!({"8": "a"}));
        assert!(
            parse_yaml("1.5: a").is_err(),
            "a float key is spelled by Go's FormatFloat"
        );
    }

    #[test]
    fn reads_booleans_as_go_yaml_v2_does() {
        assert_eq!(
            parse_yaml("a: yes\nb: off\nc: Y\nd: 'yes'\non: 1").unwrap(),
            json!({"a": true, "b": false, "c": true, "d": "yes", "true": 1})
        );
        assert!(
            parse_yaml("a: .inf").is_err(),
            "encoding/json cannot write infinity"
        );
        assert_eq!(parse_yaml("a: -.nan").unwrap(), json!({"a": "-.nan"}));
    }

    #[test]
    fn reads_a_tab_after_a_colon_as_a_separator() {
        // misreads-tab-after-colon.yaml
        assert_eq!(parse_yaml("a:\tb").unwrap(), json!({"a": "b"}));
        assert_eq!(parse_yaml("a:\t\tb\t").unwrap(), json!({"a": "b"}));
        // But not after `-` (go-yaml: "found character that cannot start any token").
        assert!(parse_yaml("-\ta").is_err());
        assert!(parse_yaml("- \ta").is_err());
        assert!(parse_yaml("a:\n- b\n-\t").is_err());
        assert!(
            parse_yaml("a: 1\n\t# c").is_err(),
            "a tab starting a comment line"
        );
        assert!(parse_yaml("\t").is_err());
        assert_eq!(parse_yaml("{a:\tb}").unwrap(), json!({"a": "b"}));
        assert_eq!(parse_yaml("a: \u{a0}b").unwrap(), json!({"a": "\u{a0}b"}));
    }

    #[test]
    fn reads_double_quoted_escapes_as_yaml_does() {
        assert_eq!(
            parse_yaml(r#"a: "\x41\u00e9\e\ \_\N""#).unwrap(),
            json!({"a": "A\u{e9}\u{1b} \u{a0}\u{85}"})
        );
        assert!(parse_yaml(r#"a: "\/""#).is_err(), "go-yaml v2 has no `\\/`");
        assert!(
            parse_yaml(r#"a: "\ud83d\ude00""#).is_err(),
            "surrogates are not code points"
        );
        assert!(parse_yaml(r#"a: "\q""#).is_err());
    }
}
