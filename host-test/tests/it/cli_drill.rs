//! `meshlife drill` and its load pod's mode, `drill-client`: the client against a real server
//! on loopback that answers, fails, closes and resets; the drill's checks before it changes
//! anything, against the fake API server (read-only: any write would be refused and seen).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::cli_support::*;
use crate::fake_api_server::FakeApiServer;

/// Reads one request head; false when the connection ended first.
fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// A server whose answers go round: 200 (kept alive), 503, 200 with `Connection: close`, and
/// a connection closed without an answer.
fn misbehaving_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answered = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&answered);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                while read_head(&mut stream) {
                    let turn = counter.fetch_add(1, Ordering::SeqCst) % 4;
                    let answer = match turn {
                        0 => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Served-By: web-1\r\n\r\nok",
                        1 => {
                            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 19\r\n\r\nno healthy upstream"
                        }
                        2 => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        _ => return,
                    };
                    if stream.write_all(answer.as_bytes()).is_err() || turn == 2 {
                        return;
                    }
                }
            });
        }
    });
    (port, answered)
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

#[test]
fn the_drill_client_writes_every_call_with_its_outcome() {
    let (port, answered) = misbehaving_server();
    let workspace = Workspace::new();
    let target = format!("http://127.0.0.1:{port}/healthz");
    let outcome = workspace.run(&[
        "drill-client",
        "--target",
        &target,
        "--host",
        "web.shop.svc:80",
        "--rate",
        "20",
        "--duration",
        "1s",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let lines = lines(&outcome.stdout);
    assert!(
        lines[0]["started"]["atMs"].as_u64().is_some(),
        "{outcome:?}"
    );
    let calls: Vec<&Value> = lines.iter().filter_map(|line| line.get("call")).collect();
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(
        summary["sent"].as_u64(),
        Some(calls.len() as u64),
        "{summary}"
    );
    assert_eq!(summary["stoppedBy"], "duration");
    // 20 ticks a second for a second, each a call on a new and on a reused connection.
    assert!((36..=44).contains(&calls.len()), "{} calls", calls.len());
    assert!(answered.load(Ordering::SeqCst) > 0);
    let failures: Vec<&str> = calls
        .iter()
        .filter_map(|call| call["failure"]["kind"].as_str())
        .collect();
    for kind in ["status", "reset"] {
        assert!(
            failures.contains(&kind),
            "no {kind} failure in {failures:?}"
        );
    }
    assert!(
        calls
            .iter()
            .any(|call| call["status"] == 503 && call["failure"]["detail"] == 503)
    );
    assert!(calls.iter().any(|call| call["closedByServer"] == true));
    assert!(calls.iter().any(|call| call["servedBy"] == "web-1"));
    for connection in ["new", "reused"] {
        assert!(calls.iter().any(|call| call["connection"] == connection));
    }
    assert_eq!(summary["failed"].as_u64(), Some(failures.len() as u64));
}

#[test]
fn the_drill_client_counts_a_closed_port_as_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let workspace = Workspace::new();
    let target = format!("http://127.0.0.1:{port}/");
    let outcome = workspace.run(&[
        "drill-client",
        "--target",
        &target,
        "--rate",
        "5",
        "--duration",
        "500ms",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let calls: Vec<Value> = lines(&outcome.stdout)
        .into_iter()
        .filter_map(|line| line.get("call").cloned())
        .collect();
    assert!(!calls.is_empty());
    assert!(
        calls
            .iter()
            .all(|call| call["failure"]["kind"] == "refused"),
        "{calls:#?}"
    );
}

#[test]
fn bad_drill_arguments_are_refused_with_what_to_give() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", WEB);
    for (args, expected) in [
        (
            vec!["drill", "pod/web-1", "--yes"],
            "a drill restarts a Deployment, a StatefulSet or an Argo Rollout, not a pod",
        ),
        (
            vec!["drill", "web", "--yes"],
            "give the target as deployment/NAME, statefulset/NAME or rollout/NAME",
        ),
        (
            vec!["drill", "deployment/web", "--rate", "500", "--yes"],
            "--rate 500: give 1 to 200 calls per second",
        ),
        (
            vec!["drill", "deployment/web", "--settle-timeout", "1h", "--yes"],
            "more than a drill's 30 minutes",
        ),
        (
            vec!["drill-client", "--target", "http://web.shop:80/"],
            "\"web.shop:80\" is not ADDRESS:PORT",
        ),
        (
            vec!["drill", "deployment/web", "--grpc", "Ticks", "--yes"],
            "--grpc \"Ticks\": a gRPC method is /package.Service/Method",
        ),
        (
            vec![
                "drill",
                "deployment/web",
                "--grpc",
                "/a.B/C",
                "--streams",
                "0",
                "--yes",
            ],
            "--streams 0: give 1 to 50 streams",
        ),
        (
            vec!["drill", "deployment/web", "--grpc-port", "9090", "--yes"],
            "--grpc <METHOD>",
        ),
        (
            vec![
                "drill",
                "deployment/web",
                "--admission-pod",
                "pod.yaml",
                "--yes",
            ],
            "--admissions <NAMESPACE>",
        ),
        (
            vec![
                "drill",
                "deployment/web",
                "--admissions",
                "shop",
                "--websocket",
                "/ws",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "drill",
                "deployment/meshlife",
                "--admissions",
                "shop",
                "--admission-pod",
                "missing.yaml",
                "--yes",
            ],
            "--admission-pod missing.yaml: ",
        ),
        (
            vec![
                "drill",
                "deployment/meshlife",
                "--admissions",
                "shop",
                "--admission-pod",
                "web.yaml",
                "--yes",
            ],
            "--admission-pod web.yaml: kind Deployment: the drill creates a Pod (dry run)",
        ),
    ] {
        let outcome = workspace.run(&args);
        assert_eq!(outcome.code, 2, "{args:?}: {outcome:?}");
        assert!(outcome.stderr.contains(expected), "{args:?}: {outcome:?}");
    }
}

const WEB: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec:
      containers: [{name: web, image: web:1}]
"#;

fn service(name: &str, cluster_ip: &str, selector: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\n\
         spec: {{clusterIP: \"{cluster_ip}\", selector: {{{selector}}}, ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n"
    )
}

fn drill_against(cluster: &str, flags: &[&str]) -> (Outcome, Vec<String>) {
    let server = FakeApiServer::serve(cluster, "v1.35.4");
    let workspace = Workspace::new();
    let kubeconfig = server.kubeconfig(workspace.path());
    let mut args = vec![
        "drill",
        "deployment/web",
        "-n",
        "shop",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--yes",
    ];
    args.extend(flags);
    let outcome = workspace.run(&args);
    (outcome, server.requests_with_methods())
}

/// Whether anything but reads and the access reviews reached the API server.
fn changed_anything(requests: &[String]) -> Vec<&String> {
    requests
        .iter()
        .filter(|request| {
            !request.starts_with("GET ") && !request.starts_with("POST /apis/authorization.k8s.io/")
        })
        .collect()
}

#[test]
fn a_drill_it_may_not_run_is_refused_before_anything_changes() {
    let cluster = format!("{WEB}---\n{}", service("web", "10.96.0.20", "app: web"));
    let (outcome, requests) = drill_against(&cluster, &[]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    for refused in [
        "patch deployments.apps",
        "create pods",
        "delete pods",
        "create pods/eviction",
    ] {
        assert!(outcome.stderr.contains(refused), "{refused}: {outcome:?}");
    }
    assert!(
        outcome
            .stderr
            .contains("nothing was changed (`meshlife install drill-role -n shop`"),
        "{outcome:?}"
    );
    assert!(changed_anything(&requests).is_empty(), "{requests:#?}");
}

#[test]
fn the_drill_calls_through_the_one_service_that_selects_the_pods() {
    for (cluster, expected) in [
        (
            WEB.to_string(),
            "no Service in namespace shop selects the pods of deployment/web",
        ),
        (
            format!("{WEB}---\n{}", service("web", "None", "app: web")),
            "Service web has no cluster IP (a headless Service)",
        ),
        (
            format!(
                "{WEB}---\n{}---\n{}",
                service("web", "10.96.0.20", "app: web"),
                service("web-front", "10.96.0.21", "tier: front")
            ),
            "several Services select the pods of deployment/web: web, web-front; choose one with --service",
        ),
        (
            service("web", "10.96.0.20", "app: web"),
            "get deployment/web in shop: not found",
        ),
    ] {
        let (outcome, requests) = drill_against(&cluster, &[]);
        assert_eq!(outcome.code, 2, "{outcome:?}");
        assert!(outcome.stderr.contains(expected), "{expected}: {outcome:?}");
        assert!(changed_anything(&requests).is_empty(), "{requests:#?}");
    }
}

#[test]
fn install_drill_role_prints_exactly_what_the_drill_uses() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&[
        "install",
        "drill-role",
        "-n",
        "shop",
        "--service-account",
        "ci/deployer",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&outcome.stdout)
        .map(|document| <Value as serde::Deserialize>::deserialize(document).unwrap())
        .collect();
    assert_eq!(documents.len(), 2, "{outcome:?}");
    let role = &documents[0];
    assert_eq!(role["kind"], "Role");
    assert_eq!(role["metadata"]["namespace"], "shop");
    let grants: Vec<String> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| {
            let resource = rule["resources"][0].as_str().unwrap().to_string();
            rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |verb| format!("{} {resource}", verb.as_str().unwrap()))
        })
        .collect();
    for grant in [
        "patch deployments",
        "create pods",
        "delete pods",
        "get pods/log",
        "create pods/eviction",
        "watch endpointslices",
        "watch events",
    ] {
        assert!(grants.iter().any(|one| one == grant), "{grant}: {grants:?}");
    }
    assert!(!grants.iter().any(|one| one.contains("secrets")));
    let binding = &documents[1];
    assert_eq!(binding["kind"], "RoleBinding");
    assert_eq!(binding["subjects"][0]["namespace"], "ci");
    assert_eq!(binding["subjects"][0]["name"], "deployer");
}

/// A WebSocket server on loopback whose first stream is dropped mid-stream, whose second is
/// closed with 1001 "going away", and whose later ones tick until the client leaves; plain
/// requests get 200.
fn websocket_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let upgrades = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let upgrades = Arc::clone(&upgrades);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if !head.contains("upgrade: websocket") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                    return;
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                      Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                );
                let tick = [0x81u8, 4, b't', b'i', b'c', b'k'];
                let turn = upgrades.fetch_add(1, Ordering::SeqCst);
                for _ in 0..3 {
                    if stream.write_all(&tick).is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                match turn {
                    // Dropped without a close frame.
                    0 => {}
                    // Closed as a draining server closes: 1001 "going away".
                    1 => {
                        let _ = stream.write_all(&[0x88, 2, 0x03, 0xe9]);
                        let mut reply = [0u8; 8];
                        let _ = stream.read(&mut reply);
                    }
                    _ => loop {
                        if stream.write_all(&tick).is_err() {
                            return;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    },
                }
            });
        }
    });
    port
}

