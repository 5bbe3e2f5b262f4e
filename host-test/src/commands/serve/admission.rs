//! `POST /admission`: the API server's own ValidatingWebhookConfiguration calls it with an
//! AdmissionReview v1 and gets one back (serving.md §4.1), for clusters that run neither
//! Gatekeeper nor Kyverno.
//!
//! The object is judged as `meshlife check --constraint` judges it: under each of the server's
//! `--constraint`s whose `spec.match` selects it (without any, the parameter defaults), with
//! its Namespace from the watch when there is one. An error finding of a `deny` constraint
//! refuses the object: `allowed: false`, and `status.message` gives every finding with its
//! fix. Every other finding (a `warn` constraint's, or below error) comes back as an
//! admission warning, in a short form that fits what the API server passes on (each at most
//! 256 characters, 4,096 in all: kubectl prints them, the API server truncates longer ones).
//! `dryrun` constraints' findings are only logged. Every finding's full text goes into the
//! audit log too (`auditAnnotations`), as the warnings are short and an admission has no message.
//!
//! A body that is not an AdmissionReview v1 gets HTTP 400, an evaluation that could not be
//! done (overloaded, deadline, failure) HTTP 500: the API server then applies the webhook's
//! failurePolicy, the cluster's choice between failing open and closed.

use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use meshlife_policy::Severity;
use serde::Serialize;
use serde_json::Value;

use super::exchange::{
    Answer, BodyError, Routes, finding_lines, json_response, one_line, text_response, violations_of,
};
use super::metrics::RequestOutcome;
use crate::constraints::constraint::{Constraint, EnforcementAction};
use crate::judging::{self, Applicable};
use crate::report::Finding;

pub const PATH: &str = "/admission";

const API_VERSION: &str = "admission.k8s.io/v1";
/// What the API server passes on of one warning, and of all of them (serving.md §4.1).
pub const WARNING_LIMIT: usize = 256;
pub const WARNINGS_TOTAL_LIMIT: usize = 4096;
/// Kept free for the warning that says how many findings did not fit.
const SUMMARY_ROOM: usize = 96;

#[derive(Serialize)]
struct AdmissionReview<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: AdmissionResponse<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    /// The full text of every finding, for the audit log (the API server records it as
    /// `admission.meshlife.dev/findings`, prefixed with the webhook's name), since warnings
    /// are cut short and an admitted object has no message.
    #[serde(
        rename = "auditAnnotations",
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    audit_annotations: std::collections::BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
}

