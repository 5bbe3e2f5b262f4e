//! The Namespaces that `POST /admission` puts into each review as `namespaceObject`.
//!
//! An AdmissionReview carries no Namespace (serving.md §4.1), yet whether a proxy is coming
//! is decided by the Namespace's labels. Gatekeeper and Kyverno add it from their own caches;
//! a plain webhook must keep one. This is kube-rs's reflector over a Namespace watch: one list,
//! then a watch, relisting when the API server says the watch is too old.
//!
//! A Namespace the watch has not delivered yet (created a moment before its workload) is
//! fetched from the API server. Without a Kubernetes configuration, or with
//! `--no-namespace-watch`, no Namespace is added and the parameters decide
//! (`injectedNamespaces` and the rest), as they do for `meshlife check` without the Namespace
//! in its input. A configuration that is there but does not work (a certificate refused, a
//! server that cannot be reached, RBAC that forbids the list) stops the server at start, with
//! the reason: serving on would judge every workload without its Namespace, silently. `/readyz`
//! waits for the watch's first list; a watch that fails later (the API server restarting) is
//! retried with backoff and keeps the Namespaces it holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::cluster::reader::Target;
use crate::terminal::error_chain;

/// Where the watch stands, for `/readyz` and the logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchState {
    /// Not watching: the parameters decide.
    Off(String),
    /// Started; the first list has not come back.
    Listing,
    /// Listed (and watching).
    Synced,
    /// The list or watch failed; retried with backoff. The parameters decide meanwhile.
    Failing(String),
}

pub struct NamespaceWatch {
    store: Option<Store<Namespace>>,
    /// For a Namespace the watch has not delivered yet (created in the same `kubectl apply`
    /// as the workload, a moment before it).
    api: Option<kube::Api<Namespace>>,
    state: Arc<Mutex<WatchState>>,
    /// Whether a list ever came back: the API server answers, so a Namespace the watch lacks
    /// is worth fetching even while a resumed watch has delivered nothing since an error.
    listed_once: Arc<AtomicBool>,
}

/// How long a Namespace the watch lacks is waited for from the API server: well inside the
/// webhook's timeout, and the parameters decide when it passes.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

