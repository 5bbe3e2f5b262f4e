//! `kubectl describe pod` text, as people paste it into issues: the pod's name, namespace,
//! owner and termination grace, each container's `State` and `Last State` blocks, and the
//! Events table. kubectl writes (staging/src/k8s.io/kubectl/pkg/describe/describe.go)
//! container times as `Mon, 02 Jan 2006 15:04:05 -0700` in the reader's local time, and the
//! Events table with ages, not times: its events are evidence of what happened, not when.

use std::collections::BTreeSet;

use super::clock;
use super::events::{self, About, EventRecord};
use super::evidence::Evidence;
use super::pod::{ContainerRecord, Placement, PodRecord, State, Termination};
use super::workload::{Entry, TemplateInit, WorkloadRecord};

/// Whether `text` looks like describe output: a `Name:` line, and a `Namespace:` line or a
/// containers section (a paste cut short may hold only the head).
pub fn is_describe(text: &str) -> bool {
    let mut name = false;
    let mut namespace_or_containers = false;
    for line in text.lines().take(400) {
        name |= line.starts_with("Name:");
        namespace_or_containers |= line.starts_with("Namespace:")
            || line.starts_with("Containers:")
            || line.starts_with("Init Containers:");
    }
    name && namespace_or_containers
}

/// Each pod's text in a describe of several (from each `Name:` line; anything before the first
/// is not a pod's), with the line it starts on (1-based).
pub fn each_pod(text: &str) -> Vec<(usize, &str)> {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("Name:") {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(index, &start)| {
            let end = starts.get(index + 1).copied().unwrap_or(text.len());
            (text[..start].lines().count() + 1, &text[start..end])
        })
        .filter(|(_, one)| !one.trim().is_empty())
        .collect()
}

/// Whether one object's describe text is a workload's (a ReplicaSet, a Job...), not a pod's:
/// kubectl writes a workload's pod template under a `Pod Template:` line (`DescribePodTemplate`,
/// for ReplicaSets, Jobs, StatefulSets, DaemonSets, ReplicationControllers and Deployments), and
/// a pod's containers at the top level.
pub fn is_workload(text: &str) -> bool {
    text.lines()
        .take(400)
        .any(|line| line.trim_end() == "Pod Template:")
}

/// A workload's describe: its name, its pod template (labels, annotations, init containers),
/// its events (about it) and notes on what could not be read; `first_line` is where `text`
/// starts in its file.
pub fn workload_of(
    text: &str,
    file: &str,
    first_line: usize,
) -> (WorkloadRecord, Vec<EventRecord>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut workload = WorkloadRecord {
        about: About {
            kind: String::new(),
            namespace: String::new(),
            name: String::new(),
        },
        labels: Default::default(),
        annotations: Default::default(),
        init_containers: Vec::new(),
        evidence: Evidence::line(file, first_line, lines.first().copied().unwrap_or("")),
    };
    let mut notes = Vec::new();
    // The top-level fields seen, which tell the kind.
    let mut fields = BTreeSet::new();
    let mut section = "";
    let mut template_part = "";
    let mut events = Vec::new();
    let mut has_events = false;
    for (index, line) in lines.iter().enumerate() {
        let number = first_line + index;
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        if trimmed.is_empty() {
            continue;
        }
        if indent == 0 {
            let (key, value) = split_field(trimmed);
            section = key;
            template_part = "";
            match key {
                "Name" => workload.about.name = value.to_string(),
                "Namespace" => workload.about.namespace = value.to_string(),
                "Pod Template" => workload.evidence = Evidence::line(file, number, line),
                "Events" => {
                    has_events = true;
                    match events::table_of(&lines[index + 1..], number + 1, file) {
                        Some(read) => events = read,
                        None if !value.contains("<none>") => notes.push(format!(
                            "{file}:{number}: the Events section has no `Type Reason Age From \
                             Message` header: its events are not read"
                        )),
                        None => {}
                    }
                    break;
                }
                _ => {
                    fields.insert((key.to_string(), value.to_string()));
                }
            }
            continue;
        }
        if section != "Pod Template" {
            continue;
        }
        if indent == 2 {
            let (key, value) = split_field(trimmed);
            template_part = key;
            match key {
                "Labels" => template_entry(&mut workload.labels, value, '=', file, number, line),
                "Annotations" => {
                    template_entry(&mut workload.annotations, value, ':', file, number, line)
                }
                _ => {}
            }
            continue;
        }
        match template_part {
            // Further labels and annotations, aligned under the first one's value.
            "Labels" => template_entry(&mut workload.labels, trimmed, '=', file, number, line),
            "Annotations" => {
                template_entry(&mut workload.annotations, trimmed, ':', file, number, line)
            }
            // A container's name, one space deeper than the section (describeContainerBasicInfo's
            // nameIndent), its fields deeper still.
            "Init Containers" if indent == 3 && trimmed.ends_with(':') => {
                let name = trimmed.trim_end_matches(':');
                if is_container_name(name) {
                    workload.init_containers.push(TemplateInit {
                        name: name.to_string(),
                        native: None,
                    });
                }
            }
            "Init Containers" if indent >= 4 => {
                let (key, value) = split_field(trimmed);
                if key == "Restart Policy"
                    && let Some(init) = workload.init_containers.last_mut()
                {
                    init.native = Some(value == "Always");
                }
            }
            _ => {}
        }
    }
    workload.about.kind = workload_kind(&fields).to_string();
    if workload.about.name.is_empty() {
        workload.about.name = "<unnamed>".into();
    }
    if !has_events {
        notes.push(format!(
            "{file}: no Events section (paste the whole `kubectl describe` output for them)"
        ));
    }
    for event in &mut events {
        event.about = Some(workload.about.clone());
    }
    (workload, events, notes)
}

