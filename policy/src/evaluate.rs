//! The pipeline: bytes, typed view, workload, mesh decision, rules, filtered violations.

use serde::Deserialize;

use crate::catalogue::{Rule, INVALID_INPUT};
use crate::input::{
    check_depth, is_object, json_type_name, parse_at, ControllerSpec, InputDoc, InputError, ObjectDoc,
    ObjectMeta, PodSpec, PodTemplate, ReviewDoc,
};
use crate::mesh::{decide, Decision};
use crate::params::Settings;
use crate::rules::{run_all, Context};
use crate::violation::{Details, Violation};
use crate::workload::{glob_matches, Workload, WorkloadKind};

/// Pod template annotation listing rule ids or names (or `*`) exempt for this workload.
pub const EXEMPT_ANNOTATION: &str = "meshlife.io/exempt";
pub const EXEMPT_REASON_ANNOTATION: &str = "meshlife.io/exempt-reason";

pub fn evaluate(input: &[u8]) -> Vec<Violation> {
    let mut violations = match evaluate_checked(input) {
        Ok(violations) => violations,
        Err(error) if operation_skips_review(input) => {
            let _ = error;
            Vec::new()
        }
        Err(error) => vec![invalid_input(error)],
    };
    violations.sort_by(|a, b| {
        (&a.details.rule, &a.details.path, &a.msg).cmp(&(&b.details.rule, &b.details.path, &b.msg))
    });
    violations.dedup();
    violations
}

fn invalid_input(error: InputError) -> Violation {
    let rule = &INVALID_INPUT;
    let location = if error.path.is_empty() { "input".to_string() } else { error.path.clone() };
    let in_parameters = error.path.starts_with("parameters");
    Violation {
        msg: format!("[{} {}] {location}: {}; the policy cannot evaluate this object.", rule.id, rule.name, error.problem),
        details: Details {
            rule: rule.id.into(),
            name: rule.name.into(),
            severity: rule.severity,
            path: error.path,
            fix: if in_parameters {
                format!("Correct {location} in the constraint's spec.parameters to a key and type of the meshlife parameter schema.")
            } else {
                format!("Correct {location} so that it is valid JSON of the Kubernetes type the field expects.")
            },
            mesh: None,
            container: None,
        },
    }
}

fn is_skipped_operation(operation: Option<&str>) -> bool {
    matches!(operation, Some("DELETE" | "CONNECT"))
}

/// A DELETE or CONNECT never yields violations, even when the rest of the input is malformed.
fn operation_skips_review(input: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        review: Option<ProbeReview>,
    }
    #[derive(Deserialize)]
    struct ProbeReview {
        operation: Option<String>,
    }
    if check_depth(input).is_err() {
        return false;
    }
    serde_json::from_slice::<Probe>(input)
        .ok()
        .and_then(|probe| probe.review?.operation)
        .is_some_and(|operation| is_skipped_operation(Some(&operation)))
}

fn evaluate_checked(input: &[u8]) -> Result<Vec<Violation>, InputError> {
    let text = core::str::from_utf8(trim_input(input))
        .map_err(|error| InputError::new("", format!("input is not UTF-8 ({error})")))?;
    if text.is_empty() {
        return Err(InputError::new("", "input is empty; expected {\"review\": ..., \"parameters\": ...}"));
    }
    check_depth(text.as_bytes())?;
    if !text.starts_with('{') {
        return Err(InputError::new("", "expected a JSON object {\"review\": ..., \"parameters\": ...}"));
    }
    let document: InputDoc = parse_at(text, "").map_err(|error| {
        // Parameter errors carry their own `parameters.` prefix from the path.
        if error.path.is_empty() && error.problem.contains("line") {
            InputError::new("", format!("input is not valid JSON: {}", error.problem))
        } else {
            error
        }
    })?;
    let settings = Settings::from_parameters(document.parameters.unwrap_or_default())?;
    let review_raw = document
        .review
        .ok_or_else(|| InputError::new("review", "missing; expected the admission request object"))?;
    if !is_object(review_raw) {
        return Err(InputError::new("review", format!("expected an object, got {}", json_type_name(review_raw))));
    }
    let review: ReviewDoc = parse_at(review_raw.get(), "review")?;
    if is_skipped_operation(review.operation.as_deref()) {
        return Ok(Vec::new());
    }
    let object_raw = review
        .object
        .ok_or_else(|| InputError::new("review.object", "missing; expected the object under review"))?;
    if !is_object(object_raw) {
        return Err(InputError::new(
            "review.object",
            format!("expected an object, got {}", json_type_name(object_raw)),
        ));
    }
    let object: ObjectDoc = parse_at(object_raw.get(), "")?;
    let kind_name = object.kind.as_deref().or(review.kind.as_ref().and_then(|gvk| gvk.kind.as_deref()));
    let Some(kind) = kind_name.and_then(WorkloadKind::from_kind) else {
        return Ok(Vec::new());
    };
    let object_meta: ObjectMeta = match object.metadata {
        Some(raw) => parse_at(raw.get(), "metadata")?,
        None => ObjectMeta::default(),
    };
    let namespace_meta = review.namespace_object.and_then(|namespace| namespace.metadata);
    let namespace = object_meta
        .namespace
        .clone()
        .or(review.namespace)
        .or_else(|| namespace_meta.as_ref().and_then(|meta| meta.name.clone()));
    let Some(workload) = build_workload(kind, object.spec.map(|raw| raw.get()), object_meta, namespace, namespace_meta)?
    else {
        return Ok(Vec::new());
    };
    Ok(review_workload(&workload, &settings))
}

