//! A workload's startup and shutdown as a timeline: when each container starts and stops, when
//! the proxy is ready, when SIGTERM lands, when the endpoint leaves the rotation, when the drain
//! ends, when the kubelet kills what is left; and what happens to each kind of request.
//!
//! Computed from the same typed view and mesh decision the rules read (`mesh::decide`,
//! `MeshDecision`, the preStop reading of `rules::prestop_delay_seconds`), so a timeline cannot
//! tell another story than the findings. Figures no manifest holds (how long the proxy takes to
//! be ready, how long the endpoint takes to leave every load balancer) are [`Assumptions`] with
//! documented defaults; every figure says where it comes from.
//!
//! Times are milliseconds: startup from the pod's start (its sandbox ready, t = 0), shutdown
//! from the pod's deletion (t = 0, when the kubelet runs preStop hooks and sends SIGTERM).
//!
//! Built in phases, one file each: `startup` (init containers, proxy, apps), `shutdown` (the
//! pod's deletion, the apps' preStop and exit), `proxy_shutdown` (each mesh's drain and exit),
//! `shutdown_fates` (what happens to each kind of request); `completion` is a batch pod's end and
//! `anchor` places a rule's finding on the picture.

mod anchor;
mod completion;
mod proxy_shutdown;
mod shutdown;
mod shutdown_fates;
mod startup;

use serde::Serialize;

use crate::evaluate::{Read, with_exact_reading};
use crate::input::Container;
use crate::mesh::{Decision, MeshDecision, NotMeshed, Placement};
use crate::params::Settings;
use crate::workload::Workload;

pub use anchor::Anchor;
use completion::completion;

/// The figures no manifest holds.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assumptions {
    /// From the proxy's start to its readiness (Envoy's first configuration from istiod, the
    /// Linkerd proxy's identity and first profile).
    pub proxy_ready_ms: u64,
    /// How long each user init container runs.
    pub init_container_ms: u64,
    /// From the app's start to its readiness.
    pub app_ready_ms: u64,
    /// From the pod's deletion until no load balancer (kube-proxy, ingress, other proxies'
    /// endpoints) sends it new requests.
    pub endpoint_removal_ms: u64,
    /// From SIGTERM to the app's exit, when it shuts down on its own.
    pub app_exit_ms: u64,
    /// How long a short request takes.
    pub short_request_ms: u64,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            proxy_ready_ms: 2_000,
            init_container_ms: 1_000,
            app_ready_ms: 3_000,
            endpoint_removal_ms: 3_000,
            app_exit_ms: 1_000,
            short_request_ms: 500,
        }
    }
}

/// Where a figure comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "camelCase")]
pub enum Source {
    /// A field of the manifest (its path).
    Manifest(String),
    /// A constraint parameter (its name).
    Parameter(String),
    /// Kubernetes' or the mesh's documented default (which, and its value).
    Default(String),
    /// One of the [`Assumptions`] (its name).
    Assumption(String),
    /// Follows from other events.
    Derived(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    Startup,
    Shutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    InitContainer,
    CaptureInstalled,
    ProxyStarted,
    ProxyReady,
    AppStarted,
    AppReady,
    Sigterm,
    EndpointRemoved,
    PreStop,
    DrainStart,
    /// A classic Istio proxy's inbound listeners close (drainDuration) before it exits.
    ListenersClosed,
    DrainEnd,
    AppExit,
    ProxyExit,
    Sigkill,
}

/// One moment (or range: `until_ms`) of the timeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub phase: Phase,
    pub kind: EventKind,
    pub at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    pub what: String,
    pub source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// A user init container.
    Init,
    /// The mesh's capture or validation init container.
    MeshInit,
    Proxy,
    App,
}

/// One container's bar: when it runs at startup and at shutdown.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    pub container: String,
    pub role: Role,
    /// Not in the spec: the injector will add it.
    pub predicted: bool,
    /// Runs from, until (`None`: keeps running past the startup picture).
    pub startup: Option<(u64, Option<u64>)>,
    /// Runs until (from the deletion at 0); `None` for containers that ended at startup.
    pub shutdown_exit_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Request {
    /// The app's outbound calls as it starts.
    StartupOutbound,
    /// A short request in flight when SIGTERM lands.
    InFlightAtSigterm,
    /// A new request routed to the pod while its endpoint is still being removed.
    NewDuringDrain,
    /// A gRPC stream or WebSocket open at SIGTERM.
    LongLivedStream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Served,
    /// Refused before any work is done (connection refused, a 503 from the proxy): a client
    /// may retry safely.
    Refused,
    /// Broken mid-way (reset, SIGKILL).
    Cut,
}

