//! The pipeline: bytes, typed view, workload, mesh decision, rules, filtered violations. The
//! typed view comes from `one_pass` when it can read the input, else from the exact reader.

use serde_json::error::Category;

use crate::catalogue::INVALID_INPUT;
use crate::input::{Fields, InputError, ObjectMeta, Path, Service};
use crate::mesh::{Decision, NotMeshed, decide};
use crate::network_policy::{NetworkPolicy, is_network_policy};
use crate::node::{Node, parse_sparse, parse_sparse_with_old_object, with_huge_numbers_replaced};
use crate::one_pass::{self, Reading};
use crate::operation::{is_judged_operation, is_skipped_operation};
use crate::params::{Parameters, Settings};
use crate::pod_specs::{build_workload, embedded_workloads};
use crate::rules::{Context, Finding, ambient, ambient_network_policy, batch_helpers, run_all};
use crate::violation::{Details, Violation};
use crate::workload::{Workload, WorkloadKind, in_exempt_namespace};

/// Pod template annotation listing rule ids or names (or `*`) exempt for this workload.
pub const EXEMPT_ANNOTATION: &str = "meshlife.io/exempt";
pub const EXEMPT_REASON_ANNOTATION: &str = "meshlife.io/exempt-reason";

pub fn evaluate(input: &[u8]) -> Vec<Violation> {
    finish(evaluate_checked(input, Reader::OnePassFirst))
}

/// [`evaluate`] reading every input the exact way, for the tests that hold the two readers to
/// the same answers.
pub fn evaluate_with_exact_reader(input: &[u8]) -> Vec<Violation> {
    finish(evaluate_checked(input, Reader::Exact))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// `one_pass`, and the exact reader when it gives up.
    OnePassFirst,
    /// `node` + `input` only.
    Exact,
}

/// [`evaluate`] for callers whose input may also be OPA value text: `None` when the bytes are
/// not JSON syntax at all (Rego sets, Go string escapes), so the caller can convert them first
/// and pay for that conversion only then.
pub fn evaluate_if_json(input: &[u8]) -> Option<Vec<Violation>> {
    match evaluate_checked(input, Reader::OnePassFirst) {
        Err(Rejection::NotJson(_)) => None,
        outcome => Some(finish(outcome)),
    }
}

/// Why an input produced no rule results.
pub(crate) enum Rejection {
    /// Readable, but not an input the policy can evaluate: ML000.
    Invalid(InputError),
    /// Not JSON syntax (also ML000 when nothing else reads it).
    NotJson(InputError),
    /// The review has no `object`: its `oldObject` is to be read (see `with_document`). Never
    /// leaves this module.
    NoObject,
}

impl From<InputError> for Rejection {
    fn from(error: InputError) -> Self {
        Rejection::Invalid(error)
    }
}

fn finish(outcome: Result<Vec<Violation>, Rejection>) -> Vec<Violation> {
    let mut violations =
        outcome.unwrap_or_else(|rejection| vec![invalid_input(rejection_error(rejection))]);
    violations.sort_by(|a, b| {
        (&a.details.rule, &a.details.path, &a.msg).cmp(&(&b.details.rule, &b.details.path, &b.msg))
    });
    violations.dedup();
    violations
}

fn invalid_input(error: InputError) -> Violation {
    let rule = &INVALID_INPUT;
    let location = if error.path.is_empty() {
        "input".to_string()
    } else {
        error.path.clone()
    };
    let in_parameters = error.path.starts_with("parameters");
    let in_envelope = matches!(error.path.as_str(), "" | "review" | "review.object");
    Violation {
        msg: format!(
            "[{} {}] {location}: {}; the policy cannot evaluate this object.",
            rule.id, rule.name, error.problem
        ),
        details: Details {
            rule: rule.id.into(),
            name: rule.name.into(),
            severity: rule.severity,
            path: error.path,
            fix: if in_parameters {
                format!(
                    "Correct {location} in the constraint's spec.parameters to a key and type of the meshlife parameter schema."
                )
            } else if in_envelope {
                "Send a Gatekeeper-shaped input: {\"review\": {\"object\": <the Kubernetes object>, ...}, \"parameters\": {...}}.".to_string()
            } else if let Some((_, range)) = error.problem.split_once("the API server requires ") {
                format!("Set {location} to {range}, a value the API server accepts.")
            } else {
                format!(
                    "Correct {location} so that it is valid JSON of the Kubernetes type the field expects."
                )
            },
            mesh: None,
            container: None,
        },
    }
}

