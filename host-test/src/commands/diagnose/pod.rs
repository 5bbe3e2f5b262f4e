//! What a pod's own object says about its containers: each one's state and last state
//! (`status.containerStatuses`, `initContainerStatuses`), its conditions, its deletion and grace
//! period; from `kubectl get pod -o json|yaml` or the API server, or as `describe.rs` reads
//! them from `kubectl describe pod` text.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::clock::{self, Millis, SECOND};
use super::evidence::Evidence;

/// A pod as observed.
#[derive(Clone, Debug, Default)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    /// `Job`, `ReplicaSet`... from the controlling owner reference (or describe's `Controlled By`).
    pub owner: Option<String>,
    pub restart_policy: Option<String>,
    /// `spec.terminationGracePeriodSeconds`, or the deletion's own grace when it was deleted.
    pub grace_seconds: Option<i64>,
    /// The field the grace period was read from.
    pub grace_evidence: Option<Evidence>,
    /// A `deletionGracePeriodSeconds` of 0 beside a longer spec grace: the kubelet's own final
    /// deletion once the containers had stopped, which says nothing of the grace they were given.
    pub final_deletion: bool,
    /// When the kubelet was told to stop it: `deletionTimestamp` minus `deletionGracePeriodSeconds`
    /// (the API server sets the timestamp to the deletion plus the grace period).
    pub deleted: Option<(Millis, Evidence)>,
    pub phase: Option<String>,
    pub containers: Vec<ContainerRecord>,
    /// Whether `containers` is the pod's whole list (describe text may be cut short before it).
    pub containers_complete: bool,
    /// Only container blocks of a describe, pasted alone: the pod's other containers, its spec
    /// and its events are not known, not absent.
    pub only_container_blocks: bool,
    /// Condition type → (status, last transition).
    pub conditions: BTreeMap<String, (String, Option<(Millis, Evidence)>)>,
    pub annotations: BTreeMap<String, String>,
    /// The whole object, when it came as one (not from describe): the prediction is drawn from it.
    pub object: Option<Value>,
    /// Where the pod was read.
    pub evidence: Evidence,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Init,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    Sidecar,
    App,
}

#[derive(Clone, Debug)]
pub struct ContainerRecord {
    pub name: String,
    pub placement: Placement,
    pub state: State,
    pub last_state: Option<State>,
    pub ready: Option<bool>,
    pub restarts: u32,
    /// Where `restarts` was read (`status.containerStatuses[1].restartCount`).
    pub restarts_evidence: Option<Evidence>,
    /// Its `restartPolicyRules` (KEP-5307, KEP-5532): what the kubelet does on which exit codes.
    pub restart_rules: Vec<RestartRule>,
    /// Its `lifecycle.postStart` hook: the kubelet starts the next container only once it has
    /// returned.
    pub post_start: Option<SpecPart>,
    /// Its `startupProbe`: a native sidecar counts as started (and the containers after it may
    /// start) only once it has succeeded.
    pub startup_probe: Option<SpecPart>,
    /// Its `lifecycle.preStop` hook, and the delay it is known to take (seconds), if it is.
    pub pre_stop: Option<SpecPart>,
    pub pre_stop_delay: Option<i64>,
    pub readiness_probe: Option<SpecPart>,
    /// Its `ports` entries.
    pub ports: Vec<Port>,
    /// Its entry in the spec (`spec.initContainers[1]`), when the pod object was given.
    pub spec: Option<Evidence>,
    /// Its index in its spec list (`spec.containers` or `spec.initContainers`), when the pod
    /// object was given: the kubelet starts each list's containers in that order.
    pub index: Option<usize>,
}

/// A container's `restartPolicyRules` entry: `action` on the exit codes it names.
#[derive(Clone, Debug)]
pub struct RestartRule {
    /// `Restart`, `RestartAllContainers`.
    pub action: String,
    /// `In [88]`, `NotIn [0]`; empty when the entry names none.
    pub exit_codes: String,
    /// The entry's field, with the rule in words as its text.
    pub evidence: Evidence,
}

