//! A cluster's facts as flags ([`ClusterFactArgs`]: the lowest kubelet version, the Istio and
//! Linkerd versions and how they are installed), shared by `constraint`, `check` and `explain`;
//! the versions they name, parsed; the meshes' own control-plane namespaces.

use std::fmt;
use std::sync::LazyLock;

use clap::{Args, ValueEnum};
use regex::Regex;

use crate::constraints::constraint::EnforcementAction;

/// The cluster's facts and rule settings as flags: one definition shared by `meshlife
/// constraint` (which writes them into a constraint) and `meshlife check` (which checks under
/// the constraint they make, without a file).
#[derive(Args, Clone, Debug, Default, PartialEq)]
pub struct ClusterFactArgs {
    /// Lowest kubelet version in the cluster (`kubectl get nodes`): 1.31, v1.31.4, 1.31.4-eks-1
    /// (`meshlife check`: 1.37, today's, when no fact flag is given; else 1.33, the parameters'
    /// default).
    #[arg(long, value_name = "VERSION", value_parser = parse_kubernetes_version)]
    pub kubernetes: Option<KubernetesVersion>,

    /// Installed Istio version (`istioctl version`): 1.26, 1.27.1.
    #[arg(long, value_name = "VERSION", value_parser = parse_istio_version, help_heading = "Istio")]
    pub istio: Option<IstioVersion>,

    /// What istiod injects by default, overriding the version's default (ENABLE_NATIVE_SIDECARS:
    /// false up to 1.26; auto from 1.27, native when every kubelet is 1.33 or later).
    #[arg(
        long,
        value_name = "true|false",
        value_parser = parse_switch,
        help_heading = "Istio",
    )]
    pub istio_native_sidecars: Option<bool>,

    /// meshConfig.defaultConfig.holdApplicationUntilProxyStarts is on.
    #[arg(long, help_heading = "Istio")]
    pub istio_hold: bool,

    /// Helm values.global.proxy.holdApplicationUntilProxyStarts is on (a pod cannot switch it off).
    #[arg(long, help_heading = "Istio")]
    pub istio_hold_forced: bool,

    /// istio-cni captures traffic (no istio-init container).
    #[arg(long, help_heading = "Istio")]
    pub istio_cni: bool,

    /// meshConfig.defaultConfig.terminationDrainDuration, a Go duration (default 5s).
    #[arg(long, value_name = "DURATION", help_heading = "Istio")]
    pub istio_drain: Option<String>,

    /// meshConfig.defaultConfig.drainDuration, a Go duration (default 45s): how long Envoy
    /// drains its listeners (ML406).
    #[arg(long, value_name = "DURATION", help_heading = "Istio")]
    pub istio_drain_duration: Option<String>,

    /// Namespaces with Istio injection on, whatever their Namespace object says (`*`: all).
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        help_heading = "Istio"
    )]
    pub istio_injected_namespaces: Vec<String>,

    /// Namespaces in ambient mode, for reviews without a Namespace object (`*`: all).
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        help_heading = "Istio"
    )]
    pub istio_ambient_namespaces: Vec<String>,

    /// UID of istio-proxy (default 1337; OpenShift assigns another).
    #[arg(long, value_name = "UID", help_heading = "Istio")]
    pub istio_proxy_uid: Option<u32>,

    /// Installed Linkerd version (`linkerd version`): 2.19, stable-2.14.10, edge-26.5.2.
    #[arg(
        long,
        value_name = "VERSION",
        value_parser = parse_linkerd_version,
        help_heading = "Linkerd",
    )]
    pub linkerd: Option<LinkerdVersion>,

    /// Helm proxy.nativeSidecar, overriding the version's default (native from 2.20).
    #[arg(
        long,
        value_name = "true|false",
        value_parser = parse_switch,
        help_heading = "Linkerd",
    )]
    pub linkerd_native_sidecars: Option<bool>,

    /// Helm proxy.await, the default of config.linkerd.io/proxy-await (default true).
    #[arg(
        long,
        value_name = "true|false",
        value_parser = parse_switch,
        help_heading = "Linkerd",
    )]
    pub linkerd_await: Option<bool>,

    /// linkerd-cni captures traffic (no linkerd-init container).
    #[arg(long, help_heading = "Linkerd")]
    pub linkerd_cni: bool,

    /// Helm proxy.enableShutdownEndpoint is on (the proxy's /shutdown admin endpoint).
    #[arg(long, help_heading = "Linkerd")]
    pub linkerd_shutdown_endpoint: bool,

    /// Namespaces with Linkerd injection on, whatever their Namespace object says (`*`: all).
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        help_heading = "Linkerd"
    )]
    pub linkerd_injected_namespaces: Vec<String>,

    /// UID of linkerd-proxy (default 2102).
    #[arg(long, value_name = "UID", help_heading = "Linkerd")]
    pub linkerd_proxy_uid: Option<u32>,

    /// Findings below this severity are dropped.
    #[arg(long, value_enum, value_name = "SEVERITY", help_heading = "Rules")]
    pub min_severity: Option<MinSeverity>,

    /// Lowest number of available replicas a rolling update may leave (ML501; default 1).
    #[arg(long, value_name = "N", help_heading = "Rules")]
    pub min_available: Option<u32>,

    /// Only these rules run (ids or names).
    #[arg(
        long,
        value_name = "RULE,...",
        value_delimiter = ',',
        value_parser = crate::rule_reference::RuleNames,
        hide_possible_values = true,
        help_heading = "Rules"
    )]
    pub rules: Vec<String>,

    /// These rules never run (ids or names).
    #[arg(
        long,
        value_name = "RULE,...",
        value_delimiter = ',',
        value_parser = crate::rule_reference::RuleNames,
        hide_possible_values = true,
        help_heading = "Rules"
    )]
    pub exclude_rules: Vec<String>,

    /// Namespaces without findings: exact names or prefix globs (`team-*`).
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub exempt_namespaces: Vec<String>,

    /// Container images every rule ignores: exact, or prefix globs ending in `*`.
    #[arg(
        long,
        value_name = "IMAGE,...",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub exempt_images: Vec<String>,

    /// Extra strings that, in a Job's container, count as stopping its sidecar (ML301).
    #[arg(
        long,
        value_name = "TEXT,...",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub exit_markers: Vec<String>,
}