/// An odd request that was judged anyway (an unknown operation, an object only in
/// `oldObject`): ML000 at warning severity beside the findings. Why not an error that replaces
/// them: the object could be judged, and its findings are what the user asked for; why not
/// silence: a host that sends such a request has a bug worth seeing, and the judgement rests on
/// a guess it should know about.
fn odd_request(note: InputError) -> Violation {
    let rule = &INVALID_INPUT;
    let fix = match note.path.as_str() {
        "review.operation" => "Send review.operation as CREATE, UPDATE, DELETE or CONNECT.",
        _ => {
            "Send the object under review as review.object: a CREATE or UPDATE always carries it (only a DELETE carries just oldObject)."
        }
    };
    Violation {
        msg: format!(
            "[{} {}] {}: {}.",
            rule.id, rule.name, note.path, note.problem
        ),
        details: Details {
            rule: rule.id.into(),
            name: rule.name.into(),
            severity: crate::violation::Severity::Warning,
            path: note.path,
            fix: fix.into(),
            mesh: None,
            container: None,
        },
    }
}

fn evaluate_checked(input: &[u8], reader: Reader) -> Result<Vec<Violation>, Rejection> {
    let text = input_text(input)?;
    if reader == Reader::OnePassFirst {
        match one_pass::read(text) {
            Some(Reading::NothingToReview) => return Ok(Vec::new()),
            Some(Reading::Review(workload, settings)) => {
                return Ok(review_workload(&workload, &settings));
            }
            None => {}
        }
    }
    with_document(text, |reading| {
        let (read, notes) = reading?;
        let findings = match read {
            Read::NotReviewed(_) => Vec::new(),
            Read::NetworkPolicy(policy, settings) => review_network_policy(&policy, &settings),
            Read::Workloads(workloads, settings) => workloads
                .iter()
                .flat_map(|workload| review_workload(workload, &settings))
                .collect(),
        };
        Ok(notes.into_iter().map(odd_request).chain(findings).collect())
    })
}

/// What the exact reader found, and what was odd about the request (see `odd_request`).
pub(crate) type ExactReading<'a> = (Read<'a>, Vec<InputError>);

/// Parses `text` the exact way and reads it; a review without `object` is parsed once more,
/// keeping its `oldObject`. The reading borrows from the parsed tree, which lives only inside
/// this call, so `use_it` gets it.
fn with_document<R>(
    text: &str,
    use_it: impl FnOnce(Result<ExactReading<'_>, Rejection>) -> R,
) -> R {
    let mut replaced = None;
    let document = match parse_document(text, &mut replaced, false) {
        Ok(document) => document,
        Err(rejection) => return use_it(Err(rejection)),
    };
    let mut notes = Vec::new();
    match read_document(&document, &mut notes) {
        Err(Rejection::NoObject) => {}
        outcome => return use_it(outcome.map(|read| (read, notes))),
    }
    let mut replaced = None;
    let document = match parse_document(text, &mut replaced, true) {
        Ok(document) => document,
        Err(rejection) => return use_it(Err(rejection)),
    };
    let mut notes = Vec::new();
    use_it(read_document(&document, &mut notes).map(|read| (read, notes)))
}

/// The input text as a sparse tree, or why it is not JSON the policy can read. Numbers beyond
/// `f64` are read from a copy in `replaced` (see `node::with_huge_numbers_replaced`).
/// `old_object`: keep the review's `oldObject` too.
fn parse_document<'t>(
    text: &'t str,
    replaced: &'t mut Option<String>,
    old_object: bool,
) -> Result<Node<'t>, Rejection> {
    let parse = if old_object {
        parse_sparse_with_old_object
    } else {
        parse_sparse
    };
    let error = match parse(text) {
        Ok(document) => return Ok(document),
        Err(error) => error,
    };
    let Some(copy) = with_huge_numbers_replaced(text) else {
        return Err(parse_rejection(error));
    };
    parse(replaced.insert(copy)).map_err(parse_rejection)
}