/// A container's `ports` entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub number: i64,
    #[serde(flatten)]
    pub evidence: Evidence,
}

impl Port {
    /// A port that serves the app's clients: not one named for metrics (`metrics`,
    /// `*-metrics`, `http-monitoring`), as ML502 reads them (docs/rules.md).
    pub fn serves(&self) -> bool {
        !self.name.as_deref().is_some_and(|name| {
            name == "metrics" || name.ends_with("-metrics") || name == "http-monitoring"
        })
    }

    /// `"http" (8080)`, or `8080`.
    pub fn phrase(&self) -> String {
        match &self.name {
            Some(name) => format!("\"{name}\" ({})", self.number),
            None => self.number.to_string(),
        }
    }
}

/// A `restartPolicyRules` entry: `{action, exitCodes: {operator, values}}`.
fn restart_rule_of(rule: &Value, file: &str, field: &str) -> Option<RestartRule> {
    let action = text_at(rule, "/action")?.to_string();
    let exit_codes = rule
        .get("exitCodes")
        .map(|codes| {
            let values: Vec<String> = codes
                .get("values")
                .and_then(Value::as_array)
                .map(|values| values.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!(
                "{} [{}]",
                text_at(codes, "/operator").unwrap_or("In"),
                values.join(", ")
            )
        })
        .unwrap_or_default();
    let words = if exit_codes.is_empty() {
        format!("action {action}")
    } else {
        format!("action {action} on exit codes {exit_codes}")
    };
    Some(RestartRule {
        action,
        exit_codes,
        evidence: Evidence {
            text: Some(words),
            ..Evidence::field(file, field)
        },
    })
}

/// The containers ML304 (job-helper-never-exits) takes for helpers that run until stopped, as
/// the policy itself names them in the pod's spec: `None` when the pod's object was not given
/// (describe text), so the rule's reading is not known.
pub fn helpers_named_by_the_rule(pod: &PodRecord) -> Option<Vec<String>> {
    let object = pod.object.as_ref()?;
    let input = serde_json::json!({
        "review": {
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "name": pod.name,
            "namespace": pod.namespace,
            "operation": "CREATE",
            "object": object,
        },
        "parameters": {},
    });
    let violations = meshlife_policy::evaluate(&serde_json::to_vec(&input).ok()?);
    let mut helpers: Vec<String> = violations
        .iter()
        .filter(|violation| {
            violation.details.rule == meshlife_policy::catalogue::JOB_HELPER_NEVER_EXITS.id
        })
        .filter_map(|violation| violation.details.container.clone())
        .collect();
    helpers.dedup();
    Some(helpers)
}

/// A hook or probe of a container's spec, in words, with the field it was read from.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecPart {
    /// An exec hook's or probe's command, its words joined by spaces; none for an HTTP, TCP,
    /// gRPC or sleep one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The field, and the hook or probe in words (`pilot-agent wait`, `httpGet
    /// :15021/healthz/ready`).
    #[serde(flatten)]
    pub evidence: Evidence,
}

impl ContainerRecord {
    /// A container known by name, before (or without) anything about its state.
    pub fn named(name: &str, placement: Placement) -> ContainerRecord {
        ContainerRecord {
            name: name.to_string(),
            placement,
            state: State::Unknown,
            last_state: None,
            ready: None,
            restarts: 0,
            restarts_evidence: None,
            restart_rules: Vec::new(),
            post_start: None,
            startup_probe: None,
            pre_stop: None,
            pre_stop_delay: None,
            readiness_probe: None,
            ports: Vec::new(),
            spec: None,
            index: None,
        }
    }
}

