//! What happens at shutdown to each kind of request (one in flight at SIGTERM, a new one while
//! the endpoint is still in rotation, a long-lived stream), from when the apps and the proxy
//! stop accepting and exit.

use super::proxy_shutdown::ProxyExit;
use super::shutdown::AppsStopped;
use super::{Assumptions, Builder, Fate, Outcome, Phase, Request, format_seconds};

impl Builder<'_, '_> {
    pub(super) fn shutdown_fates(
        &mut self,
        grace_ms: u64,
        apps: &AppsStopped,
        proxy: Option<ProxyExit>,
        serves_requests: bool,
        assumptions: &Assumptions,
    ) {
        let first_app_sigterm = apps.first_signal_ms;
        let last_app_exit = apps.last_exit_ms;
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
        } else if let Some((app, at_ms)) = &apps.ended_by_signal {
            Fate {
                request: Request::InFlightAtSigterm,
                phase: Phase::Shutdown,
                outcome: Outcome::Cut,
                window: Some((*at_ms, *at_ms)),
                why: format!("{app} ends at its stop signal, SIGKILL, before the request does"),
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
                Some(proxy) if proxy.refuses_new_from < first_app_sigterm => format!(
                    "{proxy_name} refuses them from {}, while the app is still in its preStop",
                    format_seconds(proxy.refuses_new_from)
                ),
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
