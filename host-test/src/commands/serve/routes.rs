//! The routes of the HTTPS port. Each route only translates its engine's wire format to and
//! from the same evaluation the CLI runs; this file dispatches by path and reads bodies within
//! the limits.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::limits::Limits;
use super::listener::{ConnectionInfo, Handler};
use super::metrics::{Metrics, RequestOutcome};
use super::namespace_watch::NamespaceWatch;
use super::pool::{EvaluationPool, KeyOutcome};
use super::{admission, gatekeeper, kyverno};
use crate::constraints::constraint::Constraint;
use crate::module::engine::EvaluationFailure;
use meshlife_policy::Violation;

/// A body over `--max-body` is still read and discarded up to this many times the limit, so
/// that its client gets the answer; beyond that the connection is closed at once.
const DISCARD_FACTOR: usize = 4;

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

impl Routes {
    async fn read_body(&self, request: Request<Incoming>) -> Result<Bytes, BodyError> {
        let limit = self.limits.max_body;
        let declared = request
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let discard_limit = limit.saturating_mul(DISCARD_FACTOR) as u64;
        if declared.is_some_and(|length| length > discard_limit) {
            return Err(BodyError::TooLarge { limit });
        }
        let deadline = tokio::time::Instant::now() + self.limits.read_timeout;
        let mut body = request.into_body();
        let mut kept: Vec<u8> = Vec::new();
        let mut received: u64 = 0;
        // Frame by frame, so that a body over the limit is read to its end (up to
        // DISCARD_FACTOR times the limit) and thrown away: a client still writing its body
        // would otherwise never read the answer, and Go's reads it only once written.
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(BodyError::Timeout),
                Ok(None) => break,
                Ok(Some(Err(error))) => return Err(BodyError::Broken(error.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            received += data.len() as u64;
            if received > discard_limit {
                return Err(BodyError::TooLarge { limit });
            }
            if received <= limit as u64 {
                kept.extend_from_slice(&data);
            }
        }
        if received > limit as u64 {
            return Err(BodyError::TooLarge { limit });
        }
        Ok(Bytes::from(kept))
    }

    async fn route(
        self: Arc<Self>,
        request: Request<Incoming>,
        connection: ConnectionInfo,
    ) -> (&'static str, Answer) {
        let path = request.uri().path().to_string();
        let method = request.method().clone();
        match (path.as_str(), method) {
            (gatekeeper::PATH, Method::POST) => {
                let body = self.read_body(request).await;
                let unread = body.is_err();
                let answer = gatekeeper::validate(&self, body, &connection).await;
                ("validate", closing_if_unread(answer, unread))
            }
            (gatekeeper::PATH, _) => ("validate", method_not_allowed("POST")),
            (kyverno::PATH, Method::POST) => {
                let headers = request.headers().clone();
                let body = self.read_body(request).await;
                let unread = body.is_err();
                let answer = kyverno::evaluate(&self, &headers, body).await;
                ("kyverno", closing_if_unread(answer, unread))
            }
            (kyverno::PATH, _) => ("kyverno", method_not_allowed("POST")),
            (admission::PATH, Method::POST) => {
                let body = self.read_body(request).await;
                let unread = body.is_err();
                let answer = admission::review(&self, body).await;
                ("admission", closing_if_unread(answer, unread))
            }
            (admission::PATH, _) => ("admission", method_not_allowed("POST")),
            _ => ("other", not_found(&path)),
        }
    }
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

/// A body left unread would be parsed as the next request: its answer closes the connection.
fn closing_if_unread(mut answer: Answer, unread: bool) -> Answer {
    if unread {
        answer.response.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    answer
}

impl Handler for Routes {
    fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        connection: ConnectionInfo,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>> {
        Box::pin(async move {
            let started = Instant::now();
            let metrics = Arc::clone(&self.metrics);
            metrics.in_flight.fetch_add(1, Ordering::Relaxed);
            let (route, answer) = self.route(request, connection).await;
            metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
            metrics.request_done(route, answer.outcome, started.elapsed());
            answer.response
        })
    }
}

pub fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
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

fn not_found(path: &str) -> Answer {
    Answer {
        response: text_response(
            StatusCode::NOT_FOUND,
            format!(
                "meshlife serve has no route {path}; POST {} takes Gatekeeper External Data \
                 requests, POST {} Kyverno service calls, POST {} AdmissionReviews\n",
                gatekeeper::PATH,
                kyverno::PATH,
                admission::PATH
            ),
        ),
        outcome: RequestOutcome::NotFound,
    }
}

fn method_not_allowed(allowed: &'static str) -> Answer {
    let mut response = text_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("this route takes {allowed} only\n"),
    );
    response.headers_mut().insert(
        hyper::header::ALLOW,
        hyper::header::HeaderValue::from_static(allowed),
    );
    Answer {
        response,
        outcome: RequestOutcome::NotFound,
    }
}
