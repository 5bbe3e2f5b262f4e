//! Writes a Gatekeeper `MeshLifecycle` constraint for one cluster from its
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
//!
//! The flags (`ConstraintArgs`) live here, not with the command, because the generator reads them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use clap::{ArgGroup, Args};
use meshlife_policy::catalogue;
use meshlife_policy::duration::parse_go_duration;
use regex::Regex;
use serde_json::Value;

use crate::constraints::constraint::{
    CONSTRAINT_GROUP, CONSTRAINT_KIND, Constraint, FACTS_SOURCE, parse_constraint,
};
use crate::constraints::facts::{
    ClusterFactArgs, Enforcement, ISTIO_CONTROL_PLANE, IstioFacts, LINKERD_CNI_NAMESPACE,
    LINKERD_CONTROL_PLANE, LinkerdFacts, MinSeverity, NamespaceScope, ProviderFailure, ReadFrom,
    parse_name,
};
use crate::constraints::istio::istio_parameters;
use crate::constraints::linkerd::linkerd_parameters;
use crate::constraints::parameters::{
    DEFAULT_DRAIN, ISTIO_AUTO_NATIVE_SINCE, NATIVE_MIN_MINOR, ParameterMap, rule,
};
use crate::constraints::yaml_writer::{Entry, Item, Yaml, comment};

/// Istio's ENABLE_NATIVE_SIDECARS=auto needs every kubelet at this minor version or later.
pub(super) const ISTIO_AUTO_NATIVE_MIN_KUBERNETES: u32 = 33;

/// Kubeflow's kinds holding pod templates: Katib's Experiment and the training operator's jobs.
pub(super) const EMBEDDING_KUBEFLOW_KINDS: &[&str] = &[
    "Experiment",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
];

/// `meshlife constraint`: the cluster's facts plus what only a constraint file has (its name,
/// enforcement action, match and provider-failure handling).
#[derive(Args, Clone, Debug)]
#[command(group(
    ArgGroup::new("mesh")
        .args(["istio", "linkerd", "from_cluster", "kubeconfig", "context"])
        .required(true)
        .multiple(true)
))]
#[command(group(
    ArgGroup::new("cluster-version")
        .args(["kubernetes", "from_cluster", "kubeconfig", "context"])
        .required(true)
        .multiple(true)
))]
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

    /// Where the facts were read, when a cluster gave them: the comments name each source.
    #[arg(skip)]
    pub read_from: Option<ReadFrom>,

    /// The namespaces the facts hold in, when they hold only there (an Istio revision's):
    /// `spec.match.namespaceSelector`.
    #[arg(skip)]
    pub namespace_scope: Option<NamespaceScope>,
}

impl ConstraintArgs {
    /// The pair `meshlife constraint` writes by default (named `mesh-lifecycle`) for `facts`.
    pub fn new(facts: ClusterFactArgs) -> ConstraintArgs {
        ConstraintArgs {
            facts,
            name: "mesh-lifecycle".into(),
            enforcement: None,
            output: None,
            exclude_namespaces: None,
            provider_failure: None,
            read_from: None,
            namespace_scope: None,
        }
    }
}

