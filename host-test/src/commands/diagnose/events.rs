//! A pod's events as the kubelet and the scheduler record them: `kubectl get events -o
//! json|yaml` and `kubectl events -o json` (core/v1 Events, as a List), events.k8s.io/v1
//! Events, and the Events table of `kubectl describe` (read by `describe.rs`).
//!
//! The kubelet's reasons and messages (pkg/kubelet/events/event.go, kuberuntime_container.go):
//! `Started` "Started container NAME", `Killing` "Stopping container NAME", `Unhealthy`
//! "Readiness probe failed: ...", `BackOff` "Back-off restarting failed container NAME ...".
//! An event about one container names it in `involvedObject.fieldPath`
//! (`spec.containers{istio-proxy}`, `spec.initContainers{istio-init}`). A controller's events
//! are about the controller (`involvedObject.kind: ReplicaSet`), as its `FailedCreate` when the
//! API server refuses the pods it creates.

use serde_json::Value;

use super::clock::{self, Millis};
use super::evidence::Evidence;

#[derive(Clone, Debug)]
pub struct EventRecord {
    pub reason: String,
    pub message: String,
    /// The pod it is about (`involvedObject.name`), when the input says.
    pub pod: Option<String>,
    /// The object it is about, whatever its kind (a pod, or the ReplicaSet or Job that creates
    /// them), when the input says.
    pub about: Option<About>,
    pub container: Option<String>,
    /// First and last occurrence; `None` for describe's table, which gives only ages.
    pub first: Option<Millis>,
    pub last: Option<Millis>,
    pub count: u64,
    pub evidence: Evidence,
}

/// The object an event is about: `involvedObject` (core/v1), `regarding` (events.k8s.io/v1), the
/// OBJECT column of a table, or the object a describe text is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct About {
    /// `ReplicaSet`, `Job`, `Pod`: as the API spells it.
    pub kind: String,
    /// Empty when the input does not say (a table without its NAMESPACE column).
    pub namespace: String,
    pub name: String,
}

impl About {
    /// The kind of a workload whose describe text does not tell it (a ReplicaSet and a
    /// ReplicationController print the same fields): it matches either.
    pub const ANY_KIND: &'static str = "workload";

