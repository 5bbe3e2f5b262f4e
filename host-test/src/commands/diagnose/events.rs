//! A pod's events as the kubelet and the scheduler record them: `kubectl get events -o
//! json|yaml` and `kubectl events -o json` (core/v1 Events, as a List), events.k8s.io/v1
//! Events, and the Events table of `kubectl describe` (read by `describe.rs`).
//!
//! The kubelet's reasons and messages (pkg/kubelet/events/event.go, kuberuntime_container.go):
//! `Started` "Started container NAME", `Killing` "Stopping container NAME", `Unhealthy`
//! "Readiness probe failed: ...", `BackOff` "Back-off restarting failed container NAME ...".
//! An event about one container names it in `involvedObject.fieldPath`
//! (`spec.containers{istio-proxy}`, `spec.initContainers{istio-init}`).

use serde_json::Value;

use super::clock::{self, Millis};
use super::evidence::Evidence;

#[derive(Clone, Debug)]
pub struct EventRecord {
    pub reason: String,
    pub message: String,
    /// The pod it is about (`involvedObject.name`), when the input says.
    pub pod: Option<String>,
    pub container: Option<String>,
    /// First and last occurrence; `None` for describe's table, which gives only ages.
    pub first: Option<Millis>,
    pub last: Option<Millis>,
    pub count: u64,
    pub evidence: Evidence,
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
    (!events.is_empty()).then_some(events)
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
}
