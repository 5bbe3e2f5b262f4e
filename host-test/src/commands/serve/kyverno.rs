//! `POST /kyverno`: Kyverno's service calls, from a ClusterPolicy's `context[].apiCall.service`
//! or a ValidatingPolicy's CEL `http.Post` (serving.md §3).
//!
//! The body is what the policy's `data` builds, `{"review": <the AdmissionRequest, with the
//! Namespace as namespaceObject>, "parameters": {...}}`: the module's own input, evaluated as
//! it came. The answer is one flat JSON object, always HTTP 200, so that a `deny.conditions`
//! key or a CEL expression reads it by field, without JMESPath:
//! `{"deny": bool, "message": "...", "violations": [...], "warnings": [...], "error": ""}`.
//! `deny` is whether an error finding fired; `warnings` are the other findings in short form;
//! `error` says why nothing was evaluated (the policy decides whether that denies, as
//! Gatekeeper's template does with `systemError`). Kyverno turns any other status into a rule
//! error, which its failurePolicy would then decide without the reason.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::{AUTHORIZATION, HeaderMap};
use meshlife_policy::{Severity, Violation};
use serde::Serialize;
use serde_json::value::RawValue;

use super::metrics::RequestOutcome;

use super::exchange::{
    Answer, BodyError, Routes, finding_lines, input_shape_problem, json_response, one_line,
    violations_of,
};

pub const PATH: &str = "/kyverno";

#[derive(Serialize)]
struct Response<'a> {
    deny: bool,
    message: String,
    violations: &'a [Violation],
    warnings: Vec<String>,
    error: &'a str,
}

pub async fn evaluate(
    routes: &Routes,
    headers: &HeaderMap,
    body: Result<Bytes, BodyError>,
) -> Answer {
    if let Some(expected) = &routes.kyverno_token
        && let Err(problem) = check_token(headers, expected)
    {
        routes.metrics.refused("unauthenticated");
        tracing::warn!(%problem, "Kyverno request refused");
        return error_answer(&problem);
    }
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            routes.metrics.refused(error.reason());
            tracing::warn!(%error, "Kyverno request refused");
            return error_answer(&error.to_string());
        }
    };
    let input = match read_input(&body) {
        Ok(input) => input,
        Err(message) => {
            routes.metrics.refused("malformed");
            tracing::warn!(%message, "malformed Kyverno request");
            return error_answer(&message);
        }
    };
    let input = with_watched_namespace(input, routes).await;
    let mut admission = match routes.pool.admit(1) {
        Ok(admission) => admission,
        Err(refusal) => {
            routes.metrics.refused("overloaded");
            tracing::warn!(%refusal, "Kyverno request refused");
            return error_answer(&refusal.to_string());
        }
    };
    let outcome = routes
        .pool
        .submit(&mut admission, Arc::new(input))
        .outcome()
        .await;
    let violations = match violations_of(outcome, routes) {
        Ok(violations) => violations,
        Err(message) => return error_answer(&message),
    };
    routes.metrics.key_done(if violations.is_empty() {
        "clean"
    } else {
        "violations"
    });
    answer(&violations)
}

/// The findings as Kyverno's policies read them: `message` gives every finding with its fix,
/// the denying ones first, so that a denial shown by kubectl leads with why.
///
/// Every text is one line without control characters: the warnings policy's message comes back
/// to kubectl as a warning header, and the API server silently drops a warning holding a line
/// break or another control character (so a multi-finding warning would vanish whole).
fn answer(violations: &[Violation]) -> Answer {
    let (denying, others): (Vec<&Violation>, Vec<&Violation>) = violations
        .iter()
        .partition(|violation| violation.details.severity == Severity::Error);
    let message = finding_lines(
        denying
            .iter()
            .map(|violation| (violation.msg.as_str(), violation.details.fix.as_str())),
        others
            .iter()
            .map(|violation| (violation.msg.as_str(), violation.details.fix.as_str())),
    )
    .iter()
    .map(|line| one_line(line))
    .collect::<Vec<_>>()
    .join(FINDING_SEPARATOR);
    let response = Response {
        deny: !denying.is_empty(),
        message,
        violations,
        warnings: others
            .iter()
            .map(|violation| one_line(&violation.msg))
            .collect(),
        error: "",
    };
    Answer {
        response: json_response(
            StatusCode::OK,
            serde_json::to_vec(&response).unwrap_or_default(),
        ),
        outcome: RequestOutcome::Answered,
    }
}

