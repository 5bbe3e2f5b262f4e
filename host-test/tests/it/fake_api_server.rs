//! A fake Kubernetes API server on a real loopback socket, serving the objects of a YAML stream
//! as the API server's REST paths do: lists and gets of core (`/api/v1/...`) and group
//! (`/apis/GROUP/VERSION/...`) resources, namespaced or not, filtered by `labelSelector`
//! (`key=value` terms) and `fieldSelector` (`metadata.name`, `metadata.namespace`,
//! `involvedObject.kind`, `involvedObject.name`), and `/version`. Plain HTTP/1.1, one answer per
//! connection; the kubeconfig it writes points at it. Used by `cli_cluster_facts.rs` and
//! `cli_diagnose.rs`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{Value, json};

/// The resource names served, and their kinds.
const RESOURCES: [(&str, &str); 13] = [
    ("pods", "Pod"),
    ("services", "Service"),
    ("statefulsets", "StatefulSet"),
    ("events", "Event"),
    ("namespaces", "Namespace"),
    ("nodes", "Node"),
    ("configmaps", "ConfigMap"),
    ("deployments", "Deployment"),
    ("replicasets", "ReplicaSet"),
    ("daemonsets", "DaemonSet"),
    ("jobs", "Job"),
    ("rollouts", "Rollout"),
    (
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
    ),
];

pub struct FakeApiServer {
    pub address: SocketAddr,
    /// Each request as `METHOD /path?query`.
    requests: Arc<Mutex<Vec<String>>>,
    stopping: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl FakeApiServer {
    /// Serves the objects of `yaml` (documents separated by `---`), the API server's version
    /// being `git_version`, until dropped.
    pub fn serve(yaml: &str, git_version: &str) -> FakeApiServer {
        let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(yaml)
            .map(|document| <Value as serde::Deserialize>::deserialize(document).unwrap())
            .filter(|value| !value.is_null())
            .collect();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let served = Arc::new((objects, git_version.to_string()));
        let (log, stop) = (Arc::clone(&requests), Arc::clone(&stopping));
        let accepting = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (served, log) = (Arc::clone(&served), Arc::clone(&log));
                std::thread::spawn(move || answer(stream, &served.0, &served.1, &log));
            }
        });
        FakeApiServer {
            address,
            requests,
            stopping,
            accepting: Some(accepting),
        }
    }

    /// A kubeconfig naming this server (context `fake`), written into `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("fake.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: \
             http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    \
             namespace: shop\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.address
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The paths asked for so far, with their queries, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|request| {
                request
                    .split_once(' ')
                    .map_or("", |(_, path)| path)
                    .to_string()
            })
            .collect()
    }

    /// The requests so far as `METHOD /path?query`, in order.
    pub fn requests_with_methods(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(self.address);
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

fn answer(mut stream: TcpStream, objects: &[Value], git_version: &str, log: &Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let method = head.split_whitespace().next().unwrap_or("GET").to_string();
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    log.lock().unwrap().push(format!("{method} {target}"));
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut request_body = vec![0u8; length];
    if stream.read_exact(&mut request_body).is_err() {
        return;
    }
    let (status, body) = match method.as_str() {
        "GET" => respond(&target, objects, git_version),
        "POST" if target.starts_with("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews") => {
            read_only_review(&request_body)
        }
        _ => (
            405,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "reason": "MethodNotAllowed", "code": 405,
                   "message": format!("the fake API server is read-only: {method} {target}")})
            .to_string(),
        ),
    };
    let reason = match status {
        200 | 201 => "OK",
        405 => "Method Not Allowed",
        _ => "Not Found",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A SelfSubjectAccessReview answered for an identity that may read and nothing else.
fn read_only_review(body: &[u8]) -> (u16, String) {
    let mut review: Value = serde_json::from_slice(body).unwrap_or_else(|_| json!({}));
    let verb = review
        .pointer("/spec/resourceAttributes/verb")
        .and_then(Value::as_str)
        .unwrap_or("");
    let allowed = matches!(verb, "get" | "list" | "watch");
    review["status"] = json!({"allowed": allowed});
    (201, review.to_string())
}

fn not_found(what: &str) -> (u16, String) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
               "code": 404, "message": format!("{what} not found")})
        .to_string(),
    )
}

fn respond(target: &str, objects: &[Value], git_version: &str) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path == "/version" {
        let minor = git_version.split('.').nth(1).unwrap_or("0");
        return (
            200,
            json!({"major": "1", "minor": minor, "gitVersion": git_version,
                   "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                   "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"})
            .to_string(),
        );
    }
    let (api_version, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
        ("v1".to_string(), rest)
    } else if let Some(rest) = path.strip_prefix("/apis/") {
        let mut parts = rest.splitn(3, '/');
        let (group, version, rest) = (parts.next(), parts.next(), parts.next());
        match (group, version, rest) {
            (Some(group), Some(version), Some(rest)) => (format!("{group}/{version}"), rest),
            _ => return not_found(path),
        }
    } else {
        return not_found(path);
    };
    let segments: Vec<&str> = rest.split('/').filter(|part| !part.is_empty()).collect();
    let (namespace, resource, name) = match segments.as_slice() {
        ["namespaces", namespace, resource] => (Some(*namespace), *resource, None),
        ["namespaces", namespace, resource, name] => (Some(*namespace), *resource, Some(*name)),
        [resource] => (None, *resource, None),
        [resource, name] => (None, *resource, Some(*name)),
        _ => return not_found(path),
    };
    let Some((_, kind)) = RESOURCES.iter().find(|(plural, _)| *plural == resource) else {
        return not_found(path);
    };
    let text = |object: &Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let parameters = query_parameters(query);
    let selected = |object: &&Value| {
        object.get("kind").and_then(Value::as_str) == Some(kind)
            && namespace.is_none_or(|namespace| text(object, "/metadata/namespace") == namespace)
            && name.is_none_or(|name| text(object, "/metadata/name") == name)
            && parameters.iter().all(|(key, value)| match key.as_str() {
                "labelSelector" => value.split(',').all(|term| match term.split_once('=') {
                    Some((label, wanted)) => {
                        text(
                            object,
                            &format!("/metadata/labels/{}", label.replace('/', "~1")),
                        ) == wanted
                    }
                    None => true,
                }),
                "fieldSelector" => value.split(',').all(|term| match term.split_once('=') {
                    Some((field, wanted)) => {
                        text(object, &format!("/{}", field.replace('.', "/"))) == wanted
                    }
                    None => true,
                }),
                _ => true,
            })
    };
    let found: Vec<&Value> = objects.iter().filter(selected).collect();
    if name.is_some() {
        return match found.first() {
            Some(object) => (200, object.to_string()),
            None => not_found(&format!("{resource} \"{}\"", name.unwrap_or(""))),
        };
    }
    (
        200,
        json!({"apiVersion": api_version, "kind": format!("{kind}List"),
               "metadata": {"resourceVersion": "1"}, "items": found})
        .to_string(),
    )
}

/// `labelSelector=app%3Dweb&limit=500` -> [("labelSelector", "app=web"), ("limit", "500")].
fn query_parameters(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (decoded(key), decoded(value)))
        .collect()
}

fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' if at + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        at += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
