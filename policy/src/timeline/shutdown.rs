//! The shutdown phase, from the pod's deletion (t = 0): SIGTERM, the endpoint leaving the
//! rotation, each app's preStop and exit, the SIGKILL at the grace period. The proxy's part and
//! the requests' fates follow in `proxy_shutdown` and `shutdown_fates`.

use crate::mesh::Placement;
use crate::rules::prestop_delay_seconds;
use crate::stop_signal;

use super::{
    Builder, EventKind, Fate, Outcome, Phase, Request, Role, Source, assumption, format_seconds,
    seconds_ms,
};

/// The least time the kubelet gives a container between SIGTERM and SIGKILL
/// (`minimumGracePeriodInSeconds`, pkg/kubelet/kuberuntime, Kubernetes v1.35): what a preStop
/// hook leaves of the grace period is raised to it.
const KUBELET_MINIMUM_WINDOW_MS: u64 = 2_000;

/// An app container as its shutdown reads it.
struct AppStop {
    index: usize,
    name: String,
    prestop_seconds: Option<i64>,
    has_pre_stop: bool,
    stated_signal: Option<String>,
}

/// How the app containers stopped, for the requests' fates.
pub(super) struct AppsStopped {
    /// The first stop signal an app got (after its preStop).
    pub first_signal_ms: u64,
    pub last_exit_ms: u64,
    /// The first app a SIGKILL stop signal ended, and when: it cuts what it serves.
    pub ended_by_signal: Option<(String, u64)>,
}