/// A Kubernetes version; only the minor number matters to the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubernetesVersion {
    pub minor: u32,
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "1.{}", self.minor)
    }
}

/// An Istio release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IstioVersion {
    pub minor: u32,
    /// As given, without a leading `v`.
    pub text: String,
}

impl IstioVersion {
    /// Whether istiod injects native sidecars when ENABLE_NATIVE_SIDECARS is not set: `auto`
    /// from 1.27, which is native only when every kubelet (the lowest, `kubernetes`) is 1.33 or
    /// later; classic before 1.27. The same reading `meshlife constraint` writes the parameter by.
    pub fn native_by_default(&self, kubernetes: &KubernetesVersion) -> bool {
        self.minor >= super::parameters::ISTIO_AUTO_NATIVE_SINCE
            && kubernetes.minor >= super::generate::ISTIO_AUTO_NATIVE_MIN_KUBERNETES
    }
}

impl fmt::Display for IstioVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

/// A Linkerd release: a stable (or enterprise) `2.MINOR[.PATCH]`, or an edge release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkerdVersion {
    Stable { minor: u32, text: String },
    Edge { release: (u32, u32, u32) },
}

impl LinkerdVersion {
    /// Whether this release injects native sidecars by default (Helm `proxy.nativeSidecar`).
    pub fn native_by_default(&self) -> bool {
        match self {
            LinkerdVersion::Stable { minor, .. } => *minor >= LINKERD_NATIVE_SINCE,
            LinkerdVersion::Edge { release } => *release >= LINKERD_NATIVE_SINCE_EDGE,
        }
    }

