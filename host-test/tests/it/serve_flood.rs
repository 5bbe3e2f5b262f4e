//! A flood of connections that never complete a TLS handshake, idle after one, or trickle a
//! request head, from one peer: the callers that do complete handshakes keep being answered,
//! because the flood's connections give way at --max-connections instead of holding the
//! engine's calls in the kernel's backlog until its handshake timeout. And a caller that leaves
//! an idle connection behind each call, as Kyverno's service calls do: its leftovers give way,
//! never its calls in flight.

use crate::serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serve_support::{Authority, Client, SecretVolume, Server, runtime};

const KEY: &str = r#"{"review":{"kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","namespace":"shop","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}},"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}},"parameters":{}}"#;

#[test]
fn a_connection_flood_from_one_peer_gives_way_to_callers_that_send_requests() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    // The flood's handshakes and heads would hold their slots for two minutes: far beyond the
    // client's own patience below, so a caller that had to wait for one would fail.
    let server = Server::start(
        &volume,
        false,
        &[
            "--max-connections",
            "32",
            "--handshake-timeout",
            "120s",
            "--read-timeout",
            "120s",
        ],
    );
    // 96 connections that never start a handshake and 16 that send half a ClientHello.
    let mut flood: Vec<TcpStream> = (0..96)
        .map(|_| TcpStream::connect(server.routes).unwrap())
        .collect();
    for _ in 0..16 {
        let mut stream = TcpStream::connect(server.routes).unwrap();
        stream
            .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .unwrap();
        flood.push(stream);
    }
    let client = Client::new(server.routes, &ca, None);
    let answered = runtime().block_on(async {
        let mut answered = 0;
        for _ in 0..10 {
            let reply = tokio::time::timeout(Duration::from_secs(20), client.validate(&[KEY]))
                .await
                .expect("a caller was kept waiting behind the flood")
                .unwrap();
            assert_eq!(reply["response"]["items"][0]["key"], KEY, "{reply}");
            answered += 1;
        }
        answered
    });
    assert_eq!(answered, 10);
    let shed = server.metric("meshlife_refusals_total{reason=\"connection_shed\"}");
    assert!(shed >= 10.0, "{}", server.metrics());
    // The flood's oldest connections were closed by the server: reading them ends.
    let mut closed = 0;
    for stream in &mut flood {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buffer = [0u8; 64];
        match stream.read(&mut buffer) {
            Ok(0) => closed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            _ => {}
        }
    }
    assert!(closed >= 10, "{closed} of the flood's connections closed");
    assert!(
        server.metric("meshlife_connections_open") <= 33.0,
        "{}",
        server.metrics()
    );
}

#[test]
fn a_caller_leaving_a_connection_behind_each_call_keeps_every_call_in_flight() {
    let ca = Authority::new("meshlife-test-ca");
    let volume = SecretVolume::new(&ca.server(), &ca.cert_pem);
    let server = Server::start(&volume, false, &["--max-connections", "8"]);
    let client = std::sync::Arc::new(Client::new(server.routes, &ca, None));
    const CALLERS: usize = 4;
    const CALLS: usize = 20;
    let failures = runtime().block_on(async {
        let mut callers = Vec::new();
        for _ in 0..CALLERS {
            let client = std::sync::Arc::clone(&client);
            callers.push(tokio::spawn(async move {
                // Each call on a new connection, kept open and idle afterwards.
                let mut leftovers = Vec::new();
                let mut failures = Vec::new();
                for _ in 0..CALLS {
                    let answered = async {
                        let mut connection = client.connect().await?;
                        let reply = connection
                            .post(
                                "/validate",
                                meshlife::commands::bench::client::provider_request(&[KEY]),
                            )
                            .await?;
                        anyhow::ensure!(reply.status == 200, "status {}", reply.status);
                        Ok(connection)
                    };
                    match answered.await {
                        Ok(connection) => leftovers.push(connection),
                        Err(error) => failures.push(error.to_string()),
                    }
                }
                failures
            }));
        }
        let mut failures = Vec::new();
        for caller in callers {
            failures.extend(caller.await.unwrap());
        }
        failures
    });
    assert!(
        failures.is_empty(),
        "calls cut for the caller's own leftovers: {failures:?}"
    );
    let idle = server.metric("meshlife_refusals_total{reason=\"idle_shed\"}");
    let shed = server.metric("meshlife_refusals_total{reason=\"connection_shed\"}");
    assert!(
        // Most of the 80 leftovers made way for later calls; none of the calls did.
        idle >= (CALLERS * CALLS / 2) as f64 && shed == 0.0,
        "{}",
        server.metrics()
    );
}
