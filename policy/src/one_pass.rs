//! The fast way in: one pass from JSON text straight into the typed view, reading only the
//! fields the rules read and skipping the rest without building anything for it.
//!
//! It is strict on purpose. Whatever it does not accept exactly as the exact reader (`node` +
//! `input`) would accept it (a wrong type, a null list item, a duplicate field, a missing
//! `review`, JSON that serde_json would refuse) makes it give up, and `evaluate` reads the
//! input again the exact way, which names the path and the problem. So this pass never writes an
//! error message, valid input is read once, and the two readers agree wherever this one answers
//! (property-tested in `tests/it/cases.rs`).
//!
//! Hand-written over `json_cursor` rather than derived with serde (the first version): in the
//! module, serde_json merely reading a typical Deployment takes 1.6 times as long as natively,
//! and the derived typed pass took 13.5 us there against 11.5 us for this one (measured
//! 2026-11-29 in wasmtime; the whole evaluation 22 -> 19 us). The cursor also states plainly
//! where it gives up, which serde's derive (structs from arrays, duplicate fields) did not.

use std::collections::BTreeMap;

use crate::input::{
    Container, ContainerPort, EnvVar, ExecAction, ExitCodes, Handler, HttpGetAction, IntOrString,
    Lifecycle, ObjectMeta, OwnerReference, PodSpec, RestartRule, RollingUpdate, SecurityContext,
    Service, ServicePort, SleepAction, Strategy, Text,
};
use crate::json_cursor::Cursor;
use crate::network_policy::is_network_policy;
use crate::node::parse_parameters;
use crate::operation::{is_judged_operation, is_skipped_operation};
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
    let mut cursor = Cursor::new(json);
    let envelope = envelope(&mut cursor)?;
    if !cursor.at_end() {
        return None;
    }
    let review = envelope.review?;
    if is_skipped_operation(review.operation.as_deref()) {
        return Some(Reading::NothingToReview);
    }
    // An unknown operation is judged with an ML000 beside: the exact reader writes it.
    if !is_judged_operation(review.operation.as_deref()) {
        return None;
    }
    let parameters = match envelope.parameters {
        Some(raw) => Some(parse_parameters(raw).ok()?),
        None => None,
    };
    let settings = Settings::from_parameters(Parameters::read(parameters.as_ref()).ok()?).ok()?;
    let object = review.object?;
    let review_kind = review.kind;
    let kind_name = object.kind.or(review_kind);
    let Some(kind) = kind_name
        .as_deref()
        .and_then(|kind| WorkloadKind::of(kind, object.api_version.as_deref()))
    else {
        // A NetworkPolicy is no workload: the exact reader reads it.
        if kind_name
            .as_deref()
            .is_some_and(|kind| is_network_policy(kind, object.api_version.as_deref()))
        {
            return None;
        }
        return Some(Reading::NothingToReview);
    };
    // Pod specs inside other objects (analysis templates, training jobs, ...) are rare at
    // admission; the exact reader finds them.
    if kind.is_embedding() {
        return None;
    }
    let mut workload = Workload::new(
        kind,
        object.metadata.unwrap_or_default(),
        review.namespace,
        review.namespace_object,
    );
    workload.services = envelope.services.unwrap_or_default();
    let Some(spec) = object.spec else {
        return Some(Reading::NothingToReview);
    };
    let template = match kind {
        WorkloadKind::Pod => {
            workload.pod_meta = workload.object_meta.clone();
            workload.spec = spec.pod;
            workload.check_values().ok()?;
            return Some(Reading::Review(Box::new(workload), Box::new(settings)));
        }
        WorkloadKind::CronJob => spec.job_template.and_then(|job_spec| {
            workload.concurrency_policy = spec.concurrency_policy;
            workload.job_deadline_seconds = job_spec.active_deadline_seconds;
            job_spec.template
        }),
        WorkloadKind::Job => {
            workload.job_deadline_seconds = spec.pod.active_deadline_seconds;
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
    // A value the API server refuses: the exact reader names it.
    workload.check_values().ok()?;
    Some(Reading::Review(Box::new(workload), Box::new(settings)))
}

/// Gatekeeper's input: `{"review": AdmissionRequest, "parameters": {...}}`.
struct Envelope<'a> {
    review: Option<Review<'a>>,
    /// The Services of the object's namespace (absent, null and empty alike).
    services: Option<Vec<Service<'a>>>,
    /// The text of `parameters`: they keep every key (a misspelt one is an error), so the exact
    /// reader reads them.
    parameters: Option<&'a str>,
}

