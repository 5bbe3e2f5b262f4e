//! Accepting connections (TLS on the routes port, plain on the health port) and serving
//! HTTP/1.1 on each, with the timeouts hyper does not give in the shape needed here.
//!
//! hyper's own `header_read_timeout` starts whenever the connection waits for a request head,
//! idle keep-alive waits included (hyper 1.12 `Conn::poll_read_head`), so it would close idle
//! connections long before Gatekeeper's 90 s idle timeout: exactly the POST-on-a-closed-
//! connection race of golang/go#22158. It is switched off; each connection instead has a
//! watchdog over its own I/O activity: a request whose head and body take longer than
//! `--read-timeout` from its first byte is cut, and a connection idle for `--idle-timeout`
//! is closed gracefully.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::limits::Limits;
use super::metrics::Metrics;
use super::shedding::{Admission, ConnectionTable, Slot, Stage};
use super::shutdown::{Lifecycle, Phase, reached};
use super::tls::TlsState;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What a route may know about the connection a request came on.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    pub peer: SocketAddr,
    /// A client certificate was presented; the TLS verifier has chained it to `--client-ca`.
    pub client_certificate: bool,
}

/// The request handler a listener serves: one call per request.
pub trait Handler: Send + Sync + 'static {
    fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        connection: ConnectionInfo,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>>;
}

const NO_PENDING_REQUEST: u64 = u64::MAX;

/// I/O activity of one connection, in milliseconds since it was accepted.
struct Activity {
    accepted: Instant,
    /// The connection's entry in the listener's table, told how far the connection has got.
    slot: Arc<Slot>,
    last_io: AtomicU64,
    /// When the first byte of a request not yet handed to the route arrived.
    pending_since: AtomicU64,
    in_request: AtomicBool,
    requests: AtomicU64,
}