/// The generated constraints: their YAML text, each document as that text reads back, and
/// advice for stderr.
#[derive(Debug)]
pub struct Generated {
    pub yaml: String,
    /// Each constraint document as a YAML reader makes of `yaml`, in order.
    pub documents: Vec<Value>,
    pub warnings: Vec<String>,
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
/// --include-control-planes`); Kubernetes' and Gatekeeper's stay excluded. `scope` names the
/// constraint and limits it to some namespaces (an Istio revision's, read from a cluster).
pub fn constraint_for_check(
    facts: ClusterFactArgs,
    include_control_planes: bool,
    scope: Option<(String, NamespaceScope)>,
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
    let mut args = ConstraintArgs {
        enforcement: Some(Enforcement::Deny),
        exclude_namespaces,
        ..ConstraintArgs::new(facts)
    };
    if let Some((name, scope)) = scope {
        args.name = name;
        args.namespace_scope = Some(scope);
    }
    // The warning about info findings denying admission is about Gatekeeper, not this run.
    let mut generated = generate_documents(&args, &[Role::Single(Enforcement::Deny)], false)?;
    let document = generated.documents.remove(0);
    // The same reader as a `--constraint` file's, so the flags cannot mean more than a file can.
    match parse_constraint(FACTS_SOURCE, 0, document) {
        Ok(Some(constraint)) => Ok((constraint, generated.warnings)),
        Ok(None) => Err("the constraint made from the flags is not a constraint".into()),
        Err(error) => Err(format!(
            "the constraint made from the flags does not read as one: {error}"
        )),
    }
}

/// Which constraint a document is: one with the chosen action, or one of the pair the cluster
/// files use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
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
pub const ALWAYS_ERROR_RULES: [&str; 5] = ["ML104", "ML301", "ML302", "ML304", "ML405"];

impl Role {
    pub(super) fn enforcement(self) -> Enforcement {
        match self {
            Role::Single(enforcement) => enforcement,
            Role::Errors => Enforcement::Deny,
            Role::Warnings => Enforcement::Warn,
        }
    }

    pub(super) fn name(self, base: &str) -> String {
        match self {
            Role::Single(_) => base.to_string(),
            Role::Errors => format!("{base}-errors"),
            Role::Warnings => format!("{base}-warnings"),
        }
    }

