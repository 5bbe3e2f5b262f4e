//! `kubectl describe pod` text, as people paste it into issues: the pod's name, namespace,
//! owner and termination grace, each container's `State` and `Last State` blocks, and the
//! Events table. kubectl writes (staging/src/k8s.io/kubectl/pkg/describe/describe.go)
//! container times as `Mon, 02 Jan 2006 15:04:05 -0700` in the reader's local time, and the
//! Events table with ages, not times: its events are evidence of what happened, not when.

use super::clock;
use super::events::{EventRecord, container_of_message};
use super::evidence::Evidence;
use super::pod::{ContainerRecord, Placement, PodRecord, State, Termination};

/// Whether `text` looks like describe output: a `Name:` line and a containers section.
pub fn is_describe(text: &str) -> bool {
    let mut name = false;
    let mut containers = false;
    for line in text.lines().take(400) {
        name |= line.starts_with("Name:");
        containers |= line.starts_with("Containers:") || line.starts_with("Init Containers:");
    }
    name && containers
}

/// The pod, its events, and notes on what could not be read.
pub fn describe_of(text: &str, file: &str) -> (PodRecord, Vec<EventRecord>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut pod = PodRecord {
        evidence: Evidence::line(file, 1, lines.first().copied().unwrap_or("")),
        ..PodRecord::default()
    };
    let mut notes = Vec::new();
    let mut section = "";
    let mut current: Option<ContainerRecord> = None;
    // Which state block the indented lines belong to: `State` or `Last State`.
    let mut block: Option<(&str, usize)> = None;
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let number = index + 1;
        index += 1;
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent == 0 && !trimmed.is_empty() {
            if let Some(container) = current.take() {
                pod.containers.push(container);
            }
            block = None;
            let (key, value) = split_field(trimmed);
            section = key;
            match key {
                "Name" => pod.name = value.to_string(),
                "Namespace" => pod.namespace = value.to_string(),
                "Controlled By" => {
                    pod.owner = value.split('/').next().map(str::to_string);
                }
                "Termination Grace Period" => {
                    pod.grace_seconds = value.trim_end_matches('s').parse().ok();
                }
                "Status" => {
                    pod.phase = Some(value.split_whitespace().next().unwrap_or("").to_string());
                }
                "Annotations" if !value.is_empty() && value != "<none>" => {
                    add_annotation(&mut pod, value);
                }
                "Events" => {
                    let (events, more_notes) = events_table(&lines[index..], index, file);
                    pod_events_done(&mut pod);
                    notes.extend(more_notes);
                    return (pod, events, notes);
                }
                _ => {}
            }
            continue;
        }
        if section == "Annotations" && indent > 0 && trimmed.contains(':') {
            add_annotation(&mut pod, trimmed);
            continue;
        }
        if section != "Containers" && section != "Init Containers" {
            continue;
        }
        if indent == 2 && trimmed.ends_with(':') {
            if let Some(container) = current.take() {
                pod.containers.push(container);
            }
            block = None;
            current = Some(ContainerRecord {
                name: trimmed.trim_end_matches(':').to_string(),
                placement: if section == "Init Containers" {
                    Placement::Init
                } else {
                    Placement::App
                },
                state: State::Unknown,
                last_state: None,
                ready: None,
                restarts: 0,
            });
            continue;
        }
        let Some(container) = current.as_mut() else {
            continue;
        };
        let (key, value) = split_field(trimmed);
        if indent == 4 {
            block = None;
            match key {
                "State" | "Last State" => {
                    let state = new_state(value, file, number, line);
                    if key == "State" {
                        container.state = state;
                    } else if !matches!(state, State::Unknown) {
                        container.last_state = Some(state);
                    }
                    block = Some((key, number));
                }
                "Ready" => container.ready = Some(value == "True"),
                "Restart Count" => container.restarts = value.parse().unwrap_or(0),
                "Restart Policy" if value == "Always" && container.placement == Placement::Init => {
                    container.placement = Placement::Sidecar;
                }
                _ => {}
            }
            continue;
        }
        if indent >= 6
            && let Some((which, _)) = block
        {
            let state = if which == "State" {
                Some(&mut container.state)
            } else {
                container.last_state.as_mut()
            };
            if let Some(state) = state {
                state_field(state, key, value, file, number, line, &mut notes);
            }
        }
    }
    if let Some(container) = current.take() {
        pod.containers.push(container);
    }
    pod_events_done(&mut pod);
    notes.push(format!(
        "{file}: no Events section (paste the whole `kubectl describe pod` output for them)"
    ));
    (pod, Vec::new(), notes)
}

