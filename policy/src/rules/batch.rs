//! Batch pods (ML301 to ML303): a classic proxy never exits on its own, so a Job whose app
//! finished still has a running container and never completes.

use super::{Context, Finding, capitalised};
use crate::catalogue::{JOB_NO_DEADLINE, JOB_SHUTDOWN_ENDPOINT_DISABLED, JOB_SIDECAR_NEVER_EXITS};
use crate::input::Container;
use crate::mesh::{LINKERD_ADMIN_SHUTDOWN, Mesh};
use crate::workload::WorkloadKind;

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    if !context.workload.is_batch() || !context.decision.is_classic() {
        return;
    }
    let exits = exit_mechanism(context);
    if exits.is_none() {
        context.run(&JOB_SIDECAR_NEVER_EXITS, findings, job_sidecar_never_exits);
    }
    if let Some(ExitMechanism::LinkerdShutdown { container }) = &exits {
        context.run(
            &JOB_SHUTDOWN_ENDPOINT_DISABLED,
            findings,
            |context, findings| job_shutdown_endpoint_disabled(context, container, findings),
        );
    }
    context.run(&JOB_NO_DEADLINE, findings, job_no_deadline);
}

enum ExitMechanism {
    IstioQuit,
    /// The app calls the proxy's `/shutdown` (directly or through `linkerd-await --shutdown`).
    LinkerdShutdown {
        container: String,
    },
    Marker,
}

/// How the pod stops its proxy, read from the command, args and hooks of every container but
/// the proxy (exempt images included: a terminator sidecar is often one), and for the
/// `exitMarkers` also from their images.
fn exit_mechanism(context: &Context) -> Option<ExitMechanism> {
    let markers = &context.settings.raw.exit_markers;
    let proxy = context.proxy_name();
    let others = context
        .workload
        .spec
        .containers()
        .iter()
        .filter(|c| c.name() != proxy);
    for container in others {
        if context.mesh() == Mesh::Istio
            && container
                .script_strings()
                .any(|s| s.contains("quitquitquit"))
        {
            return Some(ExitMechanism::IstioQuit);
        }
        if context.mesh() == Mesh::Linkerd && calls_linkerd_shutdown(container) {
            return Some(ExitMechanism::LinkerdShutdown {
                container: container.name().to_string(),
            });
        }
        let image = container.image.as_deref().unwrap_or("");
        if container.script_strings().chain([image]).any(|s| {
            markers
                .iter()
                .any(|marker| !marker.is_empty() && s.contains(marker.as_str()))
        }) {
            return Some(ExitMechanism::Marker);
        }
    }
    None
}

/// How the app of a batch pod asks its classic proxy to exit, in words, and whether that
/// works (ML302: Linkerd's `/shutdown` with the endpoint disabled does not). For the timeline.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) struct ExitCall {
    pub how: &'static str,
    pub works: bool,
}

/// `None` when nothing in the pod asks the proxy to exit (ML301's condition).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn proxy_exit_call(context: &Context) -> Option<ExitCall> {
    exit_mechanism(context).map(|mechanism| match mechanism {
        ExitMechanism::IstioQuit => ExitCall {
            how: "the app calls POST localhost:15020/quitquitquit",
            works: true,
        },
        ExitMechanism::LinkerdShutdown { .. } => ExitCall {
            how: "the app calls the proxy's /shutdown",
            works: linkerd_shutdown_endpoint_enabled(context),
        },
        ExitMechanism::Marker => ExitCall {
            how: "a container carries one of the exitMarkers",
            works: true,
        },
    })
}

fn calls_linkerd_shutdown(container: &Container) -> bool {
    let strings: Vec<&str> = container.script_strings().collect();
    let posts_shutdown = strings.iter().any(|s| s.contains("4191/shutdown"));
    let awaits_with_shutdown = strings.iter().any(|s| s.contains("linkerd-await"))
        && strings.iter().any(|s| {
            s.split_whitespace()
                .any(|word| word == "--shutdown" || word == "-S" || word.starts_with("--shutdown="))
        });
    posts_shutdown || awaits_with_shutdown
}

/// The env var the injector sets on linkerd-proxy when the shutdown endpoint is on.
const SHUTDOWN_ENDPOINT_ENV: &str = "LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED";

fn kind_phrase<'c>(context: &'c Context) -> &'c str {
    if let Some(embedded) = &context.workload.embedded {
        return &embedded.phrase;
    }
    match context.workload.kind {
        WorkloadKind::Job => "the Job",
        WorkloadKind::CronJob => "each Job of the CronJob",
        _ => "the batch pod",
    }
}