    pub(super) fn provider_failure(self, chosen: Option<ProviderFailure>) -> ProviderFailure {
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
    pub(super) fn facts(self, facts: &Facts) -> Facts {
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

pub(super) fn generate_documents(
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
    let mut documents = Vec::new();
    for (index, role) in roles.iter().enumerate() {
        // The facts' advice (an unsupported native sidecar, say) is given once.
        let mut ignored = Vec::new();
        let role_warnings = if index == 0 {
            &mut warnings
        } else {
            &mut ignored
        };
        let document = constraint_document(args, &facts, *role, role_warnings)?;
        if index > 0 {
            yaml.push_str("---\n");
        }
        document.render_entries(0, &mut yaml);
        documents.push(document.to_value());
    }
    Ok(Generated {
        yaml,
        documents,
        warnings,
    })
}

/// One MeshLifecycle constraint, with a comment on every fact.
pub(super) fn constraint_document(
    args: &ConstraintArgs,
    facts: &Facts,
    role: Role,
    warnings: &mut Vec<String>,
) -> Result<Yaml, String> {
    let facts = role.facts(facts);
    let enforcement = role.enforcement();
    let provider_failure = role.provider_failure(args.provider_failure);
    let mut parameters = parameters_section(&facts, role, warnings);
    if let Some(read_from) = &args.read_from {
        cite_sources(&mut parameters.entries, "", &read_from.sources);
    }
    parameters.push(
        "providerFailure",
        Value::from(provider_failure.as_str()),
        provider_failure_comment(enforcement, provider_failure),
    );
    let spec = Yaml::Map(vec![
        Entry::new(
            "enforcementAction",
            Yaml::plain(enforcement.action().as_str()),
        )
        .comment(enforcement_comment(role, &args.name, facts.min_severity)),
        Entry::new("match", match_section(args, &facts)?),
        Entry::new("parameters", Yaml::Map(parameters.entries)).comment(parameters_comment(&facts)),
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
    Ok(document)
}

/// The cluster's facts, validated, with the derived parameter values.
#[derive(Clone)]
pub(super) struct Facts {
    pub(super) kubernetes: u32,
    pub(super) istio: Option<IstioFacts>,
    pub(super) linkerd: Option<LinkerdFacts>,
    pub(super) min_severity: Option<MinSeverity>,
    pub(super) min_available: Option<u32>,
    pub(super) rules: Vec<String>,
    pub(super) exclude_rules: Vec<String>,
    pub(super) exempt_namespaces: Vec<String>,
    pub(super) exempt_images: Vec<String>,
    pub(super) exit_markers: Vec<String>,
}

impl Facts {
    pub(super) fn from_args(args: &ConstraintArgs) -> Result<Facts, String> {
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
                let envoy_drain = match &args.facts.istio_drain_duration {
                    None => None,
                    Some(text) => {
                        let text = text.trim().to_string();
                        parse_go_duration(&text).map_err(|error| {
                            format!(
                                "--istio-drain-duration: {error} (a Go duration such as 45s or 1m)"
                            )
                        })?;
                        Some(text)
                    }
                };
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
                    envoy_drain,
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
pub(crate) fn mesh_flags_need_their_version(facts: &ClusterFactArgs) -> Result<(), String> {
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
            "--istio-drain-duration",
            facts.istio_drain_duration.is_some(),
        ),
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

pub(super) static NAMESPACE_PATTERN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9*]([-a-z0-9*]*)?$").expect("a valid regex"));

/// The list's entries, trimmed, empty ones dropped, each a namespace name or a glob.
pub(super) fn namespaces(
    flag: &str,
    entries: &[String],
    allow_empty: bool,
) -> Result<Vec<String>, String> {
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

pub(super) fn non_empty(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| entry.trim().to_string())
        .filter(|entry| !entry.is_empty())
        .collect()
}

pub(super) fn rule_list(flag: &str, entries: &[String]) -> Result<Vec<String>, String> {
    let cleaned = non_empty(entries);
    for entry in &cleaned {
        if catalogue::find(entry).is_none() {
            if let Some(nearest) = crate::rule_reference::nearest_rules(entry) {
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

pub(super) fn header(args: &ConstraintArgs, facts: &Facts, roles: &[Role]) -> String {
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
    if let Some(read_from) = &args.read_from {
        comment(
            0,
            &format!(
                "The facts were read from {} by `meshlife constraint --from-cluster`; the \
                 comment on each parameter names the object and field it came from.",
                read_from.cluster
            ),
            &mut text,
        );
        for note in &read_from.notes {
            comment(
                0,
                &format!("Read, but no parameter carries it: {note}."),
                &mut text,
            );
        }
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

pub(super) fn enforcement_comment(
    role: Role,
    base: &str,
    min_severity: Option<MinSeverity>,
) -> String {
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

pub(super) fn match_section(args: &ConstraintArgs, facts: &Facts) -> Result<Yaml, String> {
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
                kinds("networking.k8s.io", &["NetworkPolicy"]),
            ]),
        )
        .comment(
            "The kinds meshlife reviews (every other kind never has findings), so no other \
             object costs an External Data call. Pods are judged exactly (they arrive injected); \
             controllers by predicting what injection does to their pod template; analysis \
             templates, Katib experiments, training jobs, JobSets and Volcano Jobs by the pod \
             templates they hold; NetworkPolicies for what Istio's ambient pods need (ML604).",
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
    if let Some(scope) = &args.namespace_scope {
        entries.push(
            Entry::new("namespaceSelector", Yaml::from_json(&scope.selector))
                .comment(scope.comment.clone()),
        );
    }
    Ok(Yaml::Map(entries))
}

pub(super) fn parameters_comment(facts: &Facts) -> String {
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

pub(super) fn provider_failure_comment(enforcement: Enforcement, mode: ProviderFailure) -> String {
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

pub(super) fn parameters_section(
    facts: &Facts,
    role: Role,
    warnings: &mut Vec<String>,
) -> ParameterMap {
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

/// Appends to each parameter's comment the sentence saying where its value came from (`prefix`
/// is the path of the map `entries` are in: `istio.`).
fn cite_sources(entries: &mut [Entry], prefix: &str, sources: &BTreeMap<String, String>) {
    for entry in entries {
        let path = format!("{prefix}{}", entry.key);
        if let Some(citation) = sources.get(&path) {
            entry.comment = Some(match entry.comment.take() {
                Some(comment) => format!("{comment} {citation}"),
                None => citation.clone(),
            });
        }
        if let Yaml::Map(nested) = &mut entry.value {
            cite_sources(nested, &format!("{path}."), sources);
        }
    }
}

pub(super) fn kubernetes_comment(facts: &Facts) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraints::facts::{
        parse_istio_version, parse_kubernetes_version, parse_linkerd_version,
    };
    use crate::constraints::yaml_writer::COMMENT_WIDTH;

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
