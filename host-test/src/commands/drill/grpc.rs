//! The drill client's gRPC streams: server-streaming calls (one empty request message, then
//! the server's messages until it ends the call) over HTTP/2 without TLS, as a meshed client
//! sends them to its proxy. No generated code is needed: the drill counts messages by their
//! length prefixes and reads the status from the trailers. A status OK is the server ending
//! the call (as one that drains does); a reset stream, a lost connection or any other status
//! (Envoy answers 14 UNAVAILABLE for an upstream that went away mid-call) is a cut.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::calls::StreamEnding;
use super::stream::{LARGEST_MESSAGE, STALL};

/// One empty message: not compressed, length 0.
const EMPTY_MESSAGE: [u8; 5] = [0, 0, 0, 0, 0];

/// An open call: the response body read frame by frame.
pub struct Call {
    body: Incoming,
    /// Kept so the connection lives as long as the call.
    _sender: SendRequest<Full<Bytes>>,
    /// Bytes of a message not yet whole.
    pending: Vec<u8>,
}

/// Connects, sends the call and waits for the server's headers. A refused connection, an
/// answer other than 200 or a status without messages (a trailers-only answer: Envoy's "no
/// healthy upstream") is an open that failed.
pub async fn open(address: SocketAddr, authority: &str, method: &str) -> Result<Call, String> {
    let tcp = tokio::time::timeout(STALL, TcpStream::connect(address))
        .await
        .map_err(|_| "connecting timed out".to_string())?
        .map_err(|error| error.to_string())?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .map_err(|error| describe(&error))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = Request::post(format!("http://{authority}{method}"))
        .header(hyper::header::CONTENT_TYPE, "application/grpc")
        .header(hyper::header::TE, "trailers")
        .header(hyper::header::USER_AGENT, "meshlife-drill")
        .body(Full::new(Bytes::from_static(&EMPTY_MESSAGE)))
        .map_err(|error| error.to_string())?;
    let response = tokio::time::timeout(STALL, sender.send_request(request))
        .await
        .map_err(|_| "no answer".to_string())?
        .map_err(|error| describe(&error))?;
    if response.status() != hyper::StatusCode::OK {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    if let Some(code) = response.headers().get("grpc-status") {
        return Err(status_text(
            code.to_str().unwrap_or(""),
            response.headers().get("grpc-message"),
        ));
    }
    Ok(Call {
        body: response.into_body(),
        _sender: sender,
        pending: Vec::new(),
    })
}

impl Call {
    /// Reads until the call ends; counts whole messages in `messages`.
    pub async fn read_until_end(&mut self, messages: &mut u64) -> StreamEnding {
        loop {
            let frame = match tokio::time::timeout(STALL, self.body.frame()).await {
                Err(_) => return StreamEnding::Stalled,
                Ok(None) => return StreamEnding::Cut("ended without a gRPC status".into()),
                Ok(Some(Err(error))) => return StreamEnding::Cut(describe(&error)),
                Ok(Some(Ok(frame))) => frame,
            };
            if let Some(data) = frame.data_ref() {
                self.pending.extend_from_slice(data);
                match take_messages(&mut self.pending) {
                    Ok(whole) => *messages += whole,
                    Err(reason) => return StreamEnding::Cut(reason),
                }
            } else if let Some(trailers) = frame.trailers_ref() {
                let code = trailers
                    .get("grpc-status")
                    .and_then(|code| code.to_str().ok())
                    .unwrap_or("");
                return if code == "0" {
                    StreamEnding::Ended
                } else {
                    StreamEnding::Cut(status_text(code, trailers.get("grpc-message")))
                };
            }
        }
    }
}

/// Removes the whole length-prefixed messages at the front of `pending`; how many.
fn take_messages(pending: &mut Vec<u8>) -> Result<u64, String> {
    let mut whole = 0;
    let mut start = 0;
    while pending.len() - start >= 5 {
        let prefix = &pending[start..start + 5];
        let length = u64::from(u32::from_be_bytes([
            prefix[1], prefix[2], prefix[3], prefix[4],
        ]));
        if length > LARGEST_MESSAGE {
            return Err(format!(
                "a message of {length} bytes, more than the client reads"
            ));
        }
        let end = start + 5 + length as usize;
        if pending.len() < end {
            break;
        }
        whole += 1;
        start = end;
    }
    pending.drain(..start);
    Ok(whole)
}

/// `gRPC status 14 UNAVAILABLE: upstream connect error ...`.
fn status_text(code: &str, message: Option<&hyper::header::HeaderValue>) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    let name = code
        .parse::<usize>()
        .ok()
        .and_then(|index| NAMES.get(index))
        .map_or(String::new(), |name| format!(" {name}"));
    let message = message
        .and_then(|value| value.to_str().ok())
        .filter(|text| !text.is_empty())
        .map_or(String::new(), |text| format!(": {text}"));
    if code.is_empty() {
        format!("trailers without a gRPC status{message}")
    } else {
        format!("gRPC status {code}{name}{message}")
    }
}

/// hyper's error by its deepest cause, which names what happened (`stream error received:
/// unexpected internal error encountered` for a reset stream); hyper's own words only say
/// where (`error reading a body from connection`).
fn describe(error: &hyper::Error) -> String {
    let mut deepest: &dyn std::error::Error = error;
    while let Some(cause) = deepest.source() {
        deepest = cause;
    }
    deepest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_by_their_length_prefixes_across_frames() {
        let mut pending = vec![0, 0, 0, 0, 2, b'h', b'i', 0, 0, 0, 0, 3, b't'];
        assert_eq!(take_messages(&mut pending), Ok(1));
        assert_eq!(pending, vec![0, 0, 0, 0, 3, b't']);
        pending.extend_from_slice(b"ic");
        assert_eq!(take_messages(&mut pending), Ok(1));
        assert!(pending.is_empty());
        let mut oversized = vec![0, 0xff, 0xff, 0xff, 0xff];
        assert!(take_messages(&mut oversized).is_err());
    }

    #[test]
    fn a_status_is_named() {
        let message = hyper::header::HeaderValue::from_static("upstream reset");
        assert_eq!(
            status_text("14", Some(&message)),
            "gRPC status 14 UNAVAILABLE: upstream reset"
        );
        assert_eq!(status_text("99", None), "gRPC status 99");
        assert_eq!(status_text("", None), "trailers without a gRPC status");
    }
}
