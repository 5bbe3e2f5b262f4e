//! What a log line tells: the proxy's own moments (started, ready, draining, exiting) as
//! pilot-agent, Envoy and linkerd2-proxy write them, an app's failed connections, and streams
//! cut. Each proxy pattern names the source that writes it and the versions it was read in;
//! a pattern is matched as a substring, so a line cut short after it still counts.

use regex::Regex;
use std::sync::LazyLock;

use super::clock::Millis;

/// What a line says about its container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    ProxyStarting,
    /// The proxy's own readiness check failed (pilot-agent's "NOT ready").
    ProxyNotReady,
    ProxyReady,
    ProxyDraining,
    ProxyExiting,
    /// A failed outbound connection: refused, reset, unreachable, no upstream yet, DNS.
    ConnectionError,
    /// A request or stream cut: gRPC UNAVAILABLE, GOAWAY, RST_STREAM, WebSocket 1006, Envoy's
    /// access log flags for a connection ended mid-request.
    StreamCut,
}

impl Signal {
    pub fn phrase(self) -> &'static str {
        match self {
            Signal::ProxyStarting => "proxy starting",
            Signal::ProxyNotReady => "proxy not ready",
            Signal::ProxyReady => "proxy ready",
            Signal::ProxyDraining => "proxy draining",
            Signal::ProxyExiting => "proxy exiting",
            Signal::ConnectionError => "connection error",
            Signal::StreamCut => "stream cut",
        }
    }
}

/// A proxy's line, and where it comes from.
pub struct ProxyPattern {
    pub signal: Signal,
    pub needle: &'static str,
    pub source: &'static str,
}

/// pilot-agent's and Envoy's lines in the `istio-proxy` container, read in istio/istio at the
/// tags 1.20.0 to 1.27.0 (1.27.0 = 7359d8be): pilot-agent writes `TIME\tLEVEL\t[scope\t]msg`.
pub const ISTIO: &[ProxyPattern] = &[
    ProxyPattern {
        signal: Signal::ProxyStarting,
        needle: "Starting proxy agent",
        source: "istio pkg/envoy/agent.go (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyStarting,
        needle: "Envoy command: [",
        source: "istio pkg/envoy/proxy.go (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyNotReady,
        needle: "Envoy proxy is NOT ready",
        source: "istio pilot/cmd/pilot-agent/status/server.go handleReadyProbe, each failed \
                 /healthz/ready (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyReady,
        needle: "Envoy proxy is ready",
        source: "istio pilot/cmd/pilot-agent/status/server.go handleReadyProbe, the first \
                 passing /healthz/ready (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyReady,
        needle: "Readiness succeeded in",
        source: "istio pilot/cmd/pilot-agent/metrics/metrics.go RecordStartupTime, when Envoy \
                 first reports LIVE (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "Agent draining Proxy",
        source: "istio pkg/envoy/agent.go terminate(): \"Agent draining Proxy for termination\" \
                 (1.21-1.27), \"Agent draining Proxy\" (1.20)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "Agent draining proxy for",
        source: "istio pkg/envoy/agent.go, EXIT_ON_ZERO_ACTIVE_CONNECTIONS (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "caught ENVOY_SIGTERM",
        source: "envoy source/server/server.cc, at SIGTERM (Envoy 1.17 and later, Istio 1.9 and \
                 later, when Envoy logs at info)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "caught SIGTERM",
        source: "envoy source/server/server.cc before 1.17 (Istio 1.8 and earlier), as pasted in \
                 istio/istio#25575",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "Graceful termination period is",
        source: "istio pkg/envoy/agent.go terminate(): \"Graceful termination period is %v, \
                 starting...\" (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "handling /drain, starting drain",
        source: "istio pilot/cmd/pilot-agent/status/server.go, a native sidecar's drain (1.22-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "handling /quitquitquit",
        source: "istio pilot/cmd/pilot-agent/status/server.go: \"handling /quitquitquit, \
                 notifying pilot-agent to exit\" (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Graceful termination period complete, terminating remaining proxies",
        source: "istio pkg/envoy/agent.go terminate() (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "There are no more active connections. terminating proxy",
        source: "istio pkg/envoy/agent.go, EXIT_ON_ZERO_ACTIVE_CONNECTIONS (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Agent already drained, exiting immediately",
        source: "istio pkg/envoy/agent.go terminate() (1.21-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Agent has successfully terminated",
        source: "istio pkg/envoy/agent.go Run() (1.20-1.27)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Envoy exited",
        source: "istio pkg/envoy/agent.go: \"Envoy exited normally\", \"Envoy exited with \
                 error: %v\", \"Envoy exited with status %v\" (1.20-1.27)",
    },
];

