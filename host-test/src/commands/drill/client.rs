//! `meshlife drill-client`: the load pod's mode. It calls one HTTP target at a fixed rate, with
//! no retries, each call on a new connection and, as often, on a kept-alive one, and writes
//! each call's outcome as one JSON line (`calls::Line`) on stdout for the drill to read from
//! the pod's log. Open loop: a call is sent on its tick whether or not the last one answered,
//! so a stalled target shows as timeouts instead of as fewer calls.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::calls::{Call, ClientSummary, Connection, Failure, Line};
use super::stream::StreamTarget;
use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error};

/// The most calls per second of each connection kind: enough for Istio's own bar (one call
/// every 40 ms), bounded so a drill never loads a service as a benchmark would.
pub const MOST_RATE: u32 = 200;
/// The longest a client runs.
pub const LONGEST: Duration = Duration::from_secs(30 * 60);

#[derive(clap::Args, Debug, Clone)]
pub struct DrillClientArgs {
    /// What to call: `http://ADDRESS:PORT/PATH` (an IP address: the drill gives the Service's
    /// cluster IP, so that no DNS is needed).
    #[arg(long)]
    pub target: String,

    /// The Host header (the Service's DNS name), when the target is an address.
    #[arg(long)]
    pub host: Option<String>,

    /// Calls per second on new connections, and as many on kept-alive ones (at most 200).
    #[arg(long, default_value_t = 25)]
    pub rate: u32,

    /// How long to send (a Go duration: `90s`, `5m`; at most 30m). The client also stops at
    /// SIGTERM or Ctrl-C, after the calls in flight.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,

    /// How long one call may take before it counts as a timeout.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Also hold WebSocket streams open on this path of the target's address, each reopened
    /// as soon as it ends (its end and the time to reopen it are written).
    #[arg(long, value_name = "PATH")]
    pub websocket: Option<String>,

    /// Also hold gRPC server-streaming calls: `http://ADDRESS:PORT/package.Service/Method`,
    /// each called with one empty message and called again as soon as it ends.
    #[arg(long, value_name = "URL", conflicts_with = "websocket")]
    pub grpc: Option<String>,

    /// The :authority of the gRPC calls (the Service's DNS name and port), when --grpc gives
    /// an address.
    #[arg(long, value_name = "HOST")]
    pub grpc_authority: Option<String>,

    /// How many streams to hold, with --websocket or --grpc (at most 50).
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
}

/// The most streams held.
pub const MOST_STREAMS: u32 = 50;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let milliseconds = meshlife_policy::duration::parse_go_duration(text)
        .map_err(|error| format!("{error}: expected a duration such as 90s or 5m"))?;
    Ok(Duration::from_millis(milliseconds))
}

/// Where the calls go.
#[derive(Clone, Debug)]
pub struct Target {
    pub address: SocketAddr,
    pub host: String,
    pub path: String,
}

impl Target {
    /// `http://ADDRESS:PORT/PATH`; a name instead of an address is refused, since the load pod
    /// may have no DNS to resolve it.
    pub fn parse(url: &str, host: Option<&str>) -> Result<Target, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("--target {url:?}: expected http://ADDRESS:PORT/PATH (plain HTTP: inside the mesh the proxies add mTLS)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let address: SocketAddr = authority.parse().map_err(|_| {
            format!(
                "--target {url:?}: {authority:?} is not ADDRESS:PORT (an IP address and a port)"
            )
        })?;
        Ok(Target {
            address,
            host: host.map_or_else(|| authority.to_string(), str::to_string),
            path: path.to_string(),
        })
    }
}

pub fn run(args: &DrillClientArgs) -> u8 {
    match check(args) {
        Ok((target, streams)) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build();
            match runtime {
                Ok(runtime) => {
                    runtime.block_on(send(target, streams, args.clone(), stop_signal()));
                    EXIT_OK
                }
                Err(error) => {
                    print_error(format_args!("cannot start the client's runtime: {error}"));
                    EXIT_ERROR
                }
            }
        }
        Err(message) => {
            print_error(format_args!("{message}"));
            EXIT_ERROR
        }
    }
}

