//! A forward-only JSON reader for `one_pass`: it reads the fields it is asked for and skips the
//! rest without building anything, eight bytes at a time inside strings.
//!
//! Every method answers `None` when the text is anything but plain valid JSON of the expected
//! shape; `one_pass` then gives up and the exact reader (serde_json) decides, with its own
//! messages. So the cursor may refuse more than JSON refuses (escaped keys, surrogate escapes,
//! more than `MAX_OPEN` open objects and lists), never less: it never accepts text serde_json refuses,
//! and it reads every value it accepts as serde_json reads it.

use std::borrow::Cow;

/// Objects and lists open at once, counted from the top of the input. Deeper text goes to the
/// exact reader, which refuses kept nesting past `node::MAX_DEPTH` (the same 64) and skips the
/// rest iteratively; so the cursor never answers where the exact reader would refuse, and its
/// recursion stays within the module's stack.
const MAX_OPEN: usize = crate::node::MAX_DEPTH;

/// Fields one object may read; an object type with more would need a larger `seen` list.
const MAX_FIELDS: usize = 16;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` (little-endian) that is a quote, a backslash or a control
/// character, and possibly of bytes above the first such byte (borrows carry upwards), never
/// below it: the lowest set bit is exact.
fn plain_run_stops(word: u64) -> u64 {
    let has_zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH_BITS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS;
    below_space
        | has_zero_byte(word ^ (ONES * u64::from(b'"')))
        | has_zero_byte(word ^ (ONES * u64::from(b'\\')))
}

/// Where the run of JSON string bytes from `from` that need no escape ends: at a quote, a
/// backslash, a control character or the end of `bytes`. Eight bytes at a time; the writer of
/// the result set (`violation`) uses it too.
pub fn plain_run_end(bytes: &[u8], from: usize) -> usize {
    let mut index = from;
    while let Some(chunk) = bytes.get(index..index + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let stops = plain_run_stops(word);
        if stops != 0 {
            return index + stops.trailing_zeros() as usize / 8;
        }
        index += 8;
    }
    while let Some(&byte) = bytes.get(index) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        index += 1;
    }
    index
}

/// Where the run of ASCII digits from `from` ends.
fn digits_end(bytes: &[u8], from: usize) -> usize {
    from + bytes[from..]
        .iter()
        .take_while(|byte| byte.is_ascii_digit())
        .count()
}

/// Like `digits_end`, but `None` when there is no digit at `from`.
fn nonempty_digits_end(bytes: &[u8], from: usize) -> Option<usize> {
    let end = digits_end(bytes, from);
    (end > from).then_some(end)
}

pub struct Cursor<'a> {
    text: &'a str,
    position: usize,
    /// Objects and lists entered and not yet left.
    open: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor {
            text,
            position: 0,
            open: 0,
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not JSON whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&byte) = bytes.get(self.position) {
            if !matches!(byte, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(byte);
            }
            self.position += 1;
        }
        None
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.position += 1)
    }

    /// Only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// The text of the value that starts here, skipped.
    pub fn raw_value(&mut self) -> Option<&'a str> {
        self.peek()?;
        let start = self.position;
        self.skip()?;
        Some(&self.text[start..self.position])
    }

    /// Reads an object, calling `member` for each key with the cursor on the value; `member`
    /// consumes the value and answers whether the key is a field it reads. A field twice gives
    /// up (the exact reader reads the first, a derived reader the last: neither is obvious).
    pub fn fields(
        &mut self,
        mut member: impl FnMut(&mut Self, &str) -> Option<bool>,
    ) -> Option<()> {
        let mut seen: [&str; MAX_FIELDS] = [""; MAX_FIELDS];
        let mut seen_count = 0;
        self.members(|cursor, key| {
            if member(cursor, key)? {
                if seen[..seen_count].contains(&key) || seen_count == MAX_FIELDS {
                    return None;
                }
                seen[seen_count] = key;
                seen_count += 1;
            }
            Some(())
        })
    }

    /// Reads an object, calling `member` for each key (escape-free, else giving up) with the
    /// cursor on the value, which `member` must consume.
    pub fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.sequence(b'{', b'}', |cursor| {
            let Cow::Borrowed(key) = cursor.string()? else {
                return None;
            };
            cursor.expect(b':')?;
            member(cursor, key)
        })
    }

    /// Reads a list, calling `item` with the cursor on each item, which `item` must consume.
    pub fn items(&mut self, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', item)
    }

    /// `open`, entries separated by commas, `close`; `entry` consumes one entry.
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut entry: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        if self.open >= MAX_OPEN {
            return None;
        }
        self.expect(open)?;
        self.open += 1;
        if self.peek()? != close {
            loop {
                entry(self)?;
                match self.peek()? {
                    b',' => self.position += 1,
                    byte if byte == close => break,
                    _ => return None,
                }
            }
        }
        self.position += 1;
        self.open -= 1;
        Some(())
    }

    /// Consumes `null` and answers true, or answers false at anything else.
    pub fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal("null")?;
        Some(true)
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.position + word.len();
        (self.bytes().get(self.position..end)? == word.as_bytes()).then(|| self.position = end)
    }

    pub fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal("true").map(|()| true),
            b'f' => self.literal("false").map(|()| false),
            _ => None,
        }
    }

    /// A string, borrowed unless it holds escapes.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.position;
        let end = self.plain_run_end();
        if self.bytes().get(end) == Some(&b'"') {
            self.position = end + 1;
            return Some(Cow::Borrowed(&self.text[start..end]));
        }
        self.position = end;
        let mut owned = String::from(&self.text[start..end]);
        loop {
            match *self.bytes().get(self.position)? {
                b'"' => {
                    self.position += 1;
                    return Some(Cow::Owned(owned));
                }
                b'\\' => {
                    self.position += 1;
                    owned.push(self.escape()?);
                }
                _ => {
                    let run_start = self.position;
                    let run_end = self.plain_run_end();
                    if run_end == run_start {
                        // A control character: not allowed in a JSON string.
                        return None;
                    }
                    owned.push_str(&self.text[run_start..run_end]);
                    self.position = run_end;
                }
            }
        }
    }

    fn plain_run_end(&self) -> usize {
        plain_run_end(self.bytes(), self.position)
    }

    /// The character of the escape after a backslash. Surrogate escapes give up: serde_json
    /// pairs and checks them, and they do not occur in Kubernetes objects.
    fn escape(&mut self) -> Option<char> {
        let letter = *self.bytes().get(self.position)?;
        self.position += 1;
        Some(match letter {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = self.text.get(self.position..self.position + 4)?;
                if !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                    return None;
                }
                self.position += 4;
                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
            }
            _ => return None,
        })
    }

    /// An integer as serde_json reads one into an `i64`; `None` for fractions, exponents,
    /// `-0` (serde_json reads it as a float) and values out of range.
    pub fn int(&mut self) -> Option<i64> {
        let negative = self.peek()? == b'-';
        let (start, end, is_integer) = self.number()?;
        if !is_integer {
            return None;
        }
        let digits = &self.text[start + usize::from(negative)..end];
        let magnitude: u64 = digits.parse().ok()?;
        if negative {
            if magnitude == 0 || magnitude > 1 << 63 {
                return None;
            }
            Some((magnitude as i64).wrapping_neg())
        } else {
            i64::try_from(magnitude).ok()
        }
    }

    /// Consumes a JSON number: its span and whether it has neither fraction nor exponent.
    fn number(&mut self) -> Option<(usize, usize, bool)> {
        self.peek()?;
        let bytes = self.bytes();
        let start = self.position;
        let mut index = start;
        if bytes.get(index) == Some(&b'-') {
            index += 1;
        }
        index = match bytes.get(index)? {
            b'0' => index + 1,
            b'1'..=b'9' => digits_end(bytes, index),
            _ => return None,
        };
        let mut is_integer = true;
        if bytes.get(index) == Some(&b'.') {
            is_integer = false;
            index = nonempty_digits_end(bytes, index + 1)?;
        }
        if matches!(bytes.get(index), Some(b'e' | b'E')) {
            is_integer = false;
            index += 1;
            if matches!(bytes.get(index), Some(b'+' | b'-')) {
                index += 1;
            }
            index = nonempty_digits_end(bytes, index)?;
        }
        self.position = index;
        Some((start, index, is_integer))
    }

    /// Skips one value of any type.
    pub fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.members(|cursor, _| cursor.skip()),
            b'[' => self.items(Cursor::skip),
            b'"' => self.skip_string(),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => self.number().map(drop),
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            self.position = self.plain_run_end();
            match *self.bytes().get(self.position)? {
                b'"' => {
                    self.position += 1;
                    return Some(());
                }
                b'\\' => {
                    self.position += 1;
                    self.escape()?;
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::IgnoredAny;

    fn skips(text: &str) -> bool {
        let mut cursor = Cursor::new(text);
        cursor.skip().is_some() && cursor.at_end()
    }

    #[test]
    fn reads_strings_borrowed_and_escaped() {
        let mut cursor = Cursor::new(r#""plain" "a\"b\\c\/\n\u00e9x" "#);
        assert!(matches!(cursor.string(), Some(Cow::Borrowed("plain"))));
        assert_eq!(cursor.string().as_deref(), Some("a\"b\\c/\néx"));
        for refused in [r#""\ud83d\ude00""#, r#""\x""#, "\"a\u{1}\"", r#""open"#] {
            assert_eq!(Cursor::new(refused).string(), None, "{refused}");
        }
    }

    #[test]
    fn reads_integers_as_serde_json_reads_them_into_i64() {
        for (text, expected) in [
            ("0", Some(0)),
            ("-7", Some(-7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("-0", None),
            ("1.0", None),
            ("1e3", None),
            ("01", Some(0)),
        ] {
            assert_eq!(Cursor::new(text).int(), expected, "{text}");
            let serde = serde_json::from_str::<i64>(text).ok();
            if text != "01" {
                assert_eq!(serde, expected, "serde_json on {text}");
            }
        }
        // "01" reads as 0 and leaves "1": the caller then finds no comma and gives up.
        let mut cursor = Cursor::new("01");
        cursor.int();
        assert!(!cursor.at_end());
    }

    #[test]
    fn skips_what_json_allows_and_gives_up_on_the_rest() {
        for text in [
            r#"{"a": [1, -2.5e+3, true, false, null, "x\"y"], "b": {}}"#,
            "[]",
            " 0 ",
        ] {
            assert!(skips(text), "{text}");
        }
        for text in [
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1.",
            "-",
            "tru",
            "[1 2]",
            "{\"a\":1,}",
        ] {
            assert!(!skips(text), "{text}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(
            !skips(&deep),
            "nesting beyond MAX_OPEN goes to the exact reader"
        );
    }

    proptest! {
        /// Any string serde_json writes reads back as itself: quotes, backslashes and control
        /// characters at every offset of the eight-byte scan.
        #[test]
        fn reads_back_every_string_serde_json_writes(text in "(\\PC|[\"\\\\\u{0}-\u{1f}]){0,40}") {
            let json = serde_json::to_string(&text).unwrap();
            let mut cursor = Cursor::new(&json);
            let read = cursor.string();
            prop_assert_eq!(read.as_deref(), Some(text.as_str()));
            prop_assert!(cursor.at_end());
        }

        /// Whatever the cursor skips to the end, serde_json accepts: it never passes text
        /// that is not JSON.
        #[test]
        fn never_accepts_what_serde_json_refuses(
            text in r#"[ \[\]{}:,"\\0-9a-z.eE+\-]{0,24}"#,
        ) {
            if skips(&text) {
                prop_assert!(serde_json::from_str::<IgnoredAny>(&text).is_ok(), "{}", text);
            }
        }
    }
}
