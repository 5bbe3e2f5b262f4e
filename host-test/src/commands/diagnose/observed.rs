//! The observed timeline of one pod: per container, when it started, was ready, got SIGTERM and
//! ended (exact where a source gives the moment, a bound where sources only constrain it), and
//! what its log says happened (the proxy's own moments, connection errors, streams cut).

use serde::Serialize;

use super::clock::{self, Bound, Millis, SECOND};
use super::events::EventRecord;
use super::evidence::Evidence;
use super::logs::LogRecord;
use super::patterns::{self, DrainDetail, Signal};
use super::pod::{
    self, ContainerRecord, Placement, PodRecord, Port, RestartRule, STATUS_PRECISION, SpecPart,
    State,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mesh {
    Istio,
    Linkerd,
}

impl Mesh {
    pub fn proxy_name(self) -> &'static str {
        match self {
            Mesh::Istio => "istio-proxy",
            Mesh::Linkerd => "linkerd-proxy",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A user init container.
    Init,
    /// The mesh's traffic capture or validation init container.
    MeshInit,
    Proxy,
    App,
}

/// The mesh's own init containers: `istio-init` installs the redirect, `istio-validation` checks
/// the CNI's; `linkerd-init`, `linkerd-network-validator` likewise.
const MESH_INIT: [&str; 4] = [
    "istio-init",
    "istio-validation",
    "linkerd-init",
    "linkerd-network-validator",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MomentKind {
    Started,
    Ready,
    /// A failed probe (`Unhealthy`): not ready then.
    ProbeFailed,
    /// Its postStart hook failed (`FailedPostStartHook`, and the `Killing` the kubelet records
    /// with that message as it stops the container for it).
    PostStartHookFailed,
    /// Its preStop hook failed (`FailedPreStopHook`): an exec hook whose container was killed
    /// under it fails then, so one at the container's end shows the hook still running.
    PreStopHookFailed,
    /// SIGTERM: the kubelet's `Killing` ("Stopping container").
    Sigterm,
    Terminated,
    /// An earlier run that ended (`lastState`, `BackOff`).
    EarlierRunEnded,
    ProxyStarting,
    ProxyReady,
    ProxyDraining,
    ProxyExiting,
    ConnectionError,
    StreamCut,
    /// An app's own line that it now serves (`listening on :8080`, Spring Boot's `Started ...
    /// in N seconds`).
    Serving,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Moment {
    pub kind: MomentKind,
    pub at: Bound,
    pub what: String,
    pub evidence: Evidence,
    /// For a proxy's own line: the source that writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern_source: Option<&'static str>,
    /// For an event: how many times it was recorded (its `count`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// For an Istio proxy's drain line: the drain pilot-agent plans, or Envoy told to stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<patterns::DrainDetail>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerTimeline {
    pub name: String,
    pub role: Role,
    pub native_sidecar: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigterm: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Still running when the data was taken.
    pub running: bool,
    /// Still waiting (to start, or to restart): `reason` says why.
    pub waiting: bool,
    pub restarts: u32,
    /// Where `restarts` was read.
    #[serde(skip)]
    pub restarts_evidence: Option<Evidence>,
    /// Its spec's `restartPolicyRules`.
    #[serde(skip)]
    pub restart_rules: Vec<RestartRule>,
    /// Whether a log of it was given.
    pub log: bool,
    /// Its log's first line with a time: it had started by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_line: Option<Moment>,
    /// Its spec's postStart hook and startupProbe, which hold the containers after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_start: Option<SpecPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<SpecPart>,
    /// Its preStop hook, and the delay it is known to take (seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<SpecPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_stop_delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<SpecPart>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// Its entry in the pod's spec, when the pod object was given.
    #[serde(skip)]
    pub spec: Option<Evidence>,
    /// Its index in its spec list (`spec.containers[1]`), when the pod object was given.
    #[serde(skip)]
    pub index: Option<usize>,
    pub moments: Vec<Moment>,
}

impl ContainerTimeline {
    pub fn moments_of(&self, kind: MomentKind) -> impl Iterator<Item = &Moment> {
        self.moments
            .iter()
            .filter(move |moment| moment.kind == kind)
    }
}

/// One pod's observed timeline.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    pub pod: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    pub batch: Option<bool>,
    /// An Istio waypoint's pod (its proxy is the workload); `None` when the data cannot say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waypoint: Option<bool>,
    /// The pod's grace period, with where it comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<i64>,
    pub grace_source: String,
    /// The field the grace period was read from.
    #[serde(skip)]
    pub grace_evidence: Option<Evidence>,
    /// When the pod was told to stop (its deletion), where the data says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Bound>,
    pub containers: Vec<ContainerTimeline>,
    /// The most two sources' clocks were seen to disagree, in milliseconds; comparisons between
    /// sources are not made closer than this.
    pub clock_skew_ms: Millis,
    /// The earliest moment, for drawing.
    #[serde(skip)]
    pub origin: Option<Millis>,
    /// Whether a pod object or describe text was given (else only logs and events).
    pub has_status: bool,
    /// Whether the pod's object was given: its spec (hooks, probes, ports), which describe text
    /// shows only in part.
    pub has_spec: bool,
    /// The pod's `Ready` condition: its status, and when it last changed (to the second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_ready: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_ready_changed: Option<Moment>,
    /// Whether the data lists all the pod's containers (a cut describe may not).
    pub containers_complete: bool,
    pub notes: Vec<String>,
    /// The pod's `status.phase`, with where it was read.
    #[serde(skip)]
    pub phase: Option<(String, Evidence)>,
    /// The pod's conditions: type → (status, last transition with its field).
    #[serde(skip)]
    pub conditions: std::collections::BTreeMap<String, (String, Option<(Millis, Evidence)>)>,
    /// The containers ML304 takes for helpers that run until stopped, read by the policy from
    /// the pod's spec; `None` without the pod's object.
    #[serde(skip)]
    pub helpers: Option<Vec<String>>,
    /// When the pod was read from the API server (`pod/NAME`): its status was so then.
    #[serde(skip)]
    pub read_at: Option<Millis>,
    /// The latest time any event about the pod was recorded (its `lastTimestamp`), with it.
    #[serde(skip)]
    pub last_event: Option<(Millis, Evidence)>,
}

impl Observed {
    pub fn proxy(&self) -> Option<&ContainerTimeline> {
        self.containers
            .iter()
            .find(|container| container.role == Role::Proxy)
    }

    pub fn container(&self, name: &str) -> Option<&ContainerTimeline> {
        self.containers
            .iter()
            .find(|container| container.name == name)
    }

    pub fn apps(&self) -> impl Iterator<Item = &ContainerTimeline> {
        self.containers
            .iter()
            .filter(|container| container.role == Role::App)
    }

    /// The latest moment the data shows (an event, a log line, a status time, a condition's
    /// transition): the pod was seen as it is at least until then.
    pub fn last_seen(&self) -> Option<(Millis, Evidence)> {
        let moments = self
            .containers
            .iter()
            .flat_map(|container| &container.moments)
            .filter_map(|moment| Some((moment.at.point()?, moment.evidence.clone())));
        let conditions = self
            .conditions
            .values()
            .filter_map(|(_, changed)| changed.clone());
        moments
            .chain(conditions)
            .chain(self.last_event.clone())
            .fold(None, latest)
    }
}

/// Of two moments with their evidence, the later (the first seen, at the same time).
fn latest(
    known: Option<(Millis, Evidence)>,
    next: (Millis, Evidence),
) -> Option<(Millis, Evidence)> {
    match known {
        Some((at, _)) if at >= next.0 => known,
        _ => Some(next),
    }
}

/// Allowed disagreement between a log line and its container's status before it counts as
/// clock skew: status times are whole seconds, and a runtime stamps a line as it reads it.
const SKEW_ALLOWED: Millis = 2 * SECOND;

/// The observed timeline of `pod` (or, with none, of what the events and logs name).
pub fn observe(pod: Option<&PodRecord>, events: &[EventRecord], logs: &[LogRecord]) -> Observed {
    let mut notes = Vec::new();
    let mut records: Vec<ContainerRecord> =
        pod.map(|pod| pod.containers.clone()).unwrap_or_default();
    // Containers the pod does not list (no pod given): named by logs and events.
    for name in logs
        .iter()
        .map(|log| log.container.as_str())
        .chain(events.iter().filter_map(|event| event.container.as_deref()))
    {
        if !records.iter().any(|record| record.name == name) {
            records.push(ContainerRecord::named(
                name,
                if MESH_INIT.contains(&name) {
                    Placement::Init
                } else {
                    Placement::App
                },
            ));
        }
    }
    let mesh = records
        .iter()
        .find_map(|record| match record.name.as_str() {
            "istio-proxy" | "istio-init" | "istio-validation" => Some(Mesh::Istio),
            "linkerd-proxy" | "linkerd-init" | "linkerd-network-validator" => Some(Mesh::Linkerd),
            _ => None,
        })
        .or_else(|| pod.and_then(injected_by_annotation));
    let deleted = pod
        .and_then(|pod| pod.deleted.as_ref())
        .map(|(at, _)| Bound::at(*at, STATUS_PRECISION));
    let mut containers: Vec<ContainerTimeline> = records
        .iter()
        .map(|record| timeline_of(record, mesh, events, logs, &mut notes))
        .collect();
    let clock_skew_ms = skew(&containers, logs, &mut notes);
    bound_readiness(&mut containers, pod, events);
    let origin = containers
        .iter()
        .flat_map(|container| {
            container
                .started
                .iter()
                .chain(container.moments.iter().map(|moment| &moment.at))
                .filter_map(Bound::point)
                .collect::<Vec<_>>()
        })
        .min();
    let (grace_seconds, grace_source) = match pod.and_then(|pod| pod.grace_seconds) {
        Some(seconds) if pod.is_some_and(|pod| pod.final_deletion) => (
            Some(seconds),
            "the pod's own (its deletionGracePeriodSeconds of 0 is the kubelet's final \
             deletion once its containers had stopped)"
                .to_string(),
        ),
        Some(seconds) => (Some(seconds), "the pod's own".to_string()),
        None if pod.is_some_and(|pod| pod.object.is_some()) => (
            Some(30),
            "Kubernetes' default (the pod sets none)".to_string(),
        ),
        None => (
            None,
            "not in the data (describe shows it only while the pod terminates)".to_string(),
        ),
    };
    Observed {
        pod: pod.map_or_else(|| "the pod".to_string(), PodRecord::title),
        mesh,
        batch: pod.and_then(|pod| {
            (pod.owner.is_some() || pod.restart_policy.is_some()).then(|| pod.is_batch())
        }),
        // Without the pod's object, a container beside the proxy is enough: a waypoint's pod
        // runs the proxy alone.
        waypoint: pod.and_then(PodRecord::is_waypoint).or_else(|| {
            records
                .iter()
                .any(|record| record.placement == Placement::App && record.name != "istio-proxy")
                .then_some(false)
        }),
        grace_seconds,
        grace_source,
        grace_evidence: pod.and_then(|pod| pod.grace_evidence.clone()),
        deleted,
        containers,
        clock_skew_ms,
        origin,
        // Container blocks alone are no pod's status: its other containers are not known.
        has_status: pod.is_some_and(|pod| !pod.only_container_blocks),
        has_spec: pod.is_some_and(|pod| pod.object.is_some()),
        pod_ready: pod
            .and_then(|pod| pod.conditions.get("Ready"))
            .map(|(status, _)| status.clone()),
        pod_ready_changed: pod.and_then(|pod| pod.conditions.get("Ready")).and_then(
            |(status, changed)| {
                let (at, evidence) = changed.as_ref()?;
                Some(moment(
                    MomentKind::Ready,
                    Bound::at(*at, STATUS_PRECISION),
                    &format!("the pod's Ready condition turned {status}"),
                    Evidence {
                        text: Some(format!("Ready {status}")),
                        ..evidence.clone()
                    },
                ))
            },
        ),
        containers_complete: pod.is_some_and(|pod| pod.containers_complete),
        notes,
        phase: pod.and_then(|pod| {
            let phase = pod.phase.clone()?;
            Some((
                phase.clone(),
                Evidence {
                    text: Some(phase),
                    ..Evidence::field(
                        &pod.evidence.file,
                        &pod.evidence.field.as_ref().map_or_else(
                            || "status.phase".to_string(),
                            |prefix| format!("{prefix}.status.phase"),
                        ),
                    )
                },
            ))
        }),
        conditions: pod.map(|pod| pod.conditions.clone()).unwrap_or_default(),
        helpers: pod.and_then(pod::helpers_named_by_the_rule),
        read_at: None,
        last_event: events
            .iter()
            .filter_map(|event| Some((event.last.or(event.first)?, event.evidence.clone())))
            .fold(None, latest),
    }
}

/// The injectors' own marks on a pod they injected: Istio's `sidecar.istio.io/status`,
/// Linkerd's `linkerd.io/proxy-version`.
fn injected_by_annotation(pod: &PodRecord) -> Option<Mesh> {
    if pod.annotations.contains_key("sidecar.istio.io/status") {
        Some(Mesh::Istio)
    } else if pod.annotations.contains_key("linkerd.io/proxy-version")
        || pod.annotations.get("linkerd.io/inject").map(String::as_str) == Some("enabled")
    {
        Some(Mesh::Linkerd)
    } else {
        None
    }
}

fn role_of(record: &ContainerRecord, mesh: Option<Mesh>) -> Role {
    if mesh.is_some_and(|mesh| mesh.proxy_name() == record.name) {
        Role::Proxy
    } else if MESH_INIT.contains(&record.name.as_str()) {
        Role::MeshInit
    } else if record.placement == Placement::Init {
        Role::Init
    } else {
        Role::App
    }
}

fn timeline_of(
    record: &ContainerRecord,
    mesh: Option<Mesh>,
    events: &[EventRecord],
    logs: &[LogRecord],
    notes: &mut Vec<String>,
) -> ContainerTimeline {
    let role = role_of(record, mesh);
    let status = |at: &Option<(Millis, Evidence)>| {
        at.as_ref().map(|(at, _)| Bound::at(*at, STATUS_PRECISION))
    };
    let mut moments = Vec::new();
    let (mut started, mut finished, mut exit_code, mut reason, mut running, mut waiting) =
        (None, None, None, None, false, false);
    match &record.state {
        State::Running { started: at } => {
            started = status(at);
            running = true;
            if let Some((_, evidence)) = at {
                moments.push(moment(
                    MomentKind::Started,
                    status(at).unwrap_or_default(),
                    "started (status)",
                    evidence.clone(),
                ));
            }
        }
        State::Terminated(termination) => {
            started = status(&termination.started);
            finished = status(&termination.finished);
            exit_code = termination.exit_code;
            reason = termination.reason.clone();
            if let Some((_, evidence)) = &termination.started {
                moments.push(moment(
                    MomentKind::Started,
                    status(&termination.started).unwrap_or_default(),
                    "started (status)",
                    evidence.clone(),
                ));
            }
            moments.push(moment(
                MomentKind::Terminated,
                finished.unwrap_or_default(),
                &format!(
                    "terminated: {} (exit {})",
                    termination.reason.as_deref().unwrap_or("no reason given"),
                    termination
                        .exit_code
                        .map_or_else(|| "code not given".to_string(), |code| code.to_string())
                ),
                termination.finished.as_ref().map_or_else(
                    || termination.evidence.clone(),
                    |(_, evidence)| evidence.clone(),
                ),
            ));
        }
        State::Waiting { reason: why, .. } => {
            waiting = true;
            reason = why.clone();
        }
        State::Unknown => {}
    }
    if let Some(State::Terminated(earlier)) = &record.last_state {
        moments.push(moment(
            MomentKind::EarlierRunEnded,
            status(&earlier.finished).unwrap_or_default(),
            &format!(
                "an earlier run ended: {} (exit {})",
                earlier.reason.as_deref().unwrap_or("no reason given"),
                earlier
                    .exit_code
                    .map_or_else(|| "code not given".to_string(), |code| code.to_string())
            ),
            earlier.evidence.clone(),
        ));
    }
    for event in events
        .iter()
        .filter(|event| event.container.as_deref() == Some(&record.name))
    {
        let at = Bound::between(
            event.first,
            event.last.map(|last| last + STATUS_PRECISION - 1),
        );
        let kind = match event.reason.as_str() {
            "Started" => Some(MomentKind::Started),
            // The kubelet stops a container whose postStart hook failed with this message
            // (kuberuntime_container.go startContainer; describe puts the field path before
            // it): that is no shutdown of the pod.
            "Killing" if event.message.ends_with("FailedPostStartHook") => {
                Some(MomentKind::PostStartHookFailed)
            }
            "FailedPostStartHook" => Some(MomentKind::PostStartHookFailed),
            "FailedPreStopHook" => Some(MomentKind::PreStopHookFailed),
            "Killing" => Some(MomentKind::Sigterm),
            "Unhealthy"
                if event.message.contains("Readiness probe")
                    || event.message.contains("Startup probe") =>
            {
                Some(MomentKind::ProbeFailed)
            }
            "BackOff" => Some(MomentKind::EarlierRunEnded),
            _ => None,
        };
        if let Some(kind) = kind {
            let what = if event.count > 1 {
                format!(
                    "{} ({} times): {}",
                    event.reason, event.count, event.message
                )
            } else {
                format!("{}: {}", event.reason, event.message)
            };
            moments.push(Moment {
                count: Some(event.count),
                ..moment(kind, at, &what, event.evidence.clone())
            });
        }
        if event.reason == "Started" && started.is_none() {
            started = event.first.map(|first| Bound::at(first, STATUS_PRECISION));
        }
    }
    let sigterm = moments
        .iter()
        .filter(|moment| moment.kind == MomentKind::Sigterm)
        .map(|moment| moment.at)
        .next();
    let proxy_patterns = match (role, mesh) {
        (Role::Proxy, Some(Mesh::Istio)) => Some(patterns::ISTIO),
        (Role::Proxy, Some(Mesh::Linkerd)) => Some(patterns::LINKERD),
        _ => None,
    };
    let mut has_log = false;
    let mut first_line = None;
    for log in logs.iter().filter(|log| log.container == record.name) {
        has_log = true;
        let first = log
            .lines
            .iter()
            .find_map(|line| line.at.map(|at| (at, line)));
        let first_timed = first.map(|(at, _)| at);
        // Of a current and a previous log, the earlier.
        if let Some((at, line)) = first
            && first_line
                .as_ref()
                .is_none_or(|known: &Moment| known.at.earliest.is_none_or(|known| at < known))
        {
            first_line = Some(moment(
                MomentKind::Started,
                Bound::at(at, 1),
                "first log line",
                Evidence::line(&log.file, line.number, &line.raw),
            ));
        }
        if let (Some(first), Some(bound)) = (first_timed, started.as_mut())
            && bound.latest.is_none_or(|latest| first < latest)
            && bound.earliest.is_none_or(|earliest| first >= earliest)
        {
            // Its first line is an upper bound on its start, often closer than the status's second.
            bound.latest = Some(first);
        }
        if started.is_none() {
            started = first_timed.map(|first| Bound::between(None, Some(first)));
        }
        for line in &log.lines {
            // Only an app's own lines say it serves: the proxy's listeners are not the app's.
            if role == Role::App
                && patterns::serving(&line.text)
                && let Some(at) = line.at
            {
                moments.push(moment(
                    MomentKind::Serving,
                    Bound::at(at, 1),
                    "serving",
                    Evidence::line(&log.file, line.number, &line.raw),
                ));
            }
            let Some((signal, source)) = patterns::signal_of(&line.text, proxy_patterns) else {
                continue;
            };
            let at = match (line.at, line.uptime, started) {
                (Some(at), _, _) => Bound::at(at, 1),
                // The Linkerd proxy's uptime counts from its process's start, in its container's.
                (None, Some(uptime), Some(start)) => Bound::between(
                    start
                        .earliest
                        .and_then(|earliest| earliest.checked_add(uptime)),
                    start.latest.and_then(|latest| latest.checked_add(uptime)),
                ),
                _ => Bound::default(),
            };
            let kind = match signal {
                Signal::ProxyStarting => MomentKind::ProxyStarting,
                Signal::ProxyNotReady => MomentKind::ProbeFailed,
                Signal::ProxyReady => MomentKind::ProxyReady,
                Signal::ProxyDraining => MomentKind::ProxyDraining,
                Signal::ProxyExiting => MomentKind::ProxyExiting,
                Signal::ConnectionError => MomentKind::ConnectionError,
                Signal::StreamCut => MomentKind::StreamCut,
            };
            let drain = (signal == Signal::ProxyDraining && mesh == Some(Mesh::Istio))
                .then(|| patterns::drain_detail(&line.text))
                .flatten();
            let what = match drain {
                Some(DrainDetail::Planned(length)) => {
                    format!("proxy draining, for {} as planned", clock::span(length))
                }
                // Envoy's own line: the proxy stops, whatever its drain.
                Some(DrainDetail::EnvoySigterm) => "Envoy caught SIGTERM".to_string(),
                None => signal.phrase().to_string(),
            };
            moments.push(Moment {
                kind,
                at,
                what,
                evidence: Evidence::line(&log.file, line.number, &line.raw),
                pattern_source: source,
                count: None,
                drain,
            });
        }
    }
    if role == Role::Proxy && !has_log {
        notes.push(format!(
            "no log of {} given: its own moments (ready, draining, exiting) are bounded by the \
             status and events only (`kubectl logs POD -c {} --timestamps`)",
            record.name, record.name
        ));
    }
    let ready = moments
        .iter()
        .find(|moment| moment.kind == MomentKind::ProxyReady && moment.at.point().is_some())
        .map(|moment| moment.at);
    // Stable: moments at the same time (or with none) keep the order they were read in.
    moments.sort_by_key(|moment| moment.at.point().unwrap_or(i64::MAX));
    ContainerTimeline {
        name: record.name.clone(),
        role,
        native_sidecar: record.placement == Placement::Sidecar,
        started,
        ready,
        sigterm,
        finished,
        exit_code,
        reason,
        running,
        waiting,
        restarts: record.restarts,
        restarts_evidence: record.restarts_evidence.clone(),
        restart_rules: record.restart_rules.clone(),
        log: has_log,
        first_line,
        post_start: record.post_start.clone(),
        startup_probe: record.startup_probe.clone(),
        pre_stop: record.pre_stop.clone(),
        pre_stop_delay: record.pre_stop_delay,
        readiness_probe: record.readiness_probe.clone(),
        ports: record.ports.clone(),
        spec: record.spec.clone(),
        index: record.index,
        moments,
    }
}

fn moment(kind: MomentKind, at: Bound, what: &str, evidence: Evidence) -> Moment {
    Moment {
        kind,
        at,
        what: what.to_string(),
        evidence,
        pattern_source: None,
        count: None,
        drain: None,
    }
}

/// Where a container's log starts before its status says it started (or runs on after it
/// ended) by more than [`SKEW_ALLOWED`], the two clocks disagree: said, and returned as the
/// margin every comparison across sources keeps.
fn skew(containers: &[ContainerTimeline], logs: &[LogRecord], notes: &mut Vec<String>) -> Millis {
    let mut most = 0;
    for container in containers {
        for log in logs.iter().filter(|log| log.container == container.name) {
            let timed: Vec<Millis> = log.lines.iter().filter_map(|line| line.at).collect();
            let (Some(&first), Some(&last)) = (timed.first(), timed.last()) else {
                continue;
            };
            let early = container
                .started
                .and_then(|started| started.earliest)
                .map_or(0, |earliest| earliest - first);
            let late = container
                .finished
                .and_then(|finished| finished.latest)
                .map_or(0, |latest| last - latest);
            let off = early.max(late);
            if off > SKEW_ALLOWED {
                notes.push(format!(
                    "{}: the log of {} {} by {}: the log's clock and the pod's status disagree, \
                     so no moment from one is compared with the other closer than that",
                    log.file,
                    container.name,
                    if early >= late {
                        "starts before its container started by its status"
                    } else {
                        "runs on after its container finished by its status"
                    },
                    clock::span(off)
                ));
                most = most.max(off);
            }
        }
    }
    most
}

/// A proxy with no ready line of its own: bounded by the status. Its readiness probe failing at
/// a moment puts readiness after it; the pod's `ContainersReady` turning True (with every
/// container ready, so the proxy too) puts it before that transition.
fn bound_readiness(
    containers: &mut [ContainerTimeline],
    pod: Option<&PodRecord>,
    _events: &[EventRecord],
) {
    let all_ready = pod
        .and_then(|pod| pod.conditions.get("ContainersReady"))
        .filter(|(status, _)| status == "True")
        .and_then(|(_, changed)| changed.as_ref().map(|(at, _)| *at));
    for container in containers
        .iter_mut()
        .filter(|container| container.role == Role::Proxy)
    {
        if container.ready.is_some() {
            continue;
        }
        // Failures once the pod is stopping say nothing of its startup.
        let stopping = container
            .moments
            .iter()
            .filter(|moment| matches!(moment.kind, MomentKind::Sigterm | MomentKind::ProxyDraining))
            .filter_map(|moment| moment.at.earliest)
            .chain(pod.and_then(|pod| pod.deleted.as_ref()).map(|(at, _)| *at))
            .min();
        let failed_last = container
            .moments_of(MomentKind::ProbeFailed)
            .filter_map(|moment| moment.at.latest)
            .filter(|at| stopping.is_none_or(|stopping| *at < stopping))
            .max();
        let earliest = match (
            container.started.and_then(|started| started.earliest),
            failed_last,
        ) {
            (Some(started), Some(failed)) => Some(started.max(failed)),
            (started, failed) => started.or(failed),
        };
        let latest = all_ready.map(|at| at + STATUS_PRECISION - 1);
        if earliest.is_some() || latest.is_some() {
            container.ready = Some(Bound::between(earliest, latest));
        }
    }
}