/// What happens to one kind of request, and when.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fate {
    pub request: Request,
    pub phase: Phase,
    pub outcome: Outcome,
    /// When the outcome happens (a window for refusals, the moment of a cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<(u64, u64)>,
    pub why: String,
}

/// A workload's timeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// `istio` or `linkerd`; `None` when the pod is not meshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<&'static str>,
    /// "classic", "classic with hold", "native", "not meshed: ...".
    pub mode: String,
    pub injected: bool,
    pub grace_ms: u64,
    pub lanes: Vec<Lane>,
    pub events: Vec<Event>,
    pub fates: Vec<Fate>,
    /// A batch pod (Job, CronJob, ...): whether it completes once its apps finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    pub assumptions: Assumptions,
}

/// What happens when a batch pod's apps finish their work.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub completes: bool,
    pub why: String,
}

impl Timeline {
    /// The end of the startup picture: the last app's readiness.
    pub fn startup_end_ms(&self) -> u64 {
        self.phase_end(Phase::Startup)
    }

    /// The end of the shutdown picture: the last exit, at most the SIGKILL.
    pub fn shutdown_end_ms(&self) -> u64 {
        self.phase_end(Phase::Shutdown)
    }

    /// When the kubelet's SIGKILL comes: the grace period, or later where a preStop used it
    /// up (the kubelet's two seconds after SIGTERM).
    pub fn sigkill_ms(&self) -> u64 {
        self.events_of(Phase::Shutdown)
            .filter(|event| event.kind == EventKind::Sigkill)
            .map(|event| event.at_ms)
            .max()
            .unwrap_or(self.grace_ms)
    }

    fn phase_end(&self, phase: Phase) -> u64 {
        self.events
            .iter()
            .filter(|event| event.phase == phase)
            .map(|event| event.until_ms.unwrap_or(event.at_ms))
            .max()
            .unwrap_or(0)
    }

    pub fn events_of(&self, phase: Phase) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |event| event.phase == phase)
    }
}

/// One pod spec's timeline, and where the pod spec is in the object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecTimeline {
    /// e.g. `spec.template.spec`.
    pub path: String,
    pub timeline: Timeline,
}

/// The timelines of every pod spec in `input` (the same Gatekeeper-shaped input `evaluate`
/// reads); none for an object without pod specs to judge. An input the policy cannot read is
/// the error its ML000 would give.
pub fn timelines(input: &[u8], assumptions: &Assumptions) -> Result<Vec<PodSpecTimeline>, String> {
    with_exact_reading(input, |reading| match reading {
        Err(error) => Err(format!("{}: {}", error.path, error.problem)),
        // A NetworkPolicy has no pod of its own, so no lifecycle to draw.
        Ok(Read::NotReviewed(_) | Read::NetworkPolicy(..)) => Ok(Vec::new()),
        Ok(Read::Workloads(workloads, settings)) => Ok(workloads
            .iter()
            .map(|workload| PodSpecTimeline {
                path: workload.spec_path().to_string(),
                timeline: timeline(workload, &settings, assumptions),
            })
            .collect()),
    })
}

