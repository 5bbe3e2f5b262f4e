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

use serde::Serialize;

use crate::evaluate::{Read, with_exact_reading};
use crate::input::Container;
use crate::mesh::{Decision, LINKERD_WAIT_BEFORE_EXIT, Mesh, MeshDecision, NotMeshed, Placement};
use crate::params::Settings;
use crate::rules::prestop_delay_seconds;
use crate::workload::Workload;

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

    /// Where a finding of `rule` (an id, `ML401`) shows on this timeline: the event or fate
    /// the rule is about, the one of `container` when several match. `None` for a rule with no
    /// place in time (ML000: the input could not be read).
    pub fn anchor_of(&self, rule: &str, container: Option<&str>) -> Option<Anchor> {
        let wanted = places_of_rule(rule)?;
        for place in wanted {
            let found = match place {
                Place::Event(phase, kind) => {
                    let matching = |event: &&Event| event.phase == *phase && event.kind == *kind;
                    let of_container = self.events.iter().position(|event| {
                        matching(&event)
                            && container.is_some()
                            && event.container.as_deref() == container
                    });
                    of_container
                        .or_else(|| self.events.iter().position(|event| matching(&event)))
                        .map(Anchor::Event)
                }
                Place::Fate(request) => self
                    .fates
                    .iter()
                    .position(|fate| fate.request == *request)
                    .map(Anchor::Fate),
                Place::Completion => self.completion.as_ref().map(|_| Anchor::Completion),
                Place::Mode => Some(Anchor::Mode),
            };
            if found.is_some() {
                return found;
            }
        }
        Some(Anchor::Mode)
    }
}

/// Where a finding shows on a [`Timeline`]: an index into `events` or `fates`, the batch
/// pod's completion, or the mesh mode line (for rules about the mode itself, and where the
/// rule's moment is not drawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "at", content = "index", rename_all = "camelCase")]
pub enum Anchor {
    Event(usize),
    Fate(usize),
    Completion,
    Mode,
}

enum Place {
    Event(Phase, EventKind),
    Fate(Request),
    Completion,
    Mode,
}

