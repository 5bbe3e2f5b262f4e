//! Where in a YAML manifest a finding's `path` is: the line and column of the deepest key of
//! the path the document's text holds, so a report can say `web.yaml:14:9` and an editor or
//! terminal jumps there. Block-style YAML (what people write and `helm template` prints) is
//! followed key by key; flow style and JSON (a whole document, or a block key's flow value) by
//! [`flow`]. A path outside the object (`namespaceObject...`) is not looked for, and the
//! caller keeps the object's own line.
//!
//! A text walk, not a parser: the manifest was already parsed (and its errors reported) by
//! the reader; this only needs the positions, which serde's YAML values do not keep.

mod flow;

/// One segment of a finding's path: `containers`, `[1]`, `["proxy.istio.io/config"]`.
#[derive(Debug, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// `spec.template.spec.containers[1].lifecycle` as segments; `None` for a path that does not
/// name a place in the object.
fn segments(path: &str) -> Option<Vec<Segment>> {
    if path.is_empty()
        || ["namespaceObject", "review", "parameters"]
            .iter()
            .any(|outside| path == *outside || path.starts_with(&format!("{outside}.")))
    {
        return None;
    }
    let mut segments = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[\"") {
            let end = after.find("\"]")?;
            segments.push(Segment::Key(after[..end].to_string()));
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            segments.push(Segment::Index(after[..end].parse().ok()?));
            rest = &after[end + 1..];
        } else {
            let rest_trimmed = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest_trimmed.find(['.', '[']).unwrap_or(rest_trimmed.len());
            if end == 0 {
                return None;
            }
            segments.push(Segment::Key(rest_trimmed[..end].to_string()));
            rest = &rest_trimmed[end..];
        }
    }
    Some(segments)
}

/// A line with content: where it starts, and where its key would be (after `- ` for an item).
#[derive(Clone, Copy, Debug)]
struct Line<'a> {
    /// 0-based line number in the text.
    number: usize,
    /// Column of the first character (of the `-` for an item).
    start: usize,
    /// Column of the key: `start`, or past `- ` for an item.
    key_column: usize,
    /// The text from `key_column` on.
    text: &'a str,
    item: bool,
}

/// The byte offset where each line of `text` starts, so that an object's lines are read from its
/// own first line: a file of thousands of documents is then read once, not once per finding.
pub fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .collect()
}

fn meaningful_lines<'a>(text: &'a str, starts: &[usize], from_line: usize) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let Some(&offset) = starts.get(from_line) else {
        return lines;
    };
    let numbered = text[offset..].lines().enumerate();
    for (number, raw) in numbered.map(|(index, raw)| (index + from_line, raw)) {
        let content = raw.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        // The next document: the object ended.
        if number > from_line && (raw.starts_with("---") || raw.starts_with("...")) {
            break;
        }
        let start = raw.len() - content.len();
        let (item, key_column, text) = match content.strip_prefix('-') {
            Some(after) if after.is_empty() || after.starts_with(' ') => {
                let key = after.trim_start_matches(' ');
                (true, start + 1 + (after.len() - key.len()), key)
            }
            _ => (false, start, content),
        };
        lines.push(Line {
            number,
            start,
            key_column,
            text,
            item,
        });
    }
    lines
}

/// Whether `text` (a line from its key column) is the key `key` of a mapping.
fn is_key(text: &str, key: &str) -> bool {
    let rest = if let Some(quoted) = text.strip_prefix('"') {
        quoted.strip_prefix(key).and_then(|r| r.strip_prefix('"'))
    } else if let Some(quoted) = text.strip_prefix('\'') {
        quoted.strip_prefix(key).and_then(|r| r.strip_prefix('\''))
    } else {
        text.strip_prefix(key)
    };
    rest.is_some_and(|rest| rest.trim_start_matches(' ').starts_with(':'))
}

/// One document's meaningful lines, read once for all the findings in it.
pub struct DocumentLines<'a> {
    text: &'a str,
    starts: &'a [usize],
    lines: Vec<Line<'a>>,
}

impl<'a> DocumentLines<'a> {
    /// The document that starts at `first_line` (1-based) of `text`, whose [`line_starts`] are
    /// `starts`.
    pub fn new(text: &'a str, starts: &'a [usize], first_line: usize) -> Self {
        let lines = match first_line.checked_sub(1) {
            Some(from_line) => meaningful_lines(text, starts, from_line),
            None => Vec::new(),
        };
        DocumentLines {
            text,
            starts,
            lines,
        }
    }

