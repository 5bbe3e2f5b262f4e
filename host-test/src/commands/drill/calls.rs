//! One call of the load, as the drill client writes it (one JSON line each on its stdout) and
//! the drill reads it back from the load pod's log.

use serde::{Deserialize, Serialize};

/// How a call reached the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Connection {
    /// A new TCP connection for this call alone: what a client without keep-alive sees.
    New,
    /// A kept-alive connection from the client's pool: where a server's close and a proxy's
    /// drain show.
    Reused,
    /// An admission through the API server (`drill --admissions`): the API server keeps its
    /// own connections to the webhook.
    Admission,
}

impl Connection {
    pub fn label(self) -> &'static str {
        match self {
            Connection::New => "new connection",
            Connection::Reused => "reused connection",
            Connection::Admission => "admission",
        }
    }
}

/// Why a call failed. The order is the report's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "detail")]
pub enum Failure {
    /// The TCP connection was refused: nothing listened (a pod gone, a proxy's listener closed).
    Refused,
    /// The connection was reset, or closed before the response was complete.
    Reset,
    /// No answer within the client's timeout.
    Timeout,
    /// An HTTP status of 500 or more (a proxy's 503 "no healthy upstream", say), or of 4xx.
    Status(u16),
    /// Anything else, with the error's text.
    Other(String),
}

impl Failure {
    pub fn label(&self) -> String {
        match self {
            Failure::Refused => "connection refused".into(),
            Failure::Reset => "connection reset or closed mid-response".into(),
            Failure::Timeout => "timeout".into(),
            Failure::Status(code) => format!("HTTP {code}"),
            Failure::Other(text) => text.clone(),
        }
    }
}

/// One request and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// When it was sent, in milliseconds since the Unix epoch (the node's clock).
    pub at_ms: u64,
    pub connection: Connection,
    /// Time to the whole response, or to the failure, in microseconds.
    pub latency_us: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The response said `Connection: close`: the server (or its proxy, draining) ends the
    /// connection. Not a failure; a reused connection is replaced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed_by_server: bool,
    /// Which pod answered, when the target names itself (`X-Served-By` or the body's
    /// `hostname`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
}

impl Call {
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }
}

/// The last line of the client's output: what it was asked to do and did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSummary {
    pub target: String,
    pub rate_per_second: u32,
    pub sent: u64,
    pub failed: u64,
    /// Calls still in flight when the client was stopped, which it waited for.
    pub drained: u64,
    pub stopped_by: String,
}

/// A line of the client's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Line {
    Call(Call),
    Summary(ClientSummary),
    /// The client started sending at this time (ms since the epoch).
    Started {
        at_ms: u64,
        target: String,
    },
    /// A long-lived stream was opened, after `failed_attempts` refused or failed ones.
    StreamOpen {
        stream: u32,
        at_ms: u64,
        failed_attempts: u32,
    },
    StreamEnd(StreamEnd),
}

/// How a long-lived stream (a WebSocket) ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "detail")]
pub enum StreamEnding {
    /// The server sent a close frame (1001 "going away" at a graceful shutdown): the client
    /// knows to reconnect, and nothing in flight is lost.
    Closed(u16),
    /// The server ended the gRPC call with status OK (as a server that drains ends its
    /// streams): the client knows to call again, and nothing in flight is lost.
    Ended,
    /// The connection ended without a close frame (reset, or closed mid-stream): what was in
    /// flight is lost, and the client learns it only from the error.
    Cut(String),
    /// Nothing arrived for the client's stall limit.
    Stalled,
    /// The client itself closed it, at its own stop.
    Stopped,
}

impl StreamEnding {
    pub fn is_cut(&self) -> bool {
        matches!(self, StreamEnding::Cut(_) | StreamEnding::Stalled)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamEnd {
    pub stream: u32,
    pub opened_ms: u64,
    pub at_ms: u64,
    pub messages: u64,
    pub ending: StreamEnding,
}

impl Line {
    /// Reads one line of the client's output; `None` for what is not one (a log line of the
    /// runtime, a line cut by the log's limit).
    pub fn parse(text: &str) -> Option<Line> {
        serde_json::from_str(text.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_line_reads_back_as_written() {
        let call = Call {
            at_ms: 1_765_000_000_123,
            connection: Connection::Reused,
            latency_us: 2_500,
            status: Some(503),
            failure: Some(Failure::Status(503)),
            closed_by_server: true,
            served_by: Some("web-7d9c-abcde".into()),
        };
        let text = serde_json::to_string(&Line::Call(call.clone())).unwrap();
        assert_eq!(Line::parse(&text), Some(Line::Call(call)));
        assert_eq!(Line::parse("I1205 12:00:00 klog line"), None);
    }
}