/// The kind of a workload's describe, by the fields kubectl's describer for it writes
/// (describe.go: `describeJob`'s `Completions`, `describeDeployment`'s `StrategyType`,
/// `describeDaemonSet`'s `Desired Number of Nodes Scheduled`, `describeStatefulSet`'s `Update
/// Strategy`, `describeCronJob`'s `Schedule`). A ReplicaSet and a ReplicationController print
/// the same fields: a ReplicaSet is known by its Deployment (`Controlled By: Deployment/...`) or
/// the `pod-template-hash` the Deployment controller selects it by; else the kind is not told.
fn workload_kind(fields: &BTreeSet<(String, String)>) -> &'static str {
    let has = |wanted: &str| fields.iter().any(|(key, _)| key == wanted);
    let value_of = |wanted: &str| {
        fields
            .iter()
            .find(|(key, _)| key == wanted)
            .map_or("", |(_, value)| value.as_str())
    };
    if has("Completions") || has("Parallelism") || has("Pods Statuses") {
        "Job"
    } else if has("Schedule") {
        "CronJob"
    } else if has("StrategyType") || has("NewReplicaSet") {
        "Deployment"
    } else if has("Desired Number of Nodes Scheduled") {
        "DaemonSet"
    } else if has("Update Strategy") {
        "StatefulSet"
    } else if value_of("Controlled By").starts_with("Deployment/")
        || value_of("Selector").contains("pod-template-hash=")
    {
        "ReplicaSet"
    } else {
        About::ANY_KIND
    }
}

/// One `key=value` label or `key: value` annotation of a pod template's describe.
fn template_entry(
    entries: &mut std::collections::BTreeMap<String, Entry>,
    text: &str,
    separator: char,
    file: &str,
    number: usize,
    line: &str,
) {
    let text = text.trim();
    if text.is_empty() || text == "<none>" {
        return;
    }
    if let Some((key, value)) = text.split_once(separator) {
        entries.insert(
            key.trim().to_string(),
            Entry {
                value: value.trim().to_string(),
                evidence: Evidence::line(file, number, line),
            },
        );
    }
}

