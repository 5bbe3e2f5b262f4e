//! The reviewed pod spec in its context: which kind holds it, where, with which metadata, and
//! the controller fields some rules read. Built once per input from the typed view.

use std::borrow::Cow;

use crate::input::{
    Container, InputError, IntOrString, ObjectMeta, Parsed, PodSpec, Service, Strategy, Text,
};

/// Kinds whose pod spec the rules review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Pod,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ReplicationController,
    Job,
    CronJob,
    Rollout,
    /// Argo Rollouts (`argoproj.io`): a Job spec per metric, `spec.metrics[].provider.job`.
    AnalysisTemplate,
    ClusterAnalysisTemplate,
    /// Katib (`kubeflow.org`): `spec.trialTemplate.trialSpec`, a Job or a training job.
    KatibExperiment,
    /// Kubeflow training operator (`kubeflow.org`): `spec.<x>ReplicaSpecs.<role>.template`.
    TrainingJob(TrainingKind),
    /// JobSet (`jobset.x-k8s.io`): `spec.replicatedJobs[].template.spec.template`.
    JobSet,
    /// Volcano (`batch.volcano.sh`) `Job`: `spec.tasks[].template`.
    VolcanoJob,
}

/// The Kubeflow training jobs, each with its own replica-spec field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainingKind {
    PyTorchJob,
    TFJob,
    MPIJob,
    XGBoostJob,
    PaddleJob,
    JAXJob,
}

impl TrainingKind {
    pub const ALL: [TrainingKind; 6] = [
        TrainingKind::PyTorchJob,
        TrainingKind::TFJob,
        TrainingKind::MPIJob,
        TrainingKind::XGBoostJob,
        TrainingKind::PaddleJob,
        TrainingKind::JAXJob,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            TrainingKind::PyTorchJob => "PyTorchJob",
            TrainingKind::TFJob => "TFJob",
            TrainingKind::MPIJob => "MPIJob",
            TrainingKind::XGBoostJob => "XGBoostJob",
            TrainingKind::PaddleJob => "PaddleJob",
            TrainingKind::JAXJob => "JAXJob",
        }
    }

    /// The field of `spec` that maps role names to replica specs.
    pub fn replica_specs_field(self) -> &'static str {
        match self {
            TrainingKind::PyTorchJob => "pytorchReplicaSpecs",
            TrainingKind::TFJob => "tfReplicaSpecs",
            TrainingKind::MPIJob => "mpiReplicaSpecs",
            TrainingKind::XGBoostJob => "xgbReplicaSpecs",
            TrainingKind::PaddleJob => "paddleReplicaSpecs",
            TrainingKind::JAXJob => "jaxReplicaSpecs",
        }
    }
}

impl WorkloadKind {
    /// The kind named `kind` of API version `api_version` (absent: any group), when it is a kind
    /// whose pod specs the rules review. `Rollout`, the analysis templates and the embedding
    /// kinds are only those of their own API group; `Job` is Volcano's under
    /// `batch.volcano.sh`, else Kubernetes'.
    pub fn of(kind: &str, api_version: Option<&str>) -> Option<WorkloadKind> {
        let group = api_version.map(|version| version.split_once('/').map_or("", |(g, _)| g));
        let in_group = |wanted: &str| group.is_none_or(|group| group == wanted);
        let kind = match kind {
            "Job" if group == Some("batch.volcano.sh") => WorkloadKind::VolcanoJob,
            "Rollout" | "AnalysisTemplate" | "ClusterAnalysisTemplate"
                if !in_group("argoproj.io") =>
            {
                return None;
            }
            "AnalysisTemplate" => WorkloadKind::AnalysisTemplate,
            "ClusterAnalysisTemplate" => WorkloadKind::ClusterAnalysisTemplate,
            "Experiment" if in_group("kubeflow.org") => WorkloadKind::KatibExperiment,
            "JobSet" if in_group("jobset.x-k8s.io") => WorkloadKind::JobSet,
            other => match TrainingKind::ALL.iter().find(|t| t.kind() == other) {
                Some(training) if in_group("kubeflow.org") => WorkloadKind::TrainingJob(*training),
                Some(_) => return None,
                None => WorkloadKind::from_kind(other)?,
            },
        };
        Some(kind)
    }

