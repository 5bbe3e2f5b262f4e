//! The fast way in: one serde pass from JSON text straight into the typed view, skipping every
//! field the rules do not read without building anything for it.
//!
//! It is strict on purpose. Whatever it does not accept exactly as the exact reader (`node` +
//! `input`) would accept it (a wrong type, a null list item, a duplicate key, a missing
//! `review`) makes it give up, and `evaluate` reads the input again the exact way, which names
//! the path and the problem. So this pass never writes an error message, valid input is read
//! once, and the two readers agree wherever this one answers (tested in `tests/one_pass.rs`).

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::input::{
    Container, ObjectMeta, ObjectOnly, PodSpec, SecurityContext, Strategy, Text, object, objects,
};
use crate::node::parse_parameters;
use crate::params::{Parameters, Settings};
use crate::workload::{Workload, WorkloadKind};

/// What the one pass found, when it could read the input.
pub enum Reading<'a> {
    /// Nothing to review: a DELETE or CONNECT, a kind that is not a workload, a controller
    /// without a pod template.
    NothingToReview,
    Review(Box<Workload<'a>>, Box<Settings>),
}

/// Reads `json` in one pass; `None` when the exact reader must decide.
pub fn read(json: &str) -> Option<Reading<'_>> {
    let ObjectOnly::<Envelope>(envelope) = serde_json::from_str(json).ok()?;
    let review = envelope.review?;
    if matches!(review.operation.as_deref(), Some("DELETE" | "CONNECT")) {
        return Some(Reading::NothingToReview);
    }
    let parameters = match envelope.parameters {
        Some(raw) => Some(parse_parameters(raw.get()).ok()?),
        None => None,
    };
    let settings = Settings::from_parameters(Parameters::read(parameters.as_ref()).ok()?).ok()?;
    let object = review.object?;
    let review_kind = review.kind.and_then(|kind| kind.kind);
    let Some(kind) = object
        .kind
        .or(review_kind)
        .as_deref()
        .and_then(WorkloadKind::from_kind)
    else {
        return Some(Reading::NothingToReview);
    };
    if kind == WorkloadKind::Rollout
        && object
            .api_version
            .is_some_and(|api_version| !api_version.starts_with("argoproj.io/"))
    {
        return Some(Reading::NothingToReview);
    }
    let object_meta = object.metadata.unwrap_or_default();
    let namespace_meta = review
        .namespace_object
        .and_then(|namespace| namespace.metadata);
    let namespace = object_meta
        .namespace
        .clone()
        .or(review.namespace)
        .or_else(|| namespace_meta.as_ref().and_then(|meta| meta.name.clone()));
    let mut workload = Workload {
        kind,
        pod_meta: ObjectMeta::default(),
        spec: PodSpec::default(),
        namespace,
        namespace_meta,
        object_meta,
        replicas: None,
        strategy: None,
        job_deadline_seconds: None,
    };
    let Some(spec) = object.spec else {
        return Some(Reading::NothingToReview);
    };
    let template = match kind {
        WorkloadKind::Pod => {
            workload.pod_meta = workload.object_meta.clone();
            workload.spec = PodSpec {
                containers: spec.containers,
                init_containers: spec.init_containers,
                termination_grace_period_seconds: spec.termination_grace_period_seconds,
                active_deadline_seconds: spec.active_deadline_seconds,
                restart_policy: spec.restart_policy,
                host_network: spec.host_network,
                security_context: spec.security_context,
            };
            return Some(Reading::Review(Box::new(workload), Box::new(settings)));
        }
        WorkloadKind::CronJob => spec
            .job_template
            .and_then(|job| job.spec)
            .and_then(|job_spec| {
                workload.job_deadline_seconds = job_spec.active_deadline_seconds;
                job_spec.template
            }),
        WorkloadKind::Job => {
            workload.job_deadline_seconds = spec.active_deadline_seconds;
            spec.template
        }
        _ => spec.template,
    };
    workload.replicas = spec.replicas;
    workload.strategy = spec.strategy;
    let Some(PodTemplate {
        metadata,
        spec: Some(pod_spec),
    }) = template
    else {
        return Some(Reading::NothingToReview);
    };
    workload.spec = pod_spec;
    workload.pod_meta = metadata.unwrap_or_default();
    Some(Reading::Review(Box::new(workload), Box::new(settings)))
}

/// Gatekeeper's input: `{"review": AdmissionRequest, "parameters": {...}}`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    review: Option<Review<'a>>,
    /// Parameters keep every key (a misspelt one is an error), so they go to the exact reader.
    #[serde(borrow)]
    parameters: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    #[serde(borrow)]
    operation: Option<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    object: Option<Object<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    kind: Option<ReviewKind<'a>>,
    #[serde(borrow)]
    namespace: Option<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    namespace_object: Option<NamespaceObject<'a>>,
}

