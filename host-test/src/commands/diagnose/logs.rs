//! Container logs as people save and paste them: `kubectl logs --timestamps` (each line
//! prefixed with the runtime's RFC 3339 time, UTC), `--prefix` (`[pod/NAME/CONTAINER] `, one
//! file holding every container), the node's CRI files (`TIME stdout F line`), aggregators'
//! prefixes before the time, newest-first pastes, lines cut short. Lines with no time of their
//! own keep their order but no moment; the Linkerd proxy's `[  1.234s]` uptime is kept, to be
//! placed from the container's start.

use std::collections::BTreeMap;

use super::clock::{self, Millis};

#[derive(Clone, Debug)]
pub struct LogRecord {
    pub container: String,
    /// The pod `kubectl logs --prefix` names, when it does.
    pub pod: Option<String>,
    pub file: String,
    /// In time order (file order for lines without a time).
    pub lines: Vec<LogLine>,
    /// What the reader had to say about the file (no timestamps, newest first...).
    pub notes: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct LogLine {
    /// 1-based line in the file.
    pub number: usize,
    pub at: Option<Millis>,
    /// A Linkerd proxy line's uptime (`[     1.234567s]`), from the proxy's start.
    pub uptime: Option<Millis>,
    /// The line without the prefixes and time the reader took off.
    pub text: String,
    /// The whole line as the file holds it.
    pub raw: String,
}

/// How many whitespace-separated words may come before a line's time (an aggregator's pod and
/// container names, a `[pod/...]` prefix).
const WORDS_BEFORE_TIME: usize = 4;

/// The logs in `text`: one per container for `--prefix` output, else one for `container`.
pub fn logs_of(text: &str, file: &str, container: &str) -> Vec<LogRecord> {
    let mut by_container: BTreeMap<(Option<String>, String), Vec<LogLine>> = BTreeMap::new();
    let mut order = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let (prefixed, rest) = match kubectl_prefix(raw) {
            Some((pod, name, rest)) => (Some((pod, name)), rest),
            None => (None, raw),
        };
        let name = (
            prefixed.map(|(pod, _)| pod.to_string()),
            prefixed.map_or(container, |(_, name)| name).to_string(),
        );
        let (runtime_at, rest) = timed(rest);
        // A JSON line keeps all its fields: an error is often in one beside the message.
        let at = runtime_at.or_else(|| json_time(rest));
        let text = rest.to_string();
        let line = LogLine {
            number: index + 1,
            at,
            uptime: linkerd_uptime(&text),
            text,
            raw: raw.to_string(),
        };
        if !by_container.contains_key(&name) {
            order.push(name.clone());
        }
        by_container.entry(name).or_default().push(line);
    }
    order
        .into_iter()
        .map(|name| {
            let lines = by_container.remove(&name).unwrap_or_default();
            record(file, name.0, name.1, lines)
        })
        .collect()
}

fn record(
    file: &str,
    pod: Option<String>,
    container: String,
    mut lines: Vec<LogLine>,
) -> LogRecord {
    let mut notes = Vec::new();
    let timed: Vec<Millis> = lines.iter().filter_map(|line| line.at).collect();
    let untimed = lines.len() - timed.len();
    if timed.is_empty() {
        notes.push(format!(
            "{file} ({container}): no line has a time (save logs with `kubectl logs --timestamps`): \
             what it says is used, but not when"
        ));
    } else if untimed > 0 {
        notes.push(format!(
            "{file} ({container}): {untimed} of {} lines have no time of their own; each is \
             placed after the timed line before it",
            lines.len()
        ));
    }
    let backwards = timed.windows(2).filter(|pair| pair[1] < pair[0]).count();
    let forwards = timed.windows(2).filter(|pair| pair[1] > pair[0]).count();
    if backwards > forwards {
        notes.push(format!(
            "{file} ({container}): newest line first; read in time order"
        ));
        lines.reverse();
    }
    // Untimed lines (continuations, a stack trace) take the time of the line before them for
    // ordering only: their own `at` stays empty.
    let mut last = None;
    let mut keyed: Vec<(Option<Millis>, usize, LogLine)> = lines
        .into_iter()
        .enumerate()
        .map(|(position, line)| {
            if line.at.is_some() {
                last = line.at;
            }
            (last, position, line)
        })
        .collect();
    keyed.sort_by_key(|(key, position, _)| (*key, *position));
    LogRecord {
        container,
        pod,
        file: file.to_string(),
        lines: keyed.into_iter().map(|(_, _, line)| line).collect(),
        notes,
    }
}

/// `[pod/web-abc/istio-proxy] rest` → (`web-abc`, `istio-proxy`, `rest`).
fn kubectl_prefix(line: &str) -> Option<(&str, &str, &str)> {
    let rest = line.strip_prefix('[')?;
    let (inside, after) = rest.split_once("] ")?;
    let mut parts = inside.split('/');
    let (_kind, pod, container) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !container.is_empty()).then_some((pod, container, after))
}

