//! The facts a live cluster holds about its meshes (`meshlife constraint --from-cluster`,
//! `check --kubeconfig`): the Kubernetes version of its nodes, each Istio revision's version and
//! configuration, Linkerd's, which namespaces inject, CNI and ambient, and its Namespaces.
//!
//! Reading ([`reader`], read-only API calls) is kept apart from what the objects read mean
//! ([`facts_of`] over a [`Snapshot`]), so the meaning is tested on the meshes' own rendered
//! installs without a cluster. Every fact carries its [`Source`]: the object and the field it
//! was read from, which every report names.

mod istio;
mod kubernetes;
mod linkerd;
pub mod reader;
mod snapshot;
pub mod webhooks;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use clap::Args;
use serde_json::Value;

pub use istio::{IstioInstall, IstioRevision, RevisionScope};
pub use linkerd::LinkerdInstall;
pub use snapshot::Snapshot;

use crate::constraints::constraint::Constraint;
use crate::constraints::facts::{ClusterFactArgs, KubernetesVersion, NamespaceScope, ReadFrom};
use crate::constraints::generate::{ConstraintArgs, Generated, constraint_for_check, generate};
use crate::module::engine::Engine;

/// A revision's share of the namespaces (see [`RevisionScope`]), as a set of facts carries it.
#[derive(Clone, Debug)]
pub struct Scope {
    pub suffix: String,
    pub namespace_selector: Value,
    pub comment: String,
}

/// Which cluster to read the facts from (`constraint`, `check`, `explain`).
#[derive(Args, Clone, Debug, Default)]
pub struct ClusterSourceArgs {
    /// Read the cluster's facts from its API server: the lowest kubelet version, each mesh's
    /// version and configuration, which namespaces inject, CNI, ambient, and the Namespaces.
    /// Uses the kubeconfig's current context (KUBECONFIG, ~/.kube/config) or, in a pod, its
    /// service account; read-only (`meshlife install facts-reader` prints the ClusterRole).
    #[arg(long, help_heading = "Cluster")]
    pub from_cluster: bool,

    /// The kubeconfig to read the cluster with; implies --from-cluster.
    #[arg(long, value_name = "FILE", help_heading = "Cluster")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to read; implies --from-cluster.
    #[arg(long, value_name = "NAME", help_heading = "Cluster")]
    pub context: Option<String>,
}

impl ClusterSourceArgs {
    /// The cluster to read, if one is asked for.
    pub fn target(&self) -> Option<reader::Target> {
        (self.from_cluster || self.kubeconfig.is_some() || self.context.is_some()).then(|| {
            reader::Target {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
            }
        })
    }

    /// The facts of the cluster asked for, `flags` standing in for what it cannot tell;
    /// `None` when no cluster is asked for.
    pub fn read(&self, flags: &ClusterFactArgs) -> Option<Result<ClusterFacts, String>> {
        let target = self.target()?;
        Some(
            reader::read_blocking(&target, reader::Reading::Facts)
                .and_then(|snapshot| facts_of(&snapshot, flags)),
        )
    }

    /// The cluster's name and its Namespaces (as `namespaceObject`s), when `--constraint`
    /// files state the facts; `None` when no cluster is asked for.
    pub fn read_namespaces(&self) -> Option<Result<(String, Vec<Value>), String>> {
        let target = self.target()?;
        Some(
            reader::read_blocking(&target, reader::Reading::Namespaces).map(|snapshot| {
                let namespaces = snapshot
                    .namespaces
                    .iter()
                    .map(snapshot::namespace_object)
                    .collect();
                (snapshot.cluster, namespaces)
            }),
        )
    }
}

/// Where a fact was read: `Deployment istio-system/istiod`, `spec.template.spec.containers[0].image`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub object: String,
    pub field: String,
}

impl Source {
    pub fn new(object: impl Into<String>, field: impl Into<String>) -> Source {
        Source {
            object: object.into(),
            field: field.into(),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            formatter.write_str(&self.object)
        } else {
            write!(formatter, "{} {}", self.object, self.field)
        }
    }
}

/// A value read from the cluster, with where it was read. A default the mesh applies because
/// nothing set the value is a fact too: its source says where it was looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Fact<T> {
    pub fn new(value: T, source: Source) -> Fact<T> {
        Fact { value, source }
    }
}

