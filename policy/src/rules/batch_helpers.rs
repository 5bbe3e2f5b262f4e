//! Batch pods with a helper that never exits (ML304): a database proxy, a secrets agent, a
//! telemetry collector or a log shipper added as a regular container keeps a Job's pod running
//! after the app has finished, exactly as a classic mesh proxy does, whether or not the pod is
//! meshed. Only containers known to run until stopped are judged (their image, or the
//! manifest's own `meshlife.io/sidecars` list), so multi-step Jobs whose containers all finish
//! never fire.

use super::{Finding, counted};
use crate::catalogue::JOB_HELPER_NEVER_EXITS;
use crate::input::Container;
use crate::mesh::Mesh;
use crate::params::Settings;
use crate::workload::{Workload, WorkloadKind};

/// The pod template annotation that names the regular containers which run until stopped:
/// `meshlife.io/sidecars: "log-shipper, metrics"`.
pub const SIDECARS_ANNOTATION: &str = "meshlife.io/sidecars";

/// A helper known to run until it is stopped, and the way it can be told to stop by itself.
struct KnownHelper {
    what: &'static str,
    /// Fragments of the image's repository path (tag and digest left out).
    images: &'static [&'static str],
    /// When the container must also run a command containing one of these words (Vault's one
    /// image runs the server, the CLI and the agent).
    command_words: &'static [&'static str],
    stop: OwnStop,
}

/// How a helper can stop on its own, besides becoming a native sidecar.
#[derive(Clone, Copy)]
enum OwnStop {
    /// Started with `flag`, it serves `/quitquitquit` on its admin port (`call`): the app ends
    /// its work by calling it.
    QuitEndpoint {
        flag: &'static str,
        call: &'static str,
    },
    /// Given one of `flags`, it exits once its one job (fetching secrets) is done.
    ExitFlag {
        flags: &'static [&'static str],
        fix: &'static str,
    },
    /// Nothing of its own: only a native sidecar (or the app killing it) ends it.
    None,
}

