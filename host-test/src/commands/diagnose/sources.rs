//! The files given to `meshlife diagnose`, each recognised from its content: a pod (JSON or YAML,
//! alone or in a List), events (an Event List, JSON or YAML), `kubectl describe pod` text (or a
//! workload's, `kubectl describe replicaset|job`, for pods never created), or a container's log.
//! Nothing is dropped silently: a file that cannot be used is said, with why.

use std::collections::BTreeMap;
use std::path::Path;

use super::describe;
use super::events::{self, EventRecord};
use super::evidence::Evidence;
use super::logs::{self, LogRecord};
use super::pod::{self, PodRecord};
use super::refused::ClusterWebhooks;
use super::workload::WorkloadRecord;

/// The largest file read; a log beyond it is read from its end (the shutdown is there).
const MOST_READ: u64 = 64 * 1024 * 1024;

/// Everything read, for the pods in it.
#[derive(Debug, Default)]
pub struct Sources {
    pub pods: Vec<PodRecord>,
    pub events: Vec<EventRecord>,
    pub logs: Vec<LogRecord>,
    /// Namespace objects read with the pods (from the API server), for the prediction.
    pub namespaces: Vec<serde_json::Value>,
    /// Workloads whose pod template was given (describe text, the API server), for pods their
    /// events say were never created.
    pub workloads: Vec<WorkloadRecord>,
    /// The cluster's MutatingWebhookConfigurations, read from the API server when a workload's
    /// events say pods were refused.
    pub webhooks: Option<ClusterWebhooks>,
    /// The API server's version (`v1.31.4`), read with the webhooks.
    pub api_server: Option<(String, Evidence)>,
    /// What was read and how it was taken (`pod.json: a Pod`), and what could not be used.
    pub notes: Vec<String>,
    /// Files that could not be read at all.
    pub errors: Vec<String>,
}

impl Sources {
    /// Reads `paths`; `log_names` maps a file to the container its log is of (`--log C=FILE`).
    pub fn read(paths: &[String], log_names: &BTreeMap<String, String>) -> Sources {
        let mut sources = Sources::default();
        for path in paths {
            match read_text(Path::new(path)) {
                Ok((text, note)) => {
                    sources.notes.extend(note);
                    sources.add_text(path, &text, log_names.get(path).map(String::as_str));
                }
                Err(error) => sources.errors.push(format!("{path}: {error}")),
            }
        }
        sources.merge_describes();
        sources
    }

    /// A pod given both as its object and as describe text is one pod: the object's status
    /// (exact times, every field) is kept, and describe's undated events only when no dated
    /// ones were given for it.
    fn merge_describes(&mut self) {
        let objects: Vec<String> = self
            .pods
            .iter()
            .filter(|pod| pod.object.is_some())
            .map(PodRecord::title)
            .collect();
        let mut dropped = Vec::new();
        self.pods.retain(|pod| {
            let duplicate = pod.object.is_none() && objects.contains(&pod.title());
            if duplicate {
                dropped.push((pod.name.clone(), pod.evidence.file.clone()));
            }
            !duplicate
        });
        for (name, file) in dropped {
            let dated = self.events.iter().any(|event| {
                event.first.is_some() && event.pod.as_deref().is_none_or(|pod| pod == name)
            });
            if dated {
                self.events.retain(|event| {
                    !(event.evidence.file == file && event.pod.as_deref() == Some(name.as_str()))
                });
            }
            self.notes.push(format!(
                "{file}: describe text of pod {name}, given with its object too: the object's \
                 status is used{}",
                if dated { ", and the dated events" } else { "" }
            ));
        }
    }

