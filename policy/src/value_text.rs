//! OPA "value" text to JSON.
//!
//! Hosts hand the module input either as JSON or, in OPA's Go host, as Rego term syntax
//! (`ast.Term.String()`): sets `{a, b}` and `set()`, strings quoted by Go's `strconv.Quote`
//! (escapes `\xNN`, `\a`, `\v`, `\UXXXXXXXX`), and sometimes a trailing NUL counted in the length
//! (rust opa-wasm). The rules read JSON, so this module turns any of those into JSON bytes,
//! borrowing the input untouched when it already is JSON (the common, large case).
//!
//! The scanner is iterative with an explicit frame stack: the wasm module runs on a 32 KiB stack,
//! where a recursive descent over hostile input would overflow.

use std::borrow::Cow;

/// Deepest nesting [`to_json`] accepts. Kubernetes objects stay far below it; anything deeper is
/// rejected rather than handed on to code that may recurse.
pub const MAX_DEPTH: usize = 64;

/// Converts OPA value text (JSON or Rego term syntax) to JSON bytes. Returns the input itself
/// (without trailing NULs) when it is already JSON.
pub fn to_json(text: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let text = trim_trailing_nul(text);
    let needs_rewrite = Scanner::new(text, Syntax::Rego, MAX_DEPTH, None)
        .run()?
        .needs_rewrite;
    if !needs_rewrite {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = Vec::with_capacity(text.len() + 16);
    Scanner::new(text, Syntax::Rego, MAX_DEPTH, Some(&mut out)).run()?;
    Ok(Cow::Owned(out))
}

/// Checks that `text` is one strict JSON value, at any depth (the check itself does not
/// recurse). Returns the deepest nesting, so callers can decide whether a recursive parser may
/// follow. A trailing NUL is not JSON; strip it first with [`trim_trailing_nul`].
pub fn validate_json(text: &[u8]) -> Result<usize, String> {
    Ok(Scanner::new(text, Syntax::Json, usize::MAX, None)
        .run()?
        .deepest)
}

/// The text without the NUL bytes some hosts count in the length of a C string.
pub fn trim_trailing_nul(text: &[u8]) -> &[u8] {
    let mut end = text.len();
    while end > 0 && text[end - 1] == 0 {
        end -= 1;
    }
    &text[..end]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Json,
    Rego,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    Array,
    Object,
    Set,
    /// A `{` in Rego syntax before its first element shows whether it opens an object or a set.
    Brace,
}

struct Frame {
    container: Container,
    /// Output offset of the opening `{`, patched to `[` when the brace turns out to be a set.
    open_at: usize,
    /// Output offset where the first element starts, for quoting a non-string first key.
    first_at: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Completed {
    String,
    OtherScalar,
    Composite,
}

#[derive(Clone, Copy)]
enum State {
    Value,
    FirstOrClose,
    Key,
    Colon,
    AfterValue,
}

struct ScanSummary {
    needs_rewrite: bool,
    deepest: usize,
}

struct Scanner<'t, 'o> {
    text: &'t [u8],
    pos: usize,
    syntax: Syntax,
    max_depth: usize,
    /// `None` for the validating pass, which only finds out whether a rewrite is needed.
    out: Option<&'o mut Vec<u8>>,
    needs_rewrite: bool,
    deepest: usize,
}

impl<'t, 'o> Scanner<'t, 'o> {
    fn new(text: &'t [u8], syntax: Syntax, max_depth: usize, out: Option<&'o mut Vec<u8>>) -> Self {
        Scanner {
            text,
            pos: 0,
            syntax,
            max_depth,
            out,
            needs_rewrite: false,
            deepest: 0,
        }
    }

    fn run(mut self) -> Result<ScanSummary, String> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut state = State::Value;
        let mut completed = Completed::OtherScalar;
        loop {
            self.skip_whitespace();
            match state {
                State::Value => match self.peek() {
                    Some(b'[') => {
                        self.open(&mut stack, Container::Array, b'[')?;
                        state = State::FirstOrClose;
                    }
                    Some(b'{') => {
                        let container = match self.syntax {
                            Syntax::Json => Container::Object,
                            Syntax::Rego => Container::Brace,
                        };
                        self.open(&mut stack, container, b'{')?;
                        state = State::FirstOrClose;
                    }
                    _ => {
                        completed = self.scalar()?;
                        state = State::AfterValue;
                    }
                },
                State::FirstOrClose => {
                    let Some(top) = stack.last_mut() else {
                        return Err(self.error("internal: no open container"));
                    };
                    let close = if top.container == Container::Array {
                        b']'
                    } else {
                        b'}'
                    };
                    if self.peek() == Some(close) {
                        // `{}` is the empty object in both syntaxes (the empty set is `set()`).
                        self.pos += 1;
                        self.emit(&[close]);
                        stack.pop();
                        completed = Completed::Composite;
                        state = State::AfterValue;
                    } else {
                        top.first_at = self.out_len();
                        state = if top.container == Container::Object {
                            State::Key
                        } else {
                            State::Value
                        };
                    }
                }
                State::Key => {
                    let key_at = self.out_len();
                    completed = self.scalar()?;
                    match completed {
                        Completed::String => {}
                        Completed::OtherScalar if self.syntax == Syntax::Rego => {
                            self.quote_key(key_at)
                        }
                        _ => return Err(self.error("object keys must be strings")),
                    }
                    state = State::Colon;
                }
                State::Colon => {
                    self.expect(b':')?;
                    state = State::Value;
                }
                State::AfterValue => {
                    let Some(top) = stack.last_mut() else {
                        if self.pos != self.text.len() {
                            return Err(self.error("unexpected text after the value"));
                        }
                        return Ok(ScanSummary {
                            needs_rewrite: self.needs_rewrite,
                            deepest: self.deepest,
                        });
                    };
                    let byte = self.peek();
                    let (first_at, open_at) = (top.first_at, top.open_at);
                    match (top.container, byte) {
                        (Container::Array | Container::Set | Container::Object, Some(b',')) => {
                            self.pos += 1;
                            self.emit(b",");
                            state = if top.container == Container::Object {
                                State::Key
                            } else {
                                State::Value
                            };
                        }
                        (Container::Array, Some(b']')) | (Container::Object, Some(b'}')) => {
                            self.pos += 1;
                            self.emit(&[byte.unwrap_or_default()]);
                            stack.pop();
                            completed = Completed::Composite;
                        }
                        (Container::Set, Some(b'}')) => {
                            self.pos += 1;
                            self.emit(b"]");
                            stack.pop();
                            completed = Completed::Composite;
                        }
                        (Container::Brace, Some(b':')) => {
                            match completed {
                                Completed::String => {}
                                Completed::OtherScalar => self.quote_key(first_at),
                                Completed::Composite => {
                                    return Err(self.error("object keys must be scalars"));
                                }
                            }
                            top.container = Container::Object;
                            self.pos += 1;
                            self.emit(b":");
                            state = State::Value;
                        }
                        (Container::Brace, Some(b',')) => {
                            top.container = Container::Set;
                            self.patch_to_array(open_at);
                            self.pos += 1;
                            self.emit(b",");
                            state = State::Value;
                        }
                        (Container::Brace, Some(b'}')) => {
                            self.patch_to_array(open_at);
                            self.pos += 1;
                            self.emit(b"]");
                            stack.pop();
                            completed = Completed::Composite;
                        }
                        _ => return Err(self.error("expected ',' or a closing bracket")),
                    }
                }
            }
        }
    }

    fn open(
        &mut self,
        stack: &mut Vec<Frame>,
        container: Container,
        byte: u8,
    ) -> Result<(), String> {
        if stack.len() >= self.max_depth {
            return Err(self.error(&format!("nesting deeper than {}", self.max_depth)));
        }
        self.pos += 1;
        let open_at = self.out_len();
        self.emit(&[byte]);
        stack.push(Frame {
            container,
            open_at,
            first_at: open_at,
        });
        self.deepest = self.deepest.max(stack.len());
        Ok(())
    }

    /// A string, number, literal or (Rego) `set()`.
    fn scalar(&mut self) -> Result<Completed, String> {
        match self.peek() {
            Some(b'"') => {
                self.string()?;
                Ok(Completed::String)
            }
            Some(b'-' | b'0'..=b'9') => {
                self.number()?;
                Ok(Completed::OtherScalar)
            }
            Some(b't') => self.literal(b"true").map(|_| Completed::OtherScalar),
            Some(b'f') => self.literal(b"false").map(|_| Completed::OtherScalar),
            Some(b'n') => self.literal(b"null").map(|_| Completed::OtherScalar),
            Some(b's') if self.syntax == Syntax::Rego => {
                self.empty_set()?;
                Ok(Completed::Composite)
            }
            Some(b'[' | b'{') => Err(self.error("object keys must be scalars")),
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        let end = self.pos + word.len();
        let followed_by_identifier = self
            .text
            .get(end)
            .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_');
        if self.text.get(self.pos..end) != Some(word) || followed_by_identifier {
            return Err(self.error("unknown literal"));
        }
        self.pos = end;
        self.emit(word);
        Ok(())
    }

    fn empty_set(&mut self) -> Result<(), String> {
        self.literal(b"set")
            .map_err(|_| self.error("unknown literal"))?;
        // `literal` copied the word; the JSON for an empty set is an empty array instead.
        if let Some(out) = self.out.as_deref_mut() {
            out.truncate(out.len() - 3);
        }
        self.skip_whitespace();
        self.expect_silently(b'(')?;
        self.skip_whitespace();
        self.expect_silently(b')')?;
        self.needs_rewrite = true;
        self.emit(b"[]");
        Ok(())
    }

    /// JSON number grammar, copied verbatim.
    fn number(&mut self) -> Result<(), String> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(self.error("invalid number"));
            }
            self.skip_digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(self.error("invalid number"));
            }
            self.skip_digits();
        }
        let text = self.text;
        self.emit(&text[start..self.pos]);
        Ok(())
    }

    fn skip_digits(&mut self) {
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> Result<(), String> {
        self.pos += 1;
        self.emit(b"\"");
        let mut run_start = self.pos;
        loop {
            let Some(&byte) = self.text.get(self.pos) else {
                return Err(self.error("unterminated string"));
            };
            match byte {
                b'"' => {
                    self.flush_run(run_start)?;
                    self.pos += 1;
                    self.emit(b"\"");
                    return Ok(());
                }
                b'\\' => {
                    self.flush_run(run_start)?;
                    self.escape()?;
                    run_start = self.pos;
                }
                0..=0x1f => return Err(self.error("control character in string")),
                _ => self.pos += 1,
            }
        }
    }

    /// Copies the unescaped bytes `text[run_start..pos]`, which must be UTF-8.
    fn flush_run(&mut self, run_start: usize) -> Result<(), String> {
        let text = self.text;
        let run = &text[run_start..self.pos];
        if std::str::from_utf8(run).is_err() {
            return Err(self.error("invalid UTF-8 in string"));
        }
        self.emit(run);
        Ok(())
    }

    fn escape(&mut self) -> Result<(), String> {
        let start = self.pos;
        let Some(&kind) = self.text.get(start + 1) else {
            return Err(self.error("unterminated escape"));
        };
        let text = self.text;
        match kind {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.pos += 2;
                self.emit(&text[start..start + 2]);
            }
            b'u' => {
                self.hex_value(start + 2, 4)?;
                self.pos += 6;
                self.emit(&text[start..start + 6]);
            }
            b'a' | b'v' | b'x' | b'U' if self.syntax == Syntax::Rego => {
                self.needs_rewrite = true;
                let character = match kind {
                    b'a' => {
                        self.pos += 2;
                        '\u{7}'
                    }
                    b'v' => {
                        self.pos += 2;
                        '\u{b}'
                    }
                    b'x' => {
                        let byte = self.hex_value(start + 2, 2)?;
                        self.pos += 4;
                        // A Go string holds bytes; `strconv.Quote` writes `\xNN` for bytes that
                        // are not valid UTF-8 on their own, which JSON cannot carry. Go's own JSON
                        // encoder substitutes U+FFFD for them, and so does this.
                        char::from_u32(byte)
                            .filter(char::is_ascii)
                            .unwrap_or('\u{fffd}')
                    }
                    _ => {
                        let code = self.hex_value(start + 2, 8)?;
                        self.pos += 10;
                        char::from_u32(code).ok_or_else(|| self.error("invalid \\U code point"))?
                    }
                };
                self.emit_char(character);
            }
            _ => return Err(self.error("invalid escape")),
        }
        Ok(())
    }

    fn hex_value(&self, at: usize, digits: usize) -> Result<u32, String> {
        let hex = self
            .text
            .get(at..at + digits)
            .ok_or_else(|| self.error("unterminated escape"))?;
        hex.iter().try_fold(0u32, |value, byte| {
            let digit = (*byte as char)
                .to_digit(16)
                .ok_or_else(|| self.error("invalid hex digit"))?;
            Ok(value << 4 | digit)
        })
    }

    /// One character inside a JSON string, escaped where JSON demands it.
    fn emit_char(&mut self, character: char) {
        match character {
            '"' => self.emit(b"\\\""),
            '\\' => self.emit(b"\\\\"),
            '\u{0}'..='\u{1f}' => {
                let escaped = format!("\\u{:04x}", character as u32);
                self.emit(escaped.as_bytes());
            }
            _ => {
                let mut buffer = [0u8; 4];
                self.emit(character.encode_utf8(&mut buffer).as_bytes());
            }
        }
    }

    /// Rego allows numbers, booleans and null as object keys; JSON dumps them as strings.
    fn quote_key(&mut self, key_at: usize) {
        self.needs_rewrite = true;
        if let Some(out) = self.out.as_deref_mut() {
            out.insert(key_at, b'"');
            out.push(b'"');
        }
    }

    fn patch_to_array(&mut self, open_at: usize) {
        self.needs_rewrite = true;
        if let Some(out) = self.out.as_deref_mut() {
            out[open_at] = b'[';
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.expect_silently(byte)?;
        self.emit(&[byte]);
        Ok(())
    }

    fn expect_silently(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() != Some(byte) {
            return Err(self.error(&format!("expected '{}'", byte as char)));
        }
        self.pos += 1;
        Ok(())
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn emit(&mut self, bytes: &[u8]) {
        if let Some(out) = self.out.as_deref_mut() {
            out.extend_from_slice(bytes);
        }
    }

    fn out_len(&self) -> usize {
        self.out.as_deref().map_or(0, Vec::len)
    }

    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn converted(text: &str) -> Value {
        let bytes = to_json(text.as_bytes()).unwrap_or_else(|error| panic!("{text}: {error}"));
        serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            panic!("{text} gave {:?}: {error}", String::from_utf8_lossy(&bytes))
        })
    }

    #[test]
    fn plain_json_is_borrowed_unchanged() {
        let text = br#" {"a": [1, -2.5e3, true, null, "x\"\\\/\u00e9\n"], "b": {}} "#;
        assert!(matches!(to_json(text), Ok(Cow::Borrowed(bytes)) if bytes == text));
    }

    #[test]
    fn trailing_nul_is_dropped_and_still_borrowed() {
        assert!(matches!(
            to_json(b"{\"a\":1}\0"),
            Ok(Cow::Borrowed(b"{\"a\":1}"))
        ));
        assert!(matches!(to_json(b"[]\0\0"), Ok(Cow::Borrowed(b"[]"))));
    }

    #[test]
    fn sets_become_arrays() {
        assert_eq!(converted(r#"{"a", "b"}"#), json!(["a", "b"]));
        assert_eq!(converted("set()"), json!([]));
        assert_eq!(converted("set ( )"), json!([]));
        assert_eq!(converted("{1}"), json!([1]));
        assert_eq!(
            converted(r#"{{"result": {{"msg": "m", "details": {}}, set()}}}"#),
            json!([{"result": [{"msg": "m", "details": {}}, []]}])
        );
        assert_eq!(
            converted(r#"{"k": {[1, {2, 3}]}}"#),
            json!({"k": [[1, [2, 3]]]})
        );
    }

    #[test]
    fn empty_braces_are_an_object() {
        assert_eq!(converted("{}"), json!({}));
        assert_eq!(converted(r#"{"a": {}}"#), json!({"a": {}}));
    }

    #[test]
    fn go_escapes_become_json_escapes() {
        assert_eq!(
            converted(r#""\a\v\x1f\x41\U0001F600\u00e9\t""#),
            json!("\u{7}\u{b}\u{1f}A😀é\t")
        );
        assert_eq!(converted(r#""\x22\x5c""#), json!("\"\\"));
        assert_eq!(converted(r#""\xff""#), json!("\u{fffd}"));
        assert_eq!(converted(r#"{"k\a": "v"}"#), json!({"k\u{7}": "v"}));
    }

    #[test]
    fn non_string_keys_are_quoted() {
        assert_eq!(
            converted(r#"{1: "a", true: 2, null: 3, -1.5: 4}"#),
            json!({"1": "a", "true": 2, "null": 3, "-1.5": 4})
        );
        assert!(to_json(br#"{[1]: 2}"#).is_err());
        assert!(to_json(br#"{"a": 1, [1]: 2}"#).is_err());
    }

    #[test]
    fn whitespace_is_allowed_between_every_token() {
        assert_eq!(
            converted("\n{ \"a\" :\t{ 1 ,\r\n2 } , \"b\" : set( ) }\n\0"),
            json!({"a": [1, 2], "b": []})
        );
    }

    #[test]
    fn malformed_text_is_an_error() {
        for text in [
            "",
            " ",
            "\0",
            "{",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\":}",
            "nul",
            "nullx",
            "truefalse",
            "01",
            "1.",
            "-",
            "1e",
            "\"abc",
            "\"\\q\"",
            "\"\\x4\"",
            "\"\\U0011ffff\"",
            "\"\\ud8\"",
            "{1, 2: 3}",
            "{\"a\": 1, 2}",
            "[1]]",
            "set(",
            "sex()",
            "\"a\nb\"",
            "{} {}",
            "[1] x",
        ] {
            assert!(to_json(text.as_bytes()).is_err(), "{text:?} was accepted");
        }
        assert!(to_json(b"\"\xff\"").is_err(), "invalid UTF-8 was accepted");
    }

    #[test]
    fn depth_is_bounded() {
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(to_json(at_limit.as_bytes()).is_ok());
        let beyond = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(
            to_json(beyond.as_bytes())
                .unwrap_err()
                .contains("nesting deeper")
        );
        let deep_sets = format!("{}{}", "{".repeat(MAX_DEPTH + 1), "}".repeat(MAX_DEPTH + 1));
        assert!(to_json(deep_sets.as_bytes()).is_err());
    }

    #[test]
    fn validate_json_is_strict_and_unbounded() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(validate_json(deep.as_bytes()), Ok(10_000));
        assert_eq!(validate_json(br#"{"a": [1, {"b": null}]}"#), Ok(3));
        assert_eq!(validate_json(b"7"), Ok(0));
        for text in [
            "set()",
            "{1, 2}",
            "{1: 2}",
            "\"\\a\"",
            "\"\\x41\"",
            "{\"a\":1}\0",
            "",
        ] {
            assert!(
                validate_json(text.as_bytes()).is_err(),
                "{text:?} was accepted"
            );
        }
    }

    #[test]
    fn conversion_agrees_with_serde_json_on_json() {
        let value = json!({
            "review": {"object": {"metadata": {"annotations": {"a/b": "x\u{1}y"}}}},
            "parameters": {"n": [1, 2.5, -3e-2], "t": true, "z": null}
        });
        let text = serde_json::to_vec_pretty(&value).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&to_json(&text).unwrap()).unwrap(),
            value
        );
    }
}
