//! The startup phase, from the pod's sandbox (t = 0): init containers in the order they run,
//! the proxy's start and readiness, the apps' start and readiness, and whether the apps' first
//! outbound calls find a ready proxy.

use crate::mesh::{Mesh, MeshDecision, Placement};

use super::{
    Assumptions, Builder, EventKind, Fate, Lane, Outcome, Phase, Request, Role, Source, assumption,
};

impl Builder<'_, '_> {
    pub(super) fn startup(&mut self) {
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
}