    /// Whether this release has `config.linkerd.io/proxy-await` (enabled by default).
    pub fn has_await(&self) -> bool {
        match self {
            LinkerdVersion::Stable { minor, .. } => *minor >= LINKERD_AWAIT_SINCE,
            LinkerdVersion::Edge { release } => *release >= LINKERD_AWAIT_SINCE_EDGE,
        }
    }
}

impl fmt::Display for LinkerdVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkerdVersion::Stable { text, .. } => formatter.write_str(text),
            LinkerdVersion::Edge {
                release: (year, month, number),
            } => write!(formatter, "edge-{year}.{month}.{number}"),
        }
    }
}

/// `MAJOR.MINOR[.PATCH]` followed by an optional `-pre-release` or `+build` suffix.
pub(super) fn release_numbers(text: &str) -> Option<Vec<u32>> {
    let core = text.split(['-', '+']).next()?;
    let parts: Vec<&str> = core.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    parts
        .iter()
        .map(|part| {
            if !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit()) {
                part.parse().ok()
            } else {
                None
            }
        })
        .collect()
}

pub fn parse_kubernetes_version(text: &str) -> Result<KubernetesVersion, String> {
    let trimmed = text.trim();
    let bare = trimmed.strip_prefix('v').unwrap_or(trimmed);
    match release_numbers(bare).as_deref() {
        Some([1, minor, ..]) => Ok(KubernetesVersion { minor: *minor }),
        Some([major, ..]) => Err(format!(
            "Kubernetes {major}.x does not exist: expected 1.MINOR[.PATCH] such as 1.31"
        )),
        _ => Err(
            "not a Kubernetes version: expected 1.MINOR[.PATCH] such as 1.31 (the lowest kubelet \
             version in `kubectl get nodes`)"
                .into(),
        ),
    }
}

pub fn parse_istio_version(text: &str) -> Result<IstioVersion, String> {
    let trimmed = text.trim();
    let bare = trimmed.strip_prefix('v').unwrap_or(trimmed);
    match release_numbers(bare).as_deref() {
        Some([1, minor, ..]) => Ok(IstioVersion {
            minor: *minor,
            text: bare.to_string(),
        }),
        Some([major, ..]) => Err(format!(
            "Istio {major}.x does not exist: expected 1.MINOR[.PATCH] such as 1.26"
        )),
        _ => Err(
            "not an Istio version: expected 1.MINOR[.PATCH] such as 1.26 (`istioctl version`)"
                .into(),
        ),
    }
}

pub fn parse_linkerd_version(text: &str) -> Result<LinkerdVersion, String> {
    let trimmed = text.trim();
    let usage = "expected 2.MINOR[.PATCH] such as 2.19 (also stable-2.14.10, enterprise-2.17.1, \
                 version-2.19), or an edge release such as edge-26.5.2 (`linkerd version`)";
    if let Some(edge) = trimmed.strip_prefix("edge-") {
        return match release_numbers(edge).as_deref() {
            Some(&[year, month, number]) => Ok(LinkerdVersion::Edge {
                release: (year, month, number),
            }),
            _ => Err(format!("not a Linkerd edge release: {usage}")),
        };
    }
    let bare = ["stable-", "enterprise-", "version-", "v"]
        .iter()
        .find_map(|prefix| trimmed.strip_prefix(prefix))
        .unwrap_or(trimmed);
    match release_numbers(bare).as_deref() {
        Some([2, minor, ..]) => Ok(LinkerdVersion::Stable {
            minor: *minor,
            text: bare.to_string(),
        }),
        Some([major, ..]) => Err(format!(
            "Linkerd {major}.x is not supported: {usage} (Linkerd 1.x has no sidecar injector)"
        )),
        _ => Err(format!("not a Linkerd version: {usage}")),
    }
}

/// `true`/`false`, also `enabled`/`disabled` (as Linkerd's annotations spell them).
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "enabled" => Ok(true),
        "false" | "disabled" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

pub(super) static DNS_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("a valid regex")
});