    /// Takes one input's text, whatever its kind.
    pub fn add_text(&mut self, file: &str, text: &str, log_of: Option<&str>) {
        if let Some(container) = log_of {
            return self.add_log(file, text, container);
        }
        let trimmed = text.trim_start_matches('\u{feff}').trim_start();
        if trimmed.is_empty() {
            self.notes.push(format!("{file}: empty, not used"));
            return;
        }
        if describe::is_describe(text) {
            // `kubectl describe pods -l app=web` prints one pod after another.
            for (first_line, one) in describe::each_pod(text) {
                if describe::is_workload(one) {
                    let (workload, events, notes) = describe::workload_of(one, file, first_line);
                    self.notes.push(format!(
                        "{file}: `kubectl describe` of {} (its pod template, {} init \
                         container(s) of its own, {} event(s))",
                        workload.about.title(),
                        workload.init_containers.len(),
                        events.len()
                    ));
                    self.notes.extend(notes);
                    self.workloads.push(workload);
                    self.events.extend(events);
                    continue;
                }
                let (pod, mut events, notes) = describe::describe_of(one, file, first_line);
                self.notes.push(format!(
                    "{file}: `kubectl describe` of pod {} ({} container(s), {} event(s))",
                    pod.title(),
                    pod.containers.len(),
                    events.len()
                ));
                self.notes.extend(notes);
                for event in &mut events {
                    event.pod = Some(pod.name.clone());
                }
                self.pods.push(pod);
                self.events.extend(events);
            }
            return;
        }
        if describe::is_container_block(text) {
            return self.add_container_blocks(file, text);
        }
        if looks_like_an_object(trimmed) {
            return self.add_objects(file, text);
        }
        let lines: Vec<&str> = text.lines().collect();
        if let Some(events) = events::headerless_rows(&lines, 1, file) {
            self.notes.push(format!(
                "{file}: rows of `kubectl describe`'s Events table, without its header ({} \
                 event(s); ages, not times: what happened is used, not when)",
                events.len()
            ));
            self.events.extend(events);
            return;
        }
        if let Some(events) = events::table_of(&lines, 1, file) {
            self.notes.push(format!(
                "{file}: a `kubectl get events` table ({} event(s); ages, not times: what \
                 happened is used, not when; `-o json` gives the times)",
                events.len()
            ));
            self.events.extend(events);
            return;
        }
        let stem = Path::new(file)
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_else(|| file.to_string());
        // A file is a container's log when it is named one (`.log`) or its lines have the
        // times logs carry; any other text is not guessed at.
        let named_a_log = stem.ends_with(".log");
        if !named_a_log {
            let records = logs::logs_of(text, file, "");
            let timed = records
                .iter()
                .any(|record| record.lines.iter().any(|line| line.at.is_some()));
            let prefixed = records.iter().any(|record| !record.container.is_empty());
            if !timed && !prefixed {
                self.notes.push(format!(
                    "{file}: not recognised (not a pod, events, `kubectl describe` text, or a \
                     log with timestamps): not used. A container's log is read when its file \
                     is named CONTAINER.log or given as --log CONTAINER={file}"
                ));
                return;
            }
        }
        let stem = stem
            .strip_suffix(".log")
            .or(stem.strip_suffix(".txt"))
            .unwrap_or(&stem);
        // `kubectl logs --previous` saved as `app.previous.log` or `app-previous.log`.
        let container = [".previous", "-previous", "_previous"]
            .iter()
            .find_map(|suffix| stem.strip_suffix(suffix))
            .unwrap_or(stem)
            .to_string();
        self.add_log(file, text, &container)
    }

    /// Container blocks of a describe, pasted alone: each file's are of the same pod (the
    /// app's and the proxy's blocks are often pasted apart), which has no name of its own.
    fn add_container_blocks(&mut self, file: &str, text: &str) {
        let (containers, notes) = describe::container_blocks_of(text, file);
        self.notes.push(format!(
            "{file}: `kubectl describe`'s block of {} pasted alone: {} read as describe's \
             (the pod's name, grace period and events are not in it)",
            containers
                .iter()
                .map(|container| format!("container {}", container.name))
                .collect::<Vec<_>>()
                .join(", "),
            if containers.len() == 1 {
                "its state is"
            } else {
                "their states are"
            }
        ));
        self.notes.extend(notes);
        let blocks_pod = self.pods.iter_mut().find(|pod| pod.only_container_blocks);
        match blocks_pod {
            Some(pod) => pod.containers.extend(containers),
            None => self.pods.push(PodRecord {
                evidence: super::evidence::Evidence::line(
                    file,
                    1,
                    text.lines().next().unwrap_or(""),
                ),
                containers,
                only_container_blocks: true,
                ..PodRecord::default()
            }),
        }
    }

    fn add_log(&mut self, file: &str, text: &str, container: &str) {
        let records = logs::logs_of(text, file, container);
        for record in &records {
            self.notes.push(format!(
                "{file}: the log of {} ({} lines)",
                record.container,
                record.lines.len()
            ));
            self.notes.extend(record.notes.iter().cloned());
        }
        self.logs.extend(records);
    }