/// Hosts may pass a trailing NUL (counted in the length) and surrounding whitespace.
fn trim_input(input: &[u8]) -> &[u8] {
    let end = input.iter().rposition(|&b| !matches!(b, 0 | b' ' | b'\n' | b'\r' | b'\t')).map_or(0, |i| i + 1);
    let start = input[..end].iter().position(|&b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t')).unwrap_or(end);
    &input[start..end]
}

/// Finds the pod spec of `kind` and builds the workload; `None` when there is none to review
/// (a Rollout with `workloadRef`, a controller without a template).
fn build_workload(
    kind: WorkloadKind,
    spec: Option<&str>,
    object_meta: ObjectMeta,
    namespace: Option<String>,
    namespace_meta: Option<ObjectMeta>,
) -> Result<Option<Workload>, InputError> {
    let Some(spec) = spec else { return Ok(None) };
    if !spec.trim_start().starts_with('{') {
        return Err(InputError::new("spec", "expected an object"));
    }
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
    if kind == WorkloadKind::Pod {
        workload.spec = parse_at(spec, "spec")?;
        workload.pod_meta = workload.object_meta.clone();
        return Ok(Some(workload));
    }
    let controller: ControllerSpec = parse_at(spec, "spec")?;
    workload.replicas = controller.replicas;
    workload.strategy = controller.strategy;
    let template: Option<PodTemplate> = if kind == WorkloadKind::CronJob {
        let job = controller.job_template.and_then(|job| job.spec);
        workload.job_deadline_seconds = job.as_ref().and_then(|job| job.active_deadline_seconds);
        job.and_then(|job| job.template)
    } else {
        if kind == WorkloadKind::Job {
            workload.job_deadline_seconds = controller.active_deadline_seconds;
        }
        controller.template
    };
    let Some(template) = template else { return Ok(None) };
    let Some(pod_spec) = template.spec else { return Ok(None) };
    if !pod_spec.get().trim_start().starts_with('{') {
        return Err(InputError::new(kind.spec_path(), format!("expected an object, got {}", json_type_name(pod_spec))));
    }
    workload.spec = parse_at(pod_spec.get(), kind.spec_path())?;
    workload.pod_meta = template.metadata.unwrap_or_default();
    Ok(Some(workload))
}

/// Runs the rules over one workload and applies exemptions and the selection parameters.
pub fn review_workload(workload: &Workload, settings: &Settings) -> Vec<Violation> {
    let namespace = workload.namespace.as_deref().unwrap_or("");
    if settings.raw.exempt_namespaces.iter().any(|pattern| glob_matches(pattern, namespace)) {
        return Vec::new();
    }
    let Decision::Meshed(decision) = decide(workload, settings) else {
        return Vec::new();
    };
    let context = Context { workload, decision: &decision, settings };
    let exempt: Vec<&str> = workload
        .annotation(EXEMPT_ANNOTATION)
        .map(|list| list.split(',').map(str::trim).filter(|entry| !entry.is_empty()).collect())
        .unwrap_or_default();
    run_all(&context)
        .into_iter()
        .filter(|finding| is_selected(finding.rule, settings))
        .filter(|finding| !exempt.iter().any(|entry| *entry == "*" || finding.rule.is_named_by(entry)))
        .filter(|finding| finding.severity >= settings.min_severity)
        .map(|finding| finding.into_violation())
        .collect()
}

fn is_selected(rule: &Rule, settings: &Settings) -> bool {
    let raw = &settings.raw;
    let included = raw.rules.is_empty() || raw.rules.iter().any(|entry| rule.is_named_by(entry));
    included && !raw.exclude_rules.iter().any(|entry| rule.is_named_by(entry))
}
