//! Whether a batch pod completes once its apps finish: a classic proxy keeps it running unless
//! something makes the proxy exit, which is what ML301-ML303 are about; so does a helper that
//! runs until stopped (ML304), meshed or not.

use crate::mesh::{Mesh, MeshDecision, Placement};
use crate::params::Settings;
use crate::workload::Workload;

use super::Completion;

pub(super) fn completion(
    workload: &Workload,
    settings: &Settings,
    decision: Option<&MeshDecision>,
) -> Completion {
    let by_proxy = proxy_completion(workload, settings, decision);
    // A helper that runs until stopped (ML304) holds the pod whatever the proxy does.
    let Some(holders) = crate::rules::batch_helpers::holding_helpers(workload, settings) else {
        return by_proxy;
    };
    let helpers: Vec<String> = holders
        .helpers
        .iter()
        .map(|helper| helper.phrase())
        .collect();
    let held = format!(
        "{} {} running after the apps exit: the pod never completes",
        helpers.join(", "),
        if helpers.len() == 1 { "keeps" } else { "keep" }
    );
    Completion {
        completes: false,
        why: if by_proxy.completes {
            held
        } else {
            format!("{held}; and {}", by_proxy.why)
        },
    }
}

fn proxy_completion(
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