/// linkerd2-proxy's lines in the `linkerd-proxy` container, read in linkerd/linkerd2-proxy at
/// release/v2.210.0 (stable-2.14), v2.240.0, v2.270.0 and 29637b64 (2026-08):
/// `[     0.001234s]  INFO ThreadId(01) target: message`, the time being the proxy's uptime.
pub const LINKERD: &[ProxyPattern] = &[
    ProxyPattern {
        signal: Signal::ProxyStarting,
        needle: "Admin interface on",
        source: "linkerd2-proxy linkerd2-proxy/src/main.rs (v2.210-HEAD)",
    },
    ProxyPattern {
        signal: Signal::ProxyReady,
        needle: "Certified identity",
        source: "linkerd2-proxy linkerd/app/src/lib.rs: the identity certified, the moment the \
                 admin /ready latch is released (v2.210-HEAD)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "starting shutdown",
        source: "linkerd2-proxy linkerd/signal/src/lib.rs: \"received SIGTERM, starting \
                 shutdown\" (v2.210-HEAD)",
    },
    ProxyPattern {
        signal: Signal::ProxyDraining,
        needle: "Received shutdown signal",
        source: "linkerd2-proxy linkerd2-proxy/src/main.rs (v2.210-HEAD)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Received shutdown via admin interface",
        source: "linkerd2-proxy linkerd2-proxy/src/main.rs, POST /shutdown (v2.210-HEAD)",
    },
    ProxyPattern {
        signal: Signal::ProxyExiting,
        needle: "Graceful shutdown did not complete in",
        source: "linkerd2-proxy linkerd2-proxy/src/main.rs, at LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD \
                 (v2.210-HEAD)",
    },
];

/// What an Istio proxy's drain line says beyond its signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DrainDetail {
    /// pilot-agent's `Graceful termination period is 5m10s, starting...` (pkg/envoy/agent.go
    /// terminate(), 1.20-1.27): the drain it plans before it kills Envoy, in milliseconds.
    Planned(Millis),
    /// Envoy's `caught ENVOY_SIGTERM` (source/server/server.cc, logged at warning, so under
    /// Istio's default `-l warning` too; `caught SIGTERM` before Envoy 1.17): Envoy shuts down
    /// at once, whatever drain was planned.
    EnvoySigterm,
}

/// The drain detail of an Istio proxy's line, if it has one.
pub fn drain_detail(text: &str) -> Option<DrainDetail> {
    if text.contains("caught ENVOY_SIGTERM") || text.contains("caught SIGTERM") {
        return Some(DrainDetail::EnvoySigterm);
    }
    let (_, after) = text.split_once("Graceful termination period is ")?;
    let (period, _) = after.split_once(", starting")?;
    go_duration(period).map(DrainDetail::Planned)
}

/// A Go `time.Duration` as `%v` prints it (`5m10s`, `45s`, `1h0m0s`, `1.5s`, `500ms`), in
/// milliseconds.
fn go_duration(text: &str) -> Option<Millis> {
    let mut rest = text.trim();
    let mut total = 0.0;
    if rest == "0s" {
        return Some(0);
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|end| *end > 0)?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let (unit, milliseconds) = [
            ("ms", 1.0),
            ("us", 0.001),
            ("\u{b5}s", 0.001),
            ("ns", 0.000_001),
            ("h", 3_600_000.0),
            ("m", 60_000.0),
            ("s", 1_000.0),
        ]
        .into_iter()
        .find(|(unit, _)| rest.starts_with(unit))?;
        total += number * milliseconds;
        rest = &rest[unit.len()..];
    }
    (total.is_finite() && total < 1e12).then_some(total as Millis)
}

/// Failed outbound connections as runtimes and clients word them.
static CONNECTION_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)connection refused|ECONNREFUSED|connection reset by peer|ECONNRESET|no route to host|EHOSTUNREACH|network is unreachable|ENETUNREACH|upstream connect error|no healthy upstream|temporary failure in name resolution|name or service not known|no such host|EAI_AGAIN|could not resolve host|failed to establish a new connection|connect: connection timed out|dial tcp [^ ]+: i/o timeout|Connection timed out",
    )
    .expect("a valid pattern")
});

/// Requests and streams cut: gRPC's UNAVAILABLE and transport closing, HTTP/2 GOAWAY and
/// RST_STREAM, WebSocket close 1006, and Envoy's access log response flags UC (upstream
/// connection termination) and DC (downstream connection termination) after the status code.
static STREAM_CUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)transport is closing|code = Unavailable|GOAWAY|RST_STREAM|stream reset|close 1006|\b1006\b.*(?:abnormal|closed)|abnormal closure|broken pipe|HTTP/[0-9.]+" 0 (?:DC|UC)\b|HTTP/[0-9.]+" 50[23] UC\b|" [0-9]{1,3} (?:DC|UC) (?:downstream_remote_disconnect|upstream_reset)"#,
    )
    .expect("a valid pattern")
});