/// A container's state, each time with where it was read.
#[derive(Clone, Debug)]
pub enum State {
    Waiting { reason: Option<String> },
    Running { started: Option<(Millis, Evidence)> },
    Terminated(Box<Termination>),
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Termination {
    pub started: Option<(Millis, Evidence)>,
    pub finished: Option<(Millis, Evidence)>,
    pub exit_code: Option<i64>,
    pub reason: Option<String>,
    pub evidence: Evidence,
}

/// Status times are whole seconds.
pub const STATUS_PRECISION: Millis = SECOND;

/// The pods of a parsed document: a Pod, or the Pods of a List. `None` when it holds none.
pub fn pods_of(value: &Value, file: &str) -> Option<Vec<PodRecord>> {
    match value.get("kind").and_then(Value::as_str) {
        Some("Pod") => Some(vec![pod_of(value, file, "")]),
        Some(kind) if kind.ends_with("List") => {
            let items = value.get("items")?.as_array()?;
            let pods: Vec<PodRecord> = items
                .iter()
                .enumerate()
                .filter(|(_, item)| item.get("kind").and_then(Value::as_str) == Some("Pod"))
                .map(|(index, item)| pod_of(item, file, &format!("items[{index}].")))
                .collect();
            (!pods.is_empty()).then_some(pods)
        }
        _ => None,
    }
}

fn text_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn pod_of(pod: &Value, file: &str, prefix: &str) -> PodRecord {
    let at = |field: &str| Evidence::field(file, &format!("{prefix}{field}"));
    let time_at = |pointer: &str, field: &str| {
        text_at(pod, pointer)
            .and_then(clock::rfc3339)
            .map(|time| (time, at(field)))
    };
    let spec_grace = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let deletion_grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    // Once every container has stopped, the kubelet deletes the pod itself with a grace of 0
    // (its status manager's final delete): that 0, and the deletionTimestamp it sets, are not
    // the deletion that stopped the containers, nor the grace they were given. A pod deleted
    // with 0 by a user is gone from the API server at once; one kept by a finalizer is read
    // alike (the spec's grace is then said to be the one used, which a forced delete is not).
    let final_deletion = deletion_grace == Some(0) && spec_grace.is_none_or(|grace| grace > 0);
    let deletion_grace = deletion_grace.filter(|_| !final_deletion);
    let deleted = time_at("/metadata/deletionTimestamp", "metadata.deletionTimestamp")
        .filter(|_| !final_deletion)
        .map(|(at, evidence)| {
            (
                at - deletion_grace.or(spec_grace).unwrap_or(30) * 1_000,
                evidence,
            )
        });
    let owner = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|owners| {
            owners
                .iter()
                .find(|owner| owner.get("controller").and_then(Value::as_bool) == Some(true))
                .or(owners.first())
        })
        .and_then(|owner| owner.get("kind").and_then(Value::as_str))
        .map(str::to_string);
    let mut containers = Vec::new();
    for (list, statuses, placement) in [
        ("initContainers", "initContainerStatuses", Placement::Init),
        ("containers", "containerStatuses", Placement::App),
    ] {
        let specs = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let status_list = pod
            .pointer(&format!("/status/{statuses}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut names: Vec<String> = specs
            .iter()
            .filter_map(|spec| spec.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        for status in &status_list {
            if let Some(name) = status.get("name").and_then(Value::as_str)
                && !names.iter().any(|known| known == name)
            {
                names.push(name.to_string());
            }
        }
        for name in names {
            let spec_index = specs
                .iter()
                .position(|spec| spec.get("name").and_then(Value::as_str) == Some(&name));
            let spec = spec_index.map(|index| &specs[index]);
            let spec_field =
                |rest: &str| format!("{prefix}spec.{list}[{}].{rest}", spec_index.unwrap_or(0));
            let placement = if placement == Placement::Init
                && spec.and_then(|spec| text_at(spec, "/restartPolicy")) == Some("Always")
            {
                Placement::Sidecar
            } else {
                placement
            };
            let status_index = status_list
                .iter()
                .position(|status| status.get("name").and_then(Value::as_str) == Some(&name));
            let status = status_index.map(|index| &status_list[index]);
            let field = |rest: &str| {
                format!(
                    "{prefix}status.{statuses}[{}].{rest}",
                    status_index.unwrap_or(0)
                )
            };
            containers.push(ContainerRecord {
                placement,
                state: status
                    .and_then(|status| status.get("state"))
                    .map(|state| state_of(state, file, &field("state")))
                    .unwrap_or(State::Unknown),
                last_state: status
                    .and_then(|status| status.get("lastState"))
                    .map(|state| state_of(state, file, &field("lastState")))
                    .filter(|state| !matches!(state, State::Unknown)),
                ready: status
                    .and_then(|status| status.get("ready"))
                    .and_then(Value::as_bool),
                restarts: status
                    .and_then(|status| status.get("restartCount"))
                    .and_then(Value::as_u64)
                    .map_or(0, |count| u32::try_from(count).unwrap_or(u32::MAX)),
                restarts_evidence: status
                    .and_then(|status| status.get("restartCount"))
                    .and_then(Value::as_u64)
                    .map(|count| Evidence {
                        text: Some(count.to_string()),
                        ..Evidence::field(file, &field("restartCount"))
                    }),
                restart_rules: spec
                    .and_then(|spec| spec.get("restartPolicyRules"))
                    .and_then(Value::as_array)
                    .map(|rules| {
                        rules
                            .iter()
                            .enumerate()
                            .filter_map(|(index, rule)| {
                                restart_rule_of(
                                    rule,
                                    file,
                                    &spec_field(&format!("restartPolicyRules[{index}]")),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                post_start: spec
                    .and_then(|spec| spec.pointer("/lifecycle/postStart"))
                    .and_then(|hook| handler_of(hook, file, &spec_field("lifecycle.postStart"))),
                startup_probe: spec
                    .and_then(|spec| spec.get("startupProbe"))
                    .and_then(|probe| handler_of(probe, file, &spec_field("startupProbe"))),
                pre_stop: spec
                    .and_then(|spec| spec.pointer("/lifecycle/preStop"))
                    .and_then(|hook| handler_of(hook, file, &spec_field("lifecycle.preStop"))),
                pre_stop_delay: spec
                    .and_then(|spec| spec.pointer("/lifecycle/preStop"))
                    .and_then(pre_stop_delay_seconds),
                readiness_probe: spec
                    .and_then(|spec| spec.get("readinessProbe"))
                    .and_then(|probe| handler_of(probe, file, &spec_field("readinessProbe"))),
                ports: spec
                    .and_then(|spec| spec.get("ports"))
                    .and_then(Value::as_array)
                    .map(|ports| {
                        ports
                            .iter()
                            .enumerate()
                            .filter_map(|(index, port)| {
                                let number = port.get("containerPort")?.as_i64()?;
                                let name = text_at(port, "/name").map(str::to_string);
                                Some(Port {
                                    evidence: Evidence {
                                        text: Some(
                                            name.clone().unwrap_or_else(|| number.to_string()),
                                        ),
                                        ..Evidence::field(
                                            file,
                                            &spec_field(&format!("ports[{index}]")),
                                        )
                                    },
                                    name,
                                    number,
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                spec: spec.map(|_| Evidence::field(file, spec_field("").trim_end_matches('.'))),
                index: spec_index,
                name,
            });
        }
    }
    let conditions = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|conditions| {
            conditions
                .iter()
                .enumerate()
                .filter_map(|(index, condition)| {
                    let kind = condition.get("type")?.as_str()?.to_string();
                    let status = text_at(condition, "/status")
                        .unwrap_or("Unknown")
                        .to_string();
                    let changed = text_at(condition, "/lastTransitionTime")
                        .and_then(clock::rfc3339)
                        .map(|time| {
                            (
                                time,
                                at(&format!("status.conditions[{index}].lastTransitionTime")),
                            )
                        });
                    Some((kind, (status, changed)))
                })
                .collect()
        })
        .unwrap_or_default();
    PodRecord {
        namespace: text_at(pod, "/metadata/namespace")
            .unwrap_or("")
            .to_string(),
        name: text_at(pod, "/metadata/name").unwrap_or("").to_string(),
        owner,
        restart_policy: text_at(pod, "/spec/restartPolicy").map(str::to_string),
        grace_seconds: deletion_grace.or(spec_grace),
        grace_evidence: match (deletion_grace, spec_grace) {
            (Some(seconds), _) => Some(Evidence {
                text: Some(seconds.to_string()),
                ..at("metadata.deletionGracePeriodSeconds")
            }),
            (None, Some(seconds)) => Some(Evidence {
                text: Some(seconds.to_string()),
                ..at("spec.terminationGracePeriodSeconds")
            }),
            (None, None) => None,
        },
        final_deletion,
        deleted,
        phase: text_at(pod, "/status/phase").map(str::to_string),
        containers,
        conditions,
        containers_complete: pod.pointer("/spec/containers").is_some()
            || pod.pointer("/status/containerStatuses").is_some(),
        only_container_blocks: false,
        annotations: crate::inputs::manifests::string_map(pod.pointer("/metadata/annotations")),
        object: Some(pod.clone()),
        evidence: Evidence::field(file, prefix.trim_end_matches('.')),
    }
}

/// The delay a preStop hook is known to take, in seconds, read as the policy reads it
/// (meshlife_policy's `rules::prestop_delay_seconds`, which the crate does not export): a
/// `sleep` action's seconds, an exec of `sleep N`, or a shell script (`sh -c '...'`) whose every
/// `sleep` has a literal duration, summed. `None` when it cannot be known (an httpGet hook,
/// another program): never guessed.
fn pre_stop_delay_seconds(hook: &Value) -> Option<i64> {
    if let Some(seconds) = hook.pointer("/sleep/seconds") {
        return seconds.as_i64();
    }
    let command: Vec<&str> = hook
        .pointer("/exec/command")?
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect::<Option<_>>()?;
    let program = command.first()?;
    let program_name = program.rsplit('/').next().unwrap_or(program);
    if program_name == "sleep" {
        return command.get(1).and_then(|arg| sleep_seconds(arg));
    }
    if matches!(program_name, "sh" | "bash" | "ash" | "dash" | "zsh") {
        let script = command.iter().skip(1).find(|arg| !arg.starts_with('-'))?;
        let words: Vec<&str> = script
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
            .filter(|word| !word.is_empty())
            .collect();
        let mut total = None;
        for (index, word) in words.iter().enumerate() {
            if word.rsplit('/').next() == Some("sleep") {
                let seconds = sleep_seconds(words.get(index + 1)?)?;
                total = Some(total.unwrap_or(0i64).saturating_add(seconds));
            }
        }
        return total;
    }
    None
}

/// `sleep`'s argument: `15`, `15s`, `2m`, `1h`, `1.5` (fractions rounded down).
fn sleep_seconds(arg: &str) -> Option<i64> {
    let arg = arg.trim_matches(|c| c == '"' || c == '\'');
    let (number, multiplier) = match arg.as_bytes().last()? {
        b's' => (&arg[..arg.len() - 1], 1),
        b'm' => (&arg[..arg.len() - 1], 60),
        b'h' => (&arg[..arg.len() - 1], 3600),
        _ => (arg, 1),
    };
    let whole = match number.split_once('.') {
        Some((whole, fraction)) if fraction.bytes().all(|b| b.is_ascii_digit()) => whole,
        Some(_) => return None,
        None => number,
    };
    let whole = if whole.is_empty() && number.starts_with('.') {
        "0"
    } else {
        whole
    };
    whole
        .parse::<i64>()
        .ok()
        .filter(|value| *value >= 0)
        .map(|value| value.saturating_mul(multiplier))
}

/// A hook (`lifecycle.postStart`) or probe in words: its exec command, `httpGet :PORT/PATH`,
/// `tcpSocket :PORT`, `grpc :PORT`, `sleep Ns`. An exec one is cited at its command.
fn handler_of(handler: &Value, file: &str, field: &str) -> Option<SpecPart> {
    let port = |inner: &Value| match inner.get("port") {
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::String(name)) => name.clone(),
        _ => "?".into(),
    };
    let (command, words, field) = if let Some(exec) = handler.get("exec") {
        let command = exec
            .get("command")
            .and_then(Value::as_array)
            .map(|words| {
                words
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        (
            Some(command.clone()),
            command,
            format!("{field}.exec.command"),
        )
    } else if let Some(get) = handler.get("httpGet") {
        let path = text_at(get, "/path").unwrap_or("/");
        (None, format!("httpGet :{}{path}", port(get)), field.into())
    } else if let Some(socket) = handler.get("tcpSocket") {
        (None, format!("tcpSocket :{}", port(socket)), field.into())
    } else if let Some(grpc) = handler.get("grpc") {
        (None, format!("grpc :{}", port(grpc)), field.into())
    } else if let Some(sleep) = handler.get("sleep") {
        let seconds = sleep.get("seconds").and_then(Value::as_i64).unwrap_or(0);
        (None, format!("sleep {seconds}s"), field.into())
    } else {
        return None;
    };
    Some(SpecPart {
        command,
        evidence: Evidence {
            text: Some(words),
            ..Evidence::field(file, &field)
        },
    })
}

fn state_of(state: &Value, file: &str, field: &str) -> State {
    let time = |inner: &Value, key: &str, kind: &str| {
        inner
            .get(key)
            .and_then(Value::as_str)
            .and_then(clock::rfc3339)
            .map(|at| (at, Evidence::field(file, &format!("{field}.{kind}.{key}"))))
    };
    if let Some(running) = state.get("running") {
        return State::Running {
            started: time(running, "startedAt", "running"),
        };
    }
    if let Some(terminated) = state.get("terminated") {
        return State::Terminated(Box::new(Termination {
            started: time(terminated, "startedAt", "terminated"),
            finished: time(terminated, "finishedAt", "terminated"),
            exit_code: terminated.get("exitCode").and_then(Value::as_i64),
            reason: terminated
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            evidence: Evidence::field(file, &format!("{field}.terminated")),
        }));
    }
    if let Some(waiting) = state.get("waiting") {
        return State::Waiting {
            reason: waiting
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
    }
    State::Unknown
}

impl PodRecord {
    /// `shop/web-7d4b9c-abcde`.
    pub fn title(&self) -> String {
        match (self.namespace.as_str(), self.name.as_str()) {
            ("", "") => "the pod".into(),
            ("", name) => name.into(),
            (namespace, name) => format!("{namespace}/{name}"),
        }
    }

    /// An Istio waypoint's pod, by its object (the label istiod renders, or an istio-proxy
    /// that runs `proxy waypoint`); `None` without the object (describe text).
    pub fn is_waypoint(&self) -> Option<bool> {
        let object = self.object.as_ref()?;
        let class = object
            .pointer("/metadata/labels/gateway.networking.k8s.io~1gateway-class-name")
            .and_then(Value::as_str);
        let proxy_args = object
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|container| container["name"] == "istio-proxy")
            .filter_map(|container| container["args"].as_array())
            .any(|args| args.len() >= 2 && args[0] == "proxy" && args[1] == "waypoint");
        Some(class == Some("istio-waypoint") || proxy_args)
    }

    /// A batch pod: owned by a Job, or one whose containers are meant to finish.
    pub fn is_batch(&self) -> bool {
        self.owner.as_deref() == Some("Job")
            || matches!(self.restart_policy.as_deref(), Some("Never" | "OnFailure"))
    }
}