fn check(args: &DrillClientArgs) -> Result<(Target, Option<StreamTarget>), String> {
    if args.rate == 0 || args.rate > MOST_RATE {
        return Err(format!(
            "--rate {}: give 1 to {MOST_RATE} calls per second",
            args.rate
        ));
    }
    if args.duration.is_zero() || args.duration > LONGEST {
        return Err(format!(
            "--duration {:?}: give more than 0 and at most {} minutes",
            args.duration,
            LONGEST.as_secs() / 60
        ));
    }
    if args.timeout.is_zero() {
        return Err("--timeout must be more than 0".into());
    }
    check_streams(args.websocket.as_deref(), None, args.streams)?;
    let target = Target::parse(&args.target, args.host.as_deref())?;
    let streams = if let Some(path) = &args.websocket {
        Some(StreamTarget::WebSocket {
            address: target.address,
            host: target.host.clone(),
            path: path.clone(),
        })
    } else if let Some(url) = &args.grpc {
        let grpc = Target::parse(url, args.grpc_authority.as_deref())
            .map_err(|error| error.replacen("--target", "--grpc", 1))?;
        check_streams(None, Some(&grpc.path), args.streams)?;
        Some(StreamTarget::Grpc {
            address: grpc.address,
            authority: grpc.host,
            method: grpc.path,
        })
    } else {
        None
    };
    Ok((target, streams))
}

/// The stream flags, as both the drill and its client check them: a WebSocket path, a gRPC
/// method `/package.Service/Method`, and how many streams.
pub fn check_streams(
    websocket: Option<&str>,
    grpc_method: Option<&str>,
    streams: u32,
) -> Result<(), String> {
    if let Some(path) = websocket
        && !path.starts_with('/')
    {
        return Err(format!("--websocket {path:?}: a path starts with /"));
    }
    if let Some(method) = grpc_method {
        let parts: Vec<&str> = method.split('/').collect();
        if parts.len() != 3 || !parts[0].is_empty() || parts[1].is_empty() || parts[2].is_empty() {
            return Err(format!(
                "--grpc {method:?}: a gRPC method is /package.Service/Method"
            ));
        }
    }
    if (websocket.is_some() || grpc_method.is_some()) && (streams == 0 || streams > MOST_STREAMS) {
        return Err(format!(
            "--streams {streams}: give 1 to {MOST_STREAMS} streams"
        ));
    }
    Ok(())
}

/// SIGTERM (the drill deleting the load pod) or Ctrl-C.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => return "SIGTERM",
                _ = tokio::signal::ctrl_c() => return "interrupt",
            }
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "interrupt"
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Kept-alive connections not in use.
type Pool = Arc<Mutex<Vec<SendRequest<Empty<Bytes>>>>>;

/// Sends until `args.duration` has passed or `stop` resolves, then waits for the calls in
/// flight; every call and the summary go to stdout as JSON lines.
pub async fn send(
    target: Target,
    streams_target: Option<StreamTarget>,
    args: DrillClientArgs,
    stop: impl std::future::Future<Output = &'static str>,
) {
    let (lines, mut received) = mpsc::unbounded_channel::<Line>();
    let writer = tokio::task::spawn_blocking(move || {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut sent = 0u64;
        let mut failed = 0u64;
        while let Some(line) = received.blocking_recv() {
            if let Line::Call(call) = &line {
                sent += 1;
                failed += u64::from(call.failed());
            }
            if let Line::Summary(summary) = &line {
                let summary = ClientSummary {
                    sent,
                    failed,
                    ..summary.clone()
                };
                let _ = writeln!(out, "{}", json_line(&Line::Summary(summary)));
                let _ = out.flush();
                continue;
            }
            // A closed stdout ends the output, not the load: the drill reads what it got.
            if writeln!(out, "{}", json_line(&line)).is_err() {
                continue;
            }
            let _ = out.flush();
        }
    });
    let _ = lines.send(Line::Started {
        at_ms: now_ms(),
        target: args.target.clone(),
    });
    let (stop_streams, streams_stop) = tokio::sync::watch::channel(false);
    let mut streams = JoinSet::new();
    if let Some(streams_target) = streams_target {
        for id in 1..=args.streams {
            streams.spawn(super::stream::hold(
                id,
                streams_target.clone(),
                lines.clone(),
                streams_stop.clone(),
            ));
        }
    }
    let target = Arc::new(target);
    let pool: Pool = Arc::default();
    let period = Duration::from_secs(1) / args.rate;
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    let deadline = tokio::time::sleep(args.duration);
    tokio::pin!(deadline);
    tokio::pin!(stop);
    let stopped_by = loop {
        tokio::select! {
            _ = &mut deadline => break "duration",
            why = &mut stop => break why,
            _ = ticks.tick() => {
                for connection in [Connection::New, Connection::Reused] {
                    let target = Arc::clone(&target);
                    let pool = Arc::clone(&pool);
                    let lines = lines.clone();
                    let timeout = args.timeout;
                    in_flight.spawn(async move {
                        let call = one_call(&target, connection, &pool, timeout).await;
                        let _ = lines.send(Line::Call(call));
                    });
                }
                // Reap what finished, so the set holds only calls in flight.
                while in_flight.try_join_next().is_some() {}
            }
        }
    };
    let drained = in_flight.len() as u64;
    let _ = stop_streams.send(true);
    // Each call ends within its timeout; the margin covers the writer.
    let _ = tokio::time::timeout(args.timeout + Duration::from_secs(1), async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while streams.join_next().await.is_some() {}
    })
    .await;
    let _ = lines.send(Line::Summary(ClientSummary {
        target: args.target.clone(),
        rate_per_second: args.rate,
        sent: 0,
        failed: 0,
        drained,
        stopped_by: stopped_by.to_string(),
    }));
    drop(lines);
    let _ = writer.await;
}