/// Whether `text` is one or more container blocks of a describe pasted alone (`istio-proxy:`,
/// then its `State:` and the rest indented under it), as people cut the one container they
/// look at out of the whole: its first line names a container, and a `State:` follows.
pub fn is_container_block(text: &str) -> bool {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let Some(first) = lines.next() else {
        return false;
    };
    let indent = first.len() - first.trim_start().len();
    let name_line = first.trim_end().strip_suffix(':').map(str::trim_start);
    name_line.is_some_and(is_container_name)
        && lines.take(80).any(|line| {
            line.len() - line.trim_start().len() > indent && line.trim().starts_with("State:")
        })
}

/// A container's name: a DNS label (`istio-proxy`, `app`).
fn is_container_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The containers of blocks pasted alone (see [`is_container_block`]), read as describe's
/// Containers section is, wherever the paste's indentation puts them; and notes on what could
/// not be read. A block alone does not say whether its container is an init container: each
/// is read as an app container (the mesh's own are known by their names).
pub fn container_blocks_of(text: &str, file: &str) -> (Vec<ContainerRecord>, Vec<String>) {
    let name_indent = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .map_or(0, |line| line.len() - line.trim_start().len());
    let (pod, _, notes) = read(
        text,
        file,
        1,
        Layout::ContainersAlone {
            // describe's own names sit two spaces in.
            shift: 2 - name_indent as isize,
        },
    );
    (pod.containers, notes)
}

/// The pod, its events, and notes on what could not be read; `first_line` is where `text`
/// starts in its file.
pub fn describe_of(
    text: &str,
    file: &str,
    first_line: usize,
) -> (PodRecord, Vec<EventRecord>, Vec<String>) {
    read(text, file, first_line, Layout::Whole)
}

/// What the text read is: a whole describe, or container blocks alone, whose indentation is
/// moved by `shift` to describe's own (names two spaces in).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Whole,
    ContainersAlone { shift: isize },
}

fn read(
    text: &str,
    file: &str,
    first_line: usize,
    layout: Layout,
) -> (PodRecord, Vec<EventRecord>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut pod = PodRecord {
        evidence: Evidence::line(file, first_line, lines.first().copied().unwrap_or("")),
        ..PodRecord::default()
    };
    let mut notes = Vec::new();
    let (mut section, shift) = match layout {
        Layout::Whole => ("", 0),
        Layout::ContainersAlone { shift } => ("Containers", shift),
    };
    let mut current: Option<ContainerRecord> = None;
    // Which state block the indented lines belong to: `State` or `Last State`.
    let mut block: Option<(&str, usize)> = None;
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let number = first_line + index;
        index += 1;
        let trimmed = line.trim();
        let indent = ((line.len() - line.trim_start().len()) as isize + shift).max(0) as usize;
        if layout != Layout::Whole && indent < 2 && !trimmed.is_empty() {
            // Text after the blocks, less indented than their names: not a container's.
            notes.push(format!(
                "{file}:{number}: `{trimmed}` is not in a container block: the lines from here \
                 on are not read"
            ));
            break;
        }
        if indent == 0 && !trimmed.is_empty() {
            if let Some(container) = current.take() {
                pod.containers.push(container);
            }
            block = None;
            let (key, value) = split_field(trimmed);
            // The app containers are all read once the section after them begins.
            if section == "Containers" {
                pod.containers_complete = true;
            }
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
                    pod_events_done(&mut pod);
                    let events = match events::table_of(&lines[index..], first_line + index, file) {
                        Some(events) => events,
                        None => {
                            if !value.contains("<none>") {
                                notes.push(format!(
                                    "{file}:{number}: the Events section has no `Type Reason \
                                     Age From Message` header: its events are not read"
                                ));
                            }
                            Vec::new()
                        }
                    };
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
            current = Some(ContainerRecord::named(
                trimmed.trim_end_matches(':'),
                if section == "Init Containers" {
                    Placement::Init
                } else {
                    Placement::App
                },
            ));
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
    if layout == Layout::Whole {
        pod_events_done(&mut pod);
        notes.push(format!(
            "{file}: no Events section (paste the whole `kubectl describe pod` output for them)"
        ));
    }
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
