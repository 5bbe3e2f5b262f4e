//! A local server that speaks the Kubernetes list/watch protocol for Namespaces, as much of it
//! as a client's reflector uses: `GET /api/v1/namespaces` answers a NamespaceList with its
//! resourceVersion, and `?watch=true` streams watch events (one JSON object per line,
//! chunked) as the test changes the Namespaces. Plain HTTP on loopback; the kubeconfig it
//! writes points at it.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Default)]
struct State {
    namespaces: BTreeMap<String, Value>,
    resource_version: u64,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
    lists: usize,
    watches: usize,
    gets: usize,
    /// Answer every request with 403, as an API server does without the RBAC.
    forbidden: bool,
}

pub struct KubeApi {
    pub address: SocketAddr,
    state: Arc<Mutex<State>>,
    runtime: tokio::runtime::Runtime,
}

impl KubeApi {
    /// Serves `namespaces` (Namespace objects) until dropped.
    pub fn start(namespaces: &[Value]) -> KubeApi {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let served = Arc::clone(&state);
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&served);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(answer(&state, request)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let api = KubeApi {
            address,
            state,
            runtime,
        };
        for namespace in namespaces {
            api.apply(namespace.clone());
        }
        api
    }

    pub fn forbid(&self) {
        self.state.lock().unwrap().forbidden = true;
    }

    /// Adds or replaces a Namespace, telling every open watch.
    pub fn apply(&self, namespace: Value) {
        self.store(namespace, true);
    }

    /// Adds a Namespace that only a GET finds: the watch lags behind it.
    pub fn apply_unwatched(&self, namespace: Value) {
        self.store(namespace, false);
    }

    fn store(&self, mut namespace: Value, tell_watches: bool) {
        let mut state = self.state.lock().unwrap();
        state.resource_version += 1;
        let version = state.resource_version.to_string();
        namespace["apiVersion"] = json!("v1");
        namespace["kind"] = json!("Namespace");
        namespace["metadata"]["resourceVersion"] = json!(version);
        let name = namespace["metadata"]["name"].as_str().unwrap().to_string();
        let kind = if state.namespaces.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let event = format!("{}\n", json!({"type": kind, "object": namespace}));
        if tell_watches {
            state
                .watchers
                .retain(|watcher| watcher.send(Bytes::from(event.clone())).is_ok());
        }
        state.namespaces.insert(name, namespace);
    }

    /// (lists, watches) requested so far.
    pub fn requests(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap();
        (state.lists, state.watches)
    }

    /// GETs of one Namespace so far.
    pub fn gets(&self) -> usize {
        self.state.lock().unwrap().gets
    }

    /// A kubeconfig naming this server, written into `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: \
             http://{}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: \
             local\ncurrent-context: local\nusers:\n- name: local\n  user: {{}}\n",
            self.address
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.state.lock().unwrap().watchers.clear();
        let _ = &self.runtime;
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn answer(state: &Arc<Mutex<State>>, request: Request<hyper::body::Incoming>) -> Response<Body> {
    let query = request.uri().query().unwrap_or("").to_string();
    let mut state = state.lock().unwrap();
    if state.forbidden {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "namespaces is forbidden: User \"system:serviceaccount:meshlife-system:meshlife\" cannot list resource \"namespaces\"",
            "reason": "Forbidden", "code": 403});
        return json_answer(StatusCode::FORBIDDEN, status.to_string());
    }
    if let Some(name) = request.uri().path().strip_prefix("/api/v1/namespaces/") {
        state.gets += 1;
        return match state.namespaces.get(name) {
            Some(namespace) => json_answer(StatusCode::OK, namespace.to_string()),
            None => json_answer(
                StatusCode::NOT_FOUND,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404,
                    "message": format!("namespaces \"{name}\" not found")})
                .to_string(),
            ),
        };
    }
    if request.uri().path() != "/api/v1/namespaces" {
        return json_answer(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "code": 404}).to_string(),
        );
    }
    if query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1")
    {
        state.watches += 1;
        let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
        state.watchers.push(sender);
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let chunk = receiver.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(chunk)), receiver))
        });
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        return response;
    }
    state.lists += 1;
    let list = json!({
        "apiVersion": "v1",
        "kind": "NamespaceList",
        "metadata": {"resourceVersion": state.resource_version.to_string()},
        "items": state.namespaces.values().collect::<Vec<_>>(),
    });
    json_answer(StatusCode::OK, list.to_string())
}

fn json_answer(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
