//! The plain-HTTP health port: `/healthz` (the process answers), `/readyz` (module loaded,
//! certificates valid, Namespaces listed when watched, not shutting down) and `/metrics` (Prometheus text).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::exchange::text_response;
use super::listener::{ConnectionInfo, Handler};
use super::metrics::Metrics;
use super::pool::EvaluationPool;
use super::shutdown::{Lifecycle, Phase};
use super::tls::TlsState;

pub struct Health {
    pub lifecycle: Lifecycle,
    pub tls: Arc<TlsState>,
    pub metrics: Arc<Metrics>,
    pub routes: Arc<super::exchange::Routes>,
    /// Which cluster facts `POST /admission` judges under, when read at start.
    pub facts_read: Option<String>,
}

impl Health {
    fn readiness(&self) -> Result<(), String> {
        match self.lifecycle.phase() {
            Phase::Serving => {}
            Phase::Draining | Phase::Closing => return Err("shutting down".into()),
        }
        self.tls.check_validity()?;
        if self.pool().capacity() == 0 {
            return Err("no evaluation workers".into());
        }
        self.routes.namespaces.readiness()?;
        Ok(())
    }

    fn pool(&self) -> &EvaluationPool {
        &self.routes.pool
    }

    fn answer(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return text_response(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
        }
        match request.uri().path() {
            "/healthz" | "/livez" => text_response(StatusCode::OK, "ok\n".into()),
            "/readyz" => match self.readiness() {
                Ok(()) => text_response(
                    StatusCode::OK,
                    match &self.facts_read {
                        Some(facts) => format!("ready\n{facts}\n"),
                        None => "ready\n".into(),
                    },
                ),
                Err(reason) => text_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {reason}\n"),
                ),
            },
            "/metrics" => {
                self.metrics
                    .queued_keys
                    .store(self.pool().busy_slots() as i64, Ordering::Relaxed);
                let mut text = self.metrics.render();
                text.push_str(&self.routes.namespaces.metrics_text());
                // What /readyz and the certificate say, for dashboards and alerts: a scrape
                // sees what the kubelet's probe sees.
                let ready = u8::from(self.readiness().is_ok());
                text.push_str(&format!(
                    "# HELP meshlife_ready 1 while /readyz answers 200 (module loaded, \
                     certificate valid, Namespaces listed when watched, not shutting down).\n\
                     # TYPE meshlife_ready gauge\nmeshlife_ready {ready}\n"
                ));
                if let Some(not_after) = self.tls.not_after() {
                    text.push_str(&format!(
                        "# HELP meshlife_certificate_expiry_timestamp_seconds When the serving \
                         certificate expires (its notAfter), in seconds since the Unix epoch.\n\
                         # TYPE meshlife_certificate_expiry_timestamp_seconds gauge\n\
                         meshlife_certificate_expiry_timestamp_seconds {not_after}\n"
                    ));
                }
                let mut response = text_response(StatusCode::OK, text);
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(
                        "text/plain; version=0.0.4; charset=utf-8",
                    ),
                );
                response
            }
            other => text_response(
                StatusCode::NOT_FOUND,
                format!("no {other} here; this port serves /healthz, /readyz and /metrics\n"),
            ),
        }
    }
}

impl Handler for Health {
    fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        _connection: ConnectionInfo,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>> {
        let response = self.answer(&request);
        Box::pin(async move { response })
    }
}