/// Everything read from one cluster.
#[derive(Clone, Debug)]
pub struct ClusterFacts {
    /// Which cluster: `context kind-dev (https://127.0.0.1:6443)`.
    pub cluster: String,
    /// The lowest kubelet version among the nodes (the API server's, when no Node is visible).
    pub kubernetes: Fact<KubernetesVersion>,
    pub istio: Option<IstioInstall>,
    pub linkerd: Option<LinkerdInstall>,
    /// The cluster's Namespaces as the module reads `namespaceObject`: name, labels and
    /// annotations.
    pub namespaces: Vec<Value>,
    /// What was read and matters, but no parameter carries (said on stderr and in the file).
    pub notes: Vec<String>,
}

/// The facts of `snapshot`; an error says what could not be told and what to do about it
/// (never a guess: an unknown version is an error, not a default).
/// `flags` state what the cluster cannot tell: a version given as a flag stands in for one the
/// cluster does not show (an image tagged `latest`, no Node).
pub fn facts_of(snapshot: &Snapshot, flags: &ClusterFactArgs) -> Result<ClusterFacts, String> {
    let mut notes = Vec::new();
    let kubernetes = kubernetes::lowest_kubelet(snapshot, flags.kubernetes.as_ref(), &mut notes)?;
    let istio = istio::install(snapshot, flags.istio.as_ref(), &mut notes)?;
    let linkerd = linkerd::install(snapshot, flags.linkerd.as_ref(), &mut notes)?;
    if istio.is_none() && linkerd.is_none() {
        return Err(format!(
            "{}: no mesh found: no Istio control plane (no Deployment labelled app=istiod) and \
             no Linkerd one (no ConfigMap linkerd-config). meshlife judges meshed workloads; \
             check that the context is the cluster you mean",
            snapshot.cluster
        ));
    }
    if istio.is_some() && linkerd.is_some() {
        notes.push(
            "both Istio and Linkerd run in this cluster: the constraint carries both meshes' \
             facts, and each workload is judged by the mesh its namespace and pod template \
             inject"
                .into(),
        );
    }
    notes.extend(native_sidecar_notices(
        snapshot,
        &kubernetes.value,
        istio.as_ref(),
        linkerd.as_ref(),
    ));
    Ok(ClusterFacts {
        cluster: snapshot.cluster.clone(),
        kubernetes,
        istio,
        linkerd,
        namespaces: snapshot
            .namespaces
            .iter()
            .map(snapshot::namespace_object)
            .collect(),
        notes,
    })
}

/// One line per mutating webhook that runs after a mesh's injector while it injects native
/// sidecars (its default: ENABLE_NATIVE_SIDECARS or `proxy.nativeSidecar` when set, else what
/// the version does on these kubelets), and takes Pod CREATE: such a webhook can remove the
/// proxy's `restartPolicy`, and then every meshed pod is refused (ML104). Known offenders are
/// named as such; the others are said neutrally. A mesh that injects classic sidecars gets
/// none: a webhook after it cannot do this to a pod that does not opt into native sidecars.
fn native_sidecar_notices(
    snapshot: &Snapshot,
    kubernetes: &KubernetesVersion,
    istio: Option<&IstioInstall>,
    linkerd: Option<&LinkerdInstall>,
) -> Vec<String> {
    let mut injectors = Vec::new();
    if let Some(istio) = istio {
        let revisions: Vec<String> = istio
            .revisions
            .iter()
            .filter(|revision| {
                revision.native_sidecars.as_ref().map_or_else(
                    || revision.version.value.native_by_default(kubernetes),
                    |fact| fact.value,
                )
            })
            .map(|revision| revision.name.clone())
            .collect();
        if !revisions.is_empty() {
            injectors.push(webhooks::Injector::Istio { revisions });
        }
    }
    if let Some(linkerd) = linkerd {
        let native = linkerd.native_sidecars.as_ref().map_or_else(
            || linkerd.version.value.native_by_default(),
            |fact| fact.value,
        );
        if native {
            injectors.push(webhooks::Injector::Linkerd);
        }
    }
    injectors
        .iter()
        .flat_map(|injector| webhooks::webhooks_after(&snapshot.mutating_webhooks, injector))
        .map(|later| later.notice())
        .collect()
}

/// One set of facts, for the namespaces of its scope (all of them without one).
#[derive(Clone, Debug)]
pub struct FactSet {
    pub scope: Option<Scope>,
    pub args: ClusterFactArgs,
    pub sources: FactSources,
    /// Flags that replaced what was read, and what no revision serves.
    pub notes: Vec<String>,
}

impl FactSet {
    /// `base` with the scope's suffix: the name of this set's constraints.
    pub fn name(&self, base: &str) -> String {
        match &self.scope {
            Some(scope) => format!("{base}-{}", scope.suffix),
            None => base.to_string(),
        }
    }