    /// Kinds whose pod specs sit inside other objects (several per object, possibly).
    pub fn is_embedding(self) -> bool {
        matches!(
            self,
            WorkloadKind::AnalysisTemplate
                | WorkloadKind::ClusterAnalysisTemplate
                | WorkloadKind::KatibExperiment
                | WorkloadKind::TrainingJob(_)
                | WorkloadKind::JobSet
                | WorkloadKind::VolcanoJob
        )
    }

    /// The kinds of Kubernetes' own and Argo's `Rollout`, by name alone.
    pub fn from_kind(kind: &str) -> Option<WorkloadKind> {
        Some(match kind {
            "Pod" => WorkloadKind::Pod,
            "Deployment" => WorkloadKind::Deployment,
            "StatefulSet" => WorkloadKind::StatefulSet,
            "DaemonSet" => WorkloadKind::DaemonSet,
            "ReplicaSet" => WorkloadKind::ReplicaSet,
            "ReplicationController" => WorkloadKind::ReplicationController,
            "Job" => WorkloadKind::Job,
            "CronJob" => WorkloadKind::CronJob,
            "Rollout" => WorkloadKind::Rollout,
            _ => return None,
        })
    }

    /// Where the pod spec and its metadata live in the object (embedding kinds: see the
    /// workload's own paths).
    pub fn spec_path(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "spec",
            WorkloadKind::CronJob => "spec.jobTemplate.spec.template.spec",
            _ => "spec.template.spec",
        }
    }

    pub fn metadata_path(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "metadata",
            WorkloadKind::CronJob => "spec.jobTemplate.spec.template.metadata",
            _ => "spec.template.metadata",
        }
    }
}

#[derive(Clone)]
pub struct Workload<'a> {
    pub kind: WorkloadKind,
    /// Where the pod spec and its metadata are in the object, e.g. `spec.template.spec` or
    /// `spec.metrics[0].provider.job.spec.template.spec`.
    pub spec_path: Cow<'static, str>,
    pub metadata_path: Cow<'static, str>,
    /// For a pod spec inside another object: the Job (or job-like) that runs it.
    pub embedded: Option<EmbeddedJob>,
    /// For a pod spec inside another object: that Job's own metadata and its path (which, like
    /// the controller's, never reaches the pods).
    pub job_meta: Option<(String, ObjectMeta<'a>)>,
    /// The metadata that steers injection: the pod template's (a Pod's own).
    pub pod_meta: ObjectMeta<'a>,
    pub spec: PodSpec<'a>,
    pub namespace: Option<Text<'a>>,
    /// The Namespace object, when the review carries it.
    pub namespace_meta: Option<ObjectMeta<'a>>,
    /// The controller's metadata (a Pod's own), for owner references.
    pub object_meta: ObjectMeta<'a>,
    pub replicas: Option<i64>,
    pub strategy: Option<Strategy<'a>>,
    /// `activeDeadlineSeconds` of the Job (or CronJob job template).
    pub job_deadline_seconds: Option<i64>,
    /// A CronJob's `spec.concurrencyPolicy`.
    pub concurrency_policy: Option<Text<'a>>,
    /// The input's top-level `services` (the host passes those of the object's namespace).
    pub services: Vec<Service<'a>>,
}

/// The job that runs an embedded pod spec, for batch messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedJob {
    /// `the Job of AnalysisTemplate metric "web"`, `the Worker replicas of the PyTorchJob`.
    pub phrase: String,
    /// Where its deadline goes, e.g. `spec.metrics[0].provider.job.spec.activeDeadlineSeconds`.
    pub deadline_path: String,
}

