//! `meshlife constraint`: writes a Gatekeeper `MeshLifecycle` constraint for one cluster from its
//! facts, given as flags (the lowest kubelet version, the Istio and Linkerd versions and how they
//! are installed).
//!
//! Several parameters follow from versions, as the meshes' own defaults do:
//! - `istio.nativeSidecars`: istiod's ENABLE_NATIVE_SIDECARS is false up to 1.26 and `auto` from
//!   1.27, which injects native sidecars only when every kubelet is 1.33 or later;
//! - `linkerd.nativeSidecars`: native by default from Linkerd 2.20 (edge-26.5.2);
//! - `linkerd.proxyAwait`: enabled by default since Linkerd 2.11 (edge-21.4.4), absent before.
//!
//! Explicit flags override the derivations. The YAML carries a comment on every fact saying what
//! it changes in the rules, and the written parameters are checked by the policy module itself
//! (as `meshlife check --constraint` does) before anything is written, so the output is always a
//! constraint `check` and Gatekeeper accept.

use std::fmt;
use std::path::PathBuf;
use std::sync::LazyLock;

use clap::{ArgGroup, Args, ValueEnum};
use meshlife_policy::catalogue;
use meshlife_policy::duration::{format_ms, parse_go_duration};
use regex::Regex;
use serde_json::{Map, Value};

use crate::constraints::constraint::{
    CONSTRAINT_GROUP, CONSTRAINT_KIND, Constraint, EnforcementAction,
};
use crate::module::engine::Engine;
use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error, print_warning};

/// Lowest Kubernetes minor version that runs native sidecars (beta, on by default).
const NATIVE_MIN_MINOR: u32 = meshlife_policy::mesh::NATIVE_SIDECAR_MIN_MINOR;
/// Istio's ENABLE_NATIVE_SIDECARS=auto needs every kubelet at this minor version or later.
const ISTIO_AUTO_NATIVE_MIN_KUBERNETES: u32 = 33;
/// First Istio minor version whose ENABLE_NATIVE_SIDECARS default is `auto`.
const ISTIO_AUTO_NATIVE_SINCE: u32 = 27;
/// First Linkerd stable minor version (and edge release) injecting native sidecars by default.
const LINKERD_NATIVE_SINCE: u32 = 20;
const LINKERD_NATIVE_SINCE_EDGE: (u32, u32, u32) = (26, 5, 2);
/// First Linkerd stable minor version (and edge release) with `config.linkerd.io/proxy-await`.
const LINKERD_AWAIT_SINCE: u32 = 11;
const LINKERD_AWAIT_SINCE_EDGE: (u32, u32, u32) = (21, 4, 4);

const DEFAULT_DRAIN: &str = "5s";
const DEFAULT_ISTIO_UID: u32 = 1337;
const DEFAULT_LINKERD_UID: u32 = 2102;
/// Grace period of a pod spec that does not set `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: u64 = 30;
/// Kubeflow's kinds holding pod templates: Katib's Experiment and the training operator's jobs.
const EMBEDDING_KUBEFLOW_KINDS: &[&str] = &[
    "Experiment",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
];
/// Widest a comment line may be, indentation and `# ` included.
const COMMENT_WIDTH: usize = 100;

/// `meshlife constraint`: the cluster's facts plus what only a constraint file has (its name,
/// enforcement action, match and provider-failure handling).
#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("mesh").args(["istio", "linkerd"]).required(true).multiple(true)
))]
#[command(group(ArgGroup::new("cluster-version").args(["kubernetes"]).required(true)))]
pub struct ConstraintArgs {
    #[command(flatten)]
    pub facts: ClusterFactArgs,

    /// `metadata.name` of the constraint.
    #[arg(long, value_name = "NAME", default_value = "mesh-lifecycle", value_parser = parse_name)]
    pub name: String,

    /// One constraint named NAME with this `spec.enforcementAction`. Without it: the pair the
    /// shipped cluster files use, NAME-errors (deny the error findings; a provider outage
    /// admits) and NAME-warnings (warn on every other finding; an outage shows as a warning).
    #[arg(long, value_enum, value_name = "ACTION")]
    pub enforcement: Option<Enforcement>,

    /// Write the constraint to FILE instead of stdout (`-`: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// `spec.match.excludedNamespaces`, replacing the default: Kubernetes' own namespaces,
    /// gatekeeper-system and the given meshes' namespaces. An empty value excludes none.
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub exclude_namespaces: Option<Vec<String>>,

    /// What the constraint does when the External Data provider fails: `ignore` admits the
    /// object unchecked (fail open), `report` makes the failure a violation under the
    /// enforcement action (with deny: fail closed). Default: ignore with `--enforcement deny`,
    /// report with warn and dryrun, so that an outage never blocks but always shows.
    #[arg(long, value_enum, value_name = "MODE", help_heading = "Rules")]
    pub provider_failure: Option<ProviderFailure>,
}

/// The cluster's facts and rule settings as flags: one definition shared by `meshlife
/// constraint` (which writes them into a constraint) and `meshlife check` (which checks under
/// the constraint they make, without a file).
#[derive(Args, Clone, Debug, Default, PartialEq)]
pub struct ClusterFactArgs {
    /// Lowest kubelet version in the cluster (`kubectl get nodes`): 1.31, v1.31.4, 1.31.4-eks-1
    /// (`meshlife check`: default 1.33, the parameters' default).
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
        help_heading = "Rules"
    )]
    pub rules: Vec<String>,

    /// These rules never run (ids or names).
    #[arg(
        long,
        value_name = "RULE,...",
        value_delimiter = ',',
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderFailure {
    Ignore,
    Report,
}

