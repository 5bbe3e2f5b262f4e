//! The rule table: docs, the CLI and the selection parameters all read this one list.

use crate::violation::Severity;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub id: &'static str,
    pub name: &'static str,
    /// The usual severity; some rules lower or raise it case by case (documented per rule).
    pub severity: Severity,
    pub summary: &'static str,
}

macro_rules! rule {
    ($id:literal, $name:literal, $severity:ident, $summary:literal) => {
        Rule {
            id: $id,
            name: $name,
            severity: Severity::$severity,
            summary: $summary,
        }
    };
}

pub const INVALID_INPUT: Rule = rule!(
    "ML000",
    "invalid-input",
    Error,
    "The input cannot be evaluated."
);
pub const STARTUP_NO_HOLD: Rule = rule!(
    "ML101",
    "startup-no-hold",
    Warning,
    "Classic proxy without hold: the app can start before the proxy is ready."
);
pub const STARTUP_HOLD_NOT_FIRST: Rule = rule!(
    "ML102",
    "startup-hold-not-first",
    Warning,
    "Hold hook present but the proxy is not the first container."
);
pub const NATIVE_SIDECAR_NO_STARTUP_GATE: Rule = rule!(
    "ML103",
    "native-sidecar-no-startup-gate",
    Warning,
    "Native proxy with neither startupProbe nor postStart."
);
pub const NATIVE_SIDECAR_UNSUPPORTED: Rule = rule!(
    "ML104",
    "native-sidecar-unsupported",
    Error,
    "Native sidecar on a cluster that cannot run it, or a proxy init container without restartPolicy Always."
);
pub const INIT_CONTAINER_NO_NETWORK: Rule = rule!(
    "ML201",
    "init-container-no-network",
    Warning,
    "With CNI capture and a classic proxy, user init containers have no working network."
);
pub const INIT_CONTAINER_AFTER_REDIRECT: Rule = rule!(
    "ML202",
    "init-container-after-redirect",
    Warning,
    "A user init container runs after the traffic redirect, before any proxy."
);
pub const JOB_SIDECAR_NEVER_EXITS: Rule = rule!(
    "ML301",
    "job-sidecar-never-exits",
    Error,
    "Batch pod with a classic proxy and nothing that stops it: the Job never completes."
);
pub const JOB_SHUTDOWN_ENDPOINT_DISABLED: Rule = rule!(
    "ML302",
    "job-shutdown-endpoint-disabled",
    Error,
    "A Linkerd batch pod calls the proxy's shutdown endpoint, which is disabled."
);
pub const JOB_NO_DEADLINE: Rule = rule!(
    "ML303",
    "job-no-deadline",
    Info,
    "Batch pod with a classic proxy and no activeDeadlineSeconds."
);
pub const JOB_HELPER_NEVER_EXITS: Rule = rule!(
    "ML304",
    "job-helper-never-exits",
    Error,
    "Batch pod with a helper that runs until stopped (a database proxy, an agent, a log shipper) as a regular container: the Job never completes."
);
pub const DRAIN_EXCEEDS_GRACE: Rule = rule!(
    "ML401",
    "drain-exceeds-grace",
    Error,
    "Istio's drain is not shorter than the grace period: the pod is killed mid-drain."
);
pub const PROXY_EXITS_BEFORE_APP: Rule = rule!(
    "ML402",
    "proxy-exits-before-app",
    Warning,
    "The app's preStop outlasts Istio's drain: the proxy exits while the app still works."
);
pub const LISTENERS_CLOSE_BEFORE_APP: Rule = rule!(
    "ML406",
    "listeners-close-before-app",
    Warning,
    "A classic Istio proxy closes its inbound listeners after drainDuration while terminationDrainDuration keeps it running and the app still serves."
);
pub const IN_PLACE_RESTART_SKIPS_DRAIN: Rule = rule!(
    "ML407",
    "in-place-restart-skips-drain",
    Warning,
    "A RestartAllContainers restart rule on a meshed pod: the proxy is killed without draining and the init containers run again."
);
pub const LINKERD_APP_SHUTDOWN_UNPROTECTED: Rule = rule!(
    "ML403",
    "linkerd-app-shutdown-unprotected",
    Warning,
    "Linkerd's classic proxy refuses new requests at SIGTERM while the app still shuts down."
);
pub const LONG_LIVED_STREAMS: Rule = rule!(
    "ML404",
    "long-lived-streams",
    Info,
    "gRPC, HTTP/2 or WebSocket streams are cut at every pod exit."
);
pub const PRESTOP_EXCEEDS_GRACE: Rule = rule!(
    "ML405",
    "prestop-exceeds-grace",
    Error,
    "An app preStop delay is not shorter than the grace period."
);
pub const ROLLOUT_CAPACITY: Rule = rule!(
    "ML501",
    "rollout-capacity",
    Warning,
    "A rollout can take the workload below minAvailable ready replicas."
);
pub const MISSING_READINESS: Rule = rule!(
    "ML502",
    "missing-readiness",
    Warning,
    "A container serves ports but has no readinessProbe."
);
pub const INVALID_MESH_ANNOTATION: Rule = rule!(
    "ML601",
    "invalid-mesh-annotation",
    Warning,
    "A lifecycle annotation the mesh would ignore or reject."
);
pub const AMBIENT_WITH_SIDECAR: Rule = rule!(
    "ML602",
    "ambient-with-sidecar",
    Warning,
    "A pod asks for both Istio ambient and a sidecar: the sidecar wins and ambient leaves the pod out."
);
pub const WAYPOINT_SHORT_GRACE: Rule = rule!(
    "ML603",
    "waypoint-short-grace",
    Warning,
    "An Istio waypoint's grace period is shorter than its drain: its rollouts cut the L7 traffic in flight."
);
pub const WAYPOINT_SINGLE_REPLICA: Rule = rule!(
    "ML605",
    "waypoint-single-replica",
    Info,
    "An Istio waypoint Deployment runs one pod: while it is evicted or rescheduled, the L7 traffic it carries fails."
);
pub const AMBIENT_NETWORK_POLICY: Rule = rule!(
    "ML604",
    "ambient-network-policy",
    Warning,
    "A NetworkPolicy over Istio ambient pods blocks HBONE (port 15008) or the kubelet's probes (from 169.254.7.127)."
);