pub async fn review(routes: &Routes, body: Result<Bytes, BodyError>) -> Answer {
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            routes.metrics.refused(error.reason());
            tracing::warn!(%error, "admission request refused");
            let status = match error {
                BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                BodyError::Timeout => StatusCode::REQUEST_TIMEOUT,
                BodyError::Broken(_) => StatusCode::BAD_REQUEST,
            };
            return failure(status, error.to_string());
        }
    };
    let (uid, review) = match read_review(&body) {
        Ok(read) => read,
        Err(message) => {
            routes.metrics.refused("malformed");
            tracing::warn!(%message, "malformed AdmissionReview");
            return failure(StatusCode::BAD_REQUEST, message);
        }
    };
    let operation = review
        .pointer("/request/operation")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The module never has findings for these (docs/rules.md §1); no worker is spent on them.
    if matches!(operation, "DELETE" | "CONNECT") {
        routes.metrics.key_done("clean");
        return respond(&uid, true, None, Vec::new(), String::new());
    }
    // An object being deleted is only ever updated to let it go (a finalizer removed): a
    // refusal would leave it Terminating for good.
    if review
        .pointer("/request/object/metadata/deletionTimestamp")
        .is_some_and(|timestamp| !timestamp.is_null())
    {
        routes.metrics.key_done("being_deleted");
        return respond(&uid, true, None, Vec::new(), String::new());
    }
    let object = match crate::inputs::manifests::object_of_admission_review(review) {
        Ok(object) => object,
        Err(error) => {
            routes.metrics.refused("malformed");
            let message = match &error.field {
                Some(field) => format!("the AdmissionReview's {field} {}", error.message),
                None => error.message.clone(),
            };
            tracing::warn!(%message, "malformed AdmissionReview");
            return failure(StatusCode::BAD_REQUEST, message);
        }
    };
    let namespace_object = routes.namespaces.get(&object.identity.namespace).await;
    let applicable = Applicable::of(&routes.constraints, &object, namespace_object.as_ref());
    if let Some((index, message)) = applicable.unmatchable.first() {
        let constraint = &routes.constraints[*index];
        routes.metrics.key_done("unmatchable");
        tracing::warn!(constraint = %constraint.name, %message, "constraint cannot be matched");
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "constraint {} cannot be matched against {}: {message}",
                constraint.name,
                object.display_name()
            ),
        );
    }
    let applied: Vec<&Constraint> = applicable
        .constraints
        .iter()
        .map(|&index| &routes.constraints[index])
        .collect();
    if applied.is_empty() {
        routes.metrics.key_done("unmatched");
        return respond(&uid, true, None, Vec::new(), String::new());
    }
    let mut admission = match routes.pool.admit(applied.len()) {
        Ok(admission) => admission,
        Err(refusal) => {
            routes.metrics.refused("overloaded");
            tracing::warn!(%refusal, "admission request refused");
            return failure(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string());
        }
    };
    let pending: Vec<_> = applied
        .iter()
        .map(|constraint| {
            let input = constraint.input_for(&object, namespace_object.as_ref(), &[]);
            // The module's input is JSON written by serde_json, so UTF-8.
            let input = String::from_utf8(input).unwrap_or_default();
            routes.pool.submit(&mut admission, Arc::new(input))
        })
        .collect();
    let mut findings = Vec::new();
    for (constraint, pending) in applied.iter().zip(pending) {
        match violations_of(pending.outcome().await, routes) {
            Ok(violations) => findings.extend(judging::findings_of(
                violations,
                constraint,
                Some(Severity::Error),
            )),
            Err(message) => return failure(StatusCode::INTERNAL_SERVER_ERROR, message),
        }
    }
    routes.metrics.key_done(if findings.is_empty() {
        "clean"
    } else {
        "violations"
    });
    let (dry_run, findings): (Vec<Finding>, Vec<Finding>) = findings
        .into_iter()
        .partition(|finding| finding.enforcement_action == EnforcementAction::Dryrun);
    for finding in &dry_run {
        tracing::info!(
            object = %object.display_name(),
            constraint = %finding.constraint,
            rule = %finding.rule,
            "dryrun finding"
        );
    }
    let (denying, others): (Vec<&Finding>, Vec<&Finding>) =
        findings.iter().partition(|finding| finding.fails_run);
    let warnings = short_warnings(&others);
    let full_text = finding_lines(
        denying
            .iter()
            .map(|finding| (finding.msg.as_str(), finding.fix.as_str())),
        others
            .iter()
            .map(|finding| (finding.msg.as_str(), finding.fix.as_str())),
    );
    let findings_text = full_text.join("\n");
    if denying.is_empty() {
        return respond(&uid, true, None, warnings, findings_text);
    }
    let mut message = format!(
        "meshlife: {} has {} mesh lifecycle finding{} that block{} it:",
        object.display_name(),
        denying.len(),
        if denying.len() == 1 { "" } else { "s" },
        if denying.len() == 1 { "s" } else { "" },
    );
    for line in &full_text {
        message.push('\n');
        message.push_str(line);
    }
    let status = Status {
        code: 403,
        reason: "Forbidden",
        message,
    };
    respond(&uid, false, Some(status), warnings, findings_text)
}

/// The uid and the review's JSON, or why the body is not an AdmissionReview v1.
fn read_review(body: &[u8]) -> Result<(String, Value), String> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|error| format!("the body is not JSON ({error}): expected an AdmissionReview"))?;
    let field = |name: &str| review.get(name).and_then(Value::as_str);
    if field("kind") != Some("AdmissionReview") || field("apiVersion") != Some(API_VERSION) {
        return Err(format!(
            "expected an AdmissionReview of {API_VERSION}, got kind {:?} of apiVersion {:?} \
             (the webhook's admissionReviewVersions must be [v1])",
            field("kind").unwrap_or(""),
            field("apiVersion").unwrap_or("")
        ));
    }
    let uid = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .ok_or("the AdmissionReview has no request.uid (a string), which the answer must echo")?
        .to_string();
    Ok((uid, review))
}

