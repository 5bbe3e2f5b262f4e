//! ML104 for pods that were never created: the API server refused them because an init
//! container holds a native sidecar's probes or lifecycle without `restartPolicy: Always`
//! (`refused.rs` reads that from the controller's `FailedCreate` events). Istio's and Linkerd's
//! injectors add the proxy as a native sidecar with the field set; what removes it is a mutating
//! webhook that sees the pod after the injector and was built on a k8s.io/api older than 0.28,
//! whose `Container` has no `restartPolicy`: it drops the field as it encodes the pod again
//! (cluster/webhooks.rs says which webhooks run after the injector, and why). An API server
//! without the SidecarContainers feature (1.28 and older, unless turned on) drops it itself.
//!
//! The message says which init container by its index. Which container that is, the pod would
//! tell, but there is none: the index is read against where the injector puts its proxy, and
//! against the workload's own init containers when its template is given.

use meshlife_policy::catalogue;

use super::{Cited, Conclusion, Status, conclusion};
use crate::cluster::webhooks::PodCreate;
use crate::commands::diagnose::clock::{self, SECOND};
use crate::commands::diagnose::evidence::Evidence;
use crate::commands::diagnose::observed::Mesh;
use crate::commands::diagnose::refused::{RefusedInit, RefusedPods};

/// Where a mesh's injector puts its proxy among the init containers when it injects a native
/// sidecar: right after its own first init container (`istio-init`, or `istio-validation` under
/// istio-cni; `linkerd-init`, or `linkerd-network-validator` under linkerd-cni) and before the
/// template's own, which then run with the proxy. The API server's refusals in the meshes' own
/// reports name this index (istio/istio#52245, linkerd/linkerd2#13033).
const PROXY_INDEX: usize = 1;

/// The template's own init containers follow the mesh's two.
const TEMPLATE_INITS_FROM: usize = PROXY_INDEX + 1;

/// The Kubernetes minor version from which the API server keeps `restartPolicy` on init
/// containers by default (SidecarContainers beta, on by default).
const SIDECARS_ON_BY_DEFAULT: u32 = meshlife_policy::mesh::NATIVE_SIDECAR_MIN_MINOR;

/// What the refused init container at an index is, as far as the data tells.
enum Which {
    /// The mesh's proxy, where its injector puts it.
    Proxy(Mesh),
    /// The template's own init container at that place.
    TemplateOwn { name: String, native: Option<bool> },
    /// Not told: why.
    Unknown(String),
}

fn mesh_name(mesh: Mesh) -> &'static str {
    match mesh {
        Mesh::Istio => "Istio",
        Mesh::Linkerd => "Linkerd",
    }
}

/// The mesh's own first init container, before the proxy.
fn mesh_first_init(mesh: Mesh) -> &'static str {
    match mesh {
        Mesh::Istio => "istio-init (istio-validation under istio-cni)",
        Mesh::Linkerd => "linkerd-init (linkerd-network-validator under linkerd-cni)",
    }
}

/// The annotation that takes a workload off native sidecars.
fn classic_annotation(mesh: Mesh) -> &'static str {
    match mesh {
        Mesh::Istio => "sidecar.istio.io/nativeSidecar: \"false\"",
        Mesh::Linkerd => "config.linkerd.io/proxy-enable-native-sidecar: \"false\"",
    }
}

fn which(init: &RefusedInit, refused: &RefusedPods) -> Which {
    let template = refused.template.as_ref();
    match (refused.mesh, init.index) {
        (Some(mesh), PROXY_INDEX) => Which::Proxy(mesh),
        (Some(mesh), 0) => Which::Unknown(format!(
            "{}'s injector puts its own {} there, which is no native sidecar: it is another \
             webhook's",
            mesh_name(mesh),
            mesh_first_init(mesh)
        )),
        (Some(_), index) => match template {
            Some(template) => match template.init_containers.get(index - TEMPLATE_INITS_FROM) {
                Some(own) => Which::TemplateOwn {
                    name: own.name.clone(),
                    native: own.native,
                },
                None => Which::Unknown(
                    "it comes after the mesh's and the template's own init containers: another \
                     webhook added it"
                        .into(),
                ),
            },
            None => Which::Unknown(
                "the template's own init containers follow the mesh's two, and the template is \
                 not in the data"
                    .into(),
            ),
        },
        (None, PROXY_INDEX) if template.is_some_and(|own| own.init_containers.is_empty()) => {
            Which::Unknown(
                "the pod template has no init container of its own, so an injector added it; \
                 Istio and Linkerd put their proxy (istio-proxy, linkerd-proxy) there, after \
                 their own init container, but nothing in the data says which mesh injects \
                 these pods"
                    .into(),
            )
        }
        (None, PROXY_INDEX) => Which::Unknown(
            "Istio and Linkerd put their proxy (istio-proxy, linkerd-proxy) there, after their \
             own init container, but nothing in the data says which mesh injects these pods"
                .into(),
        ),
        (None, _) => Which::Unknown(
            "Istio and Linkerd put their proxy at spec.initContainers[1], and nothing in the \
             data says which mesh injects these pods"
                .into(),
        ),
    }
}

