//! The reviewed pod spec in its context: which kind holds it, where, with which metadata, and
//! the controller fields some rules read. Built once per input from the typed view.

use crate::input::{ObjectMeta, PodSpec, Strategy, Text};

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
}

impl WorkloadKind {
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

    /// Where the pod spec and its metadata live in the object.
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

pub struct Workload<'a> {
    pub kind: WorkloadKind,
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
            pod_meta: ObjectMeta::default(),
            spec: PodSpec::default(),
            namespace,
            namespace_meta,
            object_meta,
            replicas: None,
            strategy: None,
            job_deadline_seconds: None,
            concurrency_policy: None,
        }
    }

    pub fn spec_path(&self) -> &'static str {
        self.kind.spec_path()
    }

    /// Path of an annotation of the pod template, e.g.
    /// `spec.template.metadata.annotations["proxy.istio.io/config"]`.
    pub fn annotation_path(&self, key: &str) -> String {
        format!("{}.annotations[\"{key}\"]", self.kind.metadata_path())
    }

    pub fn label_path(&self, key: &str) -> String {
        format!("{}.labels[\"{key}\"]", self.kind.metadata_path())
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

/// `pattern` matches `text` exactly, or as a prefix when it ends in `*`.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => text.starts_with(prefix),
        None => pattern == text,
    }
}
