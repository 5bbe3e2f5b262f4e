//! The drill client's long-lived streams, held open for the whole drill and each reopened as
//! soon as it ends: WebSocket connections (websocket.rs) or gRPC server-streaming calls
//! (grpc.rs). A stream's end says whether the server closed it (a close frame, a gRPC status
//! OK) or it was cut (the connection lost, a stream reset, a non-OK status), and the next open
//! how long the client was without it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::calls::{Line, StreamEnd, StreamEnding};
use super::{grpc, websocket};

/// How long a stream may be silent before it counts as stalled.
pub const STALL: Duration = Duration::from_secs(10);
/// How often a stream that could not be opened is tried again.
const RETRY: Duration = Duration::from_millis(100);
/// The largest message read; a larger one ends the stream as cut (the drill's target sends
/// small ticks).
pub const LARGEST_MESSAGE: u64 = 1 << 20;

/// Where a stream is opened.
#[derive(Clone, Debug)]
pub enum StreamTarget {
    /// A WebSocket upgrade of `GET path`.
    WebSocket {
        address: SocketAddr,
        host: String,
        path: String,
    },
    /// A gRPC server-streaming call of `method` (`/package.Service/Method`) with one empty
    /// request message, over HTTP/2 without TLS (inside the mesh the proxies add mTLS).
    Grpc {
        address: SocketAddr,
        authority: String,
        method: String,
    },
}

enum OpenStream {
    WebSocket(websocket::Socket),
    Grpc(grpc::Call),
}

impl StreamTarget {
    async fn open(&self) -> Result<OpenStream, String> {
        match self {
            StreamTarget::WebSocket {
                address,
                host,
                path,
            } => websocket::open(*address, host, path)
                .await
                .map(OpenStream::WebSocket)
                .map_err(|error| error.to_string()),
            StreamTarget::Grpc {
                address,
                authority,
                method,
            } => grpc::open(*address, authority, method)
                .await
                .map(OpenStream::Grpc),
        }
    }
}

impl OpenStream {
    async fn read_until_end(&mut self, messages: &mut u64) -> StreamEnding {
        match self {
            OpenStream::WebSocket(socket) => websocket::read_until_end(socket, messages).await,
            OpenStream::Grpc(call) => call.read_until_end(messages).await,
        }
    }

    /// Ends the stream from the client's side, as a client that stops does: a close frame, or
    /// the gRPC call cancelled (its HTTP/2 stream reset).
    async fn stop(self) {
        match self {
            OpenStream::WebSocket(mut socket) => {
                let _ = socket
                    .get_mut()
                    .write_all(&websocket::close_frame(1000))
                    .await;
            }
            OpenStream::Grpc(call) => drop(call),
        }
    }
}

/// Holds stream `id` open until `stop` turns true: opens, reads until the end, writes the end
/// and the next open as lines.
pub async fn hold(
    id: u32,
    target: StreamTarget,
    lines: mpsc::UnboundedSender<Line>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let mut failed_attempts = 0;
        let mut stream = loop {
            if *stop.borrow() {
                return;
            }
            match target.open().await {
                Ok(stream) => break stream,
                Err(_) => {
                    failed_attempts += 1;
                    tokio::select! {
                        _ = tokio::time::sleep(RETRY) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
        };
        let opened_ms = super::client::now_ms();
        let _ = lines.send(Line::StreamOpen {
            stream: id,
            at_ms: opened_ms,
            failed_attempts,
        });
        let mut messages = 0;
        let ending = tokio::select! {
            ending = stream.read_until_end(&mut messages) => Some(ending),
            _ = stop.changed() => None,
        };
        let ending = match ending {
            Some(ending) => ending,
            None => {
                stream.stop().await;
                StreamEnding::Stopped
            }
        };
        let _ = lines.send(Line::StreamEnd(StreamEnd {
            stream: id,
            opened_ms,
            at_ms: super::client::now_ms(),
            messages,
            ending: ending.clone(),
        }));
        if ending == StreamEnding::Stopped || *stop.borrow() {
            return;
        }
    }
}

pub fn timed_out(_: tokio::time::error::Elapsed) -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::TimedOut)
}