impl NamespaceWatch {
    pub fn off(reason: &str) -> NamespaceWatch {
        tracing::info!(
            reason,
            "no Namespace watch: POST /admission judges with the parameters' namespace facts"
        );
        NamespaceWatch {
            store: None,
            api: None,
            state: Arc::new(Mutex::new(WatchState::Off(reason.to_string()))),
            listed_once: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the watch when a Kubernetes configuration is found; must run inside the runtime.
    /// A configuration that is there but does not work (a certificate refused, a server that
    /// cannot be reached, RBAC that forbids listing Namespaces) is an error: serving without
    /// the Namespaces would judge every workload as if its Namespace had no labels, silently.
    /// With `target` (`--kubeconfig`, `--context`), that cluster is watched.
    pub async fn start(target: Option<&Target>) -> Result<NamespaceWatch, String> {
        let source = match target {
            Some(target) => match (&target.kubeconfig, &target.context) {
                (Some(path), _) => format!("--kubeconfig {}", path.display()),
                (None, Some(context)) => format!("--context {context}"),
                (None, None) => "--from-cluster".to_string(),
            },
            None => match configuration_source() {
                Some(source) => source,
                None => {
                    return Ok(NamespaceWatch::off(
                        "no Kubernetes configuration (no KUBECONFIG, ~/.kube/config or \
                         in-cluster service-account token)",
                    ));
                }
            },
        };
        let unusable = |error: String| {
            format!(
                "the Kubernetes configuration of {source} cannot be used to watch Namespaces: \
                 {error}. Fix it, or pass --no-namespace-watch to judge with the constraints' \
                 namespace facts (injectedNamespaces...)"
            )
        };
        let config = match target {
            Some(target) => {
                crate::cluster::reader::configuration(target)
                    .await
                    .map_err(unusable)?
                    .0
            }
            None => kube::Config::infer()
                .await
                .map_err(|error| unusable(error_chain(&error)))?,
        };
        let client =
            kube::Client::try_from(config).map_err(|error| unusable(error_chain(&error)))?;
        let api: kube::Api<Namespace> = kube::Api::all(client);
        first_list(&api).await.map_err(unusable)?;
        let fetcher = api.clone();
        let (store, writer) = reflector::store();
        let state = Arc::new(Mutex::new(WatchState::Listing));
        // managedFields are most of a Namespace's metadata and never read: not kept.
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|namespace| namespace.metadata.managed_fields = None)
            .reflect(writer);
        let listed_once = Arc::new(AtomicBool::new(false));
        tokio::spawn(follow(events, Arc::clone(&state), Arc::clone(&listed_once)));
        tracing::info!(%source, "watching Namespaces for POST /admission");
        Ok(NamespaceWatch {
            store: Some(store),
            api: Some(fetcher),
            state,
            listed_once,
        })
    }

    pub fn state(&self) -> WatchState {
        self.state
            .lock()
            .map(|state| state.clone())
            .unwrap_or(WatchState::Listing)
    }

    /// `Err` until the first list has come back: an answer before that would judge every
    /// object as if its Namespace had no labels. Once listed, a failing watch keeps what it
    /// holds and stays ready.
    pub fn readiness(&self) -> Result<(), String> {
        match self.state() {
            WatchState::Off(_) | WatchState::Synced => Ok(()),
            _ if self.listed_once.load(Ordering::Relaxed) => Ok(()),
            WatchState::Failing(reason) => Err(format!(
                "the first Namespace list failed (retried with backoff): {reason}"
            )),
            WatchState::Listing => Err("waiting for the first Namespace list".into()),
        }
    }

    /// The Namespace `name` as the module reads `namespaceObject`: from the watch, or, when
    /// the watch has listed once but not delivered this one, from the API server.
    pub async fn get(&self, name: &str) -> Option<Value> {
        if name.is_empty() {
            return None;
        }
        let store = self.store.as_ref()?;
        if let Some(namespace) = store.get(&ObjectRef::new(name)) {
            return Some(namespace_object(&namespace));
        }
        // Only once a list came back: a watch that never worked (say, forbidden) would fail
        // this too, on every admission.
        if !self.listed_once.load(Ordering::Relaxed) {
            return None;
        }
        let api = self.api.as_ref()?;
        match tokio::time::timeout(FETCH_TIMEOUT, api.get_opt(name)).await {
            Ok(Ok(Some(namespace))) => {
                tracing::debug!(namespace = name, "Namespace fetched ahead of the watch");
                Some(namespace_object(&namespace))
            }
            Ok(Ok(None)) => None,
            Ok(Err(error)) => {
                tracing::warn!(namespace = name, %error, "Namespace fetch failed; the parameters decide");
                None
            }
            Err(_) => {
                tracing::warn!(namespace = name, timeout = ?FETCH_TIMEOUT, "Namespace fetch timed out; the parameters decide");
                None
            }
        }
    }

    /// The watch's state and size, in Prometheus text, for `/metrics`.
    pub fn metrics_text(&self) -> String {
        let state = match self.state() {
            WatchState::Off(_) => "off",
            WatchState::Listing => "listing",
            WatchState::Synced => "synced",
            WatchState::Failing(_) => "failing",
        };
        let mut out = String::from(
            "# HELP meshlife_namespace_watch The Namespace watch of POST /admission: 1 for its \
             state.\n# TYPE meshlife_namespace_watch gauge\n",
        );
        for candidate in ["off", "listing", "synced", "failing"] {
            let value = u8::from(candidate == state);
            out.push_str(&format!(
                "meshlife_namespace_watch{{state=\"{candidate}\"}} {value}\n"
            ));
        }
        let cached = self.store.as_ref().map_or(0, |store| store.state().len());
        out.push_str(&format!(
            "# HELP meshlife_namespaces_cached Namespaces the watch holds.\n\
             # TYPE meshlife_namespaces_cached gauge\nmeshlife_namespaces_cached {cached}\n"
        ));
        out
    }
}

/// Where a Kubernetes configuration would come from, as kube's `Config::infer` looks for one;
/// `None` when there is none at all. A pod without a service-account token (the Gatekeeper
/// and Kyverno installs) has the in-cluster variables but no token: no configuration.
fn configuration_source() -> Option<String> {
    if let Some(path) = std::env::var_os("KUBECONFIG").filter(|path| !path.is_empty()) {
        return Some(format!("KUBECONFIG={}", path.to_string_lossy()));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let path = std::path::Path::new(&home).join(".kube/config");
        if path.exists() {
            return Some(path.display().to_string());
        }
    }
    let token = std::path::Path::new(IN_CLUSTER_TOKEN);
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() && token.exists() {
        return Some(format!(
            "the in-cluster service account ({IN_CLUSTER_TOKEN})"
        ));
    }
    None
}

const IN_CLUSTER_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// How long the first list may take at start, retried while the API server is unreachable
/// (it may be starting with the node); refused credentials and RBAC are not retried.
const FIRST_LIST_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// One list of a single Namespace, to find at start what would make every later list fail.
async fn first_list(api: &kube::Api<Namespace>) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + FIRST_LIST_PATIENCE;
    let params = kube::api::ListParams::default().limit(1);
    loop {
        let error = match tokio::time::timeout(FIRST_LIST_PATIENCE, api.list(&params)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(error)) => error,
            Err(_) => {
                return Err(format!(
                    "no answer to a Namespace list within {FIRST_LIST_PATIENCE:?}"
                ));
            }
        };
        let answered = matches!(&error, kube::Error::Api(_));
        if answered || tokio::time::Instant::now() >= deadline {
            return Err(match &error {
                kube::Error::Api(status) if status.code == 403 => format!(
                    "the API server forbids listing Namespaces ({}); the ClusterRole of \
                     `meshlife install webhook` grants get, list and watch",
                    status.message
                ),
                other => error_chain(other),
            });
        }
        tracing::info!(%error, "the API server cannot be reached yet; trying again");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// A Namespace as the module reads `namespaceObject`: the name, labels and annotations; the
/// rest is not worth copying.
fn namespace_object(namespace: &Namespace) -> Value {
    let metadata = &namespace.metadata;
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": metadata.name,
            "labels": metadata.labels,
            "annotations": metadata.annotations,
        },
    })
}

