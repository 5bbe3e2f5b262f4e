//! A linear look at a YAML document's nesting before libyaml reads it.
//!
//! libyaml checks every open flow collection for a stale simple key on every token, so its time
//! grows with the flow depth times the size (`[[[[...` of 200 KB took 28 s), and serde's depth
//! limit fires only after that scan. Refusing deep documents here, in one pass, keeps reading
//! any input linear in its size.

/// Flow collections (`[`, `{`) open at once. libyaml spends about this many steps per token, so
/// the bound is the cost per byte: at 256 a 2 MB document costs what a flat one of 500 MB
/// would, at the API server's 10,000 it would take minutes. Objects written as JSON (`kubectl
/// get -o json` piped in, read as YAML) nest a few dozen levels, CRD schemas included, and
/// the module reads nothing deeper than 64; `.json` files are read by serde_json, linear at
/// any depth, and have no such bound.
pub(super) const MAX_FLOW_DEPTH: usize = 256;

/// Block indentation levels and `- ` entries. libyaml reads them in linear time, so the bound is
/// the API server's: it refuses JSON nested deeper than 10,000 levels (Go's decoder limit), so a
/// deeper document is not one a cluster could hold.
pub(super) const MAX_BLOCK_DEPTH: usize = 10_000;

/// Why a document is refused before parsing.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TooDeep {
    /// 0-based line within the document text where the limit was passed.
    pub line: usize,
    pub message: String,
}

/// The first place `text` nests deeper than the limits, counted outside quoted scalars,
/// comments and block scalars. Counts are upper bounds of the nesting libyaml sees: a document
/// that passes may still be refused by the parser, never the other way round for real objects.
pub(super) fn check(text: &str) -> Result<(), TooDeep> {
    let mut flow_depth = 0usize;
    let mut quote: Option<u8> = None;
    // Indentation columns of the open block levels, innermost last.
    let mut indents: Vec<usize> = Vec::new();
    // Lines indented more than this belong to a block scalar (`key: |`).
    let mut block_scalar_parent: Option<usize> = None;
    // The first byte of the token being read, and the last byte read outside a quote.
    let mut token_first: Option<u8> = None;
    let mut last_byte = b' ';
    let mut at_node_start = true;
    for (line_index, line) in text.split('\n').enumerate() {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&byte| byte == b' ').count();
        let blank = bytes[indent..]
            .iter()
            .all(|&byte| byte == b' ' || byte == b'\t' || byte == b'\r');
        if let Some(parent) = block_scalar_parent {
            if blank || indent > parent {
                continue;
            }
            block_scalar_parent = None;
        }
        let mut position = 0;
        if quote.is_none() && flow_depth == 0 {
            if blank || bytes[indent] == b'#' {
                continue;
            }
            while indents.last().is_some_and(|&open| open > indent) {
                indents.pop();
            }
            if indents.last().is_none_or(|&open| open < indent) {
                indents.push(indent);
            }
            position = indent;
            // `- - - a`: each entry indicator opens a level on the same line.
            while position + 1 < bytes.len()
                && matches!(bytes[position], b'-' | b'?')
                && matches!(bytes[position + 1], b' ' | b'\t')
            {
                position += 2;
                while bytes.get(position) == Some(&b' ') {
                    position += 1;
                }
                indents.push(position);
            }
            if indents.len() > MAX_BLOCK_DEPTH {
                return Err(TooDeep {
                    line: line_index,
                    message: format!(
                        "nests deeper than {MAX_BLOCK_DEPTH} block levels (the API server \
                         refuses objects nested deeper)"
                    ),
                });
            }
        }
        // A node starts at the line's content, after `key: `, after an anchor or tag and, in
        // flow collections, after `[`, `{`, `,` and `:`. Only there does a quote open a quoted
        // scalar or a bracket a flow collection; elsewhere in block context both are part of a
        // plain scalar (`image: a[b`, `it's`, `a: b, 'c`), as libyaml reads them.
        if flow_depth == 0 && quote.is_none() {
            at_node_start = true;
            token_first = None;
        }
        let mut previous = None;
        while position < bytes.len() {
            let byte = bytes[position];
            position += 1;
            match quote {
                Some(b'\'') => {
                    if byte == b'\'' {
                        if bytes.get(position) == Some(&b'\'') {
                            position += 1;
                        } else {
                            quote = None;
                        }
                    }
                    previous = Some(byte);
                    continue;
                }
                Some(_) => {
                    if byte == b'\\' {
                        position += 1;
                    } else if byte == b'"' {
                        quote = None;
                    }
                    previous = Some(byte);
                    continue;
                }
                None => {}
            }
            if matches!(byte, b' ' | b'\t' | b'\r') {
                end_token(&mut token_first, &mut at_node_start, last_byte);
                previous = Some(byte);
                continue;
            }
            if byte == b'#'
                && token_first.is_none()
                && previous.is_none_or(|p| p == b' ' || p == b'\t')
            {
                break;
            }
            let begins_token = token_first.is_none();
            if begins_token {
                token_first = Some(byte);
            }
            match byte {
                b'\'' | b'"' if begins_token && at_node_start => quote = Some(byte),
                b'[' | b'{' if flow_depth > 0 || (begins_token && at_node_start) => {
                    flow_depth += 1;
                    if flow_depth > MAX_FLOW_DEPTH {
                        return Err(TooDeep {
                            line: line_index,
                            message: format!(
                                "nests deeper than {MAX_FLOW_DEPTH} flow levels (`[` and `{{`)"
                            ),
                        });
                    }
                    token_first = None;
                    at_node_start = true;
                    last_byte = byte;
                    previous = Some(byte);
                    continue;
                }
                b']' | b'}' if flow_depth > 0 => {
                    flow_depth -= 1;
                    token_first = None;
                    at_node_start = false;
                    last_byte = byte;
                    previous = Some(byte);
                    continue;
                }
                b',' | b':' if flow_depth > 0 => {
                    token_first = None;
                    at_node_start = true;
                    last_byte = byte;
                    previous = Some(byte);
                    continue;
                }
                _ => {}
            }
            at_node_start = false;
            last_byte = byte;
            previous = Some(byte);
        }
        // The line break ends a token as a space does.
        if quote.is_none() {
            end_token(&mut token_first, &mut at_node_start, last_byte);
        }
        if quote.is_none() && flow_depth == 0 && ends_with_block_scalar_indicator(line) {
            block_scalar_parent = Some(indent);
        }
    }
    Ok(())
}