/// An app's own line that it now serves: the test workload's `listening addr=[::]:8080`
/// (compat/cluster/cmd/workload), `Listening on ...` (Node, Go, Rust servers), ASP.NET Core's
/// `Now listening on: http://[::]:8080`, `Server listening ...` (Fastify, gRPC examples),
/// Spring Boot's `Started App in 2.3 seconds`, `Tomcat/Netty/Jetty/Undertow started on port`,
/// PostgreSQL's and Redis's `ready to accept connections`, Python's `Serving HTTP on`, `HTTP
/// server started`. Read only in app containers (never pilot-agent's or Envoy's lines).
static SERVING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\blistening addr=|\blistening on\b|\bserver (?:is )?listening\b|\bstarted \S+ in [0-9.]+ seconds|\b(?:tomcat|netty|jetty|undertow) started on port|\bready to accept connections\b|\bserving HTTP on\b|\bHTTP server started\b",
    )
    .expect("a valid pattern")
});

/// A line that says something failed: `error listening on :8080` is no serving line.
static FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:error|failed|failure|unable|cannot|could not)\b")
        .expect("a valid pattern")
});

/// Whether an app's line (without its time) says it now serves.
pub fn serving(text: &str) -> bool {
    SERVING.is_match(text) && !FAILURE.is_match(text)
}

/// What `text` (a line without its time) says, for a proxy of `mesh` or an app.
pub fn signal_of(
    text: &str,
    proxy: Option<&[ProxyPattern]>,
) -> Option<(Signal, Option<&'static str>)> {
    if let Some(patterns) = proxy
        && let Some(pattern) = patterns
            .iter()
            .find(|pattern| text.contains(pattern.needle))
    {
        return Some((pattern.signal, Some(pattern.source)));
    }
    if STREAM_CUT.is_match(text) {
        return Some((Signal::StreamCut, None));
    }
    if CONNECTION_ERROR.is_match(text) {
        return Some((Signal::ConnectionError, None));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_what_they_mean() {
        let istio = Some(ISTIO);
        assert_eq!(
            signal_of(
                "2024-01-15T10:00:02.499Z\tinfo\tEnvoy proxy is ready",
                istio
            )
            .map(|(signal, _)| signal),
            Some(Signal::ProxyReady)
        );
        assert_eq!(
            signal_of("dial tcp 10.96.0.1:443: connect: connection refused", None)
                .map(|(signal, _)| signal),
            Some(Signal::ConnectionError)
        );
        assert_eq!(
            signal_of(
                "rpc error: code = Unavailable desc = transport is closing",
                None
            )
            .map(|(signal, _)| signal),
            Some(Signal::StreamCut)
        );
        assert_eq!(signal_of("GET /healthz 200", None), None);
        assert_eq!(
            drain_detail(
                "2026-12-03T10:00:01.120000Z\tinfo\tGraceful termination period is 5m10s, starting..."
            ),
            Some(DrainDetail::Planned(310_000))
        );
        assert_eq!(
            drain_detail(
                "warning\tenvoy main external/envoy/source/server/server.cc:1012\tcaught ENVOY_SIGTERM\tthread=14"
            ),
            Some(DrainDetail::EnvoySigterm)
        );
        for serving_line in [
            "2026-12-05T00:33:46.907452998Z listening addr=[::]:8080 proto=http",
            "Listening on :3000",
            "2024/01/15 10:00:00 listening on port 8080",
            "info: Microsoft.Hosting.Lifetime[14] Now listening on: http://[::]:8080",
            "{\"level\":30,\"msg\":\"Server listening at http://0.0.0.0:3000\"}",
            "Started DemoApplication in 2.345 seconds (process running for 2.9)",
            "o.s.b.w.embedded.tomcat.TomcatWebServer  : Tomcat started on port 8080 (http)",
            "o.s.b.web.embedded.netty.NettyWebServer  : Netty started on port 8080",
            "LOG:  database system is ready to accept connections",
            "1:M 15 Jan 2024 10:00:00.000 * Ready to accept connections tcp",
            "Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ...",
            "HTTP server started on :8080",
        ] {
            assert!(serving(serving_line), "{serving_line}");
        }
        for other_line in [
            "error listening on :8080: address already in use",
            "loading for=8s",
            "2026-12-05T00:33:12.186299Z\tinfo\tEnvoy proxy is ready",
            "GET /healthz 200",
        ] {
            assert!(!serving(other_line), "{other_line}");
        }
        assert_eq!(go_duration("1h0m0s"), Some(3_600_000));
        assert_eq!(go_duration("1.5s"), Some(1_500));
        assert_eq!(go_duration("500ms"), Some(500));
        assert_eq!(go_duration("5x"), None);
    }
}
