//! Shutdown and connection handling of `meshlife serve` under load: SIGTERM while several
//! keep-alive clients send a steady stream; idle and slow connections.

use crate::serve_support;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use meshlife::commands::bench::client::provider_request;
use serde_json::Value;
use serve_support::{Authority, Client, SecretVolume, Server, runtime};

const KEY: &str = r#"{"review":{"kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","namespace":"shop","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":2,"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}},"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}},"parameters":{}}"#;

/// What one client saw.
#[derive(Default)]
struct Tally {
    sent: u64,
    answered: u64,
    /// Requests that were sent and got no valid answer: must stay empty.
    lost: Vec<String>,
    /// Connections refused before any request was written (the listener had closed).
    refused_connects: u64,
    closes_seen: u64,
}

#[test]
fn sigterm_under_load_answers_every_request_and_exits_in_time() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let client_leaf = ca.client();
    let drain_delay = Duration::from_secs(2);
    let shutdown_timeout = Duration::from_secs(5);
    let mut server = Server::start(
        &volume,
        true,
        &["--drain-delay", "2s", "--shutdown-timeout", "5s"],
    );
    let client = Arc::new(Client::new(server.routes, &ca, Some(&client_leaf)));
    let runtime = runtime();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let client = Arc::clone(&client);
            let stop = Arc::clone(&stop);
            runtime.spawn(async move {
                let mut tally = Tally::default();
                let mut connection = None;
                while !stop.load(Ordering::Relaxed) {
                    if connection.as_ref().is_none_or(
                        |open: &meshlife::commands::bench::client::Connection| !open.is_open(),
                    ) {
                        match client.connect().await {
                            Ok(opened) => connection = Some(opened),
                            Err(_) => {
                                // Nothing was sent on it: after the listener closed, expected.
                                tally.refused_connects += 1;
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                continue;
                            }
                        }
                    }
                    let open = connection.as_mut().unwrap();
                    tally.sent += 1;
                    match open.post("/validate", provider_request(&[KEY])).await {
                        Ok(reply) => {
                            let valid = reply.status == 200
                                && serde_json::from_slice::<Value>(&reply.body).is_ok_and(|body| {
                                    body["response"]["items"][0]["value"].is_array()
                                });
                            if valid {
                                tally.answered += 1;
                            } else {
                                tally.lost.push(format!(
                                    "invalid answer: {}",
                                    String::from_utf8_lossy(&reply.body)
                                ));
                            }
                            if reply.closes() {
                                tally.closes_seen += 1;
                                connection = None;
                            }
                        }
                        Err(error) => {
                            tally.lost.push(format!("{error:#}"));
                            connection = None;
                        }
                    }
                }
                tally
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(1500));
    let before = server.metric("meshlife_requests_total{route=\"validate\",outcome=\"answered\"}");
    assert!(
        before > 50.0,
        "only {before} requests answered before the signal"
    );
    let signalled = Instant::now();
    server.signal("TERM");
    // /readyz fails at once, while requests are still answered.
    let mut readiness_failed_after = None;
    while signalled.elapsed() < Duration::from_secs(1) {
        if server.health_get("/readyz").0 == 503 {
            readiness_failed_after = Some(signalled.elapsed());
            break;
        }
    }
    let readiness_failed_after =
        readiness_failed_after.expect("/readyz kept answering 200 after SIGTERM");
    assert!(
        readiness_failed_after < Duration::from_millis(500),
        "{readiness_failed_after:?}"
    );
    let during_drain =
        server.metric("meshlife_requests_total{route=\"validate\",outcome=\"answered\"}");

    let status = server
        .wait_exit(drain_delay + shutdown_timeout + Duration::from_secs(5))
        .expect("the server did not exit");
    let exited_after = signalled.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for handle in clients {
        let tally = runtime.block_on(handle).unwrap();
        total.sent += tally.sent;
        total.answered += tally.answered;
        total.lost.extend(tally.lost);
        total.refused_connects += tally.refused_connects;
        total.closes_seen += tally.closes_seen;
    }
    eprintln!(
        "drain under load: {} requests sent from 6 keep-alive clients, {} answered, {} lost; \
         /readyz 503 after {:?}; {} answered in the drain delay with Connection: close seen {} \
         times; exit {:?} after {:?} (drain delay {:?}, deadline {:?})",
        total.sent,
        total.answered,
        total.lost.len(),
        readiness_failed_after,
        during_drain - before,
        total.closes_seen,
        status.code(),
        exited_after,
        drain_delay,
        drain_delay + shutdown_timeout,
    );
    assert!(
        total.lost.is_empty(),
        "requests lost: {:?}",
        &total.lost[..total.lost.len().min(5)]
    );
    assert_eq!(total.sent, total.answered);
    assert!(total.closes_seen >= 6, "clients were not asked to close");
    assert!(status.success(), "exit {status:?}:\n{}", server.log());
    assert!(
        exited_after >= drain_delay,
        "exited before the drain delay: {exited_after:?}"
    );
    assert!(
        exited_after < drain_delay + shutdown_timeout,
        "{exited_after:?}"
    );
    let log = server.log();
    assert!(log.contains("every request answered"), "{log}");
}