/// After a token: a node may start next when it was an anchor or a tag (`&a [`, `!!str "`)
/// or ended a key (`key: [`).
fn end_token(token_first: &mut Option<u8>, at_node_start: &mut bool, last_byte: u8) {
    if let Some(first) = token_first.take() {
        *at_node_start = matches!(first, b'&' | b'!') || last_byte == b':';
    }
}

/// `key: |`, `- >-`, `key: |2 # comment`: the lines after hold a block scalar.
fn ends_with_block_scalar_indicator(line: &str) -> bool {
    let content = match line.find(" #") {
        Some(comment) => &line[..comment],
        None => line,
    };
    let last = content.trim_end().rsplit([' ', '\t']).next().unwrap_or("");
    let mut characters = last.chars();
    matches!(characters.next(), Some('|' | '>'))
        && characters.all(|character| matches!(character, '0'..='9' | '+' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_documents_pass() {
        for text in [
            "a: b\nc:\n  - d: [1, {e: f}]\n",
            "script: |\n  for x in [[[[ ; do\n  echo '{\n",
            "name: it's [here\nother: a{b\n",
            "msg: \"[[[[\\\"[[\"\nq: '[[''['\n",
            "# [[[[[\nk: v # {{{{\n",
        ] {
            assert_eq!(check(text), Ok(()), "{text}");
        }
    }

    #[test]
    fn deep_flow_nesting_is_refused_at_its_line() {
        let text = format!("a: 1\nb: {}", "[".repeat(MAX_FLOW_DEPTH + 1));
        let error = check(&text).unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.message.contains("flow levels"), "{error:?}");
        let at_limit = format!(
            "{}{}",
            "[".repeat(MAX_FLOW_DEPTH),
            "]".repeat(MAX_FLOW_DEPTH)
        );
        assert_eq!(check(&at_limit), Ok(()));
        assert!(check(&"{a: ".repeat(MAX_FLOW_DEPTH + 1)).is_err());
        // A quote inside a plain scalar opens nothing, so it cannot hide what follows.
        for prefix in ["a: b, 'c\n", "a: b- \"c\n", "a: it's\n"] {
            let text = format!("{prefix}d: {}", "[".repeat(MAX_FLOW_DEPTH + 1));
            assert_eq!(check(&text).map_err(|error| error.line), Err(1), "{prefix}");
        }
        // Anchors and tags come before a node.
        assert!(check(&format!("a: &x !!seq {}", "[".repeat(MAX_FLOW_DEPTH + 1))).is_err());
        // Closed collections do not add up.
        assert_eq!(check(&"[[]]\n".repeat(MAX_FLOW_DEPTH * 2)), Ok(()));
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        // Indentation and entry indicators both count: 100 indented levels, then entries.
        let mut text = String::new();
        for level in 0..100 {
            text.push_str(&" ".repeat(level));
            text.push_str("a:\n");
        }
        let indented = text.clone();
        text.push_str(&" ".repeat(100));
        text.push_str(&"- ".repeat(MAX_BLOCK_DEPTH - 100));
        text.push_str("a\n");
        assert_eq!(check(&indented), Ok(()));
        let error = check(&text).unwrap_err();
        assert_eq!(error.line, 100);
        assert!(error.message.contains("block levels"), "{error:?}");
        // A shallower document after the deep part is not counted with it.
        let dashes = format!("{}a\n", "- ".repeat(MAX_BLOCK_DEPTH - 1));
        assert_eq!(check(&format!("{dashes}{dashes}")), Ok(()));
    }
}