/// Between the findings of `message`: one line, read as a list.
const FINDING_SEPARATOR: &str = " | ";

/// The body as the module's input text, or why it is not one.
///
/// The ClusterPolicies send the review as JSON text (`to_string(merge(request, ...))`):
/// Kyverno substitutes `{{ }}` inside every string of an object value, so a manifest whose
/// text holds `{{ ... }}` (an Argo AnalysisTemplate's `{{args.x}}`, a hostile annotation)
/// would be changed or fail the rule before it reached meshlife. A string is passed untouched.
fn read_input(body: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| "the request body is not UTF-8 text, so not JSON".to_string())?;
    let expected = "expected {\"review\": <AdmissionRequest with namespaceObject, or its JSON \
                    text>, \"parameters\": {...}}, as meshlife's Kyverno policies build it";
    let problem = match input_shape_problem(text) {
        None => return Ok(text.to_string()),
        Some(problem) => problem,
    };
    if let Some(input) = review_from_text(text) {
        return input;
    }
    Err(format!(
        "the request is not a meshlife input ({problem}): {expected}"
    ))
}

/// The input with its review given as JSON text made an object again; `None` when the review
/// is not a string. Every other member, and the review's text itself, goes to the module as it
/// was sent: only the review is decoded (it is a string) and checked to be an object, so the
/// text review is read as the object review is, with no tree of either built and written again.
fn review_from_text(text: &str) -> Option<Result<String, String>> {
    let members: BTreeMap<String, &RawValue> = serde_json::from_str(text).ok()?;
    let review_text: String = serde_json::from_str(members.get("review")?.get()).ok()?;
    let review: &RawValue = match serde_json::from_str(&review_text) {
        Ok(review) => review,
        Err(error) => return Some(Err(format!("the review text is not JSON: {error}"))),
    };
    if !review.get().starts_with('{') {
        return Some(Err("the review text is JSON but not an object".into()));
    }
    let mut input = String::with_capacity(text.len());
    input.push('{');
    for (index, (key, value)) in members.iter().enumerate() {
        if index > 0 {
            input.push(',');
        }
        input.push_str(&serde_json::to_string(key).ok()?);
        input.push(':');
        input.push_str(if key == "review" {
            review.get()
        } else {
            value.get()
        });
    }
    input.push('}');
    Some(Ok(input))
}

/// The input with the review's Namespace from serve's watch, when the review carries none: the
/// ClusterPolicy pair sends Kyverno's `request` as it is, instead of fetching the Namespace
/// with an `apiCall` per policy per admission (two API requests of every admission, charged to
/// Kyverno's client rate limit, 100 per second by default, which then capped the pair at 33
/// admissions per second under load). A review that carries one (the ValidatingPolicy pair's
/// CEL `namespaceObject`), a cluster-scoped object, or no watch (`--no-namespace-watch`, no
/// Kubernetes configuration): the input as it came, and the parameters decide as for
/// `meshlife check` without the Namespace.
async fn with_watched_namespace(input: String, routes: &Routes) -> String {
    let Some(namespace) = namespace_wanted(&input) else {
        return input;
    };
    let Some(namespace_object) = routes.namespaces.get(&namespace).await else {
        return input;
    };
    let mut value: serde_json::Value = match serde_json::from_str(&input) {
        Ok(value) => value,
        Err(_) => return input,
    };
    match value
        .get_mut("review")
        .and_then(serde_json::Value::as_object_mut)
    {
        Some(review) => {
            review.insert("namespaceObject".into(), namespace_object);
            serde_json::to_string(&value).unwrap_or(input)
        }
        None => input,
    }
}

/// The review's namespace when it carries no Namespace object (absent or null), read without
/// building the object's tree.
fn namespace_wanted(input: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Input<'a> {
        #[serde(borrow)]
        review: Review<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Review<'a> {
        #[serde(default)]
        namespace: Option<String>,
        #[serde(rename = "namespaceObject", borrow, default)]
        namespace_object: Option<&'a RawValue>,
    }
    let input: Input = serde_json::from_str(input).ok()?;
    let carried = input
        .review
        .namespace_object
        .is_some_and(|object| object.get() != "null");
    match input.review.namespace {
        Some(namespace) if !namespace.is_empty() && !carried => Some(namespace),
        _ => None,
    }
}

