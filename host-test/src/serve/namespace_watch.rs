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
//! in its input. A watch the RBAC forbids is retried with backoff, and until it works the
//! parameters decide too; both are logged, and `/readyz` waits only for the first answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

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
    pub async fn start() -> NamespaceWatch {
        let client = match kube::Client::try_default().await {
            Ok(client) => client,
            Err(error) => {
                return NamespaceWatch::off(&format!(
                    "no Kubernetes configuration (in-cluster service account or KUBECONFIG): \
                     {error}"
                ));
            }
        };
        let api: kube::Api<Namespace> = kube::Api::all(client);
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
        tracing::info!("watching Namespaces for POST /admission");
        NamespaceWatch {
            store: Some(store),
            api: Some(fetcher),
            state,
            listed_once,
        }
    }

    pub fn state(&self) -> WatchState {
        self.state
            .lock()
            .map(|state| state.clone())
            .unwrap_or(WatchState::Listing)
    }

    /// `Err` until the first list has come back or failed: an answer before that would judge
    /// every object as if its Namespace had no labels.
    pub fn readiness(&self) -> Result<(), String> {
        match self.state() {
            WatchState::Listing => Err("waiting for the first Namespace list".into()),
            _ => Ok(()),
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