    /// The `spec.match.namespaceSelector` of this set's constraints, with its comment.
    pub fn namespace_scope(&self) -> Option<NamespaceScope> {
        self.scope.as_ref().map(|scope| NamespaceScope {
            selector: scope.namespace_selector.clone(),
            comment: scope.comment.clone(),
        })
    }
}

/// The constraints `check` and `explain` judge under: the cluster's facts (with the fact flags
/// over them) when a cluster's facts were read, else what `constraints::constraints_of` gives
/// for the `--constraint` files or the flags. What was replaced is pushed to `notes`.
pub fn constraints_for_judging(
    cluster: Option<&ClusterFacts>,
    constraint_files: &[PathBuf],
    flags: &ClusterFactArgs,
    include_control_planes: bool,
    limit: crate::inputs::files::ReadLimit,
    engine: &Engine,
    notes: &mut Vec<String>,
) -> Result<Vec<Constraint>, String> {
    if let Some(cluster) = cluster {
        let (sets, cluster_notes) = cluster.judging_facts(flags);
        notes.extend(cluster_notes);
        let (constraints, warnings) =
            ClusterFacts::judging_constraints(sets, include_control_planes, engine)?;
        notes.extend(warnings);
        return Ok(constraints);
    }
    crate::constraints::constraints_of(
        constraint_files,
        flags,
        include_control_planes,
        limit,
        engine,
    )
}

/// The cluster of `check` and `explain`: its facts, or, when `--constraint` files state them,
/// its Namespaces alone.
pub enum ClusterRead {
    Facts(Box<ClusterFacts>),
    Namespaces {
        cluster: String,
        namespaces: Vec<Value>,
    },
}

impl ClusterRead {
    /// What `args` ask to read; `None` when no cluster is asked for.
    pub fn of(
        args: &ClusterSourceArgs,
        flags: &ClusterFactArgs,
        constraint_files: bool,
    ) -> Result<Option<ClusterRead>, String> {
        if constraint_files {
            return args.read_namespaces().transpose().map(|read| {
                read.map(|(cluster, namespaces)| ClusterRead::Namespaces {
                    cluster,
                    namespaces,
                })
            });
        }
        args.read(flags)
            .transpose()
            .map(|read| read.map(|facts| ClusterRead::Facts(Box::new(facts))))
    }

    pub fn facts(&self) -> Option<&ClusterFacts> {
        match self {
            ClusterRead::Facts(facts) => Some(facts),
            ClusterRead::Namespaces { .. } => None,
        }
    }

    pub fn cluster(&self) -> &str {
        match self {
            ClusterRead::Facts(facts) => &facts.cluster,
            ClusterRead::Namespaces { cluster, .. } => cluster,
        }
    }

    pub fn namespaces(&self) -> &[Value] {
        match self {
            ClusterRead::Facts(facts) => &facts.namespaces,
            ClusterRead::Namespaces { namespaces, .. } => namespaces,
        }
    }

    /// One line per fact read, with its source.
    pub fn summary(&self) -> Vec<String> {
        match self {
            ClusterRead::Facts(facts) => facts.summary(),
            ClusterRead::Namespaces { namespaces, .. } => vec![format!(
                "{} Namespaces read, for the labels and annotations that decide injection \
                 (the --constraint files state the facts)",
                namespaces.len()
            )],
        }
    }
}

/// Parameter path (`istio.terminationDrainDuration`) -> where its value came from.
pub type FactSources = BTreeMap<String, Origin>;

/// Where a parameter's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Cluster(Source),
    /// A fact flag given with `--from-cluster`, which wins over the cluster.
    Flag(&'static str),
}

impl Origin {
    /// The sentence a generated constraint's comment ends with.
    fn citation(&self) -> String {
        match self {
            Origin::Cluster(source) => format!("Read from the cluster: {source}."),
            Origin::Flag(flag) => format!("Given by {flag}, in place of the cluster's value."),
        }
    }
}