/// `startupProbe, readinessProbe and lifecycle`.
fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `v1.31.4` -> 31.
fn minor_of(version: &str) -> Option<u32> {
    crate::constraints::facts::parse_kubernetes_version(version)
        .ok()
        .map(|version| version.minor)
}

/// ML104: did the API server refuse the pods because the proxy lost its `restartPolicy`?
pub(super) fn proxy_lost_restart_policy(refused: &RefusedPods) -> Conclusion {
    let rule = &catalogue::NATIVE_SIDECAR_UNSUPPORTED;
    let inits = refused.refused_inits();
    let mut confirmed = conclusion(rule, Status::Confirmed, String::new());
    let mut named = Vec::new();
    for init in &inits {
        let place = format!("spec.initContainers[{}]", init.index);
        named.push(
            match which(init, refused) {
                Which::Proxy(mesh) => format!(
                    "{place}, {}, where {}'s injector puts its native sidecar after {},",
                    mesh.proxy_name(),
                    mesh_name(mesh),
                    mesh_first_init(mesh)
                ),
                Which::TemplateOwn { name, native } => format!(
                    "{place}, {name}, the pod template's own init container{} and not the proxy,",
                    match native {
                        Some(true) => " (a native sidecar there)",
                        Some(false) => " (no native sidecar there)",
                        None => "",
                    }
                ),
                Which::Unknown(why) => format!("{place} (which container is not told: {why})"),
            } + &format!(" holds {}", listed(&init.fields)),
        );
    }
    let times = refused.events.iter().filter_map(|event| event.time).fold(
        None,
        |span: Option<(i64, i64)>, time| {
            let (Some(first), Some(last)) = (time.earliest, time.latest) else {
                return span;
            };
            Some(span.map_or((first, last), |(earliest, latest)| {
                (earliest.min(first), latest.max(last))
            }))
        },
    );
    let mesh_injector = refused.mesh.map_or_else(
        || "the mesh's injector".to_string(),
        |mesh| format!("{}'s injector", mesh_name(mesh)),
    );
    let injector_at_sentence_start = refused.mesh.map_or_else(
        || "The mesh's injector".to_string(),
        |mesh| format!("{}'s injector", mesh_name(mesh)),
    );
    let api_server = match refused
        .api_server
        .as_ref()
        .and_then(|(version, _)| Some((version, minor_of(version)?)))
    {
        Some((version, minor)) if minor >= SIDECARS_ON_BY_DEFAULT => format!(
            "; the API server ({version}) keeps the field itself (SidecarContainers is on by \
             default from Kubernetes 1.{SIDECARS_ON_BY_DEFAULT})"
        ),
        Some((version, _)) => format!(
            "; but the API server is {version}, older than 1.{SIDECARS_ON_BY_DEFAULT}: unless \
             its SidecarContainers feature is on, it drops the field itself"
        ),
        None => ", unless the API server lacks the SidecarContainers feature (Kubernetes 1.28 \
                 and older) and drops the field itself"
            .to_string(),
    };
    let mut summary = format!(
        "the API server refused the pods of {} {}{}: {}, which only a native sidecar may, but \
         not restartPolicy: Always. {injector_at_sentence_start} sets it, so a mutating webhook that runs \
         after the injector removed it (one built on a k8s.io/api older than 0.28, whose \
         Container has no restartPolicy, drops the field as it encodes the pod again){api_server}",
        refused.workload,
        match refused.refusals() {
            1 => "once".to_string(),
            count => format!("{count} times"),
        },
        // Event times are whole seconds: a bound's end within its second is that second.
        times.map_or_else(String::new, |(first, last)| {
            let last = last - last.rem_euclid(SECOND);
            if last <= first {
                format!(", at {}", clock::clock(first))
            } else {
                format!(", from {} to {}", clock::clock(first), clock::clock(last))
            }
        }),
        named.join("; ")
    );
    match &refused.webhooks {
        Some(webhooks) if !webhooks.is_empty() => {
            let names: Vec<String> = webhooks
                .iter()
                .map(|webhook| match (webhook.known, &webhook.pod_create) {
                    (Some(known), PodCreate::Matches) => {
                        format!(
                            "{} ({}, known to do this)",
                            webhook.configuration, known.what
                        )
                    }
                    _ => webhook.configuration.clone(),
                })
                .collect();
            summary.push_str(&format!(
                ". The webhooks that see the pods after {mesh_injector}: {}",
                names.join(", ")
            ));
        }
        Some(_) => summary.push_str(&format!(
            ". No MutatingWebhookConfiguration of {} takes Pod CREATE after {mesh_injector} now: \
             the one that removed the field may have been changed or removed since these events",
            refused.webhooks_read_from
        )),
        None => {}
    }
    confirmed.summary = summary;
    for event in refused.events.iter().take(3) {
        confirmed.evidence.push(Cited {
            evidence: event.evidence.clone(),
            time: event.time,
            shows: format!(
                "the API server refused {}: {}{}",
                event
                    .pod
                    .as_ref()
                    .map_or_else(|| "a pod".to_string(), |pod| format!("pod {pod}")),
                event
                    .init_containers
                    .iter()
                    .map(|init| format!(
                        "spec.initContainers[{}] holds {} without restartPolicy: Always",
                        init.index,
                        listed(&init.fields)
                    ))
                    .collect::<Vec<_>>()
                    .join("; "),
                if event.count > 1 {
                    format!(" ({} times)", event.count)
                } else {
                    String::new()
                }
            ),
        });
    }
    if let Some(injection) = &refused.injection {
        confirmed.evidence.push(Cited {
            evidence: injection.evidence.clone(),
            time: None,
            shows: format!(
                "the pods ask for {}'s injection: {}",
                mesh_name(injection.mesh),
                injection.what
            ),
        });
    }
    if let Some(template) = &refused.template {
        let own: Vec<&str> = template
            .init_containers
            .iter()
            .map(|init| init.name.as_str())
            .collect();
        confirmed.evidence.push(Cited {
            evidence: template.evidence.clone(),
            time: None,
            shows: if own.is_empty() {
                "the pod template has no init container of its own".into()
            } else {
                format!(
                    "the pod template's own init containers, after the mesh's: {}",
                    own.join(", ")
                )
            },
        });
    }
    if let Some((version, evidence)) = &refused.api_server {
        confirmed.evidence.push(Cited {
            evidence: evidence.clone(),
            time: None,
            shows: format!("the API server is {version}"),
        });
    }
    for webhook in refused.webhooks.iter().flatten() {
        confirmed.evidence.push(Cited {
            evidence: Evidence {
                text: Some(webhook.webhook.clone()),
                ..Evidence::field(
                    &format!(
                        "MutatingWebhookConfiguration {} ({})",
                        webhook.configuration, refused.webhooks_read_from
                    ),
                    &webhook.field,
                )
            },
            time: None,
            shows: format!("{}; {}", webhook.when(), webhook.verdict()),
        });
    }
    if refused.webhooks.is_none() {
        confirmed.missing.push(
            "the MutatingWebhookConfigurations that run after the injector: `meshlife diagnose \
             deployment/NAME` (or `job/NAME`) reads them from the cluster with the events, and \
             `meshlife constraint --from-cluster` lists them"
                .into(),
        );
    }
    if refused.mesh.is_none() {
        confirmed.missing.push(
            "which mesh injects these pods: the workload's pod template (`kubectl describe \
             replicaset NAME`, `kubectl describe job NAME`) and its Namespace's labels"
                .into(),
        );
    } else if refused.template.is_none()
        && inits.iter().any(|init| init.index >= TEMPLATE_INITS_FROM)
    {
        confirmed.missing.push(
            "the workload's pod template (`kubectl describe replicaset NAME`), for the init \
             containers of its own"
                .into(),
        );
    }
    confirmed.fix = Some(fix(refused));
    confirmed
}