/// A Kubernetes object name (DNS-1123 subdomain).
pub fn parse_name(text: &str) -> Result<String, String> {
    if text.len() <= 253 && DNS_SUBDOMAIN.is_match(text) {
        Ok(text.to_string())
    } else {
        Err(
            "not a Kubernetes object name: lowercase letters, digits, '-' and '.', starting and \
             ending with a letter or digit, at most 253 characters"
                .into(),
        )
    }
}

/// Where the facts of a generated constraint were read, when a cluster gave them (`meshlife
/// constraint --from-cluster`): the file says so in its comments.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadFrom {
    /// `context kind-dev (https://127.0.0.1:6443)`.
    pub cluster: String,
    /// Parameter path (`istio.terminationDrainDuration`; `istio` and `linkerd` for the
    /// versions) -> the sentence saying where its value came from.
    pub sources: std::collections::BTreeMap<String, String>,
    /// What was read and no parameter carries.
    pub notes: Vec<String>,
}

/// The namespaces a generated constraint applies to, when a cluster's facts hold only there
/// (an Istio revision's): its `spec.match.namespaceSelector`, and the comment saying why.
#[derive(Clone, Debug, PartialEq)]
pub struct NamespaceScope {
    pub selector: serde_json::Value,
    pub comment: String,
}

/// The newest releases in December 2026 (Kubernetes 1.38 is due on 2026-12-16): the cluster
/// `check` and `explain` judge as when no version is given. Both meshes inject native sidecars
/// by default there, so the defaults of 2024 (classic sidecars) describe fewer clusters each
/// month; a run for an older cluster says so with the version flags.
pub const TODAYS_KUBERNETES: &str = "1.37";
pub const TODAYS_ISTIO: &str = "1.31";
pub const TODAYS_LINKERD: &str = "2.20";

impl ClusterFactArgs {
    /// True when any fact or rule flag is on the command line.
    pub fn any_given(&self) -> bool {
        *self != ClusterFactArgs::default()
    }

    /// True when a flag other than the rule settings is given: it describes a mesh install,
    /// whose version must then be given too (what injection produces depends on it).
    pub fn describes_the_cluster(&self) -> bool {
        let rule_settings_only = ClusterFactArgs {
            min_severity: self.min_severity,
            min_available: self.min_available,
            rules: self.rules.clone(),
            exclude_rules: self.exclude_rules.clone(),
            exempt_namespaces: self.exempt_namespaces.clone(),
            exempt_images: self.exempt_images.clone(),
            exit_markers: self.exit_markers.clone(),
            ..ClusterFactArgs::default()
        };
        *self != rule_settings_only
    }

    /// These facts, on today's releases when they describe nothing of the cluster: a rule flag
    /// alone (`--rules`, `--exempt-namespaces`) must not turn the cluster assumed back to
    /// 2024's. Facts of a mesh install without its version stay as given, for the error that
    /// asks for the version.
    pub fn or_todays_releases(mut self) -> Self {
        if !self.describes_the_cluster() {
            self.kubernetes = parse_kubernetes_version(TODAYS_KUBERNETES).ok();
            self.istio = parse_istio_version(TODAYS_ISTIO).ok();
            self.linkerd = parse_linkerd_version(TODAYS_LINKERD).ok();
        }
        self
    }
}

/// The one line a run that was given no version says: which cluster it judged as, and how to
/// describe another, so that "0 findings" is never read as "fine on my cluster" when it was
/// judged as a different one.
pub fn todays_releases_note() -> String {
    format!(
        "no cluster versions given: judged as a cluster on today's releases, Kubernetes \
         {TODAYS_KUBERNETES} with Istio {TODAYS_ISTIO} and Linkerd {TODAYS_LINKERD}, both \
         injecting native sidecars by default; for another cluster give --kubernetes, --istio \
         and --linkerd (classic sidecars: Istio 1.26 or older, or Kubernetes before 1.33; Linkerd \
         2.19 or older), --constraint FILE or --kubeconfig"
    )
}