impl<'a> Workload<'a> {
    /// A workload of `kind` whose pod spec and template metadata are still to be filled in. Its
    /// namespace is the object's, else the review's, else the Namespace object's name.
    pub fn new(
        kind: WorkloadKind,
        object_meta: ObjectMeta<'a>,
        review_namespace: Option<Text<'a>>,
        namespace_meta: Option<ObjectMeta<'a>>,
    ) -> Self {
        let namespace = object_meta
            .namespace
            .clone()
            .or(review_namespace)
            .or_else(|| namespace_meta.as_ref().and_then(|meta| meta.name.clone()));
        Workload {
            kind,
            spec_path: Cow::Borrowed(kind.spec_path()),
            metadata_path: Cow::Borrowed(kind.metadata_path()),
            embedded: None,
            job_meta: None,
            pod_meta: ObjectMeta::default(),
            spec: PodSpec::default(),
            namespace,
            namespace_meta,
            object_meta,
            replicas: None,
            strategy: None,
            job_deadline_seconds: None,
            concurrency_policy: None,
            services: Vec::new(),
        }
    }

    pub fn spec_path(&self) -> &str {
        &self.spec_path
    }

    /// Path of an annotation of the pod template, e.g.
    /// `spec.template.metadata.annotations["proxy.istio.io/config"]`.
    pub fn annotation_path(&self, key: &str) -> String {
        format!("{}.annotations[\"{key}\"]", self.metadata_path)
    }

    pub fn label_path(&self, key: &str) -> String {
        format!("{}.labels[\"{key}\"]", self.metadata_path)
    }

    pub fn container_path(&self, index: usize) -> String {
        format!("{}.containers[{index}]", self.spec_path())
    }

    pub fn init_container_path(&self, index: usize) -> String {
        format!("{}.initContainers[{index}]", self.spec_path())
    }

    pub fn field_path(&self, field: &str) -> String {
        format!("{}.{field}", self.spec_path())
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.pod_meta.annotation(key)
    }

    pub fn namespace_annotation(&self, key: &str) -> Option<&str> {
        self.namespace_meta.as_ref()?.annotation(key)
    }

    pub fn namespace_label(&self, key: &str) -> Option<&str> {
        self.namespace_meta.as_ref()?.label(key)
    }

    /// Whether the parameters' `exemptNamespaces` cover this workload's namespace.
    pub fn in_exempt_namespace(&self, settings: &crate::params::Settings) -> bool {
        in_exempt_namespace(settings, self.namespace.as_deref().unwrap_or(""))
    }

    pub fn has_owner(&self) -> bool {
        self.object_meta
            .owner_references
            .as_ref()
            .is_some_and(|owners| !owners.is_empty())
    }

    /// Job, CronJob, or a Pod owned by a Job or that does not restart.
    pub fn is_batch(&self) -> bool {
        match self.kind {
            WorkloadKind::Job | WorkloadKind::CronJob => true,
            kind if kind.is_embedding() => true,
            WorkloadKind::Pod => {
                let owned_by_job = self
                    .object_meta
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|owner| owner.kind.as_deref() == Some("Job"));
                owned_by_job
                    || matches!(
                        self.spec.restart_policy.as_deref(),
                        Some("Never" | "OnFailure")
                    )
            }
            _ => false,
        }
    }

    /// The deadline that stops a stuck batch pod: the Job's, else the pod's own.
    pub fn batch_deadline_seconds(&self) -> Option<i64> {
        self.job_deadline_seconds
            .or(self.spec.active_deadline_seconds)
    }
}