fn fix(refused: &RefusedPods) -> String {
    let webhooks: Vec<&str> = refused
        .webhooks
        .iter()
        .flatten()
        .map(|webhook| webhook.configuration.as_str())
        .collect();
    let which = if webhooks.is_empty() {
        "the mutating webhook that removes it".to_string()
    } else {
        webhooks.join(", ")
    };
    // One webhook is `it`; several are each.
    let (it, them) = if webhooks.len() > 1 {
        ("each", "them")
    } else {
        ("it", "it")
    };
    let injector = refused
        .webhooks
        .iter()
        .flatten()
        .next()
        .map(|webhook| webhook.injector.clone())
        .unwrap_or_else(|| match refused.mesh {
            Some(Mesh::Linkerd) => "linkerd-proxy-injector-webhook-config".into(),
            _ => "istio-sidecar-injector".into(),
        });
    let stopgap = match refused.mesh {
        Some(mesh) => format!("`{}` on the pod template", classic_annotation(mesh)),
        None => format!(
            "`{}` (Istio) or `{}` (Linkerd) on the pod template",
            classic_annotation(Mesh::Istio),
            classic_annotation(Mesh::Linkerd)
        ),
    };
    format!(
        "make {which} keep the field, or keep {them} off the meshed pods: run a release of {it} \
         built on k8s.io/api 0.28 or later (the Datadog Cluster Agent's admission controller, \
         the EKS pod identity webhook, kube-secrets-init and kube-image-keeper have had this \
         bug), or give {it} an objectSelector or namespaceSelector that leaves these pods out, \
         or have {it} called before the injector (a configuration name that sorts before \
         {injector}, with reinvocationPolicy: Never: with IfNeeded it is called again after the \
         injector). Until then, take the workload off native sidecars: {stopgap}"
    )
}