impl ClusterFacts {
    /// The facts as the fact flags give them, each parameter's source, and notes: one set,
    /// or, when Istio revisions are configured differently, one per revision's namespaces
    /// (its [`Scope`]). A flag given on the command line wins over what was read in every set
    /// (the notes say which), so a fact the cluster cannot tell can still be stated.
    pub fn fact_sets(&self, flags: &ClusterFactArgs) -> Vec<FactSet> {
        let mut cluster_notes = Vec::new();
        let scopes: Vec<Option<RevisionScope>> = match &self.istio {
            Some(istio) if !istio.revisions_agree() => istio
                .scopes(&mut cluster_notes)
                .into_iter()
                .map(Some)
                .collect(),
            _ => vec![None],
        };
        scopes
            .into_iter()
            .map(|scope| {
                let mut read = ClusterFactArgs {
                    kubernetes: Some(self.kubernetes.value.clone()),
                    ..ClusterFactArgs::default()
                };
                let mut sources = FactSources::new();
                sources.insert(
                    "kubernetesMinorVersion".into(),
                    Origin::Cluster(self.kubernetes.source.clone()),
                );
                if let Some(istio) = &self.istio {
                    let revision = &istio.revisions[scope.as_ref().map_or(0, |one| one.revision)];
                    istio.fill(revision, &mut read, &mut sources);
                }
                if let Some(linkerd) = &self.linkerd {
                    linkerd.fill(&mut read, &mut sources);
                }
                let mut notes = cluster_notes.clone();
                let args = overridden_by_flags(read, flags, &mut sources, &mut notes);
                FactSet {
                    scope: scope.map(|scope| Scope {
                        suffix: scope.suffix,
                        namespace_selector: scope.namespace_selector,
                        comment: scope.comment,
                    }),
                    args,
                    sources,
                    notes,
                }
            })
            .collect()
    }

    /// The facts as `meshlife constraint` writes them, with their sources and the notes.
    pub fn read_from(&self, sources: &FactSources, notes: &[String]) -> ReadFrom {
        ReadFrom {
            cluster: self.cluster.clone(),
            sources: sources
                .iter()
                .map(|(parameter, origin)| (parameter.clone(), origin.citation()))
                .collect(),
            notes: self.notes.iter().chain(notes).cloned().collect(),
        }
    }

    /// The fact sets `check` and `explain` judge under: the cluster's facts with the flags over
    /// them, and what to say (flags that replaced what was read).
    pub fn judging_facts(&self, flags: &ClusterFactArgs) -> (Vec<FactSet>, Vec<String>) {
        let sets = self.fact_sets(flags);
        let mut notes = self.notes.clone();
        if let Some(first) = sets.first() {
            notes.extend(first.notes.iter().cloned());
        }
        (sets, notes)
    }

    /// The constraints `meshlife constraint --from-cluster` writes: `base`'s name, enforcement,
    /// match and provider-failure choices with each fact set's facts (its name suffixed and its
    /// namespaces selected when Istio revisions differ), every parameter's source cited.
    /// Returns what to say on stderr too: flags that replaced what was read.
    pub fn generate_constraints(
        &self,
        base: &ConstraintArgs,
    ) -> Result<(Generated, Vec<String>), String> {
        let sets = self.fact_sets(&base.facts);
        let mut all = Generated {
            yaml: String::new(),
            documents: Vec::new(),
            warnings: Vec::new(),
        };
        let mut notes = Vec::new();
        for set in &sets {
            let args = ConstraintArgs {
                facts: set.args.clone(),
                name: set.name(&base.name),
                read_from: Some(self.read_from(&set.sources, &set.notes)),
                namespace_scope: set.namespace_scope(),
                ..base.clone()
            };
            let generated = generate(&args)?;
            if !all.yaml.is_empty() {
                all.yaml.push_str("---\n");
            }
            all.yaml.push_str(&generated.yaml);
            all.documents.extend(generated.documents);
            for warning in generated.warnings {
                if !all.warnings.contains(&warning) {
                    all.warnings.push(warning);
                }
            }
            for note in &set.notes {
                if !notes.contains(note) {
                    notes.push(note.clone());
                }
            }
        }
        Ok((all, notes))
    }

    /// The constraints `check` and `explain` judge under for these fact sets: per set, the one
    /// `meshlife constraint --enforcement deny` writes (as with fact flags), checked by the
    /// module.
    pub fn judging_constraints(
        sets: Vec<FactSet>,
        include_control_planes: bool,
        engine: &Engine,
    ) -> Result<(Vec<Constraint>, Vec<String>), String> {
        let mut constraints = Vec::new();
        let mut warnings = Vec::new();
        for set in sets {
            let scope = set
                .namespace_scope()
                .map(|scope| (set.name("mesh-lifecycle"), scope));
            let (constraint, more) = constraint_for_check(set.args, include_control_planes, scope)?;
            constraint
                .validate_parameters(engine)
                .map_err(|error| error.to_string())?;
            constraints.push(constraint);
            for warning in more {
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
            }
        }
        Ok((constraints, warnings))
    }