async fn follow<S>(events: S, state: Arc<Mutex<WatchState>>, listed: Arc<AtomicBool>)
where
    S: futures_util::Stream<Item = Result<watcher::Event<Namespace>, watcher::Error>>,
{
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        // Only this task writes the flag, so it doubles as the loop's own memory.
        let listed_once = listed.load(Ordering::Relaxed);
        let next = match event {
            Ok(watcher::Event::InitDone) => WatchState::Synced,
            // A watch resumed after an error (no relist) says so only by delivering again.
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if listed_once => {
                WatchState::Synced
            }
            Ok(_) => continue,
            Err(error) => WatchState::Failing(error.to_string()),
        };
        let Ok(mut current) = state.lock() else {
            return;
        };
        if *current == next {
            continue;
        }
        match &next {
            WatchState::Synced if listed_once => tracing::info!("the Namespace watch works again"),
            WatchState::Synced => tracing::info!("Namespace list received; watching for changes"),
            WatchState::Failing(reason) if listed_once => tracing::warn!(
                %reason,
                "the Namespace watch failed (retried with backoff); the Namespaces already \
                 listed are kept meanwhile"
            ),
            WatchState::Failing(reason) => tracing::warn!(
                %reason,
                "the Namespace watch failed (retried with backoff); POST /admission judges with \
                 the parameters' namespace facts until it works"
            ),
            _ => {}
        }
        if next == WatchState::Synced {
            listed.store(true, Ordering::Relaxed);
        }
        *current = next;
    }
}
