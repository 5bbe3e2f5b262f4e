//! The parameters section of a generated constraint as it is built: each parameter with its
//! value and the comment saying what it changes, and the defaults the meshes document.

use meshlife_policy::catalogue;
use serde_json::Value;

use crate::constraints::yaml_writer::{Entry, Yaml};

/// Lowest Kubernetes minor version that runs native sidecars (beta, on by default).
pub(super) const NATIVE_MIN_MINOR: u32 = meshlife_policy::mesh::NATIVE_SIDECAR_MIN_MINOR;

/// First Istio minor version whose ENABLE_NATIVE_SIDECARS default is `auto`.
pub(super) const ISTIO_AUTO_NATIVE_SINCE: u32 = 27;

pub(super) const DEFAULT_DRAIN: &str = "5s";

pub(super) const DEFAULT_ISTIO_UID: u32 = 1337;

pub(super) const DEFAULT_LINKERD_UID: u32 = 2102;

/// Grace period of a pod spec that does not set `terminationGracePeriodSeconds`.
pub(super) const DEFAULT_GRACE_SECONDS: u64 = 30;

/// `ML101 (startup-no-hold)`.
pub(super) fn rule(id: &str) -> String {
    match catalogue::find(id) {
        Some(rule) => format!("{} ({})", rule.id, rule.name),
        None => id.to_string(),
    }
}

/// Collects the entries of a parameter map, each with the comment saying what it changes.
#[derive(Default)]
pub(super) struct ParameterMap {
    pub(super) entries: Vec<Entry>,
}

impl ParameterMap {
    pub(super) fn push(&mut self, key: &str, value: Value, comment: String) {
        self.entries
            .push(Entry::new(key, Yaml::from_json(&value)).comment(comment));
    }

    pub(super) fn push_map(&mut self, key: &str, map: ParameterMap, comment: Option<String>) {
        let mut entry = Entry::new(key, Yaml::Map(map.entries));
        if let Some(comment) = comment {
            entry = entry.comment(comment);
        }
        self.entries.push(entry);
    }

    pub(super) fn push_list(&mut self, key: &str, list: &[String], comment: String) {
        if !list.is_empty() {
            self.push(key, serde_json::json!(list), comment);
        }
    }
}

pub(super) const CLASSIC_ONLY: &str = "ML101 (startup-no-hold), ML301 (job-sidecar-never-exits), ML201 \
                            (init-container-no-network)";

/// What `cni` changes for ML201, in the words of one mesh (`mesh` is its CNI plugin's prefix,
/// `istio` or `linkerd`): whether the mesh's CNI plugin captures traffic before the init
/// containers, and whether a native proxy starts before them.
pub(super) fn cni_comment(mesh: &str, cni: bool, native_effective: bool, uid: u32) -> String {
    match (cni, native_effective) {
        (true, false) => format!(
            "{mesh}-cni: traffic is captured before the init containers run and a classic proxy \
             starts only after them, so each user init container not running as UID {uid} is {}.",
            rule("ML201")
        ),
        (true, true) => format!(
            "{mesh}-cni: traffic is captured before the init containers run; a native proxy \
             starts before the user init containers, so only pods that opt out of native \
             sidecars get {}, for each user init container not running as UID {uid}.",
            rule("ML201")
        ),
        (false, _) => format!(
            "no {mesh}-cni: {mesh}-init runs last among the init containers, so user init \
             containers still have network and predicted pods get no {}.",
            rule("ML201")
        ),
    }
}