#[derive(Deserialize)]
struct ReviewKind<'a> {
    #[serde(borrow)]
    kind: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct NamespaceObject<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    metadata: Option<ObjectMeta<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a> {
    #[serde(borrow)]
    kind: Option<Text<'a>>,
    #[serde(borrow)]
    api_version: Option<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    spec: Option<ObjectSpec<'a>>,
}

/// Every kind's `spec` in one shape, because `kind` may come after `spec` in the text: a Pod's
/// fields, a controller's, a Job's and a CronJob's. Reading more fields than one kind needs is
/// safe: a wrong type in any of them only sends the input to the exact reader.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectSpec<'a> {
    // A Pod's spec (`PodSpec`'s fields; `flatten` would buffer every skipped field).
    #[serde(borrow, default, deserialize_with = "objects")]
    containers: Option<Vec<Container<'a>>>,
    #[serde(borrow, default, deserialize_with = "objects")]
    init_containers: Option<Vec<Container<'a>>>,
    termination_grace_period_seconds: Option<i64>,
    /// A Pod's, or a Job's.
    active_deadline_seconds: Option<i64>,
    #[serde(borrow)]
    restart_policy: Option<Text<'a>>,
    host_network: Option<bool>,
    #[serde(default, deserialize_with = "object")]
    security_context: Option<SecurityContext>,
    // A controller's.
    replicas: Option<i64>,
    #[serde(borrow, default, deserialize_with = "object")]
    strategy: Option<Strategy<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    template: Option<PodTemplate<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    job_template: Option<JobTemplate<'a>>,
}

#[derive(Deserialize)]
struct PodTemplate<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    spec: Option<PodSpec<'a>>,
}

#[derive(Deserialize)]
struct JobTemplate<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    spec: Option<JobSpec<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobSpec<'a> {
    active_deadline_seconds: Option<i64>,
    #[serde(borrow, default, deserialize_with = "object")]
    template: Option<PodTemplate<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(pod_spec: &str) -> String {
        format!(
            r#"{{"review": {{"operation": "CREATE", "object": {{"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {{"name": "web", "namespace": "shop",
            "managedFields": [{{"manager": "kubectl"}}]}}, "spec": {{"replicas": 2,
            "template": {{"metadata": {{"labels": {{"app": "web"}}}}, "spec": {pod_spec}}}}}}}}},
            "parameters": {{"istio": {{"injectedNamespaces": ["shop"]}}}}}}"#
        )
    }

    fn reviewed(json: &str) -> Option<Box<Workload<'_>>> {
        match read(json)? {
            Reading::Review(workload, _) => Some(workload),
            Reading::NothingToReview => None,
        }
    }

    #[test]
    fn reads_a_valid_workload_in_one_pass() {
        let input = deployment(
            r#"{"containers": [{"name": "web", "image": "web:1", "env": [{"name": "A",
            "valueFrom": {"fieldRef": {"fieldPath": "x"}}}], "readinessProbe": {"httpGet":
            {"path": "/ready", "port": 8080}}, "ports": [{"containerPort": "http"}]}],
            "volumes": [{"name": "v", "emptyDir": {}}]}"#,
        );
        let workload = reviewed(&input).expect("a valid Deployment is read in one pass");
        assert_eq!(workload.kind, WorkloadKind::Deployment);
        assert_eq!(workload.namespace.as_deref(), Some("shop"));
        assert_eq!(workload.replicas, Some(2));
        assert_eq!(workload.pod_meta.label("app"), Some("web"));
        let container = &workload.spec.containers()[0];
        assert_eq!(container.name(), "web");
        assert!(container.has_readiness_probe && !container.has_startup_probe);
    }

    #[test]
    fn gives_up_wherever_the_exact_reader_would_object_or_read_differently() {
        for pod_spec in [
            // A struct from an array of its fields, which serde's derive accepts.
            r#"{"containers": [["web", "web:1"]]}"#,
            // A null list item, which the exact reader reads as an empty container.
            r#"{"containers": [null]}"#,
            // A duplicate key: the exact reader reads the first.
            r#"{"containers": [{"name": "a", "name": "b"}]}"#,
            r#"{"terminationGracePeriodSeconds": "30", "containers": []}"#,
            r#"{"terminationGracePeriodSeconds": 30.0, "containers": []}"#,
            r#"{"containers": [{"name": "web", "readinessProbe": true}]}"#,
            r#"{"containers": [{"name": "web", "ports": [{"containerPort": 1.5}]}]}"#,
        ] {
            assert!(read(&deployment(pod_spec)).is_none(), "{pod_spec}");
        }
        assert!(read(r#"[{"review": {}}]"#).is_none());
        assert!(read(r#"{"parameters": {"istoi": {}}, "review": {"object": {}}}"#).is_none());
    }
}
