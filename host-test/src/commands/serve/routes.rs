//! The routes of the HTTPS port. Each route only translates its engine's wire format to and
//! from the same evaluation the CLI runs; this file dispatches by path and reads bodies within
//! the limits.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::exchange::{Answer, BodyError, Routes, json_response, text_response};
use super::limits::Limits;
use super::listener::{ConnectionInfo, Handler};
use super::metrics::RequestOutcome;
use super::{admission, gatekeeper, kyverno};

/// A body over `--max-body` is still read and discarded up to this many times the limit, so
/// that its client gets the answer; beyond that the connection is closed at once.
const DISCARD_FACTOR: usize = 4;

/// The body of `request`, within `--max-body` and `--read-timeout`.
async fn read_body(request: Request<Incoming>, limits: &Limits) -> Result<Bytes, BodyError> {
    let limit = limits.max_body;
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let discard_limit = limit.saturating_mul(DISCARD_FACTOR) as u64;
    if declared.is_some_and(|length| length > discard_limit) {
        return Err(BodyError::TooLarge { limit });
    }
    let deadline = tokio::time::Instant::now() + limits.read_timeout;
    let mut body = request.into_body();
    // The usual body arrives as one frame, kept as it is; only a body in several frames
    // is copied together, into room for its declared length.
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
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
        if received > limit as u64 {
            continue;
        }
        if let Some(joined) = &mut joined {
            joined.extend_from_slice(&data);
        } else if let Some(earlier) = first.take() {
            let room = declared.map_or(0, |length| length.min(limit as u64) as usize);
            let mut together = BytesMut::with_capacity(room.max(earlier.len() + data.len()));
            together.extend_from_slice(&earlier);
            together.extend_from_slice(&data);
            joined = Some(together);
        } else {
            first = Some(data);
        }
    }
    if received > limit as u64 {
        return Err(BodyError::TooLarge { limit });
    }
    Ok(match (joined, first) {
        (Some(joined), _) => joined.freeze(),
        (None, Some(only)) => only,
        (None, None) => Bytes::new(),
    })
}

impl Routes {
    async fn route(
        self: Arc<Self>,
        request: Request<Incoming>,
        connection: ConnectionInfo,
    ) -> (&'static str, Answer) {
        let path = request.uri().path().to_string();
        let method = request.method().clone();
        match (path.as_str(), method) {
            (gatekeeper::PATH, Method::POST) => {
                let body = read_body(request, &self.limits).await;
                let unread = body.is_err();
                let answer = gatekeeper::validate(&self, body, &connection).await;
                ("validate", closing_if_unread(answer, unread))
            }
            (gatekeeper::PATH, _) => ("validate", method_not_allowed("POST")),
            (kyverno::PATH, Method::POST) => {
                let headers = request.headers().clone();
                let body = read_body(request, &self.limits).await;
                let unread = body.is_err();
                let answer = kyverno::evaluate(&self, &headers, body).await;
                ("kyverno", closing_if_unread(answer, unread))
            }
            (kyverno::PATH, _) => ("kyverno", method_not_allowed("POST")),
            (admission::PATH, Method::POST) => {
                let body = read_body(request, &self.limits).await;
                let unread = body.is_err();
                let answer = admission::review(&self, body).await;
                ("admission", closing_if_unread(answer, unread))
            }
            (admission::PATH, _) => ("admission", method_not_allowed("POST")),
            _ => ("other", not_found(&path)),
        }
    }
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

/// The transport floor `meshlife bench serve` measures (`--transport-floor-answer`): every
/// request's body is read as the routes read it, and the same bytes are answered, with nothing
/// evaluated.
pub struct FixedAnswer {
    answer: Bytes,
    limits: Limits,
}

impl FixedAnswer {
    pub fn read(path: &std::path::Path, limits: Limits) -> anyhow::Result<FixedAnswer> {
        let answer = std::fs::read(path).map_err(|error| {
            anyhow::anyhow!(
                "cannot read {} (--transport-floor-answer): {error}",
                path.display()
            )
        })?;
        Ok(FixedAnswer {
            answer: Bytes::from(answer),
            limits,
        })
    }
}

impl Handler for FixedAnswer {
    fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        _connection: ConnectionInfo,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>> {
        Box::pin(async move {
            let status = match read_body(request, &self.limits).await {
                Ok(_) => StatusCode::OK,
                Err(_) => StatusCode::BAD_REQUEST,
            };
            json_response(status, self.answer.clone())
        })
    }
}