/// The ranges the API server enforces on the integer fields the rules read. Why: a value it
/// refuses never runs, so judging it would describe a workload that cannot exist; and a rule
/// reading `-5` as a deadline would be judging nonsense. Each is from Kubernetes' validation:
/// pkg/apis/core/validation (`ValidatePodSpec`: a pod's `activeDeadlineSeconds` in
/// 1..=2147483647; container ports 1..=65535; `runAsUser` 0..=2147483647; a sleep action's
/// `seconds` non-negative), pkg/apis/batch/validation (`validateJobSpec`:
/// `ValidateNonnegativeField` for a Job's `activeDeadlineSeconds`), pkg/apis/apps/validation
/// (`replicas`, and `maxSurge`/`maxUnavailable` through `ValidatePositiveIntOrPercent`, all
/// non-negative), and the Kubeflow training operator's webhook for `runPolicy`. A negative
/// `terminationGracePeriodSeconds` is not among them: the API server accepts it (see
/// `PodSpec::grace_period_seconds`).
impl Workload<'_> {
    pub fn check_values(&self) -> Parsed<()> {
        // From the top of the object down, so the first value named is the first one met.
        in_range(self.job_deadline_seconds, 0, i64::MAX, || {
            match (&self.embedded, self.kind) {
                (Some(job), _) => job.deadline_path.clone(),
                (None, WorkloadKind::CronJob) => {
                    "spec.jobTemplate.spec.activeDeadlineSeconds".into()
                }
                (None, _) => "spec.activeDeadlineSeconds".into(),
            }
        })?;
        in_range(self.replicas, 0, i64::MAX, || "spec.replicas".into())?;
        if let Some(strategy) = &self.strategy {
            for (name, update) in [
                ("rollingUpdate", &strategy.rolling_update),
                ("canary", &strategy.canary),
            ] {
                let Some(update) = update else { continue };
                for (field, value) in [
                    ("maxSurge", &update.max_surge),
                    ("maxUnavailable", &update.max_unavailable),
                ] {
                    if let Some(IntOrString::Int(number)) = value {
                        in_range(Some(*number), 0, i64::MAX, || {
                            format!("spec.strategy.{name}.{field}")
                        })?;
                    }
                }
            }
        }
        let spec = &self.spec;
        in_range(spec.active_deadline_seconds, 1, i64::from(i32::MAX), || {
            self.field_path("activeDeadlineSeconds")
        })?;
        in_range(
            spec.security_context.as_ref().and_then(|c| c.run_as_user),
            0,
            i64::from(i32::MAX),
            || self.field_path("securityContext.runAsUser"),
        )?;
        let os_name = spec.os_name.as_deref();
        for (index, container) in spec.init_containers().iter().enumerate() {
            check_container(container, os_name, || self.init_container_path(index))?;
        }
        for (index, container) in spec.containers().iter().enumerate() {
            check_container(container, os_name, || self.container_path(index))?;
        }
        Ok(())
    }
}

fn check_container(
    container: &Container,
    os_name: Option<&str>,
    path: impl Fn() -> String,
) -> Parsed<()> {
    for (index, port) in container.ports().iter().enumerate() {
        if let Some(IntOrString::Int(number)) = port.container_port {
            in_range(Some(number), 1, 65_535, || {
                format!("{}.ports[{index}].containerPort", path())
            })?;
        }
    }
    for (hook, handler) in [
        ("postStart", container.post_start()),
        ("preStop", container.pre_stop()),
    ] {
        in_range(
            handler.and_then(|handler| handler.sleep.as_ref()?.seconds),
            0,
            i64::MAX,
            || format!("{}.lifecycle.{hook}.sleep.seconds", path()),
        )?;
    }
    if let Some(refusal) = container
        .stated_stop_signal()
        .and_then(|signal| crate::stop_signal::refusal(signal, os_name))
    {
        return Err(InputError::new(
            format!("{}.lifecycle.stopSignal", path()),
            refusal,
        ));
    }
    in_range(container.run_as_user(), 0, i64::from(i32::MAX), || {
        format!("{}.securityContext.runAsUser", path())
    })
}

fn in_range(value: Option<i64>, min: i64, max: i64, path: impl FnOnce() -> String) -> Parsed<()> {
    match value {
        Some(number) if number < min && min == 0 => Err(InputError::new(
            path(),
            format!("{number} is negative; the API server requires at least 0"),
        )),
        Some(number) if number < min || number > max => {
            let allowed = if max == i64::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            };
            Err(InputError::new(
                path(),
                format!("{number} is out of range; the API server requires {allowed}"),
            ))
        }
        _ => Ok(()),
    }
}

/// `pattern` matches `text` exactly, or as a prefix when it ends in `*`.
/// Whether the parameters' `exemptNamespaces` cover `namespace`.
pub fn in_exempt_namespace(settings: &crate::params::Settings, namespace: &str) -> bool {
    settings
        .raw
        .exempt_namespaces
        .iter()
        .any(|pattern| glob_matches(pattern, namespace))
}

pub fn glob_matches(pattern: &str, text: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => text.starts_with(prefix),
        None => pattern == text,
    }
}