/// The moments each rule is about, the preferred first (docs/rules.md, "What goes wrong at
/// runtime" of each rule).
fn places_of_rule(rule: &str) -> Option<&'static [Place]> {
    use EventKind::*;
    use Phase::*;
    Some(match rule {
        "ML101" | "ML102" => &[
            Place::Fate(Request::StartupOutbound),
            Place::Event(Startup, AppStarted),
        ],
        "ML103" => &[
            Place::Event(Startup, ProxyReady),
            Place::Fate(Request::StartupOutbound),
        ],
        "ML104" | "ML601" => &[Place::Mode],
        "ML201" | "ML202" => &[
            Place::Event(Startup, InitContainer),
            Place::Event(Startup, CaptureInstalled),
        ],
        "ML301" | "ML302" | "ML303" => &[Place::Completion],
        "ML401" => &[
            Place::Event(Shutdown, DrainEnd),
            Place::Event(Shutdown, Sigkill),
        ],
        "ML402" => &[Place::Event(Shutdown, ProxyExit)],
        "ML403" => &[
            Place::Event(Shutdown, DrainStart),
            Place::Fate(Request::InFlightAtSigterm),
        ],
        "ML404" => &[Place::Fate(Request::LongLivedStream)],
        "ML405" => &[
            Place::Event(Shutdown, PreStop),
            Place::Event(Shutdown, Sigkill),
        ],
        // The replacement pod's readiness is what a rollout waits for.
        "ML501" => &[Place::Event(Startup, AppReady)],
        "ML502" => &[Place::Event(Startup, AppReady)],
        _ => return None,
    })
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
        Ok(Read::NotReviewed(_)) => Ok(Vec::new()),
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
    let decision = match decided {
        Decision::Meshed(decision) => Some(decision),
        Decision::Gateway | Decision::NotMeshed(_) => None,
    };
    let mut builder = Builder {
        workload,
        settings,
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

fn completion(
    workload: &Workload,
    settings: &Settings,
    decision: Option<&MeshDecision>,
) -> Completion {
    let Some(decision) = decision else {
        return Completion {
            completes: true,
            why: "no proxy: the pod completes when its containers exit".into(),
        };
    };
    let proxy = decision.mesh.proxy_name();
    match decision.placement {
        Placement::Native => Completion {
            completes: true,
            why: format!(
                "{proxy} is a native sidecar: the kubelet stops it once the app containers exit"
            ),
        },
        Placement::BrokenInit => Completion {
            completes: false,
            why: format!("{proxy} blocks the init phase: the pod never starts"),
        },
        Placement::Classic { .. } => {
            let context = crate::rules::Context {
                workload,
                decision,
                settings,
            };
            match crate::rules::batch::proxy_exit_call(&context) {
                Some(call) if call.works => Completion {
                    completes: true,
                    why: format!(
                        "{}, so {proxy} exits after the work and the pod completes",
                        call.how
                    ),
                },
                Some(call) => Completion {
                    completes: false,
                    why: format!(
                        "{}, but its shutdown endpoint is disabled: the call fails, {proxy} keeps \
                         running and the pod never completes",
                        call.how
                    ),
                },
                None => Completion {
                    completes: false,
                    why: format!(
                        "the classic {proxy} keeps running after the apps exit: the pod never \
                         completes ({})",
                        match decision.mesh {
                            Mesh::Istio => {
                                "EXIT_ON_ZERO_ACTIVE_CONNECTIONS does not help: it acts only \
                                 after SIGTERM"
                            }
                            Mesh::Linkerd => {
                                "the proxy leaves only on SIGTERM or a call to its /shutdown"
                            }
                        }
                    ),
                },
            }
        }
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

    fn startup(&mut self) {
        let assumptions = self.assumptions.clone();
        let Some(decision) = self.decision else {
            self.startup_without_proxy(&assumptions);
            return;
        };
        let mesh = decision.mesh;
        let proxy = mesh.proxy_name();
        let native = decision.is_native();
        let mut now = 0u64;
        let mut capture_on = false;
        if decision.cni {
            capture_on = true;
            self.event(
                Phase::Startup,
                EventKind::CaptureInstalled,
                (0, None),
                None,
                "traffic capture on (CNI sets it up with the pod's network, before any init \
                 container)"
                    .into(),
                Source::Derived("the mesh's CNI plugin".into()),
            );
        }
        // The init containers in the order they run: the spec's for an injected pod, the
        // injector's for a prediction.
        let mut steps: Vec<(String, Role, bool)> = Vec::new();
        let inits = self.workload.spec.init_containers();
        let redirect = match mesh {
            Mesh::Istio => "istio-init",
            Mesh::Linkerd => "linkerd-init",
        };
        if decision.injected {
            for container in inits {
                let name = container.name();
                let role = if name == proxy {
                    Role::Proxy
                } else if Mesh::owns_init_container(name) {
                    Role::MeshInit
                } else if container.is_restartable_init() {
                    continue;
                } else {
                    Role::Init
                };
                steps.push((name.to_string(), role, false));
            }
        } else {
            let user: Vec<(String, Role, bool)> = inits
                .iter()
                .filter(|container| !container.is_restartable_init())
                .map(|container| (container.name().to_string(), Role::Init, false))
                .collect();
            let mesh_init = (!decision.cni).then(|| (redirect.to_string(), Role::MeshInit, true));
            if native {
                steps.extend(mesh_init);
                steps.push((proxy.to_string(), Role::Proxy, true));
                steps.extend(user);
            } else {
                // Istio's injector moves istio-init last; Linkerd's appends linkerd-init.
                steps.extend(user);
                steps.extend(mesh_init);
            }
        }
        let uid = mesh.proxy_uid(self.settings);
        let mut proxy_ready = None;
        for (name, role, predicted) in steps {
            match role {
                Role::Proxy => {
                    let ready = now + assumptions.proxy_ready_ms;
                    self.proxy_lane(&name, predicted, now);
                    self.proxy_start_events(now, ready, decision);
                    if decision.placement == Placement::BrokenInit {
                        // A regular init container must exit before the next starts; the proxy
                        // never does, so nothing after it runs (ML104).
                        self.fates.push(Fate {
                            request: Request::StartupOutbound,
                            phase: Phase::Startup,
                            outcome: Outcome::Refused,
                            window: None,
                            why: format!(
                                "the apps never start: Kubernetes waits for {name}, a regular \
                                 init container without restartPolicy: Always, to exit, and it \
                                 never does; the pod never becomes ready"
                            ),
                        });
                        return;
                    }
                    proxy_ready = Some(ready);
                    if decision.proxy_gates_app_start(self.workload) {
                        now = ready;
                    }
                }
                Role::MeshInit => {
                    let end = now + assumptions.init_container_ms;
                    self.lanes.push(Lane {
                        container: name.clone(),
                        role,
                        predicted,
                        startup: Some((now, Some(end))),
                        shutdown_exit_ms: None,
                    });
                    if name == redirect {
                        capture_on = true;
                        self.event(
                            Phase::Startup,
                            EventKind::CaptureInstalled,
                            (now, Some(end)),
                            Some(&name),
                            format!("{name} installs traffic capture (iptables)"),
                            assumption("initContainerMs"),
                        );
                    }
                    now = end;
                }
                _ => {
                    let container = inits.iter().find(|c| c.name() == name);
                    let bypasses = container
                        .and_then(|c| c.run_as_user())
                        .or_else(|| {
                            self.workload
                                .spec
                                .security_context
                                .as_ref()
                                .and_then(|context| context.run_as_user)
                        })
                        .is_some_and(|user| user == uid);
                    let network = if capture_on && proxy_ready.is_none() && !bypasses {
                        "no network: capture is on and no proxy runs yet"
                    } else if capture_on && bypasses {
                        "network direct: runs as the proxy's UID, which capture skips"
                    } else if proxy_ready.is_some() {
                        "network through the proxy"
                    } else {
                        "network direct: capture is not on yet"
                    };
                    now = self.init_step(&name, role, predicted, now, format!(" ({network})"));
                }
            }
        }
        // The regular containers start together, in spec order; a classic proxy with the hold
        // hook holds the later ones in its postStart until it is ready.
        let apps_start = if decision.is_classic() {
            let ready = now + assumptions.proxy_ready_ms;
            self.proxy_lane(proxy, !decision.injected, now);
            self.proxy_start_events(now, ready, decision);
            proxy_ready = Some(ready);
            if decision.proxy_gates_app_start(self.workload) {
                ready
            } else {
                now
            }
        } else {
            now
        };
        let app_names = self.app_startup(apps_start, &assumptions);
        let ready = proxy_ready.unwrap_or(apps_start);
        if apps_start < ready {
            self.fates.push(Fate {
                request: Request::StartupOutbound,
                phase: Phase::Startup,
                outcome: Outcome::Refused,
                window: Some((apps_start, ready)),
                why: format!(
                    "{} {} before {proxy} is ready: outbound calls fail (connection refused or \
                     503) until it is",
                    app_names.join(", "),
                    if app_names.len() == 1 {
                        "starts"
                    } else {
                        "start"
                    }
                ),
            });
        } else {
            let gate = match decision.placement {
                Placement::Native => "its startupProbe holds them until it is ready",
                _ => "its postStart hook holds them until it is ready",
            };
            self.fates.push(Fate {
                request: Request::StartupOutbound,
                phase: Phase::Startup,
                outcome: Outcome::Served,
                window: None,
                why: format!("the apps start after {proxy}: {gate}"),
            });
        }
    }

    /// A user init container run from `start`; returns when it ends. `note` follows its name.
    fn init_step(
        &mut self,
        name: &str,
        role: Role,
        predicted: bool,
        start: u64,
        note: String,
    ) -> u64 {
        let end = start + self.assumptions.init_container_ms;
        self.lanes.push(Lane {
            container: name.to_string(),
            role,
            predicted,
            startup: Some((start, Some(end))),
            shutdown_exit_ms: None,
        });
        self.event(
            Phase::Startup,
            EventKind::InitContainer,
            (start, Some(end)),
            Some(name),
            format!("init container {name}{note}"),
            assumption("initContainerMs"),
        );
        end
    }

    fn proxy_lane(&mut self, name: &str, predicted: bool, start: u64) {
        self.lanes.push(Lane {
            container: name.to_string(),
            role: Role::Proxy,
            predicted,
            startup: Some((start, None)),
            shutdown_exit_ms: None,
        });
    }

    fn proxy_start_events(&mut self, start: u64, ready: u64, decision: &MeshDecision) {
        let proxy = decision.mesh.proxy_name();
        self.event(
            Phase::Startup,
            EventKind::ProxyStarted,
            (start, None),
            Some(proxy),
            format!("{proxy} starts"),
            Source::Derived("after the init containers before it".into()),
        );
        self.event(
            Phase::Startup,
            EventKind::ProxyReady,
            (ready, None),
            Some(proxy),
            format!("{proxy} ready"),
            assumption("proxyReadyMs"),
        );
    }

    /// The app containers' startup from `start`; their names.
    fn app_startup(&mut self, start: u64, assumptions: &Assumptions) -> Vec<String> {
        let apps: Vec<(String, bool)> = self
            .app_containers()
            .iter()
            .map(|(_, container)| {
                let probed = container.has_readiness_probe || container.has_startup_probe;
                (container.name().to_string(), probed)
            })
            .collect();
        let names: Vec<String> = apps.iter().map(|(name, _)| name.clone()).collect();
        for (name, probed) in &apps {
            // Without a probe the kubelet counts the container ready the moment it runs (ML502).
            let (ready, what, source) = if *probed {
                (
                    start + assumptions.app_ready_ms,
                    format!("{name} ready"),
                    assumption("appReadyMs"),
                )
            } else {
                (
                    start,
                    format!(
                        "{name} counts as ready at once: it has no readinessProbe, so it gets \
                         traffic as soon as it runs"
                    ),
                    Source::Default(
                        "Kubernetes: a container without a readinessProbe is ready once started"
                            .into(),
                    ),
                )
            };
            self.lanes.push(Lane {
                container: name.clone(),
                role: Role::App,
                predicted: false,
                startup: Some((start, None)),
                shutdown_exit_ms: None,
            });
            self.event(
                Phase::Startup,
                EventKind::AppStarted,
                (start, None),
                Some(name),
                format!("{name} starts"),
                Source::Derived("after the init containers and any proxy gate".into()),
            );
            self.event(
                Phase::Startup,
                EventKind::AppReady,
                (ready, None),
                Some(name),
                what,
                source,
            );
        }
        names
    }

    fn startup_without_proxy(&mut self, assumptions: &Assumptions) {
        let mut now = 0;
        let inits: Vec<String> = self
            .workload
            .spec
            .init_containers()
            .iter()
            .filter(|container| !container.is_restartable_init())
            .map(|container| container.name().to_string())
            .collect();
        for name in inits {
            now = self.init_step(&name, Role::Init, false, now, String::new());
        }
        self.app_startup(now, assumptions);
    }

    /// The shutdown events and fates; returns the grace period in ms.
    fn shutdown(&mut self) -> u64 {
        let assumptions = self.assumptions.clone();
        let spec = &self.workload.spec;
        let grace_ms = seconds_ms(spec.grace_period_seconds());
        let grace_source = match spec.termination_grace_period_seconds {
            Some(_) => Source::Manifest(self.workload.field_path("terminationGracePeriodSeconds")),
            None => Source::Default("terminationGracePeriodSeconds: Kubernetes' 30 s".into()),
        };
        self.event(
            Phase::Shutdown,
            EventKind::Sigterm,
            (0, None),
            None,
            "pod deleted: preStop hooks run, then SIGTERM to each container".into(),
            Source::Derived("t = 0 of the shutdown".into()),
        );
        if let Some(decision) = self
            .decision
            .filter(|d| d.placement == Placement::BrokenInit)
        {
            self.stuck_init_shutdown(decision.mesh.proxy_name(), grace_ms, grace_source);
            return grace_ms;
        }
        let serves_requests = self.serves_requests();
        if serves_requests {
            self.event(
                Phase::Shutdown,
                EventKind::EndpointRemoved,
                (0, Some(assumptions.endpoint_removal_ms)),
                None,
                "endpoint leaves the Service's rotation (new requests may still arrive until then)"
                    .into(),
                assumption("endpointRemovalMs"),
            );
        }
        // Each app container: preStop, then SIGTERM, then its own shutdown; SIGKILL at grace.
        let mut app_exits = Vec::new();
        let mut app_sigterms = Vec::new();
        let apps: Vec<(usize, String, Option<i64>, bool)> = self
            .app_containers()
            .iter()
            .map(|(index, container)| {
                let pre_stop = container.pre_stop();
                (
                    *index,
                    container.name().to_string(),
                    pre_stop.and_then(prestop_delay_seconds),
                    pre_stop.is_some(),
                )
            })
            .collect();
        for (index, name, delay, has_pre_stop) in &apps {
            let sigterm = match (delay, has_pre_stop) {
                (Some(seconds), _) => {
                    let end = seconds_ms(*seconds).min(grace_ms);
                    self.event(
                        Phase::Shutdown,
                        EventKind::PreStop,
                        (0, Some(end)),
                        Some(name),
                        format!("{name} preStop waits {seconds}s"),
                        Source::Manifest(format!(
                            "{}.lifecycle.preStop",
                            self.workload.container_path(*index)
                        )),
                    );
                    end
                }
                (None, true) => {
                    self.event(
                        Phase::Shutdown,
                        EventKind::PreStop,
                        (0, None),
                        Some(name),
                        format!("{name} preStop runs (its length cannot be read; drawn as 0)"),
                        Source::Manifest(format!(
                            "{}.lifecycle.preStop",
                            self.workload.container_path(*index)
                        )),
                    );
                    0
                }
                (None, false) => 0,
            };
            let exit = (sigterm + assumptions.app_exit_ms).min(grace_ms);
            self.event(
                Phase::Shutdown,
                EventKind::AppExit,
                (exit, None),
                Some(name),
                if exit >= grace_ms && sigterm + assumptions.app_exit_ms > grace_ms {
                    format!("{name} killed at the grace period")
                } else {
                    format!("{name} exits (SIGTERM at {})", format_seconds(sigterm))
                },
                assumption("appExitMs"),
            );
            app_sigterms.push(sigterm);
            app_exits.push(exit);
            if let Some(lane) = self.lanes.iter_mut().find(|lane| lane.container == *name) {
                lane.shutdown_exit_ms = Some(exit);
            }
        }
        let last_app_exit = app_exits.iter().copied().max().unwrap_or(0);
        let first_app_sigterm = app_sigterms.iter().copied().min().unwrap_or(0);
        let proxy_exit = self.proxy_shutdown(grace_ms, last_app_exit);
        self.sigkill_event(grace_ms, grace_source);
        self.shutdown_fates(
            grace_ms,
            first_app_sigterm,
            last_app_exit,
            proxy_exit,
            serves_requests,
            &assumptions,
        );
        grace_ms
    }

    /// Whether anything routes requests to the pod, so that endpoint removal, new requests
    /// during the drain and long-lived streams belong on its timeline. A serving workload
    /// always; a batch pod only when a container declares a port and a Service of the input
    /// selects the pod (a Job that runs to completion has neither).
    fn serves_requests(&self) -> bool {
        let workload = self.workload;
        if !workload.is_batch() {
            return true;
        }
        let declares_port = self
            .app_containers()
            .iter()
            .any(|(_, container)| !container.ports().is_empty());
        let namespace = workload.namespace.as_deref();
        declares_port
            && workload.services.iter().any(|service| {
                (service.namespace.is_none() || service.namespace.as_deref() == namespace)
                    && service.selects(workload.pod_meta.labels.as_ref())
            })
    }

    fn sigkill_event(&mut self, grace_ms: u64, source: Source) {
        self.event(
            Phase::Shutdown,
            EventKind::Sigkill,
            (grace_ms, None),
            None,
            format!(
                "SIGKILL to whatever still runs (terminationGracePeriodSeconds {})",
                grace_ms / 1000
            ),
            source,
        );
    }

    /// The shutdown of a pod stuck at its proxy init container (ML104): only the proxy runs,
    /// and no request ever reached the pod.
    fn stuck_init_shutdown(&mut self, proxy: &'static str, grace_ms: u64, grace_source: Source) {
        let exit = self.assumptions.app_exit_ms.min(grace_ms);
        self.event(
            Phase::Shutdown,
            EventKind::ProxyExit,
            (exit, None),
            Some(proxy),
            format!("{proxy}, still the running init container, exits on SIGTERM"),
            assumption("appExitMs"),
        );
        if let Some(lane) = self.lanes.iter_mut().find(|lane| lane.role == Role::Proxy) {
            lane.shutdown_exit_ms = Some(exit);
        }
        self.sigkill_event(grace_ms, grace_source);
        for request in [
            Request::InFlightAtSigterm,
            Request::NewDuringDrain,
            Request::LongLivedStream,
        ] {
            self.fates.push(Fate {
                request,
                phase: Phase::Shutdown,
                outcome: Outcome::Refused,
                window: None,
                why: "the pod never became ready, so no request was ever sent to it".into(),
            });
        }
    }

    /// The proxy's shutdown; the time it exits, if there is one.
    fn proxy_shutdown(&mut self, grace_ms: u64, last_app_exit: u64) -> Option<ProxyExit> {
        let decision = self.decision?;
        let proxy = decision.mesh.proxy_name();
        let exit = match (decision.mesh, &decision.placement) {
            (_, Placement::BrokenInit) => return None,
            (mesh, Placement::Native) => {
                // Native sidecars get SIGTERM after the app containers exit (Kubernetes 1.29+),
                // and leave at once.
                let drain_note = match mesh {
                    Mesh::Istio => {
                        self.event(
                            Phase::Shutdown,
                            EventKind::DrainStart,
                            (0, Some(last_app_exit)),
                            Some(proxy),
                            format!(
                                "{proxy} preStop asks Envoy to drain; it keeps serving until the \
                                 apps exit"
                            ),
                            Source::Default(
                                "Istio's native sidecar preStop (pilot-agent drain)".into(),
                            ),
                        );
                        "Envoy already drained"
                    }
                    Mesh::Linkerd => "finishes in-flight requests",
                };
                let exit = last_app_exit.min(grace_ms);
                self.event(
                    Phase::Shutdown,
                    EventKind::ProxyExit,
                    (exit, None),
                    Some(proxy),
                    format!(
                        "{proxy} gets SIGTERM after the last app exits and leaves ({drain_note})"
                    ),
                    Source::Default(
                        "Kubernetes stops native sidecars after the app containers".into(),
                    ),
                );
                ProxyExit {
                    at_ms: exit,
                    refuses_new_from: exit,
                }
            }
            (Mesh::Istio, Placement::Classic { .. }) => {
                // pilot-agent gets SIGTERM at once (no preStop), drains inbound listeners for
                // terminationDrainDuration, then stops Envoy; outbound works meanwhile.
                let has_own_pre_stop = decision
                    .proxy(self.workload)
                    .is_some_and(|container| container.pre_stop().is_some());
                let (drain_end, what, source) = if decision.exit_on_zero_active_connections {
                    let minimum = decision.minimum_drain_ms;
                    let end = last_app_exit.max(minimum).min(grace_ms);
                    (
                        end,
                        format!(
                            "{proxy} waits MINIMUM_DRAIN_DURATION {}, then exits when no \
                             connection is active (here: after the apps)",
                            format_seconds(minimum)
                        ),
                        Source::Manifest("proxyMetadata.EXIT_ON_ZERO_ACTIVE_CONNECTIONS".into()),
                    )
                } else {
                    let source = if decision.drain_from_annotation {
                        Source::Manifest(self.workload.annotation_path("proxy.istio.io/config"))
                    } else {
                        Source::Parameter(format!(
                            "istio.terminationDrainDuration ({})",
                            format_seconds(decision.drain_ms)
                        ))
                    };
                    (
                        decision.drain_ms.min(grace_ms),
                        format!(
                            "{proxy} drains inbound for terminationDrainDuration {}",
                            format_seconds(decision.drain_ms)
                        ),
                        source,
                    )
                };
                let start = 0;
                self.event(
                    Phase::Shutdown,
                    EventKind::DrainStart,
                    (start, Some(drain_end)),
                    Some(proxy),
                    what,
                    source.clone(),
                );
                let cut = drain_end >= grace_ms && decision.drain_ms >= grace_ms;
                let exit = if has_own_pre_stop {
                    drain_end.max(last_app_exit).min(grace_ms)
                } else {
                    drain_end
                };
                self.event(
                    Phase::Shutdown,
                    EventKind::DrainEnd,
                    (exit, None),
                    Some(proxy),
                    if cut {
                        format!("{proxy} killed at the grace period before its drain ends")
                    } else {
                        format!("{proxy} exits")
                    },
                    source,
                );
                self.event(
                    Phase::Shutdown,
                    EventKind::ProxyExit,
                    (exit, None),
                    Some(proxy),
                    format!("{proxy} gone: the app's inbound and outbound traffic stop"),
                    Source::Derived("the drain's end".into()),
                );
                ProxyExit {
                    at_ms: exit,
                    refuses_new_from: exit,
                }
            }
            (Mesh::Linkerd, Placement::Classic { .. }) => {
                // The proxy's preStop waits proxy-wait-before-exit-seconds; on SIGTERM it refuses
                // new requests (the app's outbound ones too) and exits when in-flight ones end.
                let (wait, source) = linkerd_wait_before_exit(self.workload);
                let sigterm = seconds_ms(wait).min(grace_ms);
                if wait > 0 {
                    self.event(
                        Phase::Shutdown,
                        EventKind::PreStop,
                        (0, Some(sigterm)),
                        Some(proxy),
                        format!("{proxy} preStop sleeps {wait}s"),
                        source.clone(),
                    );
                }
                // It waits for the connections it carries: in-flight requests end, and the
                // app's own connections close when the app exits.
                let exit = (sigterm + self.assumptions.short_request_ms)
                    .max(last_app_exit)
                    .min(grace_ms);
                self.event(
                    Phase::Shutdown,
                    EventKind::DrainStart,
                    (sigterm, None),
                    Some(proxy),
                    format!("{proxy} gets SIGTERM: refuses new requests, inbound and outbound"),
                    source,
                );
                self.event(
                    Phase::Shutdown,
                    EventKind::ProxyExit,
                    (exit, None),
                    Some(proxy),
                    format!("{proxy} exits once the connections it carries have closed"),
                    Source::Derived("SIGTERM to the proxy".into()),
                );
                ProxyExit {
                    at_ms: exit,
                    refuses_new_from: sigterm,
                }
            }
        };
        if let Some(lane) = self.lanes.iter_mut().find(|lane| lane.role == Role::Proxy) {
            lane.shutdown_exit_ms = Some(exit.at_ms);
        }
        Some(exit)
    }

    fn shutdown_fates(
        &mut self,
        grace_ms: u64,
        first_app_sigterm: u64,
        last_app_exit: u64,
        proxy: Option<ProxyExit>,
        serves_requests: bool,
        assumptions: &Assumptions,
    ) {
        let short = assumptions.short_request_ms;
        let proxy_name = self.proxy_name().unwrap_or("the proxy");
        let serving_until = match proxy {
            Some(proxy) => last_app_exit.min(proxy.at_ms),
            None => last_app_exit,
        };
        // A short request in flight at SIGTERM.
        let in_flight = if grace_ms < short {
            Fate {
                request: Request::InFlightAtSigterm,
                phase: Phase::Shutdown,
                outcome: Outcome::Cut,
                window: Some((grace_ms, grace_ms)),
                why: "the grace period ends before it does: SIGKILL cuts it".into(),
            }
        } else if proxy.is_some_and(|proxy| proxy.at_ms < short) {
            Fate {
                request: Request::InFlightAtSigterm,
                phase: Phase::Shutdown,
                outcome: Outcome::Cut,
                window: proxy.map(|proxy| (proxy.at_ms, proxy.at_ms)),
                why: format!("{proxy_name} exits before it ends"),
            }
        } else {
            Fate {
                request: Request::InFlightAtSigterm,
                phase: Phase::Shutdown,
                outcome: Outcome::Served,
                window: None,
                why: format!(
                    "the app and {proxy_name} both outlive it ({} after SIGTERM)",
                    format_seconds(short)
                ),
            }
        };
        self.fates.push(in_flight);
        if !serves_requests {
            return;
        }
        // A new request while the endpoint is still in rotation: served while the app (still in
        // preStop or not yet stopped) and the proxy accept; refused after.
        let removal = assumptions.endpoint_removal_ms;
        let accepting_until = match proxy {
            Some(proxy) => first_app_sigterm.min(proxy.refuses_new_from),
            None => first_app_sigterm,
        };
        let new_request = if accepting_until >= removal {
            Fate {
                request: Request::NewDuringDrain,
                phase: Phase::Shutdown,
                outcome: Outcome::Served,
                window: None,
                why: format!(
                    "the pod accepts new requests until {}, after its endpoint is gone ({})",
                    format_seconds(accepting_until),
                    format_seconds(removal)
                ),
            }
        } else {
            let who = match proxy {
                Some(proxy) if proxy.refuses_new_from <= first_app_sigterm => {
                    format!("{proxy_name} refuses them from SIGTERM")
                }
                _ if first_app_sigterm == 0 => {
                    "the app gets SIGTERM at once (no preStop delay) and stops accepting".into()
                }
                _ => "the app stops accepting when its preStop ends".into(),
            };
            Fate {
                request: Request::NewDuringDrain,
                phase: Phase::Shutdown,
                outcome: Outcome::Refused,
                window: Some((accepting_until, removal)),
                why: format!(
                    "{who}, but load balancers still send them until the endpoint is removed \
                     ({} assumed)",
                    format_seconds(removal)
                ),
            }
        };
        self.fates.push(new_request);
        // A long-lived stream outlives any drain: it ends when the app or the proxy goes.
        let cut_at = serving_until.min(grace_ms);
        self.fates.push(Fate {
            request: Request::LongLivedStream,
            phase: Phase::Shutdown,
            outcome: Outcome::Cut,
            window: Some((cut_at, cut_at)),
            why: format!(
                "nothing closes it before {}: the client must reconnect (and retry what was in \
                 flight)",
                if proxy.is_some_and(|proxy| proxy.at_ms <= last_app_exit) {
                    format!("{proxy_name} exits")
                } else {
                    "the app exits".to_string()
                }
            ),
        });
    }
}

#[derive(Debug, Clone, Copy)]
struct ProxyExit {
    at_ms: u64,
    /// From when the proxy refuses new requests.
    refuses_new_from: u64,
}

/// `config.alpha.linkerd.io/proxy-wait-before-exit-seconds` of the pod, else of its namespace,
/// as the proxy reads it (unreadable: ignored), and where it was found.
pub(crate) fn linkerd_wait_before_exit(workload: &Workload) -> (i64, Source) {
    match workload.annotation(LINKERD_WAIT_BEFORE_EXIT) {
        Some(value) => (
            value.parse::<i64>().unwrap_or(0),
            Source::Manifest(workload.annotation_path(LINKERD_WAIT_BEFORE_EXIT)),
        ),
        None => match workload.namespace_annotation(LINKERD_WAIT_BEFORE_EXIT) {
            Some(value) => (
                value.parse::<i64>().unwrap_or(0),
                Source::Manifest(format!(
                    "namespaceObject.metadata.annotations[\"{LINKERD_WAIT_BEFORE_EXIT}\"]"
                )),
            ),
            None => (
                0,
                Source::Default(format!("{LINKERD_WAIT_BEFORE_EXIT}: Linkerd's 0")),
            ),
        },
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