#[test]
fn idle_connections_outlive_the_read_timeout_and_close_after_the_idle_timeout() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let server = Server::start(
        &volume,
        false,
        &["--read-timeout", "500ms", "--idle-timeout", "3s"],
    );
    let client = Client::new(server.routes, &ca, None);
    runtime().block_on(async {
        let mut connection = client.connect().await.unwrap();
        connection
            .post("/validate", provider_request(&[KEY]))
            .await
            .unwrap();
        // Idle four times the read timeout: a keep-alive wait is not a slow request.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(connection.is_open());
        let reply = connection
            .post("/validate", provider_request(&[KEY]))
            .await
            .unwrap();
        assert_eq!(reply.status, 200);
        // Idle past the idle timeout: closed by the server.
        tokio::time::sleep(Duration::from_millis(4500)).await;
        assert!(!connection.is_open(), "the idle connection was not closed");
    });
}

#[test]
fn a_slow_client_is_cut_off_at_the_read_timeout() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    // Plain TCP with TLS done by hand is overkill: a client that never finishes its handshake
    // is cut at the handshake timeout, and one that sends half a request at the read timeout.
    let server = Server::start(
        &volume,
        false,
        &["--read-timeout", "500ms", "--handshake-timeout", "500ms"],
    );
    let mut silent = std::net::TcpStream::connect(server.routes).unwrap();
    silent.write_all(b"\x16\x03\x01").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(server.metric("meshlife_refusals_total{reason=\"tls_handshake_timeout\"}") >= 1.0);

    let client = Client::new(server.routes, &ca, None);
    runtime().block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let raw = |partial: &'static [u8]| {
            let config = std::sync::Arc::clone(&client.config);
            let address = client.address;
            async move {
                let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
                let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
                let mut stream = tokio_rustls::TlsConnector::from(config)
                    .connect(name, tcp)
                    .await
                    .unwrap();
                stream.write_all(partial).await.unwrap();
                stream.flush().await.unwrap();
                let started = Instant::now();
                let mut answer = Vec::new();
                let read =
                    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
                        .await;
                (
                    started.elapsed(),
                    read.is_ok(),
                    String::from_utf8_lossy(&answer).into_owned(),
                )
            }
        };
        // Half a head: the connection is closed at the read timeout.
        let (elapsed, closed, _) =
            raw(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Le").await;
        assert!(closed, "a half-sent head held the connection open");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        // Half a body: answered with a systemError, then closed.
        let (elapsed, closed, answer) = raw(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"kind\"",
        )
        .await;
        assert!(closed, "a half-sent body held the connection open");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        assert!(
            answer.contains("did not arrive within --read-timeout"),
            "{answer}"
        );
    });
    assert!(server.metric("meshlife_refusals_total{reason=\"read_timeout\"}") >= 2.0);
    assert_eq!(server.health_get("/readyz").0, 200);
}