fn json_line(line: &Line) -> String {
    serde_json::to_string(line).unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"))
}

/// One call, timed from its tick to the whole response or the failure.
async fn one_call(target: &Target, connection: Connection, pool: &Pool, timeout: Duration) -> Call {
    let at_ms = now_ms();
    let started = Instant::now();
    let outcome = tokio::time::timeout(timeout, exchange(target, connection, pool)).await;
    let latency_us = started.elapsed().as_micros() as u64;
    let mut call = Call {
        at_ms,
        connection,
        latency_us,
        status: None,
        failure: None,
        closed_by_server: false,
        served_by: None,
    };
    match outcome {
        Err(_) => call.failure = Some(Failure::Timeout),
        Ok(Err(failure)) => call.failure = Some(failure),
        Ok(Ok(answer)) => {
            call.status = Some(answer.status);
            // A new connection asks for its own close; only on a kept-alive one is the
            // server's (or its draining proxy's) close news.
            call.closed_by_server = answer.closed && connection == Connection::Reused;
            call.served_by = answer.served_by;
            if answer.status >= 400 {
                call.failure = Some(Failure::Status(answer.status));
            }
        }
    }
    call
}

struct Answer {
    status: u16,
    closed: bool,
    served_by: Option<String>,
}

async fn exchange(target: &Target, connection: Connection, pool: &Pool) -> Result<Answer, Failure> {
    // The client sends on new and reused connections only (admissions are the drill's own).
    let reuse = connection == Connection::Reused;
    let idle = if reuse {
        pool.lock().ok().and_then(|mut idle| {
            while let Some(sender) = idle.pop() {
                if sender.is_ready() {
                    return Some(sender);
                }
            }
            None
        })
    } else {
        None
    };
    let mut sender = match idle {
        Some(sender) => sender,
        None => connect(target.address).await?,
    };
    let request = Request::get(&target.path)
        .header(hyper::header::HOST, &target.host)
        .header(hyper::header::USER_AGENT, "meshlife-drill")
        .header(
            hyper::header::CONNECTION,
            if reuse { "keep-alive" } else { "close" },
        )
        .body(Empty::<Bytes>::new())
        .map_err(|error| Failure::Other(error.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|error| hyper_failure(&error))?;
    let status = response.status().as_u16();
    let closed = response
        .headers()
        .get(hyper::header::CONNECTION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("close"));
    let served_by = response
        .headers()
        .get("x-served-by")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    response
        .into_body()
        .collect()
        .await
        .map_err(|error| hyper_failure(&error))?;
    if connection == Connection::Reused
        && !closed
        && !sender.is_closed()
        && let Ok(mut idle) = pool.lock()
    {
        idle.push(sender);
    }
    Ok(Answer {
        status,
        closed,
        served_by,
    })
}

async fn connect(address: SocketAddr) -> Result<SendRequest<Empty<Bytes>>, Failure> {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|error| io_failure(&error))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| hyper_failure(&error))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

fn io_failure(error: &std::io::Error) -> Failure {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::ConnectionRefused => Failure::Refused,
        ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe
        | ErrorKind::UnexpectedEof => Failure::Reset,
        ErrorKind::TimedOut => Failure::Timeout,
        _ => Failure::Other(error.to_string()),
    }
}

fn hyper_failure(error: &hyper::Error) -> Failure {
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return Failure::Reset;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_failure(io);
        }
        source = cause.source();
    }
    Failure::Other(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_an_address_and_a_path() {
        let target = Target::parse("http://10.96.0.12:8080/healthz", Some("web.shop")).unwrap();
        assert_eq!(target.address.to_string(), "10.96.0.12:8080");
        assert_eq!(
            (target.host.as_str(), target.path.as_str()),
            ("web.shop", "/healthz")
        );
        let target = Target::parse("http://127.0.0.1:80", None).unwrap();
        assert_eq!(
            (target.host.as_str(), target.path.as_str()),
            ("127.0.0.1:80", "/")
        );
        let error = Target::parse("http://web.shop:8080/", None).unwrap_err();
        assert!(error.contains("is not ADDRESS:PORT"), "{error}");
        let error = Target::parse("https://10.0.0.1:443/", None).unwrap_err();
        assert!(error.contains("plain HTTP"), "{error}");
    }
}