    /// The versions read, in a line: `kubernetes 1.31, istio 1.26.3`.
    pub fn headline(&self) -> String {
        let mut parts = vec![format!("kubernetes {}", self.kubernetes.value)];
        if let Some(istio) = &self.istio {
            for revision in &istio.revisions {
                parts.push(format!(
                    "istio {} (revision {})",
                    revision.version.value, revision.name
                ));
            }
        }
        if let Some(linkerd) = &self.linkerd {
            parts.push(format!("linkerd {}", linkerd.version.value));
        }
        parts.join(", ")
    }

    /// One line per fact read, with its source, for the first lines of a report.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "kubernetes {} (lowest kubelet): {}",
            self.kubernetes.value, self.kubernetes.source
        )];
        if let Some(istio) = &self.istio {
            lines.extend(istio.summary());
        }
        if let Some(linkerd) = &self.linkerd {
            lines.extend(linkerd.summary());
        }
        lines.push(format!(
            "{} Namespaces read, for the labels and annotations that decide injection",
            self.namespaces.len()
        ));
        lines
    }
}

/// The facts read, with every fact flag of the command line put over them.
fn overridden_by_flags(
    mut read: ClusterFactArgs,
    flags: &ClusterFactArgs,
    sources: &mut FactSources,
    notes: &mut Vec<String>,
) -> ClusterFactArgs {
    let mut flag_wins = |flag: &'static str, parameter: &str| {
        sources.insert(parameter.into(), Origin::Flag(flag));
        notes.push(format!(
            "{flag} replaces what the cluster says ({parameter})"
        ));
    };
    macro_rules! option_flag {
        ($field:ident, $flag:literal, $parameter:literal) => {
            if flags.$field.is_some() {
                read.$field = flags.$field.clone();
                flag_wins($flag, $parameter);
            }
        };
    }
    macro_rules! switch_flag {
        ($field:ident, $flag:literal, $parameter:literal) => {
            if flags.$field && !read.$field {
                read.$field = true;
                flag_wins($flag, $parameter);
            }
        };
    }
    macro_rules! list_flag {
        ($field:ident, $flag:literal, $parameter:literal) => {
            if !flags.$field.is_empty() {
                read.$field = flags.$field.clone();
                flag_wins($flag, $parameter);
            }
        };
    }
    option_flag!(kubernetes, "--kubernetes", "kubernetesMinorVersion");
    option_flag!(istio, "--istio", "istio");
    option_flag!(
        istio_native_sidecars,
        "--istio-native-sidecars",
        "istio.nativeSidecars"
    );
    switch_flag!(
        istio_hold,
        "--istio-hold",
        "istio.holdApplicationUntilProxyStarts"
    );
    switch_flag!(istio_hold_forced, "--istio-hold-forced", "istio.holdForced");
    switch_flag!(istio_cni, "--istio-cni", "istio.cni");
    option_flag!(
        istio_drain,
        "--istio-drain",
        "istio.terminationDrainDuration"
    );
    option_flag!(
        istio_drain_duration,
        "--istio-drain-duration",
        "istio.drainDuration"
    );
    list_flag!(
        istio_injected_namespaces,
        "--istio-injected-namespaces",
        "istio.injectedNamespaces"
    );
    list_flag!(
        istio_ambient_namespaces,
        "--istio-ambient-namespaces",
        "istio.ambientNamespaces"
    );
    option_flag!(istio_proxy_uid, "--istio-proxy-uid", "istio.proxyUID");
    option_flag!(linkerd, "--linkerd", "linkerd");
    option_flag!(
        linkerd_native_sidecars,
        "--linkerd-native-sidecars",
        "linkerd.nativeSidecars"
    );
    option_flag!(linkerd_await, "--linkerd-await", "linkerd.proxyAwait");
    switch_flag!(linkerd_cni, "--linkerd-cni", "linkerd.cni");
    switch_flag!(
        linkerd_shutdown_endpoint,
        "--linkerd-shutdown-endpoint",
        "linkerd.shutdownEndpoint"
    );
    list_flag!(
        linkerd_injected_namespaces,
        "--linkerd-injected-namespaces",
        "linkerd.injectedNamespaces"
    );
    option_flag!(linkerd_proxy_uid, "--linkerd-proxy-uid", "linkerd.proxyUID");
    // The rule settings are no cluster facts: they come from the flags alone.
    read.min_severity = flags.min_severity;
    read.min_available = flags.min_available;
    read.rules = flags.rules.clone();
    read.exclude_rules = flags.exclude_rules.clone();
    read.exempt_namespaces = flags.exempt_namespaces.clone();
    read.exempt_images = flags.exempt_images.clone();
    read.exit_markers = flags.exit_markers.clone();
    read
}