#[test]
fn the_drill_client_holds_websocket_streams_and_tells_a_cut_from_a_close() {
    let port = websocket_server();
    let workspace = Workspace::new();
    let target = format!("http://127.0.0.1:{port}/");
    let outcome = workspace.run(&[
        "drill-client",
        "--target",
        &target,
        "--rate",
        "2",
        "--duration",
        "1500ms",
        "--websocket",
        "/ws",
        "--streams",
        "1",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let lines = lines(&outcome.stdout);
    let opens = lines
        .iter()
        .filter(|line| line.get("streamOpen").is_some())
        .count();
    let endings: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("streamEnd"))
        .map(|end| &end["ending"])
        .collect();
    assert_eq!(opens, 3, "{outcome:?}");
    assert_eq!(
        endings,
        [
            &serde_json::json!({"kind": "cut", "detail": "closed without a close frame"}),
            &serde_json::json!({"kind": "closed", "detail": 1001}),
            &serde_json::json!({"kind": "stopped"}),
        ],
        "{outcome:?}"
    );
    let first_end = lines.iter().find_map(|line| line.get("streamEnd")).unwrap();
    assert_eq!(first_end["messages"], 3, "{first_end}");
    // The HTTP calls went on beside the streams.
    assert!(lines.iter().any(|line| line["call"]["status"] == 200));
}

/// The body of one gRPC answer, sent frame by frame from a channel; an error resets the
/// HTTP/2 stream, as a server stopped hard does.
struct GrpcBody(
    tokio::sync::mpsc::Receiver<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>,
);

impl hyper::body::Body for GrpcBody {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.0.poll_recv(context)
    }
}