struct Review<'a> {
    operation: Option<Text<'a>>,
    object: Option<Object<'a>>,
    kind: Option<Text<'a>>,
    namespace: Option<Text<'a>>,
    namespace_object: Option<ObjectMeta<'a>>,
}

struct Object<'a> {
    kind: Option<Text<'a>>,
    api_version: Option<Text<'a>>,
    metadata: Option<ObjectMeta<'a>>,
    spec: Option<ObjectSpec<'a>>,
}

/// Every kind's `spec` in one shape, because `kind` may come after `spec` in the text: a Pod's
/// fields, a controller's, a Job's and a CronJob's. Reading more fields than one kind needs is
/// safe: a wrong type in any of them only sends the input to the exact reader.
#[derive(Default)]
struct ObjectSpec<'a> {
    pod: PodSpec<'a>,
    replicas: Option<i64>,
    strategy: Option<Strategy<'a>>,
    template: Option<PodTemplate<'a>>,
    job_template: Option<JobSpec<'a>>,
    concurrency_policy: Option<Text<'a>>,
}

#[derive(Default)]
struct PodTemplate<'a> {
    metadata: Option<ObjectMeta<'a>>,
    spec: Option<PodSpec<'a>>,
}

/// A CronJob's `jobTemplate.spec`.
#[derive(Default)]
struct JobSpec<'a> {
    active_deadline_seconds: Option<i64>,
    template: Option<PodTemplate<'a>>,
}

// Readers. Each answers `None` to give up; `Some(None)` is a null or absent value, which the
// exact reader reads as absent too.

fn nullable<'a, T>(
    cursor: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if cursor.null()? {
        Some(None)
    } else {
        read(cursor).map(Some)
    }
}

fn text<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Text<'a>>> {
    nullable(cursor, |cursor| cursor.string().map(Text))
}

fn int(cursor: &mut Cursor) -> Option<Option<i64>> {
    nullable(cursor, Cursor::int)
}

fn list<'a, T>(
    cursor: &mut Cursor<'a>,
    mut read_item: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<Vec<T>>> {
    nullable(cursor, |cursor| {
        let mut items = Vec::new();
        cursor.items(|cursor| {
            items.push(read_item(cursor)?);
            Some(())
        })?;
        Some(items)
    })
}

fn texts<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Vec<Text<'a>>>> {
    list(cursor, |cursor| cursor.string().map(Text))
}

/// Labels and annotations: string values, null values left out, the last of a repeated key.
fn string_map<'a>(cursor: &mut Cursor<'a>) -> Option<Option<BTreeMap<Text<'a>, Text<'a>>>> {
    nullable(cursor, |cursor| {
        let mut map = BTreeMap::new();
        cursor.members(|cursor, key| {
            if !cursor.null()? {
                map.insert(Text::from(key), Text(cursor.string()?));
            }
            Some(())
        })?;
        Some(map)
    })
}

fn int_or_string<'a>(cursor: &mut Cursor<'a>) -> Option<Option<IntOrString<'a>>> {
    nullable(cursor, |cursor| match cursor.peek()? {
        b'"' => cursor.string().map(|text| IntOrString::Str(Text(text))),
        _ => cursor.int().map(IntOrString::Int),
    })
}

/// Any value but null, skipped.
fn present(cursor: &mut Cursor) -> Option<bool> {
    Some(nullable(cursor, Cursor::skip)?.is_some())
}

/// An object (skipped), or null.
fn is_object(cursor: &mut Cursor) -> Option<bool> {
    Some(nullable(cursor, |cursor| cursor.members(|cursor, _| cursor.skip()))?.is_some())
}