/// The line's time (the first RFC 3339 word among its first few) and the text after it; a CRI
/// file's `stdout F` after the time is taken off too.
fn timed(line: &str) -> (Option<Millis>, &str) {
    let mut rest = line;
    for _ in 0..WORDS_BEFORE_TIME {
        let trimmed = rest.trim_start();
        let end = trimmed
            .find(|c: char| c.is_whitespace())
            .unwrap_or(trimmed.len());
        let word = &trimmed[..end];
        let after = &trimmed[end..];
        if let Some((at, rest)) = time_at_start(word) {
            // The rest of a word is what a terminal made of a tab (`Z▸info▸msg`).
            let after = if rest.is_empty() {
                after
                    .strip_prefix(' ')
                    .or(after.strip_prefix('\t'))
                    .unwrap_or(after)
            } else {
                &trimmed[end - rest.len()..]
            };
            let after = strip_cri_stream(after);
            return (Some(at), after);
        }
        if after.is_empty() {
            break;
        }
        rest = after;
    }
    (None, line)
}

/// The RFC 3339 time a word opens with, and what follows it in the word: Envoy's access log
/// `[%START_TIME%]`, logfmt's `time="…"` and `ts=…`, a time glued to what a terminal made of
/// the tab after it.
fn time_at_start(word: &str) -> Option<(Millis, &str)> {
    let mut word = word.trim_start_matches('[');
    for key in ["time=", "ts=", "t=", "timestamp="] {
        if let Some(rest) = word.strip_prefix(key) {
            word = rest;
            break;
        }
    }
    let word = word.trim_start_matches('"');
    let end = word
        .find(|c: char| !(c.is_ascii_digit() || "-:.TZtz+".contains(c)))
        .unwrap_or(word.len());
    let candidate = &word[..end];
    if !looks_like_time(candidate) {
        return None;
    }
    let at = clock::rfc3339(candidate)?;
    let rest = word[end..].trim_start_matches(['"', ']']);
    Some((at, rest))
}

fn looks_like_time(word: &str) -> bool {
    let bytes = word.as_bytes();
    bytes.len() >= 20
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && matches!(bytes[10], b'T' | b't')
}

/// `stdout F message` (the node's CRI log files) → `message`.
fn strip_cri_stream(text: &str) -> &str {
    for stream in ["stdout ", "stderr "] {
        if let Some(rest) = text.strip_prefix(stream)
            && let Some(message) = rest.strip_prefix("F ").or(rest.strip_prefix("P "))
        {
            return message;
        }
    }
    text
}

/// The time of a JSON log line (Istio's `--log_as_json`, `LINKERD2_PROXY_LOG_FORMAT=json`, most
/// app loggers) saved without the runtime's.
fn json_time(text: &str) -> Option<Millis> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    ["timestamp", "time", "ts", "@timestamp"]
        .iter()
        .find_map(|key| value.get(key).and_then(serde_json::Value::as_str))
        .and_then(clock::rfc3339)
}

/// `[     1.234567s]  INFO ...` → 1,234 ms.
fn linkerd_uptime(text: &str) -> Option<Millis> {
    let inside = text.trim_start().strip_prefix('[')?;
    let (number, _) = inside.split_once("s]")?;
    let seconds: f64 = number.trim().parse().ok()?;
    // A proxy up for more than a year is not a reading of this format.
    (seconds.is_finite() && (0.0..3.2e7).contains(&seconds))
        .then_some((seconds * 1_000.0) as Millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_found_behind_prefixes() {
        let text = "\
[pod/web-1/istio-proxy] 2024-01-15T10:00:02.5Z 2024-01-15T10:00:02.499Z\tinfo\tEnvoy proxy is ready
[pod/web-1/app] 2024-01-15T10:00:01Z dial tcp 10.0.0.1:80: connect: connection refused
web-1 app 2024-01-15T10:00:03Z ok
2024-01-15T10:00:04.000000001Z stdout F done
  continuation without a time
";
        let logs = logs_of(text, "all.log", "unknown");
        assert_eq!(logs.len(), 3);
        let proxy = &logs[0];
        assert_eq!(proxy.container, "istio-proxy");
        assert!(
            proxy.lines[0]
                .text
                .starts_with("2024-01-15T10:00:02.499Z\tinfo")
        );
        let app = &logs[1];
        assert_eq!(app.container, "app");
        let rest = &logs[2];
        assert_eq!(rest.lines[0].text, "ok");
        assert_eq!(rest.lines[1].text, "done");
        assert!(rest.lines[2].at.is_none());
        let json = r#"{"timestamp":"2024-01-15T10:00:01.123456Z","level":"INFO","fields":{"message":"Certified identity","id":"web"},"target":"linkerd_app"}"#;
        let line = &logs_of(json, "linkerd-proxy.log", "linkerd-proxy")[0].lines[0];
        assert!(line.text.contains("Certified identity"));
        assert_eq!(line.at, clock::rfc3339("2024-01-15T10:00:01.123Z"));
    }

    #[test]
    fn newest_first_pastes_are_turned_round() {
        let text = "2024-01-15T10:00:03Z c\n2024-01-15T10:00:02Z b\n2024-01-15T10:00:01Z a\n";
        let log = &logs_of(text, "app.log", "app")[0];
        let texts: Vec<&str> = log.lines.iter().map(|line| line.text.as_str()).collect();
        assert_eq!(texts, ["a", "b", "c"]);
        assert!(log.notes[0].contains("newest line first"));
        assert_eq!(
            linkerd_uptime("[     1.234567s]  INFO ThreadId(01) x"),
            Some(1_234)
        );
    }
}