    /// The 1-based line and column of the deepest key of `path` found in the document; `None`
    /// when not even the first key is found.
    pub fn locate(&self, path: &str) -> Option<(usize, usize)> {
        let segments = segments(path)?;
        let first = self.lines.first()?;
        // A flow document starts with its bracket, on the `---` line (`--- {kind: Pod}`) or not.
        let (line, skip) = match first.text.strip_prefix("---") {
            Some(rest) if rest.trim_start().is_empty() => (self.lines.get(1)?, 0),
            Some(rest) => (first, first.text.len() - rest.trim_start().len()),
            None => (first, 0),
        };
        if line.text[skip..].starts_with(['{', '[']) {
            return self.in_flow(line, skip, &segments);
        }
        self.locate_in(&segments)
    }

    /// The byte offset of `column` on `line`.
    fn offset(&self, line: &Line, column: usize) -> usize {
        self.starts[line.number] + column
    }

    /// The 1-based line and column of a byte offset.
    fn position_of(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        (line + 1, offset - self.starts[line] + 1)
    }

    /// `segments` followed into the flow collection that starts `skip` bytes after `line`'s key
    /// column.
    fn in_flow(&self, line: &Line, skip: usize, segments: &[Segment]) -> Option<(usize, usize)> {
        let from = self.offset(line, line.key_column + skip);
        flow::locate(self.text, from, segments).map(|offset| self.position_of(offset))
    }
}

/// [`DocumentLines::locate`] for one path, reading the document's lines for it alone.
pub fn locate(text: &str, first_line: usize, path: &str) -> Option<(usize, usize)> {
    DocumentLines::new(text, &line_starts(text), first_line).locate(path)
}

impl DocumentLines<'_> {
    /// The block-style walk, handing over to [`flow`] at a flow value.
    fn locate_in(&self, segments: &[Segment]) -> Option<(usize, usize)> {
        let lines = &self.lines;
        // The current node: the index in `lines` where it starts, and the column of its keys (of
        // its dashes, for a sequence).
        let mut scope_start = 0;
        let mut column = lines.first()?.key_column;
        let mut found: Option<Line> = None;
        for (depth, segment) in segments.iter().enumerate() {
            let hit = match segment {
                Segment::Key(key) => {
                    lines
                        .iter()
                        .enumerate()
                        .skip(scope_start)
                        .find_map(|(index, line)| {
                            // An item's first key sits on its dash line, left of the others.
                            let item_line = index == scope_start && line.item;
                            if !item_line && line.start < column {
                                return Some(None);
                            }
                            let ours = line.key_column == column && (!line.item || item_line);
                            (ours && is_key(line.text, key)).then_some(Some(index))
                        })
                }
                Segment::Index(wanted) => {
                    let mut items = lines
                        .iter()
                        .enumerate()
                        .skip(scope_start)
                        .take_while(|(_, line)| {
                            line.start > column || (line.start == column && line.item)
                        })
                        .filter(|(_, line)| line.item && line.start == column);
                    Some(items.nth(*wanted).map(|(index, _)| index))
                }
            };
            let Some(Some(index)) = hit else {
                break;
            };
            let line = lines[index];
            found = Some(line);
            let deeper = &segments[depth + 1..];
            match segment {
                // `- {name: app, image: web}`: the item is a flow mapping.
                Segment::Index(_) if line.text.starts_with(['{', '[']) && !deeper.is_empty() => {
                    return self.in_flow(&line, 0, deeper).or(Some(position(line)));
                }
                Segment::Index(_) => {
                    scope_start = index;
                    column = line.key_column;
                }
                Segment::Key(_) => match lines.get(index + 1) {
                    // The value's keys are on the next lines, further right; a sequence's dashes
                    // may sit at the key's own column.
                    Some(next)
                        if next.start > line.key_column
                            || (next.item && next.start == line.key_column) =>
                    {
                        scope_start = index + 1;
                        column = if next.item {
                            next.start
                        } else {
                            next.key_column
                        };
                    }
                    // A flow value on the key's line: followed there.
                    _ if !deeper.is_empty() => {
                        let value = flow_value_at(line.text);
                        return value
                            .and_then(|skip| self.in_flow(&line, skip, deeper))
                            .or(Some(position(line)));
                    }
                    // A scalar: nothing deeper to find.
                    _ => break,
                },
            }
        }
        found.map(position)
    }
}