/// A gRPC server (HTTP/2 without TLS, hyper's) on loopback whose first call is reset after
/// three messages, whose second ends with status OK, whose third is refused at once with
/// status 14 UNAVAILABLE (a trailers-only answer), and whose later ones tick until the client
/// leaves.
fn grpc_server() -> u16 {
    use hyper::body::Frame;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let calls = Arc::clone(&calls);
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let turn = calls.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(request.uri().path(), "/meshlife.Stream/Ticks");
                        assert_eq!(request.headers()["content-type"], "application/grpc");
                        let (frames, body) = tokio::sync::mpsc::channel(16);
                        let mut answer =
                            hyper::Response::builder().header("content-type", "application/grpc");
                        if turn == 2 {
                            answer = answer
                                .header("grpc-status", "14")
                                .header("grpc-message", "no healthy upstream");
                            drop(frames);
                        } else {
                            tokio::spawn(async move {
                                let tick = bytes::Bytes::from_static(&[
                                    0, 0, 0, 0, 4, b't', b'i', b'c', b'k',
                                ]);
                                for round in 0.. {
                                    if round == 3 && turn == 0 {
                                        let _ = frames
                                            .send(Err(std::io::Error::other("stopped hard")))
                                            .await;
                                        return;
                                    }
                                    if round == 3 && turn == 1 {
                                        let mut trailers = hyper::HeaderMap::new();
                                        trailers.insert("grpc-status", "0".parse().unwrap());
                                        let _ = frames.send(Ok(Frame::trailers(trailers))).await;
                                        return;
                                    }
                                    if frames.send(Ok(Frame::data(tick.clone()))).await.is_err() {
                                        return;
                                    }
                                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                                }
                            });
                        }
                        std::future::ready(answer.body(GrpcBody(body)))
                    },
                );
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                    .await;
                });
            }
        });
    });
    port
}