fn parse_rejection(error: serde_json::Error) -> Rejection {
    let syntax = matches!(error.classify(), Category::Syntax | Category::Eof);
    let text = error.to_string();
    if text.contains("nests deeper") {
        Rejection::Invalid(InputError::new("", text))
    } else if syntax {
        Rejection::NotJson(InputError::new("", format!("not valid JSON: {text}")))
    } else {
        Rejection::Invalid(InputError::new("", format!("not valid JSON: {text}")))
    }
}

/// Why an input holds no pod spec to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) enum NotReviewed {
    /// `operation` is DELETE or CONNECT.
    SkippedOperation(String),
    /// The kind (and API group) is not one whose pod specs the rules review.
    Kind {
        kind: Option<String>,
        api_version: Option<String>,
    },
    /// A reviewed kind without a pod spec: a Rollout with `workloadRef`, a Pod without `spec`.
    NoPodSpec { kind: String },
}

/// What the exact reader found in an input.
pub(crate) enum Read<'a> {
    NotReviewed(#[cfg_attr(target_arch = "wasm32", allow(dead_code))] NotReviewed),
    /// Every pod spec of the object (one, or several for the embedding kinds), with the settings.
    Workloads(Vec<Workload<'a>>, Box<Settings>),
    /// A NetworkPolicy, judged for what Istio's ambient mode needs of it.
    NetworkPolicy(Box<NetworkPolicy<'a>>, Box<Settings>),
}

/// Reads the envelope, the parameters and the object's pod specs from the sparse tree, adding
/// to `notes` what is odd but judged anyway. `Rejection::NoObject` when the review has no
/// `object` and the tree was parsed without `oldObject`.
pub(crate) fn read_document<'a>(
    document: &'a Node<'a>,
    notes: &mut Vec<InputError>,
) -> Result<Read<'a>, Rejection> {
    let Some(top) = Fields::of(document, Path::Root(""))? else {
        return Err(Rejection::Invalid(InputError::new(
            "",
            "expected a JSON object {\"review\": ..., \"parameters\": ...}, got null",
        )));
    };
    let review_node = top.get("review");
    // A DELETE or CONNECT never yields violations, even when the rest of the input is malformed.
    if let Some(Node::Str(operation)) = review_node.and_then(|review| review.get("operation"))
        && is_skipped_operation(Some(operation))
    {
        return Ok(Read::NotReviewed(NotReviewed::SkippedOperation(
            operation.to_string(),
        )));
    }
    let settings = Settings::from_parameters(Parameters::read(top.get("parameters"))?)?;
    let review_node = review_node.ok_or_else(|| {
        InputError::new("review", "missing; expected the admission request object")
    })?;
    let review = Fields::of(review_node, Path::Root("review"))?.ok_or_else(|| {
        InputError::new("review", "missing; expected the admission request object")
    })?;
    let operation = review.string("operation")?;
    if !is_judged_operation(operation.as_deref()) {
        notes.push(InputError::new(
            "review.operation",
            format!(
                "unknown operation \"{}\" (Kubernetes sends CREATE, UPDATE, DELETE or CONNECT); judged as CREATE",
                operation.as_deref().unwrap_or_default()
            ),
        ));
    }
    let missing_object =
        || InputError::new("review.object", "missing; expected the object under review");
    // The node is parsed without `oldObject` until one is needed (`with_document`); whether
    // this tree kept it shows in the key being there, even as null.
    let old_object_kept = matches!(review_node, Node::Map(entries) if entries.iter().any(|(key, _)| key == "oldObject"));
    let object_node = match review.get("object") {
        Some(object) => object,
        None => match review.get("oldObject") {
            Some(old_object) => {
                notes.push(InputError::new(
                    "review.object",
                    "missing, so meshlife judged on review.oldObject; a CREATE or UPDATE always carries the object it creates or makes",
                ));
                old_object
            }
            None if old_object_kept => return Err(missing_object().into()),
            None => return Err(Rejection::NoObject),
        },
    };
    let object = Fields::of(object_node, Path::Root(""))
        .map_err(|error| InputError::new("review.object", error.problem))?
        .ok_or_else(missing_object)?;
    let review_kind = review.object("kind", |kind| kind.string("kind"))?.flatten();
    let kind_name = object.string("kind")?.or(review_kind);
    // `Rollout` is Argo's; another group's Rollout is not a pod controller we know (and so on
    // for the other kinds of one API group).
    let api_version = object.string("apiVersion")?;
    // Read only for a kind the policy reviews: another kind gets no findings, not even for a
    // malformed Namespace beside it.
    let namespace_meta = || {
        review
            .object("namespaceObject", |namespace| {
                namespace.object("metadata", ObjectMeta::read)
            })
            .map(Option::flatten)
    };
    if kind_name
        .as_deref()
        .is_some_and(|kind| is_network_policy(kind, api_version.as_deref()))
    {
        let policy = NetworkPolicy::read(&object, review.string("namespace")?, namespace_meta()?)?;
        return Ok(Read::NetworkPolicy(Box::new(policy), Box::new(settings)));
    }
    let Some(kind) = kind_name
        .as_deref()
        .and_then(|kind| WorkloadKind::of(kind, api_version.as_deref()))
    else {
        return Ok(Read::NotReviewed(NotReviewed::Kind {
            kind: kind_name.map(|kind| kind.to_string()),
            api_version: api_version.map(|version| version.to_string()),
        }));
    };
    let object_meta = object
        .object("metadata", ObjectMeta::read)?
        .unwrap_or_default();
    let mut workload = Workload::new(
        kind,
        object_meta,
        review.string("namespace")?,
        namespace_meta()?,
    );
    // Absent, null and empty alike; a wrong type anywhere inside is ML000 (`services[0].spec`).
    workload.services = top.objects("services", Service::read)?.unwrap_or_default();
    let workloads = if kind.is_embedding() {
        embedded_workloads(&workload, &object)?
    } else {
        build_workload(workload, &object)?.into_iter().collect()
    };
    for workload in &workloads {
        workload.check_values()?;
    }
    if workloads.is_empty() {
        return Ok(Read::NotReviewed(NotReviewed::NoPodSpec {
            kind: kind_name.map(|kind| kind.to_string()).unwrap_or_default(),
        }));
    }
    Ok(Read::Workloads(workloads, Box::new(settings)))
}