    /// `ReplicaSet shop/web-7d9c5f8b4`, `ReplicaSet web-7d9c5f8b4`.
    pub fn title(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// The same object, where one side may not know the namespace.
    pub fn same_as(&self, other: &About) -> bool {
        (self.kind == other.kind || self.kind == About::ANY_KIND || other.kind == About::ANY_KIND)
            && self.name == other.name
            && (self.namespace.is_empty()
                || other.namespace.is_empty()
                || self.namespace == other.namespace)
    }

    /// `replicaset/web-7d9c5f8b4` (`kubectl get events`' OBJECT column; `kubectl events` writes
    /// `ReplicaSet/web-7d9c5f8b4`), in `namespace` (empty when the table does not say).
    fn of_column(object: &str, namespace: &str) -> Option<About> {
        let (kind, name) = object.split_once('/')?;
        if kind.is_empty() || name.is_empty() {
            return None;
        }
        // The kinds whose events meshlife reads, as the API spells them; another kind is kept
        // as the table wrote it.
        let kind = match kind.to_ascii_lowercase().as_str() {
            "pod" => "Pod",
            "replicaset" => "ReplicaSet",
            "job" => "Job",
            "deployment" => "Deployment",
            "statefulset" => "StatefulSet",
            "daemonset" => "DaemonSet",
            "replicationcontroller" => "ReplicationController",
            "cronjob" => "CronJob",
            _ => kind,
        };
        Some(About {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

/// The events of a parsed document: an Event, or the Events of a List. `None` when it holds none.
pub fn events_of(value: &Value, file: &str) -> Option<Vec<EventRecord>> {
    let kind = value.get("kind").and_then(Value::as_str)?;
    if kind == "Event" {
        return event_of(value, file, "").map(|event| vec![event]);
    }
    if !kind.ends_with("List") {
        return None;
    }
    let items = value.get("items")?.as_array()?;
    let events: Vec<EventRecord> = items
        .iter()
        .enumerate()
        .filter_map(|(index, item)| event_of(item, file, &format!("items[{index}]")))
        .collect();
    // An EventList with no item is a pod without events, not an unknown List.
    (!events.is_empty() || kind == "EventList").then_some(events)
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

fn event_of(event: &Value, file: &str, field: &str) -> Option<EventRecord> {
    if event.get("kind").and_then(Value::as_str) != Some("Event") {
        return None;
    }
    // core/v1 names the object `involvedObject`, events.k8s.io/v1 `regarding`; the message is
    // `message` or `note`.
    let about = event.get("involvedObject").or(event.get("regarding"));
    let field_path = about.and_then(|about| text(about, "/fieldPath"));
    let message = text(event, "/message")
        .or(text(event, "/note"))
        .unwrap_or("")
        .to_string();
    let time = |pointers: &[&str]| {
        pointers
            .iter()
            .find_map(|pointer| text(event, pointer).and_then(clock::rfc3339))
    };
    let first = time(&[
        "/firstTimestamp",
        "/eventTime",
        "/deprecatedFirstTimestamp",
        "/metadata/creationTimestamp",
    ]);
    let last = time(&[
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/deprecatedLastTimestamp",
    ])
    .or(first);
    let count = event
        .pointer("/series/count")
        .or(event.get("count"))
        .or(event.get("deprecatedCount"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    Some(EventRecord {
        reason: text(event, "/reason").unwrap_or("").to_string(),
        container: field_path
            .and_then(container_of_field_path)
            .or_else(|| container_of_message(&message)),
        pod: about
            .filter(|about| about.get("kind").and_then(Value::as_str) == Some("Pod"))
            .and_then(|about| text(about, "/name"))
            .map(str::to_string),
        about: about.and_then(|about| {
            Some(About {
                kind: text(about, "/kind")?.to_string(),
                namespace: text(about, "/namespace")
                    .or(text(event, "/metadata/namespace"))
                    .unwrap_or("")
                    .to_string(),
                name: text(about, "/name")?.to_string(),
            })
        }),
        message: message.clone(),
        first,
        last,
        count,
        evidence: Evidence {
            text: Some(message),
            ..Evidence::field(file, field)
        },
    })
}

/// An events table as kubectl prints it: describe's `Type  Reason  Age  From  Message`,
/// `kubectl get events`' and `kubectl events`' `LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`. The
/// columns are found from the header, so any version's widths read alike; the tables give ages,
/// not times, so their events say what happened, not when. `None` when `lines` does not open
/// with such a table (within its first three lines).
pub fn table_of(lines: &[&str], first_line: usize, file: &str) -> Option<Vec<EventRecord>> {
    let Some(header_at) = lines.iter().take(5).position(|line| {
        let upper = line.to_ascii_uppercase();
        upper.contains("REASON") && upper.contains("MESSAGE")
    }) else {
        return headerless_rows(lines, first_line, file);
    };
    let header = lines[header_at];
    let upper = header.to_ascii_uppercase();
    let bytes = header.as_bytes();
    // A column starts after two spaces (`LAST SEEN` is one column).
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&at| {
            bytes[at] != b' '
                && header.is_char_boundary(at)
                && (at == 0
                    || (at >= 2 && bytes[at - 1] == b' ' && bytes[at - 2] == b' ')
                    || header[..at].trim().is_empty())
        })
        .collect();
    let column = |name: &str| upper.find(name).filter(|at| starts.contains(at));
    let next = |at: usize| starts.iter().copied().find(|start| *start > at);
    let reason_at = column("REASON")?;
    let message_at = column("MESSAGE")?;
    let object_at = column("OBJECT");
    let namespace_at = column("NAMESPACE");
    let indented = header.starts_with(' ');
    let mut events = Vec::new();
    for (offset, line) in lines.iter().enumerate().skip(header_at + 1) {
        let trimmed = line.trim();
        if trimmed.starts_with("----") || trimmed.is_empty() || trimmed.chars().all(|c| c == '.') {
            continue;
        }
        if indented && !line.starts_with(' ') {
            break;
        }
        let slice = |from: usize, to: Option<usize>| {
            let to = to.unwrap_or(line.len()).min(line.len());
            line.get(from.min(to)..to).unwrap_or("").trim()
        };
        let message = slice(message_at, None).to_string();
        let reason = slice(reason_at, next(reason_at));
        // A message the terminal wrapped goes on under the Message column.
        let indent = line.len() - line.trim_start().len();
        if reason.is_empty()
            && indent >= message_at
            && let Some(previous) = events.last_mut()
        {
            continue_message(previous, line.trim());
            continue;
        }
        // A paste's `...` between rows, or a row cut before its reason.
        if reason.is_empty() || reason.chars().all(|c| c == '.') {
            continue;
        }
        let pod = object_at
            .map(|at| slice(at, next(at)))
            .and_then(|object| object.strip_prefix("pod/"))
            .map(str::to_string);
        let about = object_at.and_then(|at| {
            let namespace = namespace_at.map_or("", |at| slice(at, next(at)));
            About::of_column(slice(at, next(at)), namespace)
        });
        let count = line
            .split_once("(x")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|count| count.parse().ok())
            .unwrap_or(1);
        events.push(EventRecord {
            reason: reason.to_string(),
            container: container_of_message(&message),
            pod,
            about,
            message,
            first: None,
            last: None,
            count,
            evidence: Evidence::line(file, first_line + offset, line),
        });
    }
    Some(events)
}

/// Rows of describe's Events table pasted without its header or its `Events:` line (`Normal
/// Killing  37m  kubelet  Stopping container linkerd-proxy`), read by their shape: every row
/// opens with the event's type, its reason, its age and its source (kubectl's DescribeEvents:
/// `%v\t%v\t%s\t%v\t%v`, type, reason, interval, source, message). A message too long for
/// the terminal goes on in lines of its own, indented deeper than the row: they are joined to
/// it. `None` when any other line is in `lines`: such text is not these rows.
pub fn headerless_rows(lines: &[&str], first_line: usize, file: &str) -> Option<Vec<EventRecord>> {
    let mut events: Vec<EventRecord> = Vec::new();
    // The indentation of the last row: a line indented deeper goes on with its message.
    let mut row_indent = None;
    for (offset, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        // Blank lines and a paste's `...` between rows.
        if trimmed.is_empty() || trimmed.chars().all(|c| c == '.') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if let Some(row) = row_of(trimmed) {
            row_indent = Some(indent);
            events.push(EventRecord {
                container: container_of_message(&row.message),
                pod: None,
                about: None,
                count: row.count,
                reason: row.reason.to_string(),
                message: row.message,
                first: None,
                last: None,
                evidence: Evidence::line(file, first_line + offset, line),
            });
            continue;
        }
        let previous = events.last_mut()?;
        if row_indent.is_none_or(|row| indent <= row) {
            return None;
        }
        continue_message(previous, trimmed);
    }
    (!events.is_empty()).then_some(events)
}

/// One row of describe's Events table, without the header to find its columns by.
struct Row<'a> {
    reason: &'a str,
    count: u64,
    message: String,
}

/// `Warning  Unhealthy  3m (x4 over 3m)  kubelet  Readiness probe failed: ...`: the type
/// (`Normal`, `Warning`), a CamelCase reason, the age (`2m`, `2m5s`, `<unknown>`; `AGE (xN over
/// AGE)` for a repeated event), the source (`kubelet`, `default-scheduler`; kubectl before
/// 1.26 wrote the node after it, `kubelet, node-1`), and the message.
fn row_of(text: &str) -> Option<Row<'_>> {
    let (kind, rest) = next_word(text)?;
    if !matches!(kind, "Normal" | "Warning") {
        return None;
    }
    let (reason, rest) = next_word(rest)?;
    let camel_case = reason.starts_with(|c: char| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric());
    let (age, mut rest) = next_word(rest)?;
    if !camel_case || !is_age(age) {
        return None;
    }
    let mut count = 1;
    if let Some((times, after)) = next_word(rest)
        && let Some(times) = times.strip_prefix("(x")
    {
        let (over, after) = next_word(after)?;
        let (since, after) = next_word(after)?;
        let since = since.strip_suffix(')')?;
        if over != "over" || !is_age(since) {
            return None;
        }
        count = times.parse().ok()?;
        rest = after;
    }
    let (source, mut rest) = next_word(rest)?;
    if source.ends_with(',') {
        rest = next_word(rest)?.1;
    }
    Some(Row {
        reason,
        count,
        message: rest.trim().to_string(),
    })
}

/// A text's first word and what follows it.
fn next_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    (end > 0).then(|| (&text[..end], &text[end..]))
}

/// An age as kubectl prints it (apimachinery's `duration.HumanDuration`: `45s`, `2m5s`, `3h`,
/// `5d2h`, `2y`), or `<unknown>` / `<invalid>` for a time it cannot place.
fn is_age(word: &str) -> bool {
    if matches!(word, "<unknown>" | "<invalid>") {
        return true;
    }
    let mut digits = 0;
    let mut units = 0;
    for c in word.chars() {
        if c.is_ascii_digit() {
            digits += 1;
        } else if "smhdy".contains(c) && digits > 0 {
            digits = 0;
            units += 1;
        } else {
            return false;
        }
    }
    digits == 0 && (1..=2).contains(&units)
}

/// A message's next line, as a terminal wrapped it: joined with a space, and kept with the
/// row's evidence so that the whole message is cited.
fn continue_message(event: &mut EventRecord, text: &str) {
    event.message = format!("{} {text}", event.message);
    // Evidence already cut to its readable length stays as it is.
    if let Some(evidence) = event.evidence.text.as_mut()
        && !evidence.ends_with('…')
    {
        *evidence = Evidence::line("", 0, &format!("{evidence} {text}"))
            .text
            .unwrap_or_default();
    }
    if event.container.is_none() {
        event.container = container_of_message(&event.message);
    }
}

/// `spec.containers{istio-proxy}` → `istio-proxy`.
fn container_of_field_path(path: &str) -> Option<String> {
    let start = path.find('{')? + 1;
    let end = path[start..].find('}')? + start;
    Some(path[start..end].to_string())
}

/// The container a kubelet message names: `Started container app`, `Created container: app`,
/// `Stopping container istio-proxy`, `Back-off restarting failed container app in pod ...`.
/// kubectl 1.35's describe puts the field path first: `spec.containers{app}: Started container`.
pub fn container_of_message(message: &str) -> Option<String> {
    // `Exec lifecycle hook ([pilot-agent wait]) for Container "istio-proxy" in Pod ...`
    if let Some((_, rest)) = message.split_once("Container \"")
        && let Some((name, _)) = rest.split_once('"')
        && !name.is_empty()
    {
        return Some(name.to_string());
    }
    if let Some(name) = message
        .split_whitespace()
        .next()
        .filter(|word| word.starts_with("spec."))
        .and_then(container_of_field_path)
    {
        return Some(name);
    }
    let after = message
        .split_once("container: ")
        .or_else(|| message.split_once("container "))?
        .1;
    let name: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.' || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_named_from_field_path_or_message() {
        assert_eq!(
            container_of_field_path("spec.containers{istio-proxy}").as_deref(),
            Some("istio-proxy")
        );
        assert_eq!(
            container_of_message("Created container: app").as_deref(),
            Some("app")
        );
        assert_eq!(
            container_of_message("Stopping container istio-proxy").as_deref(),
            Some("istio-proxy")
        );
        assert_eq!(container_of_message("Successfully assigned a/b to n"), None);
    }

    #[test]
    fn headerless_rows_are_read_by_their_shape_and_wrapped_messages_joined() {
        let text =
            include_str!("../../../tests/data/diagnose/istio-drain-killed-events-rows/events");
        let lines: Vec<&str> = text.lines().collect();
        let events = headerless_rows(&lines, 1, "events").unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[1].container.as_deref(), Some("istio-proxy"));
        assert_eq!(events[1].message, "Stopping container istio-proxy");
        let probe = &events[2];
        assert_eq!((probe.reason.as_str(), probe.count), ("Unhealthy", 3));
        assert_eq!(
            probe.message,
            "Readiness probe failed: Get \"http://10.244.0.7:15021/healthz/ready\": dial tcp \
             10.244.0.7:15021: connect: connection refused"
        );
        assert_eq!(probe.evidence.line, Some(3));
        assert!(
            probe
                .evidence
                .text
                .as_deref()
                .unwrap()
                .ends_with("15021: connect: connection refused")
        );
        assert!(is_age("2m5s") && is_age("<unknown>") && !is_age("2m5s3h") && !is_age("s"));
        // A log line is not a row, nor is text with a line that is neither row nor continuation.
        assert!(headerless_rows(&["2024-01-15T10:00:01Z Normal start"], 1, "x").is_none());
        assert!(headerless_rows(&["  Normal  Killing  2m  kubelet  x", "other"], 1, "x").is_none());
    }
}