fn pod_events_done(pod: &mut PodRecord) {
    if pod.name.is_empty() {
        pod.name = "<unnamed>".into();
    }
}

fn add_annotation(pod: &mut PodRecord, text: &str) {
    if let Some((key, value)) = text.split_once(": ") {
        pod.annotations
            .insert(key.trim().to_string(), value.trim().to_string());
    }
}

/// `Exit Code:    0` → (`Exit Code`, `0`).
fn split_field(text: &str) -> (&str, &str) {
    match text.split_once(':') {
        Some((key, value)) => (key.trim(), value.trim()),
        None => (text.trim(), ""),
    }
}

fn new_state(value: &str, file: &str, number: usize, line: &str) -> State {
    let evidence = Evidence::line(file, number, line);
    match value.split_whitespace().next().unwrap_or("") {
        "Running" => State::Running { started: None },
        "Terminated" => State::Terminated(Box::new(Termination {
            started: None,
            finished: None,
            exit_code: None,
            reason: None,
            evidence,
        })),
        "Waiting" => State::Waiting { reason: None },
        _ => State::Unknown,
    }
}

fn state_field(
    state: &mut State,
    key: &str,
    value: &str,
    file: &str,
    number: usize,
    line: &str,
    notes: &mut Vec<String>,
) {
    let mut time = || match clock::rfc1123z(value).or_else(|| clock::rfc3339(value)) {
        Some(at) => Some((at, Evidence::line(file, number, line))),
        None => {
            notes.push(format!(
                "{file}:{number}: `{value}` is not a time kubectl writes (`Mon, 02 Jan 2006 \
                 15:04:05 -0700`): this moment is not used"
            ));
            None
        }
    };
    match (state, key) {
        (State::Running { started }, "Started") => *started = time(),
        (State::Terminated(termination), "Started") => termination.started = time(),
        (State::Terminated(termination), "Finished") => termination.finished = time(),
        (State::Terminated(termination), "Exit Code") => {
            termination.exit_code = value.parse().ok();
        }
        (State::Terminated(termination), "Reason") => termination.reason = Some(value.into()),
        (State::Waiting { reason, .. }, "Reason") => *reason = Some(value.into()),
        _ => {}
    }
}

/// The Events table: columns found from its header (`Type  Reason  Age  From  Message`), so
/// widths from any kubectl version read alike.
fn events_table(lines: &[&str], first_index: usize, file: &str) -> (Vec<EventRecord>, Vec<String>) {
    let mut notes = Vec::new();
    let mut events = Vec::new();
    let Some(header_at) = lines
        .iter()
        .take(3)
        .position(|line| line.contains("Reason") && line.contains("Message"))
    else {
        if lines
            .first()
            .is_none_or(|line| !line.trim().is_empty() && !line.contains("<none>"))
        {
            notes.push(format!(
                "{file}: the Events section has no `Type Reason Age From Message` header: its \
                 events are not read"
            ));
        }
        return (events, notes);
    };
    let header = lines[header_at];
    let column = |name: &str| header.find(name);
    let (Some(reason_at), Some(age_at), Some(message_at)) =
        (column("Reason"), column("Age"), column("Message"))
    else {
        return (events, notes);
    };
    for (offset, line) in lines.iter().enumerate().skip(header_at + 1) {
        let number = first_index + offset + 1;
        if line.trim_start().starts_with("----") || line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            break;
        }
        let slice = |from: usize, to: usize| {
            line.get(from.min(line.len())..to.min(line.len()))
                .unwrap_or("")
                .trim()
        };
        let reason = slice(reason_at, age_at).to_string();
        let age = slice(age_at, message_at);
        let message = line
            .get(message_at.min(line.len())..)
            .unwrap_or("")
            .trim()
            .to_string();
        let count = age
            .split_once("(x")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|count| count.parse().ok())
            .unwrap_or(1);
        events.push(EventRecord {
            container: container_of_message(&message),
            pod: None,
            reason,
            message,
            first: None,
            last: None,
            count,
            evidence: Evidence::line(file, number, line),
        });
    }
    (events, notes)
}