impl Builder<'_, '_> {
    /// The shutdown events and fates; returns the grace period in ms.
    pub(super) fn shutdown(&mut self) -> u64 {
        let assumptions = self.assumptions.clone();
        let spec = &self.workload.spec;
        let grace_ms = seconds_ms(spec.grace_period_seconds());
        let grace_source = match spec.termination_grace_period_seconds {
            Some(_) => Source::Manifest(self.workload.field_path("terminationGracePeriodSeconds")),
            None => Source::Default("terminationGracePeriodSeconds: Kubernetes' 30 s".into()),
        };
        let settings = self.settings;
        let any_stated_signal = self.app_containers().iter().any(|(_, container)| {
            stop_signal::honoured(container.stated_stop_signal(), settings).is_some()
        });
        self.event(
            Phase::Shutdown,
            EventKind::Sigterm,
            (0, None),
            None,
            if any_stated_signal {
                "pod deleted: preStop hooks run, then each container's stop signal (SIGTERM, or its lifecycle.stopSignal)".into()
            } else {
                "pod deleted: preStop hooks run, then SIGTERM to each container".into()
            },
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
        let apps: Vec<AppStop> = self
            .app_containers()
            .iter()
            .map(|(index, container)| {
                let pre_stop = container.pre_stop();
                AppStop {
                    index: *index,
                    name: container.name().to_string(),
                    prestop_seconds: pre_stop.and_then(prestop_delay_seconds),
                    has_pre_stop: pre_stop.is_some(),
                    stated_signal: container.stated_stop_signal().map(str::to_string),
                }
            })
            .collect();
        let mut last_kill = grace_ms;
        let mut ended_by_signal: Option<(String, u64)> = None;
        for AppStop {
            index,
            name,
            prestop_seconds,
            has_pre_stop,
            stated_signal,
        } in &apps
        {
            let sigterm = match (prestop_seconds, has_pre_stop) {
                (Some(seconds), _) => {
                    let end = seconds_ms(*seconds).min(grace_ms);
                    self.event(
                        Phase::Shutdown,
                        EventKind::PreStop,
                        (0, Some(end)),
                        Some(name),
                        if seconds_ms(*seconds) >= grace_ms {
                            format!(
                                "{name} preStop waits {seconds}s: the kubelet abandons it at the grace period"
                            )
                        } else {
                            format!("{name} preStop waits {seconds}s")
                        },
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
            // After a preStop hook the kubelet sends SIGTERM with what is left of the grace
            // period, but never less than its minimum window (seen on a real kubelet: a hook of
            // the grace period's length, SIGTERM at its end, SIGKILL 2 s later).
            let kill = if *has_pre_stop {
                grace_ms.max(sigterm + KUBELET_MINIMUM_WINDOW_MS)
            } else {
                grace_ms
            };
            last_kill = last_kill.max(kill);
            if self.gateway && name == "istio-proxy" {
                let exit = self.gateway_drain(*index, sigterm, kill);
                app_sigterms.push(sigterm);
                app_exits.push(exit);
                continue;
            }
            let (exit, text, source) = self.app_exit(
                *index,
                name,
                stated_signal.as_deref(),
                sigterm,
                kill,
                grace_ms,
            );
            let killed_by_signal = stop_signal::honoured(stated_signal.as_deref(), self.settings)
                .is_some_and(|signal| {
                    stop_signal::effect(signal) == stop_signal::Effect::KillsAtOnce
                });
            if killed_by_signal && ended_by_signal.as_ref().is_none_or(|(_, at)| exit < *at) {
                ended_by_signal = Some((name.clone(), exit));
            }
            self.event(
                Phase::Shutdown,
                EventKind::AppExit,
                (exit, None),
                Some(name),
                text,
                source,
            );
            app_sigterms.push(sigterm);
            app_exits.push(exit);
            if let Some(lane) = self.lanes.iter_mut().find(|lane| lane.container == *name) {
                lane.shutdown_exit_ms = Some(exit);
            }
        }
        let stopped = AppsStopped {
            first_signal_ms: app_sigterms.iter().copied().min().unwrap_or(0),
            last_exit_ms: app_exits.iter().copied().max().unwrap_or(0),
            ended_by_signal,
        };
        let proxy_exit = self.proxy_shutdown(grace_ms, stopped.last_exit_ms);
        self.sigkill_event(last_kill, grace_ms, grace_source);
        self.shutdown_fates(
            grace_ms,
            &stopped,
            proxy_exit,
            serves_requests,
            &assumptions,
        );
        grace_ms
    }

    /// When an app container is gone after its stop signal at `signal_ms`: `appExitMs` later,
    /// unless its honoured `lifecycle.stopSignal` is SIGKILL (at once) or SIGSTOP (frozen until
    /// the kill at `kill_ms`). The event's text and source.
    fn app_exit(
        &self,
        index: usize,
        name: &str,
        stated_signal: Option<&str>,
        signal_ms: u64,
        kill_ms: u64,
        grace_ms: u64,
    ) -> (u64, String, Source) {
        let signal_path = || {
            Source::Manifest(format!(
                "{}.lifecycle.stopSignal",
                self.workload.container_path(index)
            ))
        };
        let at = format_seconds(signal_ms);
        let honoured = stop_signal::honoured(stated_signal, self.settings);
        if let Some(signal) = honoured {
            match stop_signal::effect(signal) {
                stop_signal::Effect::KillsAtOnce => {
                    return (
                        signal_ms.min(kill_ms),
                        format!(
                            "{name} ends at {at}: its lifecycle.stopSignal SIGKILL leaves it no graceful shutdown"
                        ),
                        signal_path(),
                    );
                }
                stop_signal::Effect::FreezesUntilKilled => {
                    return (
                        kill_ms,
                        format!(
                            "{name} is frozen at {at} by its lifecycle.stopSignal SIGSTOP and killed at the grace period"
                        ),
                        signal_path(),
                    );
                }
                stop_signal::Effect::Handled => {}
            }
        }
        let signal = match (honoured, stated_signal) {
            (Some(signal), _) => format!("{signal} at {at}, its lifecycle.stopSignal"),
            (None, Some(stated)) if stated != "SIGTERM" => format!(
                "SIGTERM at {at}: its lifecycle.stopSignal {stated} is dropped below Kubernetes 1.{}",
                stop_signal::HONOURED_FROM_MINOR
            ),
            _ => format!("SIGTERM at {at}"),
        };
        let signal_name = honoured.unwrap_or("SIGTERM");
        let exit = (signal_ms + self.assumptions.app_exit_ms).min(kill_ms);
        let text = if signal_ms + self.assumptions.app_exit_ms <= kill_ms {
            format!("{name} exits ({signal})")
        } else if kill_ms > grace_ms {
            format!(
                "{name} killed {} after its {signal_name} at the grace period: the kubelet's least window after a preStop",
                format_seconds(kill_ms - signal_ms)
            )
        } else {
            format!("{name} killed at the grace period")
        };
        (exit, text, assumption("appExitMs"))
    }

    /// A gateway's or waypoint's proxy: pilot-agent answers SIGTERM by draining Envoy for
    /// terminationDrainDuration and then exits, as a classic sidecar does (ML603); SIGKILL cuts
    /// the drain at `kill_ms`. Returns when the proxy is gone.
    fn gateway_drain(&mut self, index: usize, sigterm_ms: u64, kill_ms: u64) -> u64 {
        let (drain_ms, from_annotation) =
            crate::rules::ambient::gateway_drain_ms(self.workload, self.settings);
        let source = self.termination_drain_source(from_annotation, drain_ms);
        let drain_end = sigterm_ms + drain_ms;
        let exit = drain_end.min(kill_ms);
        self.event(
            Phase::Shutdown,
            EventKind::DrainStart,
            (sigterm_ms, Some(exit)),
            Some("istio-proxy"),
            format!(
                "istio-proxy drains the requests and streams it carries for terminationDrainDuration {}",
                format_seconds(drain_ms)
            ),
            source.clone(),
        );
        self.event(
            Phase::Shutdown,
            EventKind::AppExit,
            (exit, None),
            Some("istio-proxy"),
            if drain_end <= kill_ms {
                "istio-proxy exits at the end of its drain".to_string()
            } else {
                format!(
                    "istio-proxy killed at the grace period, {} into its {} drain: what it still carries is cut",
                    format_seconds(exit - sigterm_ms),
                    format_seconds(drain_ms)
                )
            },
            source,
        );
        let name = self.workload.spec.containers()[index].name().to_string();
        if let Some(lane) = self.lanes.iter_mut().find(|lane| lane.container == name) {
            lane.shutdown_exit_ms = Some(exit);
        }
        exit
    }

    /// Where an Istio proxy's terminationDrainDuration comes from: the pod's
    /// `proxy.istio.io/config`, else the mesh's parameter.
    pub(super) fn termination_drain_source(&self, from_annotation: bool, drain_ms: u64) -> Source {
        if from_annotation {
            Source::Manifest(self.workload.annotation_path("proxy.istio.io/config"))
        } else {
            Source::Parameter(format!(
                "istio.terminationDrainDuration ({})",
                format_seconds(drain_ms)
            ))
        }
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

    /// The last SIGKILL: at the grace period, or later for a container whose preStop used the
    /// grace period up (`kill_ms`).
    fn sigkill_event(&mut self, kill_ms: u64, grace_ms: u64, source: Source) {
        self.event(
            Phase::Shutdown,
            EventKind::Sigkill,
            (kill_ms, None),
            None,
            if kill_ms > grace_ms {
                format!(
                    "SIGKILL to whatever still runs (terminationGracePeriodSeconds {}, and the kubelet's least window of {} after a preStop that used it up)",
                    grace_ms / 1000,
                    format_seconds(KUBELET_MINIMUM_WINDOW_MS)
                )
            } else {
                format!(
                    "SIGKILL to whatever still runs (terminationGracePeriodSeconds {})",
                    grace_ms / 1000
                )
            },
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
        self.sigkill_event(grace_ms, grace_ms, grace_source);
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
}
