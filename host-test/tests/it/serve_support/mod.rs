//! A real `meshlife serve` process for the server's tests: certificates made with rcgen, the
//! binary started on loopback ports it picks itself, its log read for the addresses, and
//! HTTPS clients over real sockets.

#![allow(dead_code)] // each test binary uses part of the support

pub mod kube_api;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshlife::commands::bench::client::{Connection, client_config, provider_request};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use serde_json::Value;

/// A CA and the certificates it signed, as PEM.
pub struct Authority {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Authority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate for localhost and 127.0.0.1.
    pub fn server(&self) -> Leaf {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate, as Gatekeeper's webhook certificate is one.
    pub fn client(&self) -> Leaf {
        let mut params = CertificateParams::new(vec![
            "gatekeeper-webhook-service.gatekeeper-system.svc".to_string(),
        ])
        .unwrap();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The files a server is started with, laid out as kubelet mounts a Secret: the names are
/// symlinks through `..data`, which points at a timestamped folder.
pub struct SecretVolume {
    pub dir: tempfile::TempDir,
    generation: usize,
}

impl SecretVolume {
    pub fn new(server: &Leaf, client_ca: &str) -> SecretVolume {
        let dir = tempfile::tempdir().unwrap();
        let mut volume = SecretVolume { dir, generation: 0 };
        volume.write(server, client_ca);
        for name in ["tls.crt", "tls.key", "ca.crt"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), volume.dir.path().join(name))
                .unwrap();
        }
        volume
    }

    /// Writes a new generation and swaps `..data` to it atomically, as kubelet does.
    pub fn write(&mut self, server: &Leaf, client_ca: &str) {
        self.generation += 1;
        let folder = format!("..2026_12_01_{:02}", self.generation);
        let path = self.dir.path().join(&folder);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("tls.crt"), &server.cert_pem).unwrap();
        std::fs::write(path.join("tls.key"), &server.key_pem).unwrap();
        std::fs::write(path.join("ca.crt"), client_ca).unwrap();
        let staging = self.dir.path().join("..data_tmp");
        let _ = std::fs::remove_file(&staging);
        std::os::unix::fs::symlink(&folder, &staging).unwrap();
        std::fs::rename(&staging, self.dir.path().join("..data")).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A running `meshlife serve`.
pub struct Server {
    child: Option<Child>,
    pub routes: SocketAddr,
    pub health: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

pub fn meshlife_binary() -> &'static str {
    env!("CARGO_BIN_EXE_meshlife")
}

impl Server {
    /// Starts the server with the volume's files and `extra` flags; waits until it is ready.
    pub fn start(volume: &SecretVolume, client_ca: bool, extra: &[&str]) -> Server {
        Server::spawn(Server::command(volume, client_ca, extra))
    }

    /// The command [`Server::start`] runs, for a test that adds to it (environment, say).
    pub fn command(volume: &SecretVolume, client_ca: bool, extra: &[&str]) -> Command {
        let mut command = Command::new(meshlife_binary());
        // A cluster of the machine's own must not be watched by a test's server.
        command
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST");
        command.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--health-listen",
            "127.0.0.1:0",
            "--tls-cert",
        ]);
        command.arg(volume.path("tls.crt"));
        command.arg("--tls-key").arg(volume.path("tls.key"));
        if client_ca {
            command.arg("--client-ca").arg(volume.path("ca.crt"));
        }
        command.args(extra);
        command
    }

    pub fn spawn(mut command: Command) -> Server {
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("meshlife serve starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (ready_sender, ready) = std::sync::mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("meshlife serve is ready") {
                    let _ = ready_sender.send(line.clone());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let line = match ready.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "meshlife serve did not become ready:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        };
        // `routes=ADDR` in text logs, `"routes":"ADDR"` in JSON ones.
        let address = |name: &str| -> SocketAddr {
            let text = format!("{name}=");
            let json = format!("\"{name}\":\"");
            let (start, end) = match line.find(&text) {
                Some(start) => (start + text.len(), ' '),
                None => (line.find(&json).unwrap() + json.len(), '"'),
            };
            line[start..]
                .split(|c: char| c == end || c.is_whitespace())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let server = Server {
            routes: address("routes"),
            health: address("health"),
            child: Some(child),
            log,
        };
        server.wait_ready();
        server
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.health_get("/readyz").0 == 200 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("/readyz never answered 200:\n{}", self.log());
    }

    /// `(status, body)` of a GET on the health port; status 0 when it does not answer.
    pub fn health_get(&self, path: &str) -> (u16, String) {
        http_get(self.health, path)
    }

    pub fn metrics(&self) -> String {
        self.health_get("/metrics").1
    }

    /// The value of one metric line (`name{labels}`), 0 when absent.
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|line| {
                line.strip_prefix(series)
                    .and_then(|rest| rest.strip_prefix(' '))
                    .and_then(|value| value.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit; `None` when it is still running after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().unwrap();
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Resident memory high-water mark of the process, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A GET over plain HTTP/1.1 with `Connection: close`; status 0 when nothing answers.
pub fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(2)) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A client of `server` trusting `ca`, presenting `client` if given.
pub struct Client {
    pub address: SocketAddr,
    pub config: Arc<rustls::ClientConfig>,
}

impl Client {
    pub fn new(address: SocketAddr, ca: &Authority, client: Option<&Leaf>) -> Client {
        let config = client_config(
            ca.cert_pem.as_bytes(),
            client.map(|leaf| (leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())),
        )
        .unwrap();
        Client { address, config }
    }

    pub async fn connect(&self) -> anyhow::Result<Connection> {
        Connection::open(self.address, "localhost", &self.config).await
    }

    /// POSTs a ProviderRequest with `keys` on a new connection; the parsed response.
    pub async fn validate(&self, keys: &[&str]) -> anyhow::Result<Value> {
        let mut connection = self.connect().await?;
        let reply = connection.post("/validate", provider_request(keys)).await?;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        Ok(serde_json::from_slice(&reply.body)?)
    }
}

/// A tokio runtime for a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// The workspace root, for the examples and rule cases.
pub fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Every rule case and every example object of Istio and Linkerd, as module inputs: what each
/// route must answer as the engine does.
pub fn rule_cases_and_examples() -> Vec<meshlife::fixtures::Fixture> {
    let mut all = meshlife::fixtures::rule_cases(&workspace().join("policy/tests/cases")).unwrap();
    let examples = [
        workspace().join("examples/istio").display().to_string(),
        workspace().join("examples/linkerd").display().to_string(),
    ];
    all.extend(meshlife::fixtures::manifest_objects(&examples, &serde_json::json!({})).unwrap());
    assert!(all.len() > 200, "{} fixtures", all.len());
    all
}