impl Activity {
    fn new(slot: Arc<Slot>) -> Activity {
        Activity {
            accepted: Instant::now(),
            slot,
            last_io: AtomicU64::new(0),
            pending_since: AtomicU64::new(NO_PENDING_REQUEST),
            in_request: AtomicBool::new(false),
            requests: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.accepted.elapsed().as_millis() as u64
    }

    fn bytes_read(&self) {
        let now = self.now();
        self.last_io.store(now, Ordering::Relaxed);
        if !self.in_request.load(Ordering::Relaxed) {
            self.slot.set_stage(Stage::Receiving);
            let _ = self.pending_since.compare_exchange(
                NO_PENDING_REQUEST,
                now,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    fn request_started(&self) {
        self.slot.set_stage(Stage::Answering);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_request.store(true, Ordering::Relaxed);
        self.pending_since
            .store(NO_PENDING_REQUEST, Ordering::Relaxed);
    }

    fn request_finished(&self) {
        self.last_io.store(self.now(), Ordering::Relaxed);
        self.in_request.store(false, Ordering::Relaxed);
        self.slot.set_stage(Stage::Idle);
    }
}

/// Records reads into [`Activity`]; otherwise passes everything through.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(context, buffer);
        if buffer.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(context, buffer)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(context)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Settings shared by every connection of one listener.
#[derive(Clone)]
pub struct ListenerSettings {
    pub name: &'static str,
    pub limits: Limits,
    pub lifecycle: Lifecycle,
    pub metrics: Arc<Metrics>,
    /// `None`: plain HTTP (the health port).
    pub tls: Option<Arc<TlsState>>,
    /// Whether this listener stops accepting when the server closes. The health port keeps
    /// answering probes until the process exits.
    pub closes_on_shutdown: bool,
}

/// Accepts connections until the server closes; returns when every connection has ended.
/// At `--max-connections` it goes on accepting, and a connection that is not being answered
/// gives way to the new one (shedding.rs says which); the kernel's backlog never holds an
/// engine's call behind a flood.
pub async fn serve<H: Handler>(listener: TcpListener, settings: ListenerSettings, handler: Arc<H>) {
    let table = ConnectionTable::new(settings.limits.max_connections);
    let mut phase = settings.lifecycle.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = reached(&mut phase, Phase::Closing), if settings.closes_on_shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(listener = settings.name, %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admission = table.admit(peer, |stage| {
            // An idle keep-alive connection closed early refuses nothing: a caller that would
            // have reused it opens another. Counted apart, so that a caller leaving one behind
            // each call (Kyverno's service calls) is not taken for shedding under load.
            let reason = if stage == Stage::Idle {
                "idle_shed"
            } else {
                "connection_shed"
            };
            settings.metrics.refused(reason);
            tracing::debug!(
                listener = settings.name,
                ?stage,
                "at --max-connections: a connection gives way"
            );
        });
        let guard = match admission {
            Admission::Serve(guard) => guard,
            Admission::Full => {
                settings.metrics.refused("connection_limit");
                tracing::warn!(listener = settings.name, %peer, "every connection is being answered at --max-connections: new connection closed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let settings = settings.clone();
        let handler = Arc::clone(&handler);
        tokio::spawn(async move {
            settings.metrics.connections.fetch_add(1, Ordering::Relaxed);
            connection(stream, peer, Arc::clone(&guard.slot), &settings, handler).await;
            settings.metrics.connections.fetch_sub(1, Ordering::Relaxed);
            drop(guard);
        });
    }
    drop(listener);
    tracing::info!(listener = settings.name, "stopped accepting connections");
    while !table.is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn connection<H: Handler>(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Arc<Slot>,
    settings: &ListenerSettings,
    handler: Arc<H>,
) {
    let activity = Arc::new(Activity::new(Arc::clone(&slot)));
    match &settings.tls {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
            let handshake = tokio::select! {
                handshake = tokio::time::timeout(settings.limits.handshake_timeout, acceptor.accept(stream)) => handshake,
                _ = slot.notify.notified() => return,
            };
            let stream = match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    settings.metrics.refused("tls_handshake");
                    tracing::info!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    settings.metrics.refused("tls_handshake_timeout");
                    tracing::info!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            slot.set_stage(Stage::Idle);
            let info = ConnectionInfo {
                peer,
                client_certificate: stream.get_ref().1.peer_certificates().is_some(),
            };
            let io = Tracked {
                inner: stream,
                activity: Arc::clone(&activity),
            };
            http(io, info, activity, settings, handler).await;
        }
        None => {
            slot.set_stage(Stage::Idle);
            let info = ConnectionInfo {
                peer,
                client_certificate: false,
            };
            let io = Tracked {
                inner: stream,
                activity: Arc::clone(&activity),
            };
            http(io, info, activity, settings, handler).await;
        }
    }
}

async fn http<S, H>(
    io: Tracked<S>,
    info: ConnectionInfo,
    activity: Arc<Activity>,
    settings: &ListenerSettings,
    handler: Arc<H>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let peer = info.peer;
    let lifecycle = settings.lifecycle.clone();
    let service_activity = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let handler = Arc::clone(&handler);
        let info = info.clone();
        let activity = Arc::clone(&service_activity);
        let lifecycle = lifecycle.clone();
        async move {
            activity.request_started();
            let mut response = handler.handle(request, info).await;
            if lifecycle.phase() >= Phase::Draining {
                // Clients open their next connection elsewhere, to a pod that stays.
                response.headers_mut().insert(
                    hyper::header::CONNECTION,
                    hyper::header::HeaderValue::from_static("close"),
                );
            }
            activity.request_finished();
            Ok::<_, Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .keep_alive(true)
        .header_read_timeout(None)
        .timer(hyper_util::rt::TokioTimer::new());
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);

    let limits = &settings.limits;
    let check_every = (limits.read_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut watchdog = tokio::time::interval(check_every);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut phase = settings.lifecycle.subscribe();
    // Closing was asked for; `closing`: graceful shutdown is under way.
    let mut close_requested = false;
    let mut closing = false;
    // A client that has just connected is about to send: closing its connection now would
    // fail a request it has already written (Go does not retry a POST). Such a connection
    // gets its first request answered, with `Connection: close`, unless it stays silent this
    // long. Connections that have served requests and are idle are closed at once.
    let first_request_grace = limits.read_timeout.min(Duration::from_secs(2));
    loop {
        if close_requested
            && !closing
            && (activity.requests.load(Ordering::Relaxed) > 0
                || activity.accepted.elapsed() >= first_request_grace)
        {
            closing = true;
            connection.as_mut().graceful_shutdown();
        }
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(listener = settings.name, %peer, %error, "connection ended with an error");
                }
                return;
            }
            _ = reached(&mut phase, Phase::Closing), if !close_requested && settings.closes_on_shutdown => {
                close_requested = true;
            }
            _ = activity.slot.notify.notified(), if !closing => {
                // Giving way to a new connection at --max-connections: a request being
                // answered is finished first; anything else ends now.
                if !activity.in_request.load(Ordering::Relaxed) {
                    return;
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = watchdog.tick() => {
                let now = activity.now();
                let pending = activity.pending_since.load(Ordering::Relaxed);
                if pending != NO_PENDING_REQUEST
                    && now.saturating_sub(pending) > limits.read_timeout.as_millis() as u64
                {
                    settings.metrics.refused("read_timeout");
                    tracing::info!(listener = settings.name, "request head not complete within --read-timeout; connection closed");
                    return;
                }
                let idle = pending == NO_PENDING_REQUEST && !activity.in_request.load(Ordering::Relaxed);
                if !closing && idle
                    && now.saturating_sub(activity.last_io.load(Ordering::Relaxed))
                        > limits.idle_timeout.as_millis() as u64
                {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