/// One warning per finding, as the API server passes them on: control characters dropped,
/// each cut to [`WARNING_LIMIT`], and no more than [`WARNINGS_TOTAL_LIMIT`] in all, the last
/// saying how many did not fit.
pub fn short_warnings(findings: &[&Finding]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut total = 0;
    for (index, finding) in findings.iter().enumerate() {
        let warning = cut(&one_line(&finding.msg), WARNING_LIMIT);
        let left = findings.len() - index - 1;
        // Room is kept for the line that says how many were left out.
        let reserve = if left > 0 { SUMMARY_ROOM } else { 0 };
        if total + warning.len() + reserve > WARNINGS_TOTAL_LIMIT {
            let unsaid = findings.len() - index;
            warnings.push(format!(
                "meshlife: {unsaid} more finding{} not shown (run meshlife check on the object)",
                if unsaid == 1 { "" } else { "s" }
            ));
            break;
        }
        total += warning.len();
        warnings.push(warning);
    }
    warnings
}

/// `text` in at most `limit` bytes, cut at a character boundary and marked when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    const MARK: &str = "...";
    let mut end = limit - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &text[..end])
}

fn respond(
    uid: &str,
    allowed: bool,
    status: Option<Status>,
    warnings: Vec<String>,
    findings: String,
) -> Answer {
    let mut audit_annotations = std::collections::BTreeMap::new();
    if !findings.is_empty() {
        audit_annotations.insert("findings", findings);
    }
    let review = AdmissionReview {
        api_version: API_VERSION,
        kind: "AdmissionReview",
        response: AdmissionResponse {
            uid,
            allowed,
            status,
            warnings,
            audit_annotations,
        },
    };
    Answer {
        response: json_response(
            StatusCode::OK,
            serde_json::to_vec(&review).unwrap_or_default(),
        ),
        outcome: RequestOutcome::Answered,
    }
}

/// A status the API server treats as the webhook failing, so its failurePolicy decides.
fn failure(status: StatusCode, message: String) -> Answer {
    Answer {
        response: text_response(status, format!("meshlife: {message}\n")),
        outcome: RequestOutcome::SystemError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(msg: String) -> Finding {
        Finding {
            rule: "ML101".into(),
            check: "startup-no-hold".into(),
            severity: Severity::Warning,
            msg,
            path: String::new(),
            fix: String::new(),
            mesh: None,
            container: None,
            enforcement_action: EnforcementAction::Warn,
            constraint: String::new(),
            fails_run: false,
            timeline_place: None,
            location: None,
        }
    }

    #[test]
    fn warnings_fit_the_api_servers_limits_and_say_what_was_left_out() {
        let findings: Vec<Finding> = (0..40)
            .map(|index| {
                finding(format!(
                    "[ML101 startup-no-hold] {index} {}",
                    "é".repeat(200)
                ))
            })
            .collect();
        let borrowed: Vec<&Finding> = findings.iter().collect();
        let warnings = short_warnings(&borrowed);
        assert!(
            warnings
                .iter()
                .all(|warning| warning.len() <= WARNING_LIMIT)
        );
        assert!(warnings.iter().map(String::len).sum::<usize>() <= WARNINGS_TOTAL_LIMIT);
        let last = warnings.last().unwrap();
        let shown = warnings.len() - 1;
        assert!(
            last.contains(&format!("{} more findings", 40 - shown)),
            "{last}"
        );
        assert!(warnings[0].ends_with("..."), "{}", warnings[0]);
    }

    #[test]
    fn short_findings_are_passed_whole_without_control_characters() {
        let findings = [finding("[ML101 startup-no-hold] a\nb\u{1b}c".into())];
        let borrowed: Vec<&Finding> = findings.iter().collect();
        assert_eq!(
            short_warnings(&borrowed),
            vec!["[ML101 startup-no-hold] a b c".to_string()]
        );
    }

    #[test]
    fn a_body_that_is_not_an_admission_review_v1_says_what_is_expected() {
        for body in [
            &br#"{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}"#[..],
            br#"{"kind": "ProviderRequest"}"#,
            br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}"#,
            b"not json",
        ] {
            let problem = read_review(body).unwrap_err();
            assert!(
                problem.contains("AdmissionReview") || problem.contains("uid"),
                "{problem}"
            );
        }
    }
}
