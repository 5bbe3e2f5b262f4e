//! What the drill sees of the target while the load runs: each pod's life (created, ready,
//! deleted, its containers' ends, gone) from a pod watch, when each pod's address leaves the
//! Service's EndpointSlices, and the kubelet's `Killing` events. Times are the drill's own clock
//! when it received the change (milliseconds), since the API's timestamps are whole seconds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;

/// One pod of the target, as watched.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodLife {
    pub name: String,
    /// Present when the drill began: the rollout replaces it.
    pub old: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<u64>,
    /// When its deletion was seen: the kubelet starts its preStop hooks and SIGTERM then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<i64>,
    /// When the kubelet's `Killing` event (it stops a container) was first seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killing_ms: Option<u64>,
    /// When its address stopped being a ready endpoint of the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_endpoints_ms: Option<u64>,
    /// Each container's end: (name, exit code, when seen).
    pub exits: Vec<ContainerExit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gone_ms: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerExit {
    pub container: String,
    pub exit_code: i32,
    pub seen_ms: u64,
}

impl PodLife {
    /// Killed at the grace period: a container's exit code 137 (SIGKILL).
    pub fn killed(&self) -> bool {
        self.exits.iter().any(|exit| exit.exit_code == 137)
    }
}

/// Everything watched, by pod name.
#[derive(Debug, Default)]
pub struct Observations {
    pub pods: BTreeMap<String, PodLife>,
    /// Addresses that were ready endpoints at the last EndpointSlice change.
    ready_addresses: BTreeMap<String, bool>,
}

impl Observations {
    /// The pods present before the drill changes anything.
    pub fn begin(pods: &[Pod], now_ms: u64) -> Observations {
        let mut observations = Observations::default();
        for pod in pods {
            observations.pod_changed(pod, now_ms);
            if let Some(life) = observations.pods.get_mut(&name_of(pod)) {
                life.old = true;
            }
        }
        observations
    }

    pub fn pod_changed(&mut self, pod: &Pod, now_ms: u64) {
        let name = name_of(pod);
        let life = self.pods.entry(name.clone()).or_insert_with(|| PodLife {
            name,
            seen_ms: Some(now_ms),
            ..PodLife::default()
        });
        if let Some(ip) = pod.status.as_ref().and_then(|status| status.pod_ip.clone()) {
            life.ip = Some(ip);
        }
        let ready = pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|condition| condition.type_ == "Ready" && condition.status == "True")
            });
        if ready && life.ready_ms.is_none() {
            life.ready_ms = Some(now_ms);
        }
        if pod.metadata.deletion_timestamp.is_some() && life.deleted_ms.is_none() {
            life.deleted_ms = Some(now_ms);
            life.grace_seconds = pod.metadata.deletion_grace_period_seconds;
        }
        let statuses = pod.status.as_ref().into_iter().flat_map(|status| {
            status
                .container_statuses
                .iter()
                .flatten()
                .chain(status.init_container_statuses.iter().flatten())
        });
        for status in statuses {
            let Some(terminated) = status
                .state
                .as_ref()
                .and_then(|state| state.terminated.as_ref())
            else {
                continue;
            };
            if life.exits.iter().all(|exit| exit.container != status.name) {
                life.exits.push(ContainerExit {
                    container: status.name.clone(),
                    exit_code: terminated.exit_code,
                    seen_ms: now_ms,
                });
            }
        }
    }

    pub fn pod_deleted(&mut self, pod: &Pod, now_ms: u64) {
        self.pod_changed(pod, now_ms);
        if let Some(life) = self.pods.get_mut(&name_of(pod)) {
            life.gone_ms.get_or_insert(now_ms);
        }
    }

    /// The kubelet's `Killing` event for `pod`.
    pub fn killing(&mut self, pod: &str, now_ms: u64) {
        if let Some(life) = self.pods.get_mut(pod) {
            life.killing_ms.get_or_insert(now_ms);
        }
    }

    /// The Service's EndpointSlices as they are now: an address that was ready and no longer
    /// is (not ready, terminating, or gone) has left the rotation.
    pub fn endpoints_changed(&mut self, slices: &[EndpointSlice], now_ms: u64) {
        let mut ready: BTreeMap<String, bool> = BTreeMap::new();
        for endpoint in slices
            .iter()
            .flat_map(|slice| slice.endpoints.iter().flatten())
        {
            // A missing `ready` means ready (discovery/v1: "nil ... should be interpreted as
            // true"), unless the endpoint is terminating.
            let conditions = endpoint.conditions.as_ref();
            let terminating = conditions.and_then(|c| c.terminating).unwrap_or(false);
            let is_ready = conditions.and_then(|c| c.ready).unwrap_or(!terminating);
            for address in &endpoint.addresses {
                *ready.entry(address.clone()).or_default() |= is_ready;
            }
        }
        for life in self.pods.values_mut() {
            let Some(ip) = &life.ip else { continue };
            let was = self.ready_addresses.get(ip).copied().unwrap_or(false);
            let is = ready.get(ip).copied().unwrap_or(false);
            if was && !is && life.left_endpoints_ms.is_none() && life.old {
                life.left_endpoints_ms = Some(now_ms);
            }
        }
        self.ready_addresses = ready;
    }

    /// Whether `ip` was a ready endpoint at the last change seen.
    pub fn is_ready_endpoint(&self, ip: &str) -> bool {
        self.ready_addresses.get(ip).copied().unwrap_or(false)
    }
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}