/// Istio's control plane and gateways (the istio/gateway chart's usual namespaces): their
/// lifecycle is Istio's, not a workload owner's.
pub const ISTIO_CONTROL_PLANE: [&str; 3] = ["istio-system", "istio-ingress", "istio-egress"];
/// Linkerd's control plane and extensions, whose own pods are injected and some deliberately
/// so (linkerd-identity starts before any proxy can).
pub const LINKERD_CONTROL_PLANE: [&str; 4] = [
    "linkerd",
    "linkerd-viz",
    "linkerd-jaeger",
    "linkerd-multicluster",
];
/// linkerd-cni's own namespace, when it is installed.
pub const LINKERD_CNI_NAMESPACE: &str = "linkerd-cni";

/// Whether `namespace` is a mesh's own: `meshlife check` leaves it unjudged, as the generated
/// constraints exclude it, unless `--include-control-planes`.
pub fn is_control_plane_namespace(namespace: &str) -> bool {
    ISTIO_CONTROL_PLANE.contains(&namespace)
        || LINKERD_CONTROL_PLANE.contains(&namespace)
        || namespace == LINKERD_CNI_NAMESPACE
}

/// First Linkerd stable minor version (and edge release) injecting native sidecars by default.
pub(super) const LINKERD_NATIVE_SINCE: u32 = 20;

pub(super) const LINKERD_NATIVE_SINCE_EDGE: (u32, u32, u32) = (26, 5, 2);

/// First Linkerd stable minor version (and edge release) with `config.linkerd.io/proxy-await`.
pub(super) const LINKERD_AWAIT_SINCE: u32 = 11;

pub(super) const LINKERD_AWAIT_SINCE_EDGE: (u32, u32, u32) = (21, 4, 4);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderFailure {
    Ignore,
    Report,
}

impl ProviderFailure {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ProviderFailure::Ignore => "ignore",
            ProviderFailure::Report => "report",
        }
    }

    /// A deny constraint must not turn an outage of the provider into refused objects unless
    /// asked to; a warn or dryrun one costs nothing to report it, and is where it shows.
    pub(super) fn default_for(enforcement: Enforcement) -> ProviderFailure {
        match enforcement {
            Enforcement::Deny => ProviderFailure::Ignore,
            Enforcement::Warn | Enforcement::Dryrun => ProviderFailure::Report,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Enforcement {
    Deny,
    Warn,
    Dryrun,
}

impl Enforcement {
    pub(super) fn action(self) -> EnforcementAction {
        match self {
            Enforcement::Deny => EnforcementAction::Deny,
            Enforcement::Warn => EnforcementAction::Warn,
            Enforcement::Dryrun => EnforcementAction::Dryrun,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum MinSeverity {
    Info,
    Warning,
    Error,
}

impl MinSeverity {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            MinSeverity::Info => "info",
            MinSeverity::Warning => "warning",
            MinSeverity::Error => "error",
        }
    }
}

#[derive(Clone)]
pub(super) struct IstioFacts {
    pub(super) version: IstioVersion,
    pub(super) native: bool,
    pub(super) native_given: bool,
    /// What the version alone implies (for the comment when a flag overrides it).
    pub(super) native_by_version: bool,
    pub(super) hold: bool,
    pub(super) hold_forced: bool,
    pub(super) cni: bool,
    pub(super) drain: String,
    pub(super) drain_ms: u64,
    pub(super) drain_given: bool,
    /// `drainDuration`, when given: written only then.
    pub(super) envoy_drain: Option<String>,
    pub(super) injected_namespaces: Vec<String>,
    pub(super) ambient_namespaces: Vec<String>,
    pub(super) proxy_uid: Option<u32>,
}

#[derive(Clone)]
pub(super) struct LinkerdFacts {
    pub(super) version: LinkerdVersion,
    pub(super) native: bool,
    pub(super) native_given: bool,
    pub(super) proxy_await: bool,
    pub(super) await_given: bool,
    pub(super) cni: bool,
    pub(super) shutdown_endpoint: bool,
    pub(super) injected_namespaces: Vec<String>,
    pub(super) proxy_uid: Option<u32>,
}