    fn add_objects(&mut self, file: &str, text: &str) {
        let mut used = false;
        for document in crate::inputs::manifests::parse_documents(file, text) {
            match document {
                Err(error) => self.notes.push(format!(
                    "{error}: not used (cut short? save it again with `kubectl get -o json`)"
                )),
                Ok((index, _, value)) => used |= self.add_document(file, index, &value),
            }
        }
        if !used && !self.notes.iter().any(|note| note.starts_with(file)) {
            self.notes
                .push(format!("{file}: nothing in it could be used"));
        }
    }

    /// An object read from the API server, as a file's would be.
    pub fn add_value(&mut self, file: &str, value: &serde_json::Value) {
        self.add_document(file, 0, value);
    }

    /// Takes one parsed document; whether it held anything used.
    fn add_document(&mut self, file: &str, index: usize, value: &serde_json::Value) -> bool {
        let mut used = false;
        {
            {
                {
                    if let Some(pods) = pod::pods_of(value, file) {
                        self.notes.push(format!(
                            "{file}: {}",
                            pods.iter()
                                .map(|pod| format!("pod {}", pod.title()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        self.pods.extend(pods);
                        used = true;
                    } else if let Some(events) = events::events_of(value, file) {
                        self.notes
                            .push(format!("{file}: {} event(s)", events.len()));
                        self.events.extend(events);
                        used = true;
                    } else if value
                        .get("kind")
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|kind| kind.ends_with("List"))
                    {
                        let empty = value
                            .get("items")
                            .and_then(serde_json::Value::as_array)
                            .is_none_or(Vec::is_empty);
                        self.notes.push(if empty {
                            format!(
                                "{file}, document {}: an empty List (no event or pod in it)",
                                index + 1
                            )
                        } else {
                            format!(
                                "{file}, document {}: a List with no Pod or Event in it, not used",
                                index + 1
                            )
                        });
                    } else {
                        self.notes.push(format!(
                            "{file}, document {}: {}, not a Pod, an Event or a List of them: not used",
                            index + 1,
                            value
                                .get("kind")
                                .and_then(serde_json::Value::as_str)
                                .map_or("no kind".to_string(), |kind| format!("a {kind}"))
                        ));
                    }
                }
            }
        }
        used
    }
}

/// A Kubernetes object's text (JSON or YAML with `kind:`), as opposed to a log whose lines are
/// JSON objects of their own (no `kind`, one per line).
fn looks_like_an_object(text: &str) -> bool {
    let head: String = text.chars().take(4_096).collect();
    if head.starts_with('{') || head.starts_with('[') {
        // JSON lines: the first line is a whole object without a kind.
        let first = head.lines().next().unwrap_or("");
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(first) {
            return map.contains_key("kind") && map.contains_key("apiVersion");
        }
        return head.contains("\"kind\"") || head.contains("\"apiVersion\"");
    }
    head.lines()
        .any(|line| line.starts_with("kind:") || line.starts_with("apiVersion:"))
}

/// The file's text (what is not UTF-8 replaced, and said), its end when it is over [`MOST_READ`].
fn read_text(path: &Path) -> Result<(String, Option<String>), String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|error| format!("cannot read: {error}"))?;
    let metadata = file
        .metadata()
        .map_err(|error| format!("cannot read: {error}"))?;
    if metadata.is_dir() {
        return Err("a folder: name the files (the pod, its events, logs, describe text)".into());
    }
    let mut note = None;
    if metadata.len() > MOST_READ {
        file.seek(SeekFrom::Start(metadata.len() - MOST_READ))
            .map_err(|error| format!("cannot read: {error}"))?;
        note = Some(format!(
            "{}: {} bytes; only its last {} MiB are read",
            path.display(),
            metadata.len(),
            MOST_READ / 1024 / 1024
        ));
    }
    let mut bytes = Vec::new();
    file.take(MOST_READ)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read: {error}"))?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, note)),
        Err(error) => {
            let text = String::from_utf8_lossy(error.as_bytes()).into_owned();
            let said = format!(
                "{}: not all UTF-8; the bytes that are not are read as \u{fffd}",
                path.display()
            );
            Ok((
                text,
                Some(note.map_or(said.clone(), |note| format!("{note}; {said}"))),
            ))
        }
    }
}