/// The fields of an object that `member` reads (answering true), the others skipped.
fn fields<'a, T: Default>(
    cursor: &mut Cursor<'a>,
    mut member: impl FnMut(&mut T, &mut Cursor<'a>, &str) -> Option<bool>,
) -> Option<Option<T>> {
    nullable(cursor, |cursor| {
        let mut value = T::default();
        cursor.fields(|cursor, key| match member(&mut value, cursor, key)? {
            true => Some(true),
            false => cursor.skip().map(|()| false),
        })?;
        Some(value)
    })
}

/// A list of objects; a null item gives up (the exact reader reads it as an empty object).
fn objects<'a, T: Default>(
    cursor: &mut Cursor<'a>,
    member: impl Fn(&mut T, &mut Cursor<'a>, &str) -> Option<bool>,
) -> Option<Option<Vec<T>>> {
    list(cursor, |cursor| fields(cursor, &member)?)
}

/// Sets `$target` from `$read` and answers true: one read field.
macro_rules! field {
    ($target:expr, $read:expr) => {{
        $target = $read?;
        true
    }};
}

fn envelope<'a>(cursor: &mut Cursor<'a>) -> Option<Envelope<'a>> {
    let mut review = None;
    let mut parameters = None;
    let mut services = None;
    cursor.fields(|cursor, key| match key {
        "review" => Some(field!(review, review_fields(cursor))),
        "parameters" => Some(field!(parameters, nullable(cursor, Cursor::raw_value))),
        "services" => Some(field!(services, objects(cursor, service_fields))),
        _ => cursor.skip().map(|()| false),
    })?;
    Some(Envelope {
        review,
        parameters,
        services,
    })
}

fn review_fields<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Review<'a>>> {
    let mut review = Review {
        operation: None,
        object: None,
        kind: None,
        namespace: None,
        namespace_object: None,
    };
    let read = nullable(cursor, |cursor| {
        cursor.fields(|cursor, key| {
            Some(match key {
                "operation" => field!(review.operation, text(cursor)),
                "object" => field!(review.object, object_fields(cursor)),
                "kind" => field!(
                    review.kind,
                    fields(cursor, |kind: &mut Option<Text<'a>>, cursor, key| {
                        Some(key == "kind" && field!(*kind, text(cursor)))
                    })
                    .map(Option::flatten)
                ),
                "namespace" => field!(review.namespace, text(cursor)),
                "namespaceObject" => field!(
                    review.namespace_object,
                    fields(cursor, |meta: &mut Option<ObjectMeta<'a>>, cursor, key| {
                        Some(key == "metadata" && field!(*meta, object_meta(cursor)))
                    })
                    .map(Option::flatten)
                ),
                _ => return cursor.skip().map(|()| false),
            })
        })
    })?;
    Some(read.map(|()| review))
}

fn object_fields<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Object<'a>>> {
    let mut object = Object {
        kind: None,
        api_version: None,
        metadata: None,
        spec: None,
    };
    let read = nullable(cursor, |cursor| {
        cursor.fields(|cursor, key| {
            Some(match key {
                "kind" => field!(object.kind, text(cursor)),
                "apiVersion" => field!(object.api_version, text(cursor)),
                "metadata" => field!(object.metadata, object_meta(cursor)),
                "spec" => field!(object.spec, object_spec(cursor)),
                _ => return cursor.skip().map(|()| false),
            })
        })
    })?;
    Some(read.map(|()| object))
}

fn object_meta<'a>(cursor: &mut Cursor<'a>) -> Option<Option<ObjectMeta<'a>>> {
    fields(cursor, |meta: &mut ObjectMeta<'a>, cursor, key| {
        Some(match key {
            "name" => field!(meta.name, text(cursor)),
            "namespace" => field!(meta.namespace, text(cursor)),
            "labels" => field!(meta.labels, string_map(cursor)),
            "annotations" => field!(meta.annotations, string_map(cursor)),
            "ownerReferences" => field!(
                meta.owner_references,
                objects(cursor, |owner: &mut OwnerReference<'a>, cursor, key| {
                    Some(key == "kind" && field!(owner.kind, text(cursor)))
                })
            ),
            _ => false,
        })
    })
}

