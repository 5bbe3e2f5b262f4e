//! What every route shares, below the route files and the dispatch: the server's state
//! ([`Routes`]), why a body was not read, a route's answer, the module's result read as
//! violations, and the response and text helpers. Route files import only this, never each
//! other or the dispatch.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use meshlife_policy::Violation;

use super::limits::Limits;
use super::metrics::{Metrics, RequestOutcome};
use super::namespace_watch::NamespaceWatch;
use super::pool::{EvaluationPool, KeyOutcome};
use crate::constraints::constraint::Constraint;
use crate::module::engine::EvaluationFailure;

/// What every route shares.
pub struct Routes {
    pub pool: EvaluationPool,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// Whether `--client-ca` was given: routes that serve Gatekeeper then require a client
    /// certificate (the TLS layer has already chained any presented one to that CA).
    pub client_ca: bool,
    /// The token `POST /kyverno` requires as `Authorization: Bearer`, from
    /// `--kyverno-token-file`; any request is taken without one.
    pub kyverno_token: Option<Vec<u8>>,
    /// What `POST /admission` judges under: the `--constraint`s, or the parameter defaults.
    pub constraints: Vec<Constraint>,
    /// The Namespaces `POST /admission` adds to its reviews.
    pub namespaces: NamespaceWatch,
}

/// Why a body was not read.
#[derive(Debug)]
pub enum BodyError {
    TooLarge { limit: usize },
    Timeout,
    Broken(String),
}

impl BodyError {
    pub fn reason(&self) -> &'static str {
        match self {
            BodyError::TooLarge { .. } => "body_too_large",
            BodyError::Timeout => "read_timeout",
            BodyError::Broken(_) => "body_broken",
        }
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(
                formatter,
                "the request body exceeds the server's limit of {limit} bytes (--max-body)"
            ),
            BodyError::Timeout => {
                formatter.write_str("the request body did not arrive within --read-timeout")
            }
            BodyError::Broken(error) => {
                write!(formatter, "the request body could not be read: {error}")
            }
        }
    }
}

/// A route's answer and how the request ended, for the metrics.
pub struct Answer {
    pub response: Response<Full<Bytes>>,
    pub outcome: RequestOutcome,
}

/// What is wrong with `text` as a module input, `{"review": {...}, "parameters": ...}`, or
/// `None` when it has that shape: checked before a worker is spent on it.
pub fn input_shape_problem(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct InputShape<'a> {
        #[serde(borrow)]
        review: &'a serde_json::value::RawValue,
    }
    match serde_json::from_str::<InputShape>(text) {
        Ok(shape) if shape.review.get().starts_with('{') => None,
        Ok(_) => Some("its review is not an object".into()),
        Err(error) => Some(error.to_string()),
    }
}

/// Why an input got no answer, as the metrics' reason and the caller's message; logged here
/// (the pool has replaced the instance in every case).
pub fn evaluation_failure(failure: EvaluationFailure, limits: &Limits) -> (&'static str, String) {
    match failure {
        EvaluationFailure::DeadlineExceeded => {
            tracing::warn!(
                timeout = ?limits.eval_timeout,
                "evaluation stopped at its deadline; the instance was replaced"
            );
            (
                "deadline",
                format!(
                    "the evaluation did not finish within {:?} (--eval-timeout) and was stopped",
                    limits.eval_timeout
                ),
            )
        }
        EvaluationFailure::Aborted(message) => {
            tracing::warn!(%message, "evaluation aborted; the instance was replaced");
            ("aborted", format!("the evaluation was aborted: {message}"))
        }
        EvaluationFailure::Failed(message) => {
            tracing::error!(%message, "evaluation failed; the instance was replaced");
            ("failed", format!("the evaluation failed: {message}"))
        }
    }
}

#[derive(serde::Deserialize)]
struct ResultBinding {
    result: Vec<Violation>,
}

/// Each finding as one "msg Fix: fix" line, the denying ones first, so that a denial shown by
/// kubectl leads with why. Kyverno's `message` and the webhook's `status.message` both read so.
pub fn finding_lines<'a>(
    denying: impl IntoIterator<Item = (&'a str, &'a str)>,
    others: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<String> {
    denying
        .into_iter()
        .chain(others)
        .map(|(msg, fix)| format!("{msg} Fix: {fix}"))
        .collect()
}

/// One evaluation's violations, or why there are none (counted in the metrics).
pub fn violations_of(outcome: KeyOutcome, routes: &Routes) -> Result<Vec<Violation>, String> {
    let text = match outcome {
        KeyOutcome::Evaluated(text) => text,
        KeyOutcome::Failed(failure) => {
            let (reason, message) = evaluation_failure(failure, &routes.limits);
            routes.metrics.key_done(reason);
            return Err(message);
        }
    };
    let bindings: Vec<ResultBinding> = serde_json::from_str(&text).map_err(|error| {
        routes.metrics.key_done("bad_result");
        format!("the module's result is not a result set of violations: {error}")
    })?;
    Ok(bindings
        .into_iter()
        .flat_map(|binding| binding.result)
        .collect())
}

pub fn json_response(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

pub fn text_response(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `text` with every control character (line breaks included) as a space: what the engines
/// show of a finding (an API server warning, a Kyverno message) is one line.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|character| {
            if character.is_control() {
                ' '
            } else {
                character
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn texts_for_the_engines_are_one_line() {
        assert_eq!(super::one_line("a\nb\tc\r"), "a b c ");
    }
}