/// Where a `key: {...}` or `key: [...]` line's flow value starts, from the key's column.
fn flow_value_at(text: &str) -> Option<usize> {
    let key_end = match text.chars().next()? {
        quote @ ('"' | '\'') => 2 + text[1..].find(quote)?,
        _ => 0,
    };
    let colon = key_end + text[key_end..].find(':')?;
    let after = &text[colon + 1..];
    let value = after.trim_start_matches(' ');
    value
        .starts_with(['{', '['])
        .then(|| colon + 1 + (after.len() - value.len()))
}

fn position(line: Line) -> (usize, usize) {
    (line.number + 1, line.key_column + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = r#"# a comment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    metadata:
      annotations:
        "proxy.istio.io/config": '{}'
    spec:
      terminationGracePeriodSeconds: 5
      initContainers:
      - name: init
        image: busybox
      containers:
        - name: app
          image: web
        - name: sidecar
          image: helper
          lifecycle:
            preStop:
              exec: {command: [sleep, "5"]}
---
kind: Other
"#;

    #[test]
    fn paths_are_followed_key_by_key_and_item_by_item() {
        let at = |path: &str| locate(DEPLOYMENT, 2, path);
        assert_eq!(at("spec.template.spec"), Some((11, 5)));
        assert_eq!(
            at("spec.template.spec.terminationGracePeriodSeconds"),
            Some((12, 7))
        );
        assert_eq!(at("spec.template.spec.initContainers[0]"), Some((14, 9)));
        assert_eq!(at("spec.template.spec.containers[0]"), Some((17, 11)));
        assert_eq!(at("spec.template.spec.containers[1]"), Some((19, 11)));
        assert_eq!(
            at("spec.template.spec.containers[1].lifecycle.preStop"),
            Some((22, 13))
        );
        assert_eq!(
            at(r#"spec.template.metadata.annotations["proxy.istio.io/config"]"#),
            Some((10, 9))
        );
    }

    #[test]
    fn a_missing_key_points_at_the_deepest_one_present() {
        let at = |path: &str| locate(DEPLOYMENT, 2, path);
        // ML303 names the field to add.
        assert_eq!(at("spec.activeDeadlineSeconds"), Some((6, 1)));
        assert_eq!(at("spec.template.spec.containers[5]"), Some((16, 7)));
        assert_eq!(at("spec.template.spec.containers[1].env"), Some((19, 11)));
        assert_eq!(at("namespaceObject.metadata.annotations"), None);
        assert_eq!(at("status"), None);
    }

    /// A flow-style document (`{kind: Pod, spec: {...}}`) had every finding at its first line.
    #[test]
    fn flow_documents_and_flow_values_are_followed_too() {
        let text = "kind: List\n---\n{kind: Pod, metadata: {name: web},\n spec: {containers: [\n   {name: app, lifecycle: {preStop: {exec: {command: [sleep, '5']}}}}]}}\n--- {\"kind\": \"Job\", \"spec\": {\"backoffLimit\": 1}}\n";
        assert_eq!(
            locate(text, 3, "spec.containers[0].lifecycle.preStop"),
            Some((5, 28))
        );
        assert_eq!(locate(text, 3, "spec.containers[0]"), Some((5, 4)));
        assert_eq!(locate(text, 3, "spec.activeDeadlineSeconds"), Some((4, 2)));
        assert_eq!(locate(text, 6, "spec.backoffLimit"), Some((6, 30)));
        let at = |path: &str| locate(DEPLOYMENT, 2, path);
        // `exec: {command: [sleep, "5"]}`, a block key's flow value.
        assert_eq!(
            at("spec.template.spec.containers[1].lifecycle.preStop.exec.command[1]"),
            Some((23, 39))
        );
        let items = "spec:\n  containers:\n  - {name: app, image: web}\n  - {name: proxy, image: 'p:1', ports: [{containerPort: 80}]}\n";
        assert_eq!(
            locate(items, 1, "spec.containers[1].ports[0]"),
            Some((4, 41))
        );
        assert_eq!(locate(items, 1, "spec.containers[0].image"), Some((3, 17)));
    }

    #[test]
    fn path_segments() {
        assert_eq!(
            segments(r#"a.b[2]["x.y/z"].c"#),
            Some(vec![
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(2),
                Segment::Key("x.y/z".into()),
                Segment::Key("c".into()),
            ])
        );
        assert_eq!(segments("review.object"), None);
    }
}