pub const RULES: &[Rule] = &[
    INVALID_INPUT,
    STARTUP_NO_HOLD,
    STARTUP_HOLD_NOT_FIRST,
    NATIVE_SIDECAR_NO_STARTUP_GATE,
    NATIVE_SIDECAR_UNSUPPORTED,
    INIT_CONTAINER_NO_NETWORK,
    INIT_CONTAINER_AFTER_REDIRECT,
    JOB_SIDECAR_NEVER_EXITS,
    JOB_SHUTDOWN_ENDPOINT_DISABLED,
    JOB_NO_DEADLINE,
    JOB_HELPER_NEVER_EXITS,
    DRAIN_EXCEEDS_GRACE,
    PROXY_EXITS_BEFORE_APP,
    LINKERD_APP_SHUTDOWN_UNPROTECTED,
    LONG_LIVED_STREAMS,
    PRESTOP_EXCEEDS_GRACE,
    LISTENERS_CLOSE_BEFORE_APP,
    IN_PLACE_RESTART_SKIPS_DRAIN,
    ROLLOUT_CAPACITY,
    MISSING_READINESS,
    INVALID_MESH_ANNOTATION,
    AMBIENT_WITH_SIDECAR,
    WAYPOINT_SHORT_GRACE,
    AMBIENT_NETWORK_POLICY,
    WAYPOINT_SINGLE_REPLICA,
];

/// Looks a rule up by id (`ML101`, any case) or name (`startup-no-hold`).
pub fn find(id_or_name: &str) -> Option<&'static Rule> {
    let wanted = id_or_name.trim();
    RULES
        .iter()
        .find(|rule| rule.id.eq_ignore_ascii_case(wanted) || rule.name == wanted)
}

impl Rule {
    /// True when `entry` (an id or a name, as in `rules`, `excludeRules` or the exempt
    /// annotation) designates this rule.
    pub fn is_named_by(&self, entry: &str) -> bool {
        let entry = entry.trim();
        self.id.eq_ignore_ascii_case(entry) || self.name == entry
    }
}