fn object_spec<'a>(cursor: &mut Cursor<'a>) -> Option<Option<ObjectSpec<'a>>> {
    fields(cursor, |spec: &mut ObjectSpec<'a>, cursor, key| {
        Some(match key {
            "replicas" => field!(spec.replicas, int(cursor)),
            "concurrencyPolicy" => field!(spec.concurrency_policy, text(cursor)),
            "strategy" => field!(spec.strategy, strategy(cursor)),
            "template" => field!(spec.template, pod_template(cursor)),
            "jobTemplate" => field!(
                spec.job_template,
                fields(cursor, |job: &mut Option<JobSpec<'a>>, cursor, key| {
                    Some(key == "spec" && field!(*job, job_spec(cursor)))
                })
                .map(Option::flatten)
            ),
            _ => pod_spec_field(&mut spec.pod, cursor, key)?,
        })
    })
}

fn job_spec<'a>(cursor: &mut Cursor<'a>) -> Option<Option<JobSpec<'a>>> {
    fields(cursor, |job: &mut JobSpec<'a>, cursor, key| {
        Some(match key {
            "activeDeadlineSeconds" => field!(job.active_deadline_seconds, int(cursor)),
            "template" => field!(job.template, pod_template(cursor)),
            _ => false,
        })
    })
}

fn pod_template<'a>(cursor: &mut Cursor<'a>) -> Option<Option<PodTemplate<'a>>> {
    fields(cursor, |template: &mut PodTemplate<'a>, cursor, key| {
        Some(match key {
            "metadata" => field!(template.metadata, object_meta(cursor)),
            "spec" => field!(
                template.spec,
                fields(cursor, |spec: &mut PodSpec<'a>, cursor, key| {
                    pod_spec_field(spec, cursor, key)
                })
            ),
            _ => false,
        })
    })
}

/// One field of a pod spec; false for a key that is not one.
fn pod_spec_field<'a>(spec: &mut PodSpec<'a>, cursor: &mut Cursor<'a>, key: &str) -> Option<bool> {
    Some(match key {
        "containers" => field!(spec.containers, objects(cursor, container_field)),
        "initContainers" => field!(spec.init_containers, objects(cursor, container_field)),
        "terminationGracePeriodSeconds" => {
            field!(spec.termination_grace_period_seconds, int(cursor))
        }
        "activeDeadlineSeconds" => field!(spec.active_deadline_seconds, int(cursor)),
        "restartPolicy" => field!(spec.restart_policy, text(cursor)),
        "hostNetwork" => field!(spec.host_network, nullable(cursor, Cursor::boolean)),
        "securityContext" => field!(spec.security_context, security_context(cursor)),
        "os" => field!(
            spec.os_name,
            fields(cursor, |name: &mut Option<Text<'a>>, cursor, key| {
                Some(match key {
                    "name" => field!(*name, text(cursor)),
                    _ => false,
                })
            })
            .map(Option::flatten)
        ),
        _ => false,
    })
}