#[test]
fn the_drill_client_holds_grpc_streams_and_tells_a_cut_from_an_end() {
    let grpc_port = grpc_server();
    let http_port = websocket_server();
    let workspace = Workspace::new();
    let target = format!("http://127.0.0.1:{http_port}/");
    let grpc = format!("http://127.0.0.1:{grpc_port}/meshlife.Stream/Ticks");
    let outcome = workspace.run(&[
        "drill-client",
        "--target",
        &target,
        "--rate",
        "2",
        "--duration",
        "1500ms",
        "--grpc",
        &grpc,
        "--grpc-authority",
        "ticks.shop.svc:9090",
        "--streams",
        "1",
    ]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let lines = lines(&outcome.stdout);
    let failed_attempts: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("streamOpen"))
        .map(|open| &open["failedAttempts"])
        .collect();
    // The third call's UNAVAILABLE is an open that failed, tried again.
    assert_eq!(failed_attempts, [0, 0, 1], "{outcome:?}");
    let ends: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("streamEnd"))
        .collect();
    let endings: Vec<&str> = ends
        .iter()
        .map(|end| end["ending"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(endings, ["cut", "ended", "stopped"], "{outcome:?}");
    assert_eq!(ends[0]["messages"], 3, "{outcome:?}");
    assert_eq!(ends[1]["messages"], 3, "{outcome:?}");
    let reason = ends[0]["ending"]["detail"].as_str().unwrap();
    assert!(reason.contains("stream error"), "{reason}");
    assert!(lines.iter().any(|line| line["call"]["status"] == 200));
}

#[test]
fn a_grpc_drill_finds_the_services_grpc_port_or_says_to_give_it() {
    let cluster = format!("{WEB}---\n{}", service("web", "10.96.0.20", "app: web"));
    let (outcome, requests) = drill_against(&cluster, &["--grpc", "/meshlife.Stream/Ticks"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "Service web has no gRPC port (appProtocol grpc, or a name grpc or grpc-*): give --grpc-port"
        ),
        "{outcome:?}"
    );
    assert!(changed_anything(&requests).is_empty(), "{requests:#?}");
    // With the gRPC port found (by appProtocol, whatever its name), the drill goes on to its
    // access review, which the read-only fake refuses.
    let with_grpc = cluster.replace(
        "ports: [{name: http, port: 80, targetPort: 8080}]",
        "ports: [{name: http, port: 80, targetPort: 8080}, {name: ticks, port: 9090, appProtocol: grpc}]",
    );
    let (outcome, _) = drill_against(&with_grpc, &["--grpc", "/meshlife.Stream/Ticks"]);
    assert!(outcome.stderr.contains("the drill may not"), "{outcome:?}");
}

const ROLLOUT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {canary: {}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1}]
"#;

#[test]
fn an_argo_rollout_is_drilled_with_its_own_permissions() {
    let drill = |cluster: &str| {
        let server = FakeApiServer::serve(cluster, "v1.35.4");
        let workspace = Workspace::new();
        let kubeconfig = server.kubeconfig(workspace.path());
        let outcome = workspace.run(&[
            "drill",
            "rollout/web",
            "-n",
            "shop",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--yes",
        ]);
        (outcome, server.requests_with_methods())
    };
    let service = service("web", "10.96.0.20", "app: web");
    // Read through argoproj.io; the access review asks for the Rollout's verbs, not a
    // Deployment's.
    let (outcome, requests) = drill(&format!("{ROLLOUT}---\n{service}"));
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("may not patch rollouts.argoproj.io, create pods"),
        "{outcome:?}"
    );
    assert!(!outcome.stderr.contains("deployments.apps"), "{outcome:?}");
    assert!(
        requests.iter().any(|request| request
            .starts_with("GET /apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/web")),
        "{requests:#?}"
    );
    assert!(changed_anything(&requests).is_empty(), "{requests:#?}");
    // Without the Rollout (or its CRD), and with a template held elsewhere.
    let (outcome, _) = drill(&service);
    assert!(
        outcome
            .stderr
            .contains("a rollout target needs Argo Rollouts' CRD (rollouts.argoproj.io)"),
        "{outcome:?}"
    );
    let by_reference = ROLLOUT.replace(
        "  strategy: {canary: {}}",
        "  strategy: {canary: {}}\n  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: web}",
    );
    let (outcome, _) = drill(&format!("{by_reference}---\n{service}"));
    assert!(
        outcome
            .stderr
            .contains("rollout/web takes its pod template from spec.workloadRef"),
        "{outcome:?}"
    );
}