/// The timeline of `workload` under `settings`.
pub fn timeline(workload: &Workload, settings: &Settings, assumptions: &Assumptions) -> Timeline {
    let decided = crate::mesh::decide(workload, settings);
    let mode = match &decided {
        Decision::Gateway => "an Istio gateway: the proxy is the workload".to_string(),
        // Meshed, but not by a proxy in the pod: no sidecar rule applies.
        Decision::NotMeshed(NotMeshed::Ambient { .. }) => {
            "Istio ambient: no proxy in the pod (ztunnel captures its traffic before its first \
             container starts), so no sidecar rule applies"
                .to_string()
        }
        Decision::NotMeshed(reason) => format!("not meshed: {}", not_meshed_phrase(reason)),
        Decision::Meshed(decision) => match decision.placement {
            Placement::Native => "native sidecar".to_string(),
            Placement::Classic { hold: true } => "classic sidecar, app held until ready".into(),
            Placement::Classic { hold: false } => "classic sidecar".to_string(),
            Placement::BrokenInit => "proxy in initContainers without restartPolicy: Always \
                                      (the pod never starts)"
                .to_string(),
        },
    };
    let gateway = matches!(decided, Decision::Gateway);
    let decision = match decided {
        Decision::Meshed(decision) => Some(decision),
        Decision::Gateway | Decision::NotMeshed(_) => None,
    };
    let mut builder = Builder {
        workload,
        settings,
        gateway,
        decision: decision.as_deref(),
        assumptions,
        events: Vec::new(),
        lanes: Vec::new(),
        fates: Vec::new(),
    };
    builder.startup();
    let grace_ms = builder.shutdown();
    let completion = workload
        .is_batch()
        .then(|| completion(workload, settings, decision.as_deref()));
    Timeline {
        mesh: decision.as_ref().map(|decision| decision.mesh.as_str()),
        mode,
        injected: decision.as_ref().is_some_and(|decision| decision.injected),
        grace_ms,
        lanes: builder.lanes,
        events: builder.events,
        fates: builder.fates,
        completion,
        assumptions: assumptions.clone(),
    }
}

fn not_meshed_phrase(reason: &NotMeshed) -> String {
    match reason {
        NotMeshed::NoMeshSignal {
            namespace_unknown: true,
            ..
        } => "the namespace is unknown and nothing on the pod asks for a proxy".into(),
        NotMeshed::NoMeshSignal { .. } => "nothing asks for a proxy".into(),
        NotMeshed::OptedOut { key, value, .. } => format!("{key}: {value}"),
        NotMeshed::NamespaceInjectionDisabled { key, .. } => format!("{key}: disabled"),
        NotMeshed::HostNetwork => "hostNetwork: true".into(),
        NotMeshed::SystemNamespace { namespace } => format!("{namespace} is never injected"),
        NotMeshed::Ambient { .. } => "Istio ambient, no in-pod proxy".into(),
        NotMeshed::CustomTemplate { templates } => {
            format!("inject.istio.io/templates {templates} names no sidecar template")
        }
        NotMeshed::AnnotationOnlyInjectRequest { .. } => {
            "an inject annotation alone, in a namespace without injection".into()
        }
    }
}

struct Builder<'w, 'a> {
    workload: &'w Workload<'w>,
    settings: &'a Settings,
    /// An Istio gateway or waypoint: its istio-proxy is the workload, and drains as one.
    gateway: bool,
    decision: Option<&'a MeshDecision>,
    assumptions: &'a Assumptions,
    events: Vec<Event>,
    lanes: Vec<Lane>,
    fates: Vec<Fate>,
}

fn assumption(name: &str) -> Source {
    Source::Assumption(name.into())
}

fn seconds_ms(seconds: i64) -> u64 {
    (seconds.max(0) as u64).saturating_mul(1000)
}

impl Builder<'_, '_> {
    fn event(
        &mut self,
        phase: Phase,
        kind: EventKind,
        (at_ms, until_ms): (u64, Option<u64>),
        container: Option<&str>,
        what: String,
        source: Source,
    ) {
        self.events.push(Event {
            phase,
            kind,
            at_ms,
            until_ms,
            container: container.map(str::to_string),
            what,
            source,
        });
    }

    fn proxy_name(&self) -> Option<&'static str> {
        self.decision.map(|decision| decision.mesh.proxy_name())
    }

    /// The pod's app containers: every regular container but the proxy. Unlike the rules'
    /// `Context::app_containers`, exempt images are drawn too: exempt from findings, they still
    /// start and stop.
    fn app_containers(&self) -> Vec<(usize, &Container<'_>)> {
        let proxy = self.proxy_name();
        self.workload
            .spec
            .containers()
            .iter()
            .enumerate()
            .filter(|(_, container)| Some(container.name()) != proxy)
            .collect()
    }
}

/// `1.5s`, `30s`, `250ms`.
pub fn format_seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    }
}