/// The text of the input, or why it cannot be read.
pub(crate) fn input_text(input: &[u8]) -> Result<&str, Rejection> {
    let text = core::str::from_utf8(trim_input(input))
        .map_err(|error| InputError::new("", format!("not UTF-8 ({error})")))?;
    if text.is_empty() {
        return Err(Rejection::Invalid(InputError::new(
            "",
            "empty; expected {\"review\": ..., \"parameters\": ...}",
        )));
    }
    Ok(text)
}

/// The input error behind a rejection.
pub(crate) fn rejection_error(rejection: Rejection) -> InputError {
    match rejection {
        Rejection::Invalid(error) | Rejection::NotJson(error) => error,
        // `with_document` reads `oldObject` on this; should it ever get here, it is what it says.
        Rejection::NoObject => {
            InputError::new("review.object", "missing; expected the object under review")
        }
    }
}

/// Parses and reads an input the exact way and hands the result to `use_it` (the workloads
/// borrow from the parsed tree, which lives only inside this call).
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn with_exact_reading<R>(
    input: &[u8],
    use_it: impl FnOnce(Result<Read<'_>, InputError>) -> R,
) -> R {
    let text = match input_text(input) {
        Ok(text) => text,
        Err(rejection) => return use_it(Err(rejection_error(rejection))),
    };
    with_document(text, |reading| {
        use_it(reading.map(|(read, _)| read).map_err(rejection_error))
    })
}

/// Hosts may pass a trailing NUL (counted in the length) and surrounding whitespace.
fn trim_input(input: &[u8]) -> &[u8] {
    let end = input
        .iter()
        .rposition(|&b| !matches!(b, 0 | b' ' | b'\n' | b'\r' | b'\t'))
        .map_or(0, |i| i + 1);
    let start = input[..end]
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        .unwrap_or(end);
    &input[start..end]
}

/// Runs ML604 over a NetworkPolicy, with the exemptions and selection parameters a workload
/// gets (the exempt annotation on the policy's own metadata).
fn review_network_policy(policy: &NetworkPolicy, settings: &Settings) -> Vec<Violation> {
    let namespace = policy.namespace.as_deref().unwrap_or("");
    if in_exempt_namespace(settings, namespace) {
        return Vec::new();
    }
    let mut findings = Vec::new();
    ambient_network_policy::check(policy, settings, &mut findings);
    keep_selected(
        findings,
        policy.meta.annotation(EXEMPT_ANNOTATION),
        settings,
    )
}

/// Runs the rules over one workload and applies exemptions and the selection parameters.
pub fn review_workload(workload: &Workload, settings: &Settings) -> Vec<Violation> {
    if workload.in_exempt_namespace(settings) {
        return Vec::new();
    }
    let mut findings = Vec::new();
    let decision = decide(workload, settings);
    let mesh = match &decision {
        Decision::Meshed(decision) => Some(decision.mesh),
        Decision::NotMeshed(_) | Decision::Gateway => None,
    };
    // The rules that hold whether or not the pod is meshed.
    batch_helpers::check(workload, settings, mesh, &mut findings);
    match &decision {
        Decision::NotMeshed(NotMeshed::Ambient { .. }) => {
            ambient::streams_through_ztunnel(workload, settings, &mut findings);
        }
        Decision::Gateway => {
            ambient::waypoint_short_grace(workload, settings, &mut findings);
            ambient::waypoint_single_replica(workload, settings, &mut findings);
        }
        _ => {}
    }
    if let Decision::Meshed(decision) = &decision {
        let context = Context {
            workload,
            decision,
            settings,
        };
        findings.extend(run_all(&context));
    }
    keep_selected(findings, workload.annotation(EXEMPT_ANNOTATION), settings)
}

/// The findings the parameters select, at or above their minimum severity, without those
/// the object's exempt annotation (`exempt`, a list of rule ids or names, or `*`) names.
fn keep_selected(
    findings: Vec<Finding>,
    exempt: Option<&str>,
    settings: &Settings,
) -> Vec<Violation> {
    let exempt: Vec<&str> = exempt
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|entry| !entry.is_empty())
                .collect()
        })
        .unwrap_or_default();
    findings
        .into_iter()
        .filter(|finding| settings.selects(finding.rule))
        .filter(|finding| {
            !exempt
                .iter()
                .any(|entry| *entry == "*" || finding.rule.is_named_by(entry))
        })
        .filter(|finding| finding.severity >= settings.min_severity)
        .map(|finding| finding.into_violation())
        .collect()
}

