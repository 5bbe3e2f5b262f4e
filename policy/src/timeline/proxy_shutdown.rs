//! The proxy's shutdown, which differs by mesh and placement: a native sidecar leaves after
//! the apps, a classic Istio proxy drains for terminationDrainDuration, a classic Linkerd proxy
//! waits out its preStop and then refuses new requests. Its exit decides the requests' fates.

use crate::mesh::{LINKERD_WAIT_BEFORE_EXIT, Mesh, Placement};
use crate::workload::Workload;

use super::{Builder, EventKind, Phase, Role, Source, format_seconds, seconds_ms};

impl Builder<'_, '_> {
    /// The proxy's shutdown; the time it exits, if there is one.
    pub(super) fn proxy_shutdown(
        &mut self,
        grace_ms: u64,
        last_app_exit: u64,
    ) -> Option<ProxyExit> {
        let decision = self.decision?;
        let proxy = decision.mesh.proxy_name();
        let exit = match (decision.mesh, &decision.placement) {
            (_, Placement::BrokenInit) => return None,
            (mesh, Placement::Native) => {
                // Native sidecars get SIGTERM after the app containers exit (Kubernetes 1.29+),
                // and leave at once.
                let exit = last_app_exit.min(grace_ms);
                let drain_note = match mesh {
                    Mesh::Istio if self.native_istio_drains_at_deletion() => {
                        // The preStop starts Envoy's drain at the deletion with `skip_exit`:
                        // inbound responses carry Connection: close at once, and the listeners
                        // stay open until the proxy exits (seen on the real node).
                        self.event(
                            Phase::Shutdown,
                            EventKind::DrainStart,
                            (0, Some(exit)),
                            Some(proxy),
                            format!(
                                "{proxy} preStop starts Envoy's drain at the deletion: inbound \
                                 responses carry Connection: close (HTTP/2: GOAWAY); listeners \
                                 and outbound stay open until it exits"
                            ),
                            Source::Default(
                                "Istio's native sidecar preStop (pilot-agent drain, skip_exit)"
                                    .into(),
                            ),
                        );
                        "Envoy already drained"
                    }
                    Mesh::Istio => "drains only now, after the apps",
                    Mesh::Linkerd => "finishes in-flight requests",
                };
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
                    .declared_proxy(self.workload)
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
                    let source = self.termination_drain_source(
                        decision.drain_from_annotation,
                        decision.drain_ms,
                    );
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
                // Envoy stops the inbound listeners after drainDuration (no skip_exit on the
                // SIGTERM path), while the agent keeps it for terminationDrainDuration.
                let listeners_close = self.classic_listeners_close().filter(|at| *at < exit);
                if let Some(at) = listeners_close {
                    let source = if decision.envoy_drain_from_annotation {
                        Source::Manifest(self.workload.annotation_path("proxy.istio.io/config"))
                    } else if self.settings.istio_envoy_drain_ms
                        == crate::mesh::ISTIO_DRAIN_DURATION_MS
                    {
                        Source::Default(format!(
                            "Istio's drainDuration {} (Envoy's --drain-time-s)",
                            format_seconds(at)
                        ))
                    } else {
                        Source::Parameter("istio.drainDuration".into())
                    };
                    self.event(
                        Phase::Shutdown,
                        EventKind::ListenersClosed,
                        (at, None),
                        Some(proxy),
                        format!(
                            "{proxy} closes its inbound listeners after drainDuration {}: new \
                             connections to the app are refused",
                            format_seconds(at)
                        ),
                        source,
                    );
                }
                ProxyExit {
                    at_ms: exit,
                    refuses_new_from: listeners_close.unwrap_or(exit),
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
}

impl Builder<'_, '_> {
    /// Whether the pod's native istio-proxy drains at the deletion.
    fn native_istio_drains_at_deletion(&self) -> bool {
        let Some(decision) = self.decision else {
            return false;
        };
        let context = crate::rules::Context {
            workload: self.workload,
            decision,
            settings: self.settings,
        };
        crate::rules::native_proxy_drains_at_deletion(&context)
    }

    /// When a classic Istio proxy's inbound listeners close (ML406's reading).
    fn classic_listeners_close(&self) -> Option<u64> {
        let context = crate::rules::Context {
            workload: self.workload,
            decision: self.decision?,
            settings: self.settings,
        };
        crate::rules::classic_listeners_close_ms(&context)
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ProxyExit {
    pub(super) at_ms: u64,
    /// From when the proxy refuses new requests.
    pub(super) refuses_new_from: u64,
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