/// `Authorization: Bearer TOKEN` against `--kyverno-token-file`, compared in constant time.
fn check_token(headers: &HeaderMap, expected: &[u8]) -> Result<(), String> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(
            "this route requires a bearer token (--kyverno-token-file): set the header \
             Authorization: Bearer <token> in the policy's service call"
                .into(),
        );
    };
    let presented = value
        .as_bytes()
        .strip_prefix(b"Bearer ")
        .ok_or("the Authorization header is not `Bearer <token>`")?;
    if constant_time_equal(presented, expected) {
        Ok(())
    } else {
        Err("the bearer token does not match --kyverno-token-file".into())
    }
}

/// Equal bytes, in time that depends only on the lengths: a token compared byte by byte with
/// an early exit leaks how much of it a guess got right.
fn constant_time_equal(presented: &[u8], expected: &[u8]) -> bool {
    if presented.len() != expected.len() {
        return false;
    }
    let difference = presented
        .iter()
        .zip(expected)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b));
    std::hint::black_box(difference) == 0
}

fn error_answer(message: &str) -> Answer {
    let message = one_line(message);
    let response = Response {
        deny: false,
        message: String::new(),
        violations: &[],
        warnings: Vec::new(),
        error: &message,
    };
    Answer {
        response: json_response(
            StatusCode::OK,
            serde_json::to_vec(&response).unwrap_or_default(),
        ),
        outcome: RequestOutcome::SystemError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_is_wanted_only_when_the_review_carries_none() {
        let wanted = |input: &str| namespace_wanted(input);
        assert_eq!(
            wanted(r#"{"review": {"namespace": "shop", "object": {}}}"#),
            Some("shop".into())
        );
        assert_eq!(
            wanted(r#"{"review": {"namespace": "shop", "namespaceObject": null}}"#),
            Some("shop".into())
        );
        assert_eq!(
            wanted(r#"{"review": {"namespace": "shop", "namespaceObject": {"metadata": {}}}}"#),
            None
        );
        assert_eq!(wanted(r#"{"review": {"namespace": ""}}"#), None);
        assert_eq!(wanted(r#"{"review": {"object": {}}}"#), None);
        assert_eq!(wanted(r#"{"review": "text"}"#), None);
    }

    #[test]
    fn tokens_are_equal_only_when_every_byte_is() {
        assert!(constant_time_equal(b"secret", b"secret"));
        assert!(!constant_time_equal(b"secreT", b"secret"));
        assert!(!constant_time_equal(b"secre", b"secret"));
        assert!(!constant_time_equal(b"", b"secret"));
    }

    #[test]
    fn a_body_that_is_not_an_input_says_what_is_expected() {
        for body in [&b"[]"[..], b"{\"review\": 1}", b"not json", b"\xff"] {
            let problem = read_input(body).unwrap_err();
            assert!(
                problem.contains("expected") || problem.contains("UTF-8"),
                "{problem}"
            );
        }
        assert!(read_input(br#"{"review": {"object": {}}, "parameters": {}}"#).is_ok());
    }

    #[test]
    fn a_review_sent_as_json_text_is_read_as_the_object_it_holds() {
        let text = serde_json::json!({
            "review": r#"{"object": {"metadata": {"annotations": {"a": "{{ request.operation }}"}}}}"#,
            "parameters": {"minSeverity": "error"},
        })
        .to_string();
        let input: serde_json::Value =
            serde_json::from_str(&read_input(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            input["review"]["object"]["metadata"]["annotations"]["a"],
            "{{ request.operation }}"
        );
        assert_eq!(input["parameters"]["minSeverity"], "error");
        // The review's own text and every other member reach the module as they were sent.
        let sent = r#"{"parameters": {"n": 1e3}, "review": "{\"object\": {\"spec\": 1.50}}"}"#;
        assert_eq!(
            read_input(sent.as_bytes()).unwrap(),
            r#"{"parameters":{"n": 1e3},"review":{"object": {"spec": 1.50}}}"#
        );
        for bad in [r#"{"review": "[1]"}"#, r#"{"review": "{oops"}"#] {
            let problem = read_input(bad.as_bytes()).unwrap_err();
            assert!(problem.contains("review text"), "{problem}");
        }
    }
}