fn container_field<'a>(
    container: &mut Container<'a>,
    cursor: &mut Cursor<'a>,
    key: &str,
) -> Option<bool> {
    Some(match key {
        "name" => field!(container.name, text(cursor)),
        "image" => field!(container.image, text(cursor)),
        "command" => field!(container.command, texts(cursor)),
        "args" => field!(container.args, texts(cursor)),
        "env" => field!(
            container.env,
            objects(cursor, |var: &mut EnvVar<'a>, cursor, key| {
                Some(match key {
                    "name" => field!(var.name, text(cursor)),
                    "value" => field!(var.value, text(cursor)),
                    _ => false,
                })
            })
        ),
        "ports" => field!(
            container.ports,
            objects(cursor, |port: &mut ContainerPort<'a>, cursor, key| {
                Some(match key {
                    "name" => field!(port.name, text(cursor)),
                    "containerPort" => field!(port.container_port, int_or_string(cursor)),
                    "appProtocol" => field!(port.app_protocol, text(cursor)),
                    _ => false,
                })
            })
        ),
        "lifecycle" => field!(
            container.lifecycle,
            fields(cursor, |lifecycle: &mut Lifecycle<'a>, cursor, key| {
                Some(match key {
                    "postStart" => field!(lifecycle.post_start, handler(cursor)),
                    "preStop" => field!(lifecycle.pre_stop, handler(cursor)),
                    "stopSignal" => field!(lifecycle.stop_signal, text(cursor)),
                    _ => false,
                })
            })
        ),
        "readinessProbe" => {
            let grpc = probe(cursor)?;
            container.has_readiness_probe = grpc.is_some();
            container.grpc_probes.readiness = grpc.unwrap_or(false);
            true
        }
        "startupProbe" => {
            let grpc = probe(cursor)?;
            container.has_startup_probe = grpc.is_some();
            container.grpc_probes.startup = grpc.unwrap_or(false);
            true
        }
        "livenessProbe" => field!(
            container.grpc_probes.liveness,
            probe(cursor).map(|grpc| grpc.unwrap_or(false))
        ),
        "restartPolicy" => field!(container.restart_policy, text(cursor)),
        "restartPolicyRules" => field!(
            container.restart_rules,
            objects(cursor, |rule: &mut RestartRule<'a>, cursor, key| {
                Some(match key {
                    "action" => field!(rule.action, text(cursor)),
                    "exitCodes" => field!(
                        rule.exit_codes,
                        fields(cursor, |codes: &mut ExitCodes<'a>, cursor, key| {
                            Some(match key {
                                "operator" => field!(codes.operator, text(cursor)),
                                "values" => field!(codes.values, list(cursor, Cursor::int)),
                                _ => false,
                            })
                        })
                    ),
                    _ => false,
                })
            })
        ),
        "securityContext" => field!(container.security_context, security_context(cursor)),
        _ => false,
    })
}

/// A probe (`Some(None)` when null): whether it has a `grpc` action.
fn probe(cursor: &mut Cursor) -> Option<Option<bool>> {
    fields(cursor, |grpc: &mut bool, cursor, key| {
        Some(key == "grpc" && field!(*grpc, is_object(cursor)))
    })
}

/// A Service of the input's top-level `services`.
fn service_fields<'a>(
    service: &mut Service<'a>,
    cursor: &mut Cursor<'a>,
    key: &str,
) -> Option<bool> {
    Some(match key {
        "metadata" => {
            let meta = fields(
                cursor,
                |meta: &mut (Option<Text<'a>>, Option<Text<'a>>), cursor, key| {
                    Some(match key {
                        "name" => field!(meta.0, text(cursor)),
                        "namespace" => field!(meta.1, text(cursor)),
                        _ => false,
                    })
                },
            )?;
            (service.name, service.namespace) = meta.unwrap_or_default();
            true
        }
        "spec" => {
            let spec = fields(cursor, |spec: &mut Service<'a>, cursor, key| {
                Some(match key {
                    "selector" => field!(spec.selector, string_map(cursor)),
                    "ports" => field!(
                        spec.ports,
                        objects(cursor, |port: &mut ServicePort<'a>, cursor, key| {
                            Some(match key {
                                "name" => field!(port.name, text(cursor)),
                                "port" => field!(port.port, int(cursor)),
                                "targetPort" => field!(port.target_port, int_or_string(cursor)),
                                "appProtocol" => field!(port.app_protocol, text(cursor)),
                                _ => false,
                            })
                        })
                    ),
                    _ => false,
                })
            })?;
            if let Some(spec) = spec {
                service.selector = spec.selector;
                service.ports = spec.ports;
            } else {
                service.selector = None;
                service.ports = None;
            }
            true
        }
        _ => false,
    })
}

fn handler<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Handler<'a>>> {
    fields(cursor, |handler: &mut Handler<'a>, cursor, key| {
        Some(match key {
            "exec" => field!(
                handler.exec,
                fields(cursor, |exec: &mut ExecAction<'a>, cursor, key| {
                    Some(key == "command" && field!(exec.command, texts(cursor)))
                })
            ),
            "sleep" => field!(
                handler.sleep,
                fields(cursor, |sleep: &mut SleepAction, cursor, key| {
                    Some(key == "seconds" && field!(sleep.seconds, int(cursor)))
                })
            ),
            "httpGet" => field!(
                handler.http_get,
                fields(cursor, |get: &mut HttpGetAction<'a>, cursor, key| {
                    Some(key == "path" && field!(get.path, text(cursor)))
                })
            ),
            _ => false,
        })
    })
}