/// ML301.
fn job_sidecar_never_exits(context: &Context, findings: &mut Vec<Finding>) {
    if context.app_containers().next().is_none() {
        return;
    }
    // Istio users often reach for exit-on-idle; it is Istio's word, so only Istio hears it.
    let not_a_fix = match context.mesh() {
        Mesh::Istio => {
            "; EXIT_ON_ZERO_ACTIVE_CONNECTIONS does not help, since it only acts after SIGTERM"
        }
        Mesh::Linkerd => "",
    };
    // A helper that never finishes either (ML304's) is not among the containers that finish.
    let helpers: Vec<&str> =
        super::batch_helpers::holding_helpers(context.workload, context.settings)
            .map(|holders| holders.helpers.iter().map(|helper| helper.name()).collect())
            .unwrap_or_default();
    let finishing: Vec<String> = context
        .app_containers()
        .filter(|(_, container)| !helpers.contains(&container.name()))
        .map(|(_, container)| format!("\"{}\"", container.name()))
        .collect();
    let message = format!(
        "{} keeps running once {} {} finished, so the pod never completes and {} never succeeds{not_a_fix}.",
        capitalised(&context.proxy_phrase()),
        super::counted("container", &finishing),
        if finishing.len() == 1 { "has" } else { "have" },
        kind_phrase(context)
    );
    let fix = match context.mesh() {
        Mesh::Istio => {
            "End the app's command with curl -fsS -X POST http://localhost:15020/quitquitquit, or use native sidecars (sidecar.istio.io/nativeSidecar: \"true\"), or opt the pod out with the label sidecar.istio.io/inject: \"false\"."
        }
        Mesh::Linkerd => {
            "Wrap the app's command in linkerd-await --shutdown -- <command> (or POST http://localhost:4191/shutdown) with config.linkerd.io/proxy-admin-shutdown: enabled, or use native sidecars (config.linkerd.io/proxy-enable-native-sidecar: \"true\"), or opt the pod out with the annotation linkerd.io/inject: disabled."
        }
    };
    findings.push(context.finding(
        &JOB_SIDECAR_NEVER_EXITS,
        context.proxy_or_spec_path(),
        message,
        fix.to_string(),
    ));
}

/// Whether linkerd-proxy serves `/shutdown`: the env var the injector set on an injected
/// proxy, else the annotation (template, then namespace) or the mesh-wide parameter.
fn linkerd_shutdown_endpoint_enabled(context: &Context) -> bool {
    match context.decision.proxy(context.workload) {
        Some(proxy) => proxy.env_value(SHUTDOWN_ENDPOINT_ENV) == Some("true"),
        None => {
            context
                .workload
                .annotation(LINKERD_ADMIN_SHUTDOWN)
                .or_else(|| {
                    context
                        .workload
                        .namespace_annotation(LINKERD_ADMIN_SHUTDOWN)
                })
                == Some("enabled")
                || context.settings.raw.linkerd.shutdown_endpoint
        }
    }
}

/// ML302: the app calls `/shutdown`, but the proxy was not told to serve it.
fn job_shutdown_endpoint_disabled(context: &Context, container: &str, findings: &mut Vec<Finding>) {
    if linkerd_shutdown_endpoint_enabled(context) {
        return;
    }
    let injected_proxy = context.decision.proxy(context.workload);
    let message = format!(
        "container \"{container}\" calls the linkerd-proxy shutdown endpoint, but the endpoint is disabled, so the call fails and the proxy keeps {} running forever.",
        kind_phrase(context)
    );
    let (path, fix) = match (
        injected_proxy,
        context.decision.proxy_path(context.workload),
    ) {
        (Some(_), Some(proxy_path)) => (
            format!("{proxy_path}.env"),
            format!(
                "Re-create the pod from a template annotated {LINKERD_ADMIN_SHUTDOWN}: enabled, so the injector sets {SHUTDOWN_ENDPOINT_ENV}=true on linkerd-proxy (or install Linkerd with proxy.enableShutdownEndpoint=true)."
            ),
        ),
        _ => (
            context.workload.annotation_path(LINKERD_ADMIN_SHUTDOWN),
            format!(
                "Add the annotation {LINKERD_ADMIN_SHUTDOWN}: enabled to the pod template (or install Linkerd with proxy.enableShutdownEndpoint=true and set the linkerd.shutdownEndpoint parameter)."
            ),
        ),
    };
    findings.push(
        context
            .finding(&JOB_SHUTDOWN_ENDPOINT_DISABLED, path, message, fix)
            .about_container(container),
    );
}

/// ML303: nothing bounds a batch pod whose sidecar hangs.
fn job_no_deadline(context: &Context, findings: &mut Vec<Finding>) {
    if context.workload.batch_deadline_seconds().is_some() {
        return;
    }
    let (path, field) = match (&context.workload.embedded, context.workload.kind) {
        (Some(embedded), _) => (
            embedded.deadline_path.clone(),
            embedded.deadline_path.clone(),
        ),
        (None, WorkloadKind::Job) => (
            "spec.activeDeadlineSeconds".to_string(),
            "spec.activeDeadlineSeconds on the Job".to_string(),
        ),
        (None, WorkloadKind::CronJob) => (
            "spec.jobTemplate.spec.activeDeadlineSeconds".to_string(),
            "spec.jobTemplate.spec.activeDeadlineSeconds on the CronJob".to_string(),
        ),
        (None, _) => (
            "spec.activeDeadlineSeconds".to_string(),
            "spec.activeDeadlineSeconds on the pod".to_string(),
        ),
    };
    let forbid = if context.workload.kind == WorkloadKind::CronJob
        && context.workload.concurrency_policy.as_deref() == Some("Forbid")
    {
        "; under the CronJob's concurrencyPolicy: Forbid one stuck run blocks every later one"
    } else {
        ""
    };
    let message = format!(
        "{} with {} has no activeDeadlineSeconds, so if the sidecar never exits the pod runs and holds its resources forever{forbid}.",
        capitalised(kind_phrase(context)),
        context.proxy_phrase()
    );
    let fix = format!("Set {field} to bound a stuck run.");
    findings.push(context.finding(&JOB_NO_DEADLINE, path, message, fix));
}