impl ProviderFailure {
    fn as_str(self) -> &'static str {
        match self {
            ProviderFailure::Ignore => "ignore",
            ProviderFailure::Report => "report",
        }
    }

    /// A deny constraint must not turn an outage of the provider into refused objects unless
    /// asked to; a warn or dryrun one costs nothing to report it, and is where it shows.
    fn default_for(enforcement: Enforcement) -> ProviderFailure {
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
    fn action(self) -> EnforcementAction {
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
    fn as_str(self) -> &'static str {
        match self {
            MinSeverity::Info => "info",
            MinSeverity::Warning => "warning",
            MinSeverity::Error => "error",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Versions

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
fn release_numbers(text: &str) -> Option<Vec<u32>> {
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

static DNS_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
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

// ---------------------------------------------------------------------------------------------
// Generation

/// The generated constraints: their YAML text, the parameters each holds, and advice for stderr.
#[derive(Debug)]
pub struct Generated {
    pub yaml: String,
    /// Each constraint's name and parameters, in the order of the documents.
    pub constraints: Vec<(String, Value)>,
    pub warnings: Vec<String>,
}

/// Runs `meshlife constraint` and returns the exit code.
pub fn run_constraint(args: &ConstraintArgs) -> u8 {
    let generated = match generate(args) {
        Ok(generated) => generated,
        Err(error) => {
            print_error(error);
            return EXIT_ERROR;
        }
    };
    if let Err(error) = validate(&generated) {
        print_error(error);
        return EXIT_ERROR;
    }
    for warning in &generated.warnings {
        print_warning(warning);
    }
    match args.output.as_ref().filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            if let Err(error) = std::fs::write(path, &generated.yaml) {
                print_error(format_args!("cannot write {}: {error}", path.display()));
                return EXIT_ERROR;
            }
        }
        None => {
            if let Err(error) = crate::terminal::write_stdout(&generated.yaml) {
                print_error(error);
                return EXIT_ERROR;
            }
        }
    }
    EXIT_OK
}

/// Reads the written YAML back as `meshlife check --constraint` does, and has the policy module
/// judge each constraint's parameters: what is written must be what `check` and Gatekeeper use.
fn validate(generated: &Generated) -> Result<(), String> {
    let engine = Engine::embedded().map_err(|error| format!("{error:#}"))?;
    let read_back =
        crate::constraints::constraint::parse_constraints_text("(generated)", &generated.yaml)
            .map_err(|error| format!("the generated YAML does not read back: {error}"))?;
    let intended: Vec<(&str, &Value)> = generated
        .constraints
        .iter()
        .map(|(name, parameters)| (name.as_str(), parameters))
        .collect();
    let found: Vec<(&str, &Value)> = read_back
        .iter()
        .map(|constraint| (constraint.name.as_str(), &constraint.parameters))
        .collect();
    if found != intended {
        return Err(format!(
            "the generated YAML holds other constraints than intended: {found:?} instead of \
             {intended:?}"
        ));
    }
    for constraint in &read_back {
        constraint
            .validate_parameters(&engine)
            .map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Builds the constraint, or the pair, for `args`. Errors name the flag at fault.
pub fn generate(args: &ConstraintArgs) -> Result<Generated, String> {
    let roles: &[Role] = match args.enforcement {
        Some(enforcement) => &[Role::Single(enforcement)],
        None => &[Role::Errors, Role::Warnings],
    };
    generate_documents(args, roles, true)
}

/// The constraint `meshlife constraint --enforcement deny` writes for these facts (its default
/// name), as `meshlife check` reads it, so a quick run without a file judges the findings the
/// cluster's constraints would (each once, where the pair repeats a denied ML401 or ML403 as a
/// warning). Returns the warnings about the facts too.
/// With `include_control_planes`, the meshes' own namespaces are matched too (`check
/// --include-control-planes`); Kubernetes' and Gatekeeper's stay excluded.
pub fn constraint_for_check(
    facts: ClusterFactArgs,
    include_control_planes: bool,
) -> Result<(Constraint, Vec<String>), String> {
    let exclude_namespaces = include_control_planes.then(|| {
        [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "gatekeeper-system",
        ]
        .map(String::from)
        .to_vec()
    });
    let args = ConstraintArgs {
        facts,
        name: "mesh-lifecycle".into(),
        enforcement: Some(Enforcement::Deny),
        output: None,
        exclude_namespaces,
        provider_failure: None,
    };
    // The warning about info findings denying admission is about Gatekeeper, not this run.
    let generated = generate_documents(&args, &[Role::Single(Enforcement::Deny)], false)?;
    let mut constraints =
        crate::constraints::constraint::parse_constraints_text(FACTS_SOURCE, &generated.yaml)
            .map_err(|error| {
                format!("the constraint made from the flags does not read back: {error}")
            })?;
    match (constraints.pop(), constraints.is_empty()) {
        (Some(constraint), true) => Ok((constraint, generated.warnings)),
        _ => Err("the constraint made from the flags is not one constraint".into()),
    }
}

/// How findings from a constraint made of command-line facts name their source.
pub const FACTS_SOURCE: &str = "(command-line facts)";

impl ClusterFactArgs {
    /// True when any fact or rule flag is on the command line.
    pub fn any_given(&self) -> bool {
        *self != ClusterFactArgs::default()
    }
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

/// Which constraint a document is: one with the chosen action, or one of the pair the cluster
/// files use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Single(Enforcement),
    /// NAME-errors: deny, error findings only, a provider outage admits (unless
    /// `--provider-failure report`).
    Errors,
    /// NAME-warnings: warn on everything NAME-errors does not deny, an outage is reported.
    Warnings,
}

/// The rules whose findings are always errors (their row of docs/rules.md says `error` and
/// nothing else): NAME-errors denies all of them, so NAME-warnings leaves them out. ML401 and
/// ML403 are not here: each is an error in some cases and a warning in others.
pub const ALWAYS_ERROR_RULES: [&str; 4] = ["ML104", "ML301", "ML302", "ML405"];

impl Role {
    fn enforcement(self) -> Enforcement {
        match self {
            Role::Single(enforcement) => enforcement,
            Role::Errors => Enforcement::Deny,
            Role::Warnings => Enforcement::Warn,
        }
    }

    fn name(self, base: &str) -> String {
        match self {
            Role::Single(_) => base.to_string(),
            Role::Errors => format!("{base}-errors"),
            Role::Warnings => format!("{base}-warnings"),
        }
    }

    fn provider_failure(self, chosen: Option<ProviderFailure>) -> ProviderFailure {
        match self {
            Role::Single(enforcement) => {
                chosen.unwrap_or_else(|| ProviderFailure::default_for(enforcement))
            }
            Role::Errors => chosen.unwrap_or(ProviderFailure::Ignore),
            // Where an outage shows while NAME-errors admits: always reported.
            Role::Warnings => ProviderFailure::Report,
        }
    }

    /// The facts as this constraint holds them: the pair splits the findings by severity.
    fn facts(self, facts: &Facts) -> Facts {
        let mut facts = facts.clone();
        match self {
            Role::Single(_) => {}
            Role::Errors => facts.min_severity = Some(MinSeverity::Error),
            Role::Warnings => {
                for rule in ALWAYS_ERROR_RULES {
                    if !facts.exclude_rules.iter().any(|given| given == rule) {
                        facts.exclude_rules.push(rule.to_string());
                    }
                }
            }
        }
        facts
    }
}

fn generate_documents(
    args: &ConstraintArgs,
    roles: &[Role],
    warn_about_info_denials: bool,
) -> Result<Generated, String> {
    let facts = Facts::from_args(args)?;
    let mut warnings = Vec::new();
    if warn_about_info_denials
        && args.enforcement == Some(Enforcement::Deny)
        && facts.min_severity.is_none()
    {
        warnings.push(
            "--enforcement deny without --min-severity: Gatekeeper rejects objects for every \
             finding, info ones (ML303 job-no-deadline, ML404 long-lived-streams) included; \
             consider --min-severity warning or error, or leave out --enforcement for the pair \
             that denies errors and warns on the rest"
                .into(),
        );
    }
    let mut yaml = header(args, &facts, roles);
    let mut constraints = Vec::new();
    for (index, role) in roles.iter().enumerate() {
        // The facts' advice (an unsupported native sidecar, say) is given once.
        let mut ignored = Vec::new();
        let role_warnings = if index == 0 {
            &mut warnings
        } else {
            &mut ignored
        };
        let (document, parameters) = constraint_document(args, &facts, *role, role_warnings)?;
        if index > 0 {
            yaml.push_str("---\n");
        }
        document.render_entries(0, &mut yaml);
        constraints.push((role.name(&args.name), parameters));
    }
    Ok(Generated {
        yaml,
        constraints,
        warnings,
    })
}

/// One MeshLifecycle constraint as YAML, and its parameters as they read back.
fn constraint_document(
    args: &ConstraintArgs,
    facts: &Facts,
    role: Role,
    warnings: &mut Vec<String>,
) -> Result<(Yaml, Value), String> {
    let facts = role.facts(facts);
    let enforcement = role.enforcement();
    let provider_failure = role.provider_failure(args.provider_failure);
    let mut parameters = parameters_section(&facts, role, warnings);
    parameters.push(
        "providerFailure",
        Value::from(provider_failure.as_str()),
        provider_failure_comment(enforcement, provider_failure),
    );
    let parameters = Parameters {
        yaml: Yaml::Map(parameters.entries),
        value: Value::Object(parameters.value),
    };
    let spec = Yaml::Map(vec![
        Entry::new(
            "enforcementAction",
            Yaml::plain(enforcement.action().as_str()),
        )
        .comment(enforcement_comment(role, &args.name, facts.min_severity)),
        Entry::new("match", match_section(args, &facts)?),
        Entry::new("parameters", parameters.yaml).comment(parameters_comment(&facts)),
    ]);
    let document = Yaml::Map(vec![
        Entry::new(
            "apiVersion",
            Yaml::plain(&format!("{CONSTRAINT_GROUP}/v1beta1")),
        ),
        Entry::new("kind", Yaml::plain(CONSTRAINT_KIND)),
        Entry::new(
            "metadata",
            Yaml::Map(vec![Entry::new(
                "name",
                Yaml::string(&role.name(&args.name)),
            )]),
        ),
        Entry::new("spec", spec),
    ]);
    Ok((document, parameters.value))
}

/// The cluster's facts, validated, with the derived parameter values.
#[derive(Clone)]
struct Facts {
    kubernetes: u32,
    istio: Option<IstioFacts>,
    linkerd: Option<LinkerdFacts>,
    min_severity: Option<MinSeverity>,
    min_available: Option<u32>,
    rules: Vec<String>,
    exclude_rules: Vec<String>,
    exempt_namespaces: Vec<String>,
    exempt_images: Vec<String>,
    exit_markers: Vec<String>,
}

#[derive(Clone)]
struct IstioFacts {
    version: IstioVersion,
    native: bool,
    native_given: bool,
    /// What the version alone implies (for the comment when a flag overrides it).
    native_by_version: bool,
    hold: bool,
    hold_forced: bool,
    cni: bool,
    drain: String,
    drain_ms: u64,
    drain_given: bool,
    injected_namespaces: Vec<String>,
    ambient_namespaces: Vec<String>,
    proxy_uid: Option<u32>,
}

#[derive(Clone)]
struct LinkerdFacts {
    version: LinkerdVersion,
    native: bool,
    native_given: bool,
    proxy_await: bool,
    await_given: bool,
    cni: bool,
    shutdown_endpoint: bool,
    injected_namespaces: Vec<String>,
    proxy_uid: Option<u32>,
}

impl Facts {
    fn from_args(args: &ConstraintArgs) -> Result<Facts, String> {
        mesh_flags_need_their_version(&args.facts)?;
        let kubernetes = args.facts.kubernetes.as_ref().map_or_else(
            || meshlife_policy::params::Parameters::default().kubernetes_minor_version,
            |version| version.minor,
        );
        let istio = match &args.facts.istio {
            None => None,
            Some(version) => {
                let native_by_version = version.minor >= ISTIO_AUTO_NATIVE_SINCE
                    && kubernetes >= ISTIO_AUTO_NATIVE_MIN_KUBERNETES;
                let drain = args
                    .facts
                    .istio_drain
                    .as_deref()
                    .unwrap_or(DEFAULT_DRAIN)
                    .trim()
                    .to_string();
                let drain_ms = parse_go_duration(&drain).map_err(|error| {
                    format!("--istio-drain: {error} (a Go duration such as 5s, 1m30s or 500ms)")
                })?;
                Some(IstioFacts {
                    version: version.clone(),
                    native: args
                        .facts
                        .istio_native_sidecars
                        .unwrap_or(native_by_version),
                    native_given: args.facts.istio_native_sidecars.is_some(),
                    native_by_version,
                    hold: args.facts.istio_hold,
                    hold_forced: args.facts.istio_hold_forced,
                    cni: args.facts.istio_cni,
                    drain,
                    drain_ms,
                    drain_given: args.facts.istio_drain.is_some(),
                    injected_namespaces: namespaces(
                        "--istio-injected-namespaces",
                        &args.facts.istio_injected_namespaces,
                        false,
                    )?,
                    ambient_namespaces: namespaces(
                        "--istio-ambient-namespaces",
                        &args.facts.istio_ambient_namespaces,
                        false,
                    )?,
                    proxy_uid: args.facts.istio_proxy_uid,
                })
            }
        };
        let linkerd = args
            .facts
            .linkerd
            .as_ref()
            .map(|version| -> Result<_, String> {
                Ok(LinkerdFacts {
                    version: version.clone(),
                    native: args
                        .facts
                        .linkerd_native_sidecars
                        .unwrap_or_else(|| version.native_by_default()),
                    native_given: args.facts.linkerd_native_sidecars.is_some(),
                    proxy_await: args
                        .facts
                        .linkerd_await
                        .unwrap_or_else(|| version.has_await()),
                    await_given: args.facts.linkerd_await.is_some(),
                    cni: args.facts.linkerd_cni,
                    shutdown_endpoint: args.facts.linkerd_shutdown_endpoint,
                    injected_namespaces: namespaces(
                        "--linkerd-injected-namespaces",
                        &args.facts.linkerd_injected_namespaces,
                        false,
                    )?,
                    proxy_uid: args.facts.linkerd_proxy_uid,
                })
            });
        Ok(Facts {
            kubernetes,
            istio,
            linkerd: linkerd.transpose()?,
            min_severity: args.facts.min_severity,
            min_available: args.facts.min_available,
            rules: rule_list("--rules", &args.facts.rules)?,
            exclude_rules: rule_list("--exclude-rules", &args.facts.exclude_rules)?,
            exempt_namespaces: namespaces(
                "--exempt-namespaces",
                &args.facts.exempt_namespaces,
                false,
            )?,
            exempt_images: non_empty(&args.facts.exempt_images),
            exit_markers: non_empty(&args.facts.exit_markers),
        })
    }
}

/// A mesh's flags describe one install of it, and what injection produces depends on its
/// version (the native-sidecar default, the hold and drain settings it reads), so they need
/// `--istio` or `--linkerd`. clap's `requires` says only "required argument not provided"; this
/// says why and shows the line to type.
fn mesh_flags_need_their_version(facts: &ClusterFactArgs) -> Result<(), String> {
    let istio_flags = [
        (
            "--istio-native-sidecars",
            facts.istio_native_sidecars.is_some(),
        ),
        ("--istio-hold", facts.istio_hold),
        ("--istio-hold-forced", facts.istio_hold_forced),
        ("--istio-cni", facts.istio_cni),
        ("--istio-drain", facts.istio_drain.is_some()),
        (
            "--istio-injected-namespaces",
            !facts.istio_injected_namespaces.is_empty(),
        ),
        (
            "--istio-ambient-namespaces",
            !facts.istio_ambient_namespaces.is_empty(),
        ),
        ("--istio-proxy-uid", facts.istio_proxy_uid.is_some()),
    ];
    let linkerd_flags = [
        (
            "--linkerd-native-sidecars",
            facts.linkerd_native_sidecars.is_some(),
        ),
        ("--linkerd-await", facts.linkerd_await.is_some()),
        ("--linkerd-cni", facts.linkerd_cni),
        (
            "--linkerd-shutdown-endpoint",
            facts.linkerd_shutdown_endpoint,
        ),
        (
            "--linkerd-injected-namespaces",
            !facts.linkerd_injected_namespaces.is_empty(),
        ),
        ("--linkerd-proxy-uid", facts.linkerd_proxy_uid.is_some()),
    ];
    let given = |flags: &[(&'static str, bool)]| -> Vec<&'static str> {
        flags
            .iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect()
    };
    let mut problems = Vec::new();
    if facts.istio.is_none() {
        let orphans = given(&istio_flags);
        if !orphans.is_empty() {
            problems.push(format!(
                "{} describe{} an Istio install, so {} --istio VERSION (`istioctl version`): \
                 what injection produces depends on the version (native sidecars by default \
                 from 1.27 on Kubernetes 1.33, the hold and drain settings it reads): add, for \
                 example, `--istio 1.26` (your version)",
                orphans.join(", "),
                if orphans.len() == 1 { "s" } else { "" },
                if orphans.len() == 1 {
                    "it needs"
                } else {
                    "they need"
                },
            ));
        }
    }
    if facts.linkerd.is_none() {
        let orphans = given(&linkerd_flags);
        if !orphans.is_empty() {
            problems.push(format!(
                "{} describe{} a Linkerd install, so {} --linkerd VERSION (`linkerd version`): \
                 what injection produces depends on the version (native sidecars by default \
                 from 2.20, proxy-await from 2.11): add, for example, `--linkerd 2.19` (your \
                 version)",
                orphans.join(", "),
                if orphans.len() == 1 { "s" } else { "" },
                if orphans.len() == 1 {
                    "it needs"
                } else {
                    "they need"
                },
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

static NAMESPACE_PATTERN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9*]([-a-z0-9*]*)?$").expect("a valid regex"));

/// The list's entries, trimmed, empty ones dropped, each a namespace name or a glob.
fn namespaces(flag: &str, entries: &[String], allow_empty: bool) -> Result<Vec<String>, String> {
    let cleaned = non_empty(entries);
    for entry in &cleaned {
        if entry.len() > 63 || !NAMESPACE_PATTERN.is_match(entry) {
            return Err(format!(
                "{flag}: {entry:?} is not a namespace name (lowercase letters, digits and '-', \
                 '*' for globs)"
            ));
        }
    }
    if cleaned.is_empty() && !entries.is_empty() && !allow_empty {
        return Err(format!("{flag}: no namespace given"));
    }
    Ok(cleaned)
}

fn non_empty(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| entry.trim().to_string())
        .filter(|entry| !entry.is_empty())
        .collect()
}

fn rule_list(flag: &str, entries: &[String]) -> Result<Vec<String>, String> {
    let cleaned = non_empty(entries);
    for entry in &cleaned {
        if catalogue::find(entry).is_none() {
            if let Some(nearest) = crate::commands::rules::nearest_rules(entry) {
                return Err(format!(
                    "{flag}: {entry:?} is not a rule id or name; did you mean {nearest}? \
                     (`meshlife rules` lists them all)"
                ));
            }
            let known: Vec<&str> = catalogue::RULES.iter().map(|rule| rule.id).collect();
            return Err(format!(
                "{flag}: {entry:?} is not a rule id or name; the rules are {}",
                known.join(", ")
            ));
        }
    }
    Ok(cleaned)
}

/// `ML101 (startup-no-hold)`.
fn rule(id: &str) -> String {
    match catalogue::find(id) {
        Some(rule) => format!("{} ({})", rule.id, rule.name),
        None => id.to_string(),
    }
}

fn header(args: &ConstraintArgs, facts: &Facts, roles: &[Role]) -> String {
    let mut cluster = vec![format!(
        "kubernetes 1.{} (lowest kubelet)",
        facts.kubernetes
    )];
    if let Some(istio) = &facts.istio {
        let mut details = Vec::new();
        if istio.native {
            details.push("native sidecars");
        }
        if istio.cni {
            details.push("istio-cni");
        }
        cluster.push(if details.is_empty() {
            format!("istio {}", istio.version)
        } else {
            format!("istio {} ({})", istio.version, details.join(", "))
        });
    }
    if let Some(linkerd) = &facts.linkerd {
        let mut details = Vec::new();
        if linkerd.native {
            details.push("native sidecars");
        }
        if linkerd.cni {
            details.push("linkerd-cni");
        }
        cluster.push(if details.is_empty() {
            format!("linkerd {}", linkerd.version)
        } else {
            format!("linkerd {} ({})", linkerd.version, details.join(", "))
        });
    }
    let mut text = String::new();
    let names: Vec<String> = roles
        .iter()
        .map(|role| format!("{:?}", role.name(&args.name)))
        .collect();
    comment(
        0,
        &format!(
            "MeshLifecycle constraint{} {}, written by `meshlife constraint` (meshlife {}) for a \
             cluster running {}.",
            if names.len() == 1 { "" } else { "s" },
            names.join(" and "),
            env!("CARGO_PKG_VERSION"),
            cluster.join(", ")
        ),
        &mut text,
    );
    if roles.len() > 1 {
        comment(
            0,
            &format!(
                "Two constraints, applied together, as the cluster files of \
                 constraints/gatekeeper/clusters/ are: {errors} denies the error findings \
                 (certain breakage: Jobs that never finish, drains the kubelet cuts, pods that \
                 cannot start); {warnings} returns every other finding to `kubectl apply` as a \
                 warning and lists it in audit, without blocking. When the provider fails, \
                 {errors} admits the object ({provider}) and {warnings} reports an ML000 \
                 warning, so an outage never blocks and always shows. For one constraint, give \
                 --enforcement.",
                errors = Role::Errors.name(&args.name),
                warnings = Role::Warnings.name(&args.name),
                provider = Role::Errors
                    .provider_failure(args.provider_failure)
                    .as_str(),
            ),
            &mut text,
        );
    }
    comment(
        0,
        "Needs the meshlifecycle ConstraintTemplate (constraints/gatekeeper/template.yaml) and the \
         meshlife External Data provider (constraints/gatekeeper/provider.yaml). Try it on \
         manifests without a cluster: meshlife check --constraint THIS_FILE PATH... \
         Several parameters follow from the versions: write it again after upgrading Kubernetes \
         or a mesh.",
        &mut text,
    );
    text
}

fn enforcement_comment(role: Role, base: &str, min_severity: Option<MinSeverity>) -> String {
    let action = match role.enforcement() {
        Enforcement::Deny => {
            let which = match min_severity {
                None | Some(MinSeverity::Info) => {
                    "any finding, info ones included (minSeverity is info)".to_string()
                }
                Some(severity) => format!("a finding of severity {} or above", severity.as_str()),
            };
            format!(
                "deny: Gatekeeper rejects a create or update with {which}, and audit lists \
                 existing objects; meshlife check fails on these findings at or above --fail-on."
            )
        }
        Enforcement::Warn => "warn: Gatekeeper admits the object and returns the findings as \
                              warnings (kubectl prints them), and audit lists them; meshlife \
                              check reports them without failing."
            .into(),
        Enforcement::Dryrun => "dryrun: findings are only recorded by audit (the constraint's \
                                status.violations); nothing is rejected or shown at admission, \
                                and meshlife check reports them without failing."
            .into(),
    };
    match role {
        Role::Warnings => format!(
            "{action} Every finding {} does not deny, and the ML401 and ML403 errors it denies \
             again.",
            Role::Errors.name(base)
        ),
        Role::Single(_) | Role::Errors => action,
    }
}

fn match_section(args: &ConstraintArgs, facts: &Facts) -> Result<Yaml, String> {
    let kinds = |group: &str, kinds: &[&str]| {
        Item::new(Yaml::Map(vec![
            Entry::new("apiGroups", Yaml::Flow(vec![Yaml::string(group)])),
            Entry::new(
                "kinds",
                Yaml::Flow(kinds.iter().map(|kind| Yaml::plain(kind)).collect()),
            ),
        ]))
    };
    let mut entries = vec![
        Entry::new("scope", Yaml::string("*")).comment(
            "Argo's ClusterAnalysisTemplate is cluster-scoped (its Jobs run in the namespace of \
             the rollout that uses it); every other kind below is namespaced. The namespace \
             matchers leave cluster-scoped objects in, so only that kind is reviewed wherever it \
             is used.",
        ),
        Entry::new(
            "kinds",
            Yaml::Seq(vec![
                kinds("", &["Pod", "ReplicationController"]),
                kinds(
                    "apps",
                    &["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
                ),
                kinds("batch", &["Job", "CronJob"]),
                kinds(
                    "argoproj.io",
                    &["Rollout", "AnalysisTemplate", "ClusterAnalysisTemplate"],
                ),
                kinds("kubeflow.org", EMBEDDING_KUBEFLOW_KINDS),
                kinds("jobset.x-k8s.io", &["JobSet"]),
                kinds("batch.volcano.sh", &["Job"]),
            ]),
        )
        .comment(
            "The kinds meshlife reviews (every other kind never has findings), so no other \
             object costs an External Data call. Pods are judged exactly (they arrive injected); \
             controllers by predicting what injection does to their pod template; analysis \
             templates, Katib experiments, training jobs, JobSets and Volcano Jobs by the pod \
             templates they hold.",
        ),
    ];
    let mut excluded = Vec::new();
    match &args.exclude_namespaces {
        Some(given) => {
            let names = namespaces("--exclude-namespaces", given, true)?;
            if !names.is_empty() {
                excluded.push(Item::list(&names).comment("Never reviewed (--exclude-namespaces)."));
            }
        }
        None => {
            excluded.push(
                Item::list(&["kube-system", "kube-public", "kube-node-lease"]).comment(
                    "Kubernetes' own namespaces (neither mesh injects into kube-system or \
                         kube-public).",
                ),
            );
            if facts.istio.is_some() {
                excluded.push(Item::list(&ISTIO_CONTROL_PLANE).comment(
                    "Istio's control plane and gateways: their lifecycle is Istio's, not a \
                     workload owner's.",
                ));
            }
            if let Some(linkerd) = &facts.linkerd {
                let mut names = LINKERD_CONTROL_PLANE.to_vec();
                if linkerd.cni {
                    names.push(LINKERD_CNI_NAMESPACE);
                }
                excluded.push(Item::list(&names).comment(
                    "Linkerd's control plane and extensions, whose own pods are injected.",
                ));
            }
            excluded.push(Item::list(&["gatekeeper-system"]).comment(
                "Gatekeeper and the meshlife External Data provider: judging the provider's own \
                 Deployment would need the provider to be up already.",
            ));
        }
    }
    if !excluded.is_empty() {
        entries.push(Entry::new("excludedNamespaces", Yaml::Seq(excluded)));
    }
    Ok(Yaml::Map(entries))
}

fn parameters_comment(facts: &Facts) -> String {
    let mut text = String::from(
        "The cluster's facts as the rules read them (docs/rules.md, Parameters); keys left out \
         keep their defaults.",
    );
    if facts.istio.is_none() {
        text.push_str(
            " No Istio: a pod that still asks for an Istio sidecar is judged with Istio's \
             defaults (classic sidecars, no hold, 5s drain).",
        );
    }
    if facts.linkerd.is_none() {
        text.push_str(
            " No Linkerd: a pod annotated linkerd.io/inject: enabled is judged with Linkerd's \
             defaults (classic sidecars with proxy-await).",
        );
    }
    text
}

/// The parameters as YAML (with comments) and as the JSON value it parses to.
struct Parameters {
    yaml: Yaml,
    value: Value,
}

/// Collects entries of a parameter map and their JSON values side by side.
#[derive(Default)]
struct ParameterMap {
    entries: Vec<Entry>,
    value: Map<String, Value>,
}

impl ParameterMap {
    fn push(&mut self, key: &str, value: Value, comment: String) {
        self.entries
            .push(Entry::new(key, Yaml::from_json(&value)).comment(comment));
        self.value.insert(key.into(), value);
    }

    fn push_map(&mut self, key: &str, map: ParameterMap, comment: Option<String>) {
        let mut entry = Entry::new(key, Yaml::Map(map.entries));
        if let Some(comment) = comment {
            entry = entry.comment(comment);
        }
        self.entries.push(entry);
        self.value.insert(key.into(), Value::Object(map.value));
    }

    fn push_list(&mut self, key: &str, list: &[String], comment: String) {
        if !list.is_empty() {
            self.push(key, serde_json::json!(list), comment);
        }
    }
}

const CLASSIC_ONLY: &str = "ML101 (startup-no-hold), ML301 (job-sidecar-never-exits), ML201 \
                            (init-container-no-network)";

fn provider_failure_comment(enforcement: Enforcement, mode: ProviderFailure) -> String {
    let effect = match (mode, enforcement) {
        (ProviderFailure::Ignore, _) => {
            "a provider failure (down, too slow, an error for the object) is not reported by \
             this constraint: the object is admitted unchecked (fail open). Pair it with a warn \
             constraint at report so that outages show; report here refuses objects while the \
             provider is down (fail closed)."
        }
        (ProviderFailure::Report, Enforcement::Deny) => {
            "a provider failure (down, too slow, an error for the object) is an ML000 violation \
             of this deny constraint: the object is refused while the provider is down (fail \
             closed). ignore admits it unchecked instead."
        }
        (ProviderFailure::Report, Enforcement::Warn) => {
            "a provider failure (down, too slow, an error for the object) is an ML000 warning \
             at admission and an audit entry, and never blocks."
        }
        (ProviderFailure::Report, Enforcement::Dryrun) => {
            "a provider failure (down, too slow, an error for the object) is an ML000 audit \
             entry, and never blocks."
        }
    };
    format!("Read by the template only: {effect}")
}

fn parameters_section(facts: &Facts, role: Role, warnings: &mut Vec<String>) -> ParameterMap {
    let k = facts.kubernetes;
    let mut top = ParameterMap::default();
    top.push(
        "kubernetesMinorVersion",
        Value::from(k),
        kubernetes_comment(facts),
    );
    if let Some(istio) = &facts.istio {
        top.push_map(
            "istio",
            istio_parameters(istio, k, warnings),
            Some(format!(
                "Istio {}: how istiod injects and configures the proxy.",
                istio.version
            )),
        );
    }
    if let Some(linkerd) = &facts.linkerd {
        top.push_map(
            "linkerd",
            linkerd_parameters(linkerd, k, warnings),
            Some(format!(
                "Linkerd {}: how the proxy injector is configured.",
                linkerd.version
            )),
        );
    }
    if let Some(severity) = facts.min_severity {
        top.push(
            "minSeverity",
            Value::from(severity.as_str()),
            format!(
                "Findings below {} are dropped (ML000, invalid input, never is).",
                severity.as_str()
            ),
        );
    }
    if let Some(count) = facts.min_available {
        top.push(
            "minAvailable",
            Value::from(count),
            format!(
                "{}: a rolling update must keep at least {count} replica{} available.",
                rule("ML501"),
                if count == 1 { "" } else { "s" }
            ),
        );
    }
    top.push_list("rules", &facts.rules, "Only these rules run.".into());
    let exclude_comment = match role {
        Role::Warnings => format!(
            "These rules never run here: the ones whose findings are always errors, which \
             the deny constraint blocks ({}), and any left out of both.",
            ALWAYS_ERROR_RULES.map(rule).join(", ")
        ),
        Role::Single(_) | Role::Errors => "These rules never run.".into(),
    };
    top.push_list("excludeRules", &facts.exclude_rules, exclude_comment);
    top.push_list(
        "exemptNamespaces",
        &facts.exempt_namespaces,
        "No findings in these namespaces (exact names, or prefix globs such as team-*).".into(),
    );
    top.push_list(
        "exemptImages",
        &facts.exempt_images,
        "Containers with these images (exact, or prefix globs ending in *) are left out of every \
         rule."
            .into(),
    );
    top.push_list(
        "exitMarkers",
        &facts.exit_markers,
        format!(
            "Strings that, in a Job container's command, args, hooks or image, count as stopping \
             its sidecar ({}, {}).",
            rule("ML301"),
            rule("ML302")
        ),
    );
    top
}

fn kubernetes_comment(facts: &Facts) -> String {
    let k = facts.kubernetes;
    let istio_auto = facts
        .istio
        .as_ref()
        .is_some_and(|istio| istio.version.minor >= ISTIO_AUTO_NATIVE_SINCE && !istio.native_given);
    if k < NATIVE_MIN_MINOR {
        let state = if k == 28 {
            "native sidecars unsupported (the SidecarContainers gate is alpha and off in 1.28; \
             beta and on from 1.29)"
        } else {
            "native sidecars unsupported (they arrived as alpha in 1.28, on by default from 1.29)"
        };
        format!(
            "kubernetes 1.{k} (lowest kubelet): {state}: any native request is {} and the pod is \
             judged as classic.",
            rule("ML104")
        )
    } else if k < ISTIO_AUTO_NATIVE_MIN_KUBERNETES {
        let mut text = format!(
            "kubernetes 1.{k} (lowest kubelet): native sidecars run (beta and on by default \
             from 1.29, GA in 1.33), so a pod that asks for one is judged as native."
        );
        if istio_auto {
            text.push_str(
                " Istio's ENABLE_NATIVE_SIDECARS=auto still injects classic sidecars until every \
                 kubelet is 1.33 or later.",
            );
        }
        text
    } else {
        let mut text = format!(
            "kubernetes 1.{k} (lowest kubelet): native sidecars are GA (since 1.33), so a pod \
             that asks for one is judged as native."
        );
        if istio_auto {
            text.push_str(" Istio's ENABLE_NATIVE_SIDECARS=auto injects them by default.");
        }
        text
    }
}

fn istio_parameters(istio: &IstioFacts, k: u32, warnings: &mut Vec<String>) -> ParameterMap {
    let mut map = ParameterMap::default();
    let version = &istio.version;
    let uid = istio.proxy_uid.unwrap_or(DEFAULT_ISTIO_UID);
    let classic_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "so {CLASSIC_ONLY} and the drain rules ML401/ML402 apply to Istio pods (a \
             sidecar.istio.io/nativeSidecar: \"true\" request is ML104 here)."
        )
    } else {
        format!(
            "so {CLASSIC_ONLY} and the drain rules ML401/ML402 apply to Istio pods that do not \
             set sidecar.istio.io/nativeSidecar: \"true\"."
        )
    };
    if istio.native && k < NATIVE_MIN_MINOR {
        warnings.push(format!(
            "Istio is set to inject native sidecars, but kubernetes 1.{k} cannot run them: every \
             Istio pod is reported by ML104 (native-sidecar-unsupported)"
        ));
    }
    let native_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "but kubernetes 1.{k} cannot run them: every Istio pod that does not set \
             sidecar.istio.io/nativeSidecar: \"false\" is {} and is judged as classic.",
            rule("ML104")
        )
    } else {
        format!(
            "so {CLASSIC_ONLY} and ML401/ML402 do not apply to Istio pods unless they set \
             sidecar.istio.io/nativeSidecar: \"false\"; {} and {} still do.",
            rule("ML103"),
            rule("ML405")
        )
    };
    let native_comment = match (istio.native_given, istio.native) {
        (false, false) if version.minor < ISTIO_AUTO_NATIVE_SINCE => format!(
            "istio {version}: istiod injects classic sidecars (ENABLE_NATIVE_SIDECARS=false \
             before 1.27), {classic_tail}"
        ),
        (false, false) => format!(
            "istio {version}: ENABLE_NATIVE_SIDECARS=auto injects native sidecars only when every \
             kubelet is 1.33 or later, and the lowest here is 1.{k}: istiod injects classic \
             sidecars, {classic_tail}"
        ),
        (false, true) => format!(
            "istio {version} on kubernetes 1.{k}: ENABLE_NATIVE_SIDECARS=auto injects native \
             sidecars (every kubelet is 1.33 or later), {native_tail}"
        ),
        (true, native) => {
            let by_version = if istio.native_by_version {
                "native"
            } else {
                "classic"
            };
            let what = if native { "native" } else { "classic" };
            let tail = if native { &native_tail } else { &classic_tail };
            format!(
                "--istio-native-sidecars {native}: istiod injects {what} sidecars \
                 (ENABLE_NATIVE_SIDECARS={native}; istio {version} on kubernetes 1.{k} would \
                 inject {by_version} ones by default), {tail}"
            )
        }
    };
    map.push("nativeSidecars", Value::Bool(istio.native), native_comment);

    // Below 1.29 a native request is judged as classic: every pod reads the classic settings.
    let native_effective = istio.native && k >= NATIVE_MIN_MINOR;
    let only_classic = if native_effective {
        " Only pods that opt out of native sidecars read it."
    } else {
        ""
    };
    let hold_comment = if istio.hold {
        format!(
            "meshConfig.defaultConfig.holdApplicationUntilProxyStarts on: classic Istio pods \
             wait for the proxy, so {} does not fire unless their proxy.istio.io/config \
             annotation sets holdApplicationUntilProxyStarts: false.{only_classic}",
            rule("ML101")
        )
    } else {
        format!(
            "meshConfig.defaultConfig.holdApplicationUntilProxyStarts off: a classic Istio pod is \
             {} unless its proxy.istio.io/config annotation sets \
             holdApplicationUntilProxyStarts: true.{only_classic}",
            rule("ML101")
        )
    };
    map.push(
        "holdApplicationUntilProxyStarts",
        Value::Bool(istio.hold),
        hold_comment,
    );
    let forced_comment = if istio.hold_forced {
        format!(
            "Helm values.global.proxy.holdApplicationUntilProxyStarts on: istiod ORs it into \
             every pod, so every classic Istio pod waits for the proxy and a per-pod false cannot \
             switch it off: no {} for Istio pods.",
            rule("ML101")
        )
    } else {
        "Helm values.global.proxy.holdApplicationUntilProxyStarts off: the pod's \
         proxy.istio.io/config annotation, else the meshConfig default above, decides hold."
            .to_string()
    };
    map.push("holdForced", Value::Bool(istio.hold_forced), forced_comment);

    let cni_comment = match (istio.cni, native_effective) {
        (true, false) => format!(
            "istio-cni: traffic is captured before the init containers run and a classic proxy \
             starts only after them, so each user init container not running as UID {uid} is {}.",
            rule("ML201")
        ),
        (true, true) => format!(
            "istio-cni: traffic is captured before the init containers run; a native proxy \
             starts before the user init containers, so only pods that opt out of native \
             sidecars get {}, for each user init container not running as UID {uid}.",
            rule("ML201")
        ),
        (false, _) => format!(
            "no istio-cni: istio-init runs last among the init containers, so user init \
             containers still have network and predicted pods get no {}.",
            rule("ML201")
        ),
    };
    map.push("cni", Value::Bool(istio.cni), cni_comment);

    let default_note = if istio.drain == DEFAULT_DRAIN && !istio.drain_given {
        " (the default)"
    } else {
        ""
    };
    let longest_grace = istio.drain_ms / 1000;
    let grace_clause = if longest_grace >= DEFAULT_GRACE_SECONDS {
        format!(
            "whose terminationGracePeriodSeconds is {longest_grace} or less, which includes the \
             default 30: every classic Istio pod that keeps the default grace period is ML401"
        )
    } else {
        format!("whose terminationGracePeriodSeconds is {longest_grace} or less")
    };
    let drain_text = format_ms(istio.drain_ms);
    map.push(
        "terminationDrainDuration",
        Value::String(istio.drain.clone()),
        format!(
            "meshConfig.defaultConfig.terminationDrainDuration {}{default_note}: {} for classic \
             Istio pods {grace_clause}; {} when an app's preStop sleep lasts {drain_text} or \
             longer. A pod's proxy.istio.io/config annotation overrides it.",
            istio.drain,
            rule("ML401"),
            rule("ML402"),
        ),
    );
    map.push_list(
        "injectedNamespaces",
        &istio.injected_namespaces,
        "Istio injection is on in these namespaces (\"*\": all), whatever their Namespace object \
         says; other namespaces: their istio-injection or istio.io/rev label decides."
            .into(),
    );
    map.push_list(
        "ambientNamespaces",
        &istio.ambient_namespaces,
        "Namespaces in ambient mode (\"*\": all): their pods get no sidecar, and no findings, \
         unless they ask for one; read only when a review carries no Namespace object (its \
         istio.io/dataplane-mode label decides otherwise)."
            .into(),
    );
    if let Some(uid) = istio.proxy_uid {
        map.push(
            "proxyUID",
            Value::from(uid),
            format!(
                "istio-proxy runs as UID {uid}: its traffic is not captured, so ML201 and ML202 \
                 leave init containers running as {uid} alone."
            ),
        );
    }
    map
}

fn linkerd_parameters(linkerd: &LinkerdFacts, k: u32, warnings: &mut Vec<String>) -> ParameterMap {
    let mut map = ParameterMap::default();
    let version = &linkerd.version;
    let uid = linkerd.proxy_uid.unwrap_or(DEFAULT_LINKERD_UID);
    let opt_in = if k < NATIVE_MIN_MINOR {
        "(a config.linkerd.io/proxy-enable-native-sidecar: \"true\" request is ML104 here)"
    } else {
        "that do not opt in with config.linkerd.io/proxy-enable-native-sidecar: \"true\""
    };
    let classic_tail = format!(
        "so ML101 (startup-no-hold, when proxy-await is off), {}, {}, {} and {} apply to Linkerd \
         pods {opt_in}.",
        rule("ML301"),
        rule("ML302"),
        rule("ML201"),
        rule("ML403")
    );
    if linkerd.native && k < NATIVE_MIN_MINOR {
        warnings.push(format!(
            "Linkerd is set to inject native sidecars, but kubernetes 1.{k} cannot run them: \
             every Linkerd pod is reported by ML104 (native-sidecar-unsupported); pass \
             --linkerd-native-sidecars false if the injector is set to classic sidecars"
        ));
    }
    let native_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "but kubernetes 1.{k} cannot run them: every Linkerd pod that keeps the default is {} \
             and is judged as classic.",
            rule("ML104")
        )
    } else {
        format!(
            "so ML101, ML201, ML301, ML302, ML303 and ML403 do not apply to Linkerd pods that \
             keep the default; {} still fires for injected native pods whose proxy-await is \
             disabled.",
            rule("ML103")
        )
    };
    let native_comment = match (linkerd.native_given, linkerd.native) {
        (false, false) => format!(
            "linkerd {version}: the proxy is injected as a classic sidecar (native sidecars are \
             opt-in before 2.20, config.linkerd.io/proxy-enable-native-sidecar), {classic_tail}"
        ),
        (false, true) => format!(
            "linkerd {version}: native sidecars by default (since 2.20, Helm \
             proxy.nativeSidecar), {native_tail}"
        ),
        (true, native) => {
            let by_version = if version.native_by_default() {
                "native"
            } else {
                "classic"
            };
            let what = if native { "native" } else { "classic" };
            let tail = if native { &native_tail } else { &classic_tail };
            format!(
                "--linkerd-native-sidecars {native}: Helm proxy.nativeSidecar={native}, the proxy \
                 is injected as a {what} sidecar (linkerd {version} defaults to {by_version}), \
                 {tail}"
            )
        }
    };
    map.push(
        "nativeSidecars",
        Value::Bool(linkerd.native),
        native_comment,
    );

    let await_comment = match (linkerd.proxy_await, linkerd.await_given) {
        (true, _) => format!(
            "config.linkerd.io/proxy-await defaults to enabled: classic Linkerd pods wait for the \
             proxy, so {} does not fire, and native ones get a startupProbe, unless a pod or its \
             Namespace sets it to disabled.",
            rule("ML101")
        ),
        (false, true) => format!(
            "--linkerd-await false (Helm proxy.await=false): classic Linkerd pods are {} and \
             injected native ones {}, unless a pod or its Namespace sets \
             config.linkerd.io/proxy-await: enabled.",
            rule("ML101"),
            rule("ML103")
        ),
        (false, false) => format!(
            "linkerd {version} has no proxy-await (added in 2.11): classic Linkerd pods start \
             without waiting for the proxy, {}.",
            rule("ML101")
        ),
    };
    map.push(
        "proxyAwait",
        Value::Bool(linkerd.proxy_await),
        await_comment,
    );

    let native_effective = linkerd.native && k >= NATIVE_MIN_MINOR;
    let cni_comment = match (linkerd.cni, native_effective) {
        (true, false) => format!(
            "linkerd-cni: traffic is captured before the init containers run and a classic proxy \
             starts only after them, so each user init container not running as UID {uid} is {}.",
            rule("ML201")
        ),
        (true, true) => format!(
            "linkerd-cni: traffic is captured before the init containers run; a native proxy \
             starts before the user init containers, so only pods that opt out of native \
             sidecars get {}, for each user init container not running as UID {uid}.",
            rule("ML201")
        ),
        (false, _) => format!(
            "no linkerd-cni: linkerd-init runs last among the init containers, so user init \
             containers still have network and predicted pods get no {}.",
            rule("ML201")
        ),
    };
    map.push("cni", Value::Bool(linkerd.cni), cni_comment);

    let shutdown_comment = if linkerd.shutdown_endpoint {
        format!(
            "Helm proxy.enableShutdownEndpoint on: a Linkerd Job can stop its classic proxy with \
             POST localhost:4191/shutdown or linkerd-await --shutdown (no {} for predicted pods).",
            rule("ML302")
        )
    } else {
        format!(
            "Helm proxy.enableShutdownEndpoint off (the default): a Linkerd Job that stops its \
             classic proxy with POST localhost:4191/shutdown or linkerd-await --shutdown is {} \
             unless its template or Namespace sets config.linkerd.io/proxy-admin-shutdown: \
             enabled.",
            rule("ML302")
        )
    };
    map.push(
        "shutdownEndpoint",
        Value::Bool(linkerd.shutdown_endpoint),
        shutdown_comment,
    );
    map.push_list(
        "injectedNamespaces",
        &linkerd.injected_namespaces,
        "Linkerd injection is on in these namespaces (\"*\": all), whatever their Namespace \
         object says; other namespaces: their linkerd.io/inject annotation decides."
            .into(),
    );
    if let Some(uid) = linkerd.proxy_uid {
        map.push(
            "proxyUID",
            Value::from(uid),
            format!(
                "linkerd-proxy runs as UID {uid}: its traffic is not captured, so ML201 and ML202 \
                 leave init containers running as {uid} alone."
            ),
        );
    }
    map
}

// ---------------------------------------------------------------------------------------------
// A small YAML writer: block mappings and sequences with comments, flow lists of scalars.

enum Yaml {
    /// A scalar, already rendered.
    Scalar(String),
    /// `[a, b]`, of scalars.
    Flow(Vec<Yaml>),
    Map(Vec<Entry>),
    Seq(Vec<Item>),
}

struct Entry {
    key: String,
    comment: Option<String>,
    value: Yaml,
}

struct Item {
    comment: Option<String>,
    /// Scalars, or maps (without comments on their first key).
    values: Vec<Yaml>,
}

impl Entry {
    fn new(key: &str, value: Yaml) -> Entry {
        Entry {
            key: key.into(),
            comment: None,
            value,
        }
    }

    fn comment(mut self, text: impl Into<String>) -> Entry {
        self.comment = Some(text.into());
        self
    }
}

impl Item {
    fn new(value: Yaml) -> Item {
        Item {
            comment: None,
            values: vec![value],
        }
    }

    /// Several scalar list items under one comment.
    fn list<S: AsRef<str>>(values: &[S]) -> Item {
        Item {
            comment: None,
            values: values
                .iter()
                .map(|value| Yaml::string(value.as_ref()))
                .collect(),
        }
    }

    fn comment(mut self, text: impl Into<String>) -> Item {
        self.comment = Some(text.into());
        self
    }
}

/// Strings that YAML 1.1 readers (Kubernetes' go-yaml among them) take for booleans or null.
const YAML_11_WORDS: [&str; 11] = [
    "y", "yes", "n", "no", "on", "off", "true", "false", "null", "~", "",
];

static PLAIN_SAFE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z_/][A-Za-z0-9._/-]*$").expect("a valid regex"));
static GO_DURATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$").expect("a valid regex"));

impl Yaml {
    /// A scalar known to need no quotes.
    fn plain(text: &str) -> Yaml {
        Yaml::Scalar(text.to_string())
    }

    /// A string scalar, quoted when a YAML reader could take it for something else.
    fn string(text: &str) -> Yaml {
        let plain = (PLAIN_SAFE.is_match(text) || GO_DURATION.is_match(text))
            && !YAML_11_WORDS.contains(&text.to_ascii_lowercase().as_str());
        if plain {
            Yaml::Scalar(text.to_string())
        } else {
            // A JSON string is a valid YAML double-quoted scalar.
            Yaml::Scalar(Value::String(text.to_string()).to_string())
        }
    }

    fn from_json(value: &Value) -> Yaml {
        match value {
            Value::String(text) => Yaml::string(text),
            Value::Array(items) => Yaml::Flow(items.iter().map(Yaml::from_json).collect()),
            other => Yaml::Scalar(other.to_string()),
        }
    }

    /// A mapping's entries at `indent` (the caller has written the key line).
    fn render_entries(&self, indent: usize, out: &mut String) {
        let Yaml::Map(entries) = self else {
            return;
        };
        for entry in entries {
            if let Some(text) = &entry.comment {
                comment(indent, text, out);
            }
            out.push_str(&" ".repeat(indent));
            out.push_str(&entry.key);
            out.push(':');
            entry.value.render_value(indent, out);
        }
    }

    /// The value after `key:` at `indent`.
    fn render_value(&self, indent: usize, out: &mut String) {
        match self {
            Yaml::Scalar(_) | Yaml::Flow(_) => {
                out.push(' ');
                out.push_str(&self.inline());
                out.push('\n');
            }
            Yaml::Map(_) => {
                out.push('\n');
                self.render_entries(indent + 2, out);
            }
            Yaml::Seq(items) => {
                out.push('\n');
                for item in items {
                    if let Some(text) = &item.comment {
                        comment(indent + 2, text, out);
                    }
                    for value in &item.values {
                        match value {
                            Yaml::Map(_) => {
                                let mut nested = String::new();
                                value.render_entries(indent + 4, &mut nested);
                                // The first key goes on the dash's line.
                                out.push_str(&" ".repeat(indent + 2));
                                out.push_str("- ");
                                out.push_str(&nested[indent + 4..]);
                            }
                            _ => {
                                out.push_str(&" ".repeat(indent + 2));
                                out.push_str("- ");
                                out.push_str(&value.inline());
                                out.push('\n');
                            }
                        }
                    }
                }
            }
        }
    }

    fn inline(&self) -> String {
        match self {
            Yaml::Scalar(text) => text.clone(),
            Yaml::Flow(items) => {
                let items: Vec<String> = items.iter().map(Yaml::inline).collect();
                format!("[{}]", items.join(", "))
            }
            // Not used inline.
            Yaml::Map(_) | Yaml::Seq(_) => "{}".into(),
        }
    }
}

/// `text` as `# ` lines at `indent`, wrapped at [`COMMENT_WIDTH`].
fn comment(indent: usize, text: &str, out: &mut String) {
    let prefix = format!("{}# ", " ".repeat(indent));
    let width = COMMENT_WIDTH.saturating_sub(prefix.len()).max(20);
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&prefix);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&prefix);
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_kubernetes_version("1.31").unwrap().minor, 31);
        assert_eq!(parse_kubernetes_version("v1.31.4-eks-1").unwrap().minor, 31);
        assert_eq!(parse_kubernetes_version("v1.30.2+k3s1").unwrap().minor, 30);
        for bad in ["1.x", "1", "31", "1.31.4.5", "", "1..3", "one.two"] {
            assert!(parse_kubernetes_version(bad).is_err(), "{bad}");
        }
        assert!(
            parse_kubernetes_version("2.1")
                .unwrap_err()
                .contains("does not exist")
        );
        assert_eq!(parse_istio_version("1.27.0-beta.1").unwrap().minor, 27);
        assert!(parse_istio_version("1.x").is_err());
        let linkerd = |text: &str| parse_linkerd_version(text).unwrap();
        assert!(!linkerd("2.19").native_by_default());
        assert!(linkerd("2.20.1").native_by_default());
        assert!(!linkerd("stable-2.14.10").native_by_default());
        assert!(linkerd("edge-26.5.2").native_by_default());
        assert!(!linkerd("edge-26.5.1").native_by_default());
        assert!(!linkerd("2.10").has_await());
        assert!(linkerd("2.11").has_await());
        assert!(parse_linkerd_version("1.9").is_err());
        assert!(parse_linkerd_version("edge-26.5").is_err());
    }

    #[test]
    fn scalars_are_quoted_when_yaml_would_misread_them() {
        let inline = |text: &str| Yaml::string(text).inline();
        assert_eq!(inline("kube-system"), "kube-system");
        assert_eq!(inline("5s"), "5s");
        assert_eq!(inline("1m30s"), "1m30s");
        assert_eq!(inline("*"), "\"*\"");
        assert_eq!(inline("team-*"), "\"team-*\"");
        assert_eq!(inline("yes"), "\"yes\"");
        assert_eq!(inline("123"), "\"123\"");
        assert_eq!(inline(""), "\"\"");
        assert_eq!(
            inline("registry.local/tools:1.0"),
            "\"registry.local/tools:1.0\""
        );
    }

    #[test]
    fn comments_wrap() {
        let mut out = String::new();
        comment(4, &"word ".repeat(60), &mut out);
        assert!(out.lines().count() > 1);
        assert!(
            out.lines()
                .all(|line| line.len() <= COMMENT_WIDTH && line.starts_with("    # "))
        );
    }
}