fn security_context(cursor: &mut Cursor) -> Option<Option<SecurityContext>> {
    fields(cursor, |context: &mut SecurityContext, cursor, key| {
        Some(key == "runAsUser" && field!(context.run_as_user, int(cursor)))
    })
}

fn strategy<'a>(cursor: &mut Cursor<'a>) -> Option<Option<Strategy<'a>>> {
    fields(cursor, |strategy: &mut Strategy<'a>, cursor, key| {
        Some(match key {
            "type" => field!(strategy.kind, text(cursor)),
            "rollingUpdate" => field!(strategy.rolling_update, rolling_update(cursor)),
            "canary" => field!(strategy.canary, rolling_update(cursor)),
            "blueGreen" => field!(strategy.blue_green, present(cursor)),
            _ => false,
        })
    })
}

fn rolling_update<'a>(cursor: &mut Cursor<'a>) -> Option<Option<RollingUpdate<'a>>> {
    fields(cursor, |update: &mut RollingUpdate<'a>, cursor, key| {
        Some(match key {
            "maxUnavailable" => field!(update.max_unavailable, int_or_string(cursor)),
            "maxSurge" => field!(update.max_surge, int_or_string(cursor)),
            _ => false,
        })
    })
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
    fn reads_services_and_grpc_probes_in_one_pass() {
        let input = deployment(
            r#"{"containers": [{"name": "web", "livenessProbe": {"grpc": {"port": 9000}}}]}"#,
        )
        .replacen(
            "{\"review\"",
            r#"{"services": [{"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"name": "grpc", "port": 80, "targetPort": 9000}]}}], "extra": [1], "review""#,
            1,
        );
        let workload = reviewed(&input).expect("services are read in one pass");
        assert_eq!(workload.services.len(), 1);
        assert_eq!(workload.services[0].ports()[0].port, Some(80));
        assert!(workload.services[0].selects(workload.pod_meta.labels.as_ref()));
        assert!(workload.spec.containers()[0].grpc_probes.liveness);
    }

    #[test]
    fn gives_up_wherever_the_exact_reader_would_object_or_read_differently() {
        for pod_spec in [
            // A struct from an array of its fields (serde's derive would accept it).
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
        let valid = deployment(r#"{"containers": [{"name": "web", "image": "web:1"}]}"#);
        assert!(read(&valid).is_some());
        for refused in [
            // Text serde_json refuses, or reads in ways this pass leaves to it.
            format!("{valid} trailing"),
            valid.replace("\"web:1\"", "\"web\\ud83d\""),
            valid.replace("\"name\": \"web\"", "\"na\\u006de\": \"web\""),
            valid.replace("\"replicas\": 2", "\"replicas\": -0"),
            valid.replace("\"replicas\": 2", "\"replicas\": 02"),
            valid.replace(
                "\"manager\": \"kubectl\"",
                &format!("\"deep\": {}{}", "[".repeat(100), "]".repeat(100)),
            ),
            // 69 levels from the top, inside a subtree the exact reader keeps (readinessProbe
            // holds rule keys): it refuses them, so this pass must not answer.
            valid.replace(
                "\"image\": \"web:1\"",
                &format!(
                    "\"image\": \"web:1\", \"readinessProbe\": {{\"exec\": {}{}}}",
                    "[".repeat(60),
                    "]".repeat(60)
                ),
            ),
        ] {
            assert_ne!(refused, valid, "the edit applies");
            assert!(read(&refused).is_none(), "{refused}");
            assert_eq!(
                crate::evaluate(refused.as_bytes()),
                crate::evaluate_with_exact_reader(refused.as_bytes())
            );
        }
        assert!(read(r#"{"parameters": {"istoi": {}}, "review": {"object": {}}}"#).is_none());
    }
}