const KNOWN_HELPERS: &[KnownHelper] = &[
    KnownHelper {
        what: "the Cloud SQL Auth Proxy",
        images: &[
            "cloud-sql-proxy",
            "cloudsql-docker/gce-proxy",
            "cloud_sql_proxy",
        ],
        command_words: &[],
        stop: OwnStop::QuitEndpoint {
            flag: "--quitquitquit",
            call: "curl -fsS -X POST http://localhost:9091/quitquitquit",
        },
    },
    KnownHelper {
        what: "the AlloyDB Auth Proxy",
        images: &["alloydb-auth-proxy"],
        command_words: &[],
        stop: OwnStop::QuitEndpoint {
            flag: "--quitquitquit",
            call: "curl -fsS -X POST http://localhost:9091/quitquitquit",
        },
    },
    KnownHelper {
        what: "Vault Agent",
        images: &["hashicorp/vault", "vault"],
        command_words: &["agent"],
        stop: OwnStop::ExitFlag {
            flags: &["-exit-after-auth", "--exit-after-auth", "exit_after_auth"],
            fix: "run the agent with -exit-after-auth (exit_after_auth = true) when the app reads its secrets only at start",
        },
    },
    KnownHelper {
        what: "an OpenTelemetry Collector",
        images: &[
            "opentelemetry-collector",
            "opentelemetry-collector-contrib",
            "opentelemetry-collector-k8s",
            "otelcol",
            "otelcol-contrib",
        ],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Fluent Bit",
        images: &["fluent-bit"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Fluentd",
        images: &["fluentd"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Vector",
        images: &["timberio/vector"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Promtail",
        images: &["grafana/promtail"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Grafana Alloy",
        images: &["grafana/alloy"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Filebeat",
        images: &["beats/filebeat", "elastic/filebeat"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "the Datadog Agent",
        images: &["datadog/agent", "datadoghq/agent"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "Envoy",
        images: &["envoyproxy/envoy"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "the Consul dataplane",
        images: &["hashicorp/consul-dataplane"],
        command_words: &[],
        stop: OwnStop::None,
    },
    KnownHelper {
        what: "oauth2-proxy",
        images: &["oauth2-proxy"],
        command_words: &[],
        stop: OwnStop::None,
    },
];

/// Why a container is taken for a helper that runs until stopped.
#[derive(Clone, Copy)]
enum HelperKind {
    Known(&'static KnownHelper),
    /// Listed in `meshlife.io/sidecars`.
    Marked,
    /// A regular container with its own `restartPolicy: Always` (KEP-5307): the kubelet
    /// restarts it on every exit, so it never finishes.
    RestartedAlways,
}

/// ML304 over any batch pod, meshed or not; `mesh` is the pod's mesh when it has one (its
/// proxy is ML301's, never judged here).
pub fn check(
    workload: &Workload,
    settings: &Settings,
    mesh: Option<Mesh>,
    findings: &mut Vec<Finding>,
) {
    if !settings.selects(&JOB_HELPER_NEVER_EXITS) {
        return;
    }
    let Some(holders) = holding_helpers(workload, settings) else {
        return;
    };
    for holder in &holders.helpers {
        findings.push(finding(workload, mesh, holder, &holders.apps));
    }
}

/// The helpers that keep a batch pod running after its apps finish, and those apps.
pub(crate) struct Holders<'w> {
    pub helpers: Vec<Helper<'w>>,
    /// The app containers, quoted, for messages.
    apps: Vec<String>,
}

pub(crate) struct Helper<'w> {
    index: usize,
    container: &'w Container<'w>,
    kind: HelperKind,
    /// Started with its quit endpoint on, which no container calls.
    unused_endpoint: bool,
}

impl<'w> Helper<'w> {
    pub(crate) fn name(&self) -> &'w str {
        self.container.name()
    }

    /// `container "cloud-sql-proxy" (the Cloud SQL Auth Proxy)`, for the timeline.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn phrase(&self) -> String {
        match self.kind {
            HelperKind::Known(helper) => {
                format!("container \"{}\" ({})", self.container.name(), helper.what)
            }
            HelperKind::Marked | HelperKind::RestartedAlways => {
                format!("container \"{}\"", self.container.name())
            }
        }
    }
}

/// `None` when the pod is not batch, or nothing in it finishes, or nothing holds it.
pub(crate) fn holding_helpers<'w>(
    workload: &'w Workload<'w>,
    settings: &Settings,
) -> Option<Holders<'w>> {
    if !workload.is_batch() {
        return None;
    }
    let containers = workload.spec.containers();
    let is_exempt = |container: &Container| super::image_is_exempt(settings, container);
    let marked: Vec<&str> = workload
        .annotation(SIDECARS_ANNOTATION)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let is_proxy = |container: &Container| {
        container.name() == Mesh::Istio.proxy_name()
            || container.name() == Mesh::Linkerd.proxy_name()
    };
    let helper_kind = |container: &Container| -> Option<HelperKind> {
        if is_proxy(container) || is_exempt(container) {
            return None;
        }
        if marked.contains(&container.name()) {
            return Some(HelperKind::Marked);
        }
        if container.restart_policy.as_deref() == Some("Always") {
            return Some(HelperKind::RestartedAlways);
        }
        known_helper(container).map(HelperKind::Known)
    };
    let apps: Vec<String> = containers
        .iter()
        .filter(|container| !is_proxy(container) && helper_kind(container).is_none())
        .map(|container| format!("\"{}\"", container.name()))
        .collect();
    if apps.is_empty() || stopped_by_the_pod(workload, settings) {
        // Nothing in the pod finishes (the helpers are the work), or the pod stops them.
        return None;
    }
    let helpers: Vec<Helper> = containers
        .iter()
        .enumerate()
        .filter_map(|(index, container)| {
            let kind = helper_kind(container)?;
            let unused_endpoint = stops_by_itself(workload, container, &kind)?;
            Some(Helper {
                index,
                container,
                kind,
                unused_endpoint,
            })
        })
        .collect();
    (!helpers.is_empty()).then_some(Holders { helpers, apps })
}

/// The helper whose image (and, for one image of many uses, command) this container has.
fn known_helper(container: &Container) -> Option<&'static KnownHelper> {
    let repository = image_repository(container.image.as_deref().unwrap_or(""));
    KNOWN_HELPERS.iter().find(|helper| {
        helper
            .images
            .iter()
            .any(|fragment| repository_has(repository, fragment))
            && (helper.command_words.is_empty()
                || container
                    .command()
                    .iter()
                    .chain(container.args())
                    .flat_map(|text| text.split_whitespace())
                    .any(|word| helper.command_words.contains(&word)))
    })
}

/// `gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.11` → `gcr.io/cloud-sql-connectors/cloud-sql-proxy`.
fn image_repository(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rsplit_once(':') {
        // A colon after the last slash is a tag; before it, a registry's port.
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => without_digest,
    }
}

/// Whether `fragment` is whole path segments of `repository` (`vault` matches `vault` and
/// `hashicorp/vault`, not `vaultwarden`).
fn repository_has(repository: &str, fragment: &str) -> bool {
    let repository = repository.to_ascii_lowercase();
    repository.match_indices(fragment).any(|(start, _)| {
        let end = start + fragment.len();
        (start == 0 || repository.as_bytes()[start - 1] == b'/')
            && (end == repository.len() || repository.as_bytes()[end] == b'/')
    })
}

/// Something in the pod stops its helpers: a container that kills processes by name (with the
/// process namespace shared, the usual do-it-yourself fix), or a string carrying one of the
/// `exitMarkers`.
fn stopped_by_the_pod(workload: &Workload, settings: &Settings) -> bool {
    let markers = &settings.raw.exit_markers;
    workload.spec.containers().iter().any(|container| {
        let image = container.image.as_deref().unwrap_or("");
        container.script_strings().any(|text| {
            text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
                .any(|word| matches!(word.rsplit('/').next(), Some("pkill" | "killall")))
        }) || container.script_strings().chain([image]).any(|text| {
            markers
                .iter()
                .any(|marker| !marker.is_empty() && text.contains(marker.as_str()))
        })
    })
}

/// `None` when the helper stops by itself (its exit flag, or its quit endpoint called by
/// another container); else whether it runs with a quit endpoint that nobody calls.
fn stops_by_itself(workload: &Workload, container: &Container, kind: &HelperKind) -> Option<bool> {
    let stop = match kind {
        HelperKind::Known(helper) => helper.stop,
        // The kubelet starts it again whatever it does.
        HelperKind::RestartedAlways => return Some(false),
        HelperKind::Marked => OwnStop::None,
    };
    let strings: Vec<&str> = container.script_strings().collect();
    let has_word = |words: &[&str]| {
        strings.iter().any(|text| {
            text.split_whitespace()
                .any(|word| words.iter().any(|wanted| word.starts_with(wanted)))
        })
    };
    // A helper started by a script that waits for something (a file the app leaves, a signal)
    // has its own way out: the sentinel-file pattern of the years before native sidecars.
    let waits = strings.iter().any(|text| {
        text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
            .any(|word| matches!(word, "while" | "until" | "trap" | "inotifywait"))
    });
    if waits {
        return None;
    }
    match stop {
        OwnStop::ExitFlag { flags, .. } if has_word(flags) => None,
        OwnStop::QuitEndpoint { flag, .. } if has_word(&[flag, &flag[1..]]) => {
            let called = workload.spec.containers().iter().any(|other| {
                other.name() != container.name()
                    && other
                        .script_strings()
                        .any(|text| text.contains("quitquitquit"))
            });
            if called { None } else { Some(true) }
        }
        _ => Some(false),
    }
}

fn finding(workload: &Workload, mesh: Option<Mesh>, helper: &Helper, apps: &[String]) -> Finding {
    let name = helper.container.name();
    let (who, stop) = match helper.kind {
        HelperKind::Known(known) => (
            format!(
                "container \"{name}\" ({}, which runs until it is stopped)",
                known.what
            ),
            known.stop,
        ),
        HelperKind::Marked => (
            format!(
                "container \"{name}\" (listed in {SIDECARS_ANNOTATION} as running until stopped)"
            ),
            OwnStop::None,
        ),
        HelperKind::RestartedAlways => (
            format!(
                "container \"{name}\" (restartPolicy: Always, so the kubelet starts it again on every exit)"
            ),
            OwnStop::None,
        ),
    };
    let endpoint = if helper.unused_endpoint {
        " serves /quitquitquit, but no other container calls it, so it"
    } else {
        ""
    };
    let has = if apps.len() == 1 { "has" } else { "have" };
    let message = format!(
        "{who}{endpoint} keeps running once {} {has} finished, so the pod never completes and {} never succeeds.",
        counted("container", apps),
        job_phrase(workload)
    );
    let native = format!(
        "Move \"{name}\" to initContainers with restartPolicy: Always (a native sidecar, Kubernetes 1.29 or newer): the kubelet stops it once the app containers have finished"
    );
    let fix = match stop {
        _ if matches!(helper.kind, HelperKind::RestartedAlways) => format!(
            "Set restartPolicy: Never or OnFailure on \"{name}\" (or leave it out, so the pod's applies); if it must run beside the app, move it to initContainers as a native sidecar, which the kubelet stops once the app containers have finished."
        ),
        OwnStop::QuitEndpoint { call, .. } if helper.unused_endpoint => {
            format!("{native}; or end the app's command with {call}.")
        }
        OwnStop::QuitEndpoint { flag, call } => {
            format!("{native}; or start it with {flag} and end the app's command with {call}.")
        }
        OwnStop::ExitFlag { fix, .. } => format!("{native}; or {fix}."),
        OwnStop::None => format!("{native}."),
    };
    Finding {
        rule: &JOB_HELPER_NEVER_EXITS,
        severity: JOB_HELPER_NEVER_EXITS.severity,
        path: workload.container_path(helper.index),
        message,
        fix,
        mesh,
        container: Some(name.to_string()),
    }
}

fn job_phrase(workload: &Workload) -> String {
    if let Some(embedded) = &workload.embedded {
        return embedded.phrase.clone();
    }
    match workload.kind {
        WorkloadKind::Job => "the Job".into(),
        WorkloadKind::CronJob => "each Job of the CronJob".into(),
        _ => "the batch pod".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_repositories_lose_tag_and_digest_but_keep_a_registry_port() {
        assert_eq!(
            image_repository("gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.11.0"),
            "gcr.io/cloud-sql-connectors/cloud-sql-proxy"
        );
        assert_eq!(
            image_repository("registry:5000/team/fluent-bit"),
            "registry:5000/team/fluent-bit"
        );
        assert_eq!(
            image_repository("hashicorp/vault@sha256:abc"),
            "hashicorp/vault"
        );
    }

    #[test]
    fn fragments_match_whole_path_segments() {
        assert!(repository_has("hashicorp/vault", "vault"));
        assert!(repository_has("vault", "vault"));
        assert!(!repository_has("dani-garcia/vaultwarden", "vault"));
        assert!(repository_has(
            "gcr.io/cloud-sql-connectors/cloud-sql-proxy",
            "cloud-sql-proxy"
        ));
        assert!(repository_has(
            "docker.io/grafana/promtail",
            "grafana/promtail"
        ));
        assert!(!repository_has("my-fluent-bit-config", "fluent-bit"));
    }
}