#[cfg(test)]
mod json_first_tests {
    use super::*;

    const POD: &str = r#"{"review": {"object": {"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "shop"}, "spec": {"template": {"metadata":
        {"labels": {"sidecar.istio.io/inject": "true"}}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "a", "image": "a"}]}}}}}}"#;

    #[test]
    fn json_is_answered_as_evaluate_answers_it() {
        let answer = evaluate_if_json(POD.as_bytes()).expect("JSON is evaluated");
        assert!(!answer.is_empty());
        assert_eq!(answer, evaluate(POD.as_bytes()));
        // Valid JSON of the wrong shape is still JSON: the ML000 comes from here.
        let wrong_shape = evaluate_if_json(b"[1, 2]").expect("JSON is evaluated");
        assert_eq!(wrong_shape[0].details.rule, "ML000");
        let deep = format!("{{\"review\": {}{}}}", "[".repeat(100), "]".repeat(100));
        assert!(evaluate_if_json(deep.as_bytes()).is_some());
    }

    #[test]
    fn numbers_beyond_f64_name_their_field_or_are_skipped_with_it() {
        let job = |grace: &str, status: &str| {
            // Characters of several bytes before the number on its line: serde_json counts
            // its error column in bytes, which is how the number is found.
            POD.replace(
                "\"restartPolicy\": \"Never\"",
                &format!(
                    "\"restartPolicy\": \"Never\", \"x\": \"\u{e9}\u{20ac}\u{1f600}\", \"terminationGracePeriodSeconds\": {grace}"
                ),
            )
            .replacen(
                "{\"review\"",
                &format!("{{\"status\": {status}, \"review\""),
                1,
            )
        };
        for huge in [
            "1e400",
            "-1e400",
            "99999999999999999999",
            &format!("1{}", "0".repeat(400)),
        ] {
            let input = job(huge, "1");
            assert_ne!(input, POD);
            for answer in [
                evaluate(input.as_bytes()),
                evaluate_with_exact_reader(input.as_bytes()),
            ] {
                assert_eq!(answer.len(), 1, "{huge}: {answer:?}");
                assert_eq!(
                    answer[0].details.path, "spec.template.spec.terminationGracePeriodSeconds",
                    "{huge}"
                );
                assert!(
                    answer[0]
                        .msg
                        .contains("a number beyond the 64-bit integer range"),
                    "{huge}: {}",
                    answer[0].msg
                );
            }
        }
        // In a field the policy never reads, such a number is skipped like the field (the API
        // server drops unknown fields too): both readers judge the object.
        let input = job("30", "{\"x\": [1e400, -1e999, {\"y\": 2e400}]}");
        let fine = job("30", "1");
        assert_eq!(evaluate(input.as_bytes()), evaluate(fine.as_bytes()));
        assert_eq!(
            evaluate_with_exact_reader(input.as_bytes()),
            evaluate(fine.as_bytes())
        );
    }

    #[test]
    fn a_create_or_update_with_only_an_old_object_is_judged_on_it() {
        let object = POD.replace("{\"review\": {\"object\":", "{\"review\": {\"oldObject\":");
        let judged = evaluate(POD.as_bytes());
        for operation in ["\"CREATE\"", "\"UPDATE\"", "null"] {
            for empty in ["", "\"object\": null, "] {
                let input = object.replacen(
                    "{\"review\": {",
                    &format!("{{\"review\": {{\"operation\": {operation}, {empty}"),
                    1,
                );
                for answer in [
                    evaluate(input.as_bytes()),
                    evaluate_with_exact_reader(input.as_bytes()),
                ] {
                    let (notes, findings): (Vec<_>, Vec<_>) =
                        answer.into_iter().partition(|v| v.details.rule == "ML000");
                    assert_eq!(findings, judged, "{input}");
                    assert_eq!(notes.len(), 1, "{input}: {notes:?}");
                    assert_eq!(notes[0].details.path, "review.object");
                    assert_eq!(notes[0].details.severity, crate::Severity::Warning);
                    assert!(
                        notes[0].msg.contains("judged on review.oldObject"),
                        "{}",
                        notes[0].msg
                    );
                }
            }
        }
        // A DELETE carries only oldObject, and is never judged; with neither object, as before.
        let delete = object.replacen(
            "{\"review\": {",
            "{\"review\": {\"operation\": \"DELETE\", ",
            1,
        );
        assert_eq!(evaluate(delete.as_bytes()), vec![]);
        let neither = evaluate(br#"{"review": {"operation": "UPDATE", "oldObject": null}}"#);
        assert_eq!(neither.len(), 1);
        assert!(
            neither[0].msg.contains("review.object: missing"),
            "{}",
            neither[0].msg
        );
        // With both, the old object is never read (nor its nesting counted).
        let deep = format!(
            "{{\"spec\": {{\"template\": {}1{}}}}}",
            "[".repeat(100),
            "]".repeat(100)
        );
        let both = POD.replacen(
            "{\"review\": {",
            &format!("{{\"review\": {{\"oldObject\": {deep}, "),
            1,
        );
        assert_eq!(evaluate_with_exact_reader(both.as_bytes()), judged);
    }

    #[test]
    fn text_that_is_not_json_is_left_to_the_rego_converter() {
        for text in [
            r#"{"review": {"object": {"kind": "Pod", "x": "\x1f"}}}"#,
            r#"{"review": {"object": {"kind": "Pod"}}, "parameters": {"rules": {"ML101"}}}"#,
            "set()",
            r#"{"review": "#,
        ] {
            assert!(evaluate_if_json(text.as_bytes()).is_none(), "{text}");
        }
    }
}
