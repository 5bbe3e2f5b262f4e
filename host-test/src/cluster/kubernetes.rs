//! The Kubernetes version the rules need: the lowest kubelet's, since a pod may land on any
//! node and native sidecars run only where the kubelet runs them.

use serde_json::Value;

use super::snapshot::{self, Snapshot};
use super::{Fact, Source};
use crate::constraints::facts::{KubernetesVersion, parse_kubernetes_version};

const KUBELET_FIELD: &str = "status.nodeInfo.kubeletVersion";

/// The lowest kubelet version among the nodes; without any Node, the API server's version
/// (kubelets are at most three minors older than it), said in the source.
pub(super) fn lowest_kubelet(
    snapshot: &Snapshot,
    given: Option<&KubernetesVersion>,
    notes: &mut Vec<String>,
) -> Result<Fact<KubernetesVersion>, String> {
    let mut unversioned = 0;
    let mut lowest: Option<(KubernetesVersion, &Value)> = None;
    for node in &snapshot.nodes {
        let Some(text) = node
            .pointer("/status/nodeInfo/kubeletVersion")
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
        else {
            unversioned += 1;
            continue;
        };
        let version = parse_kubernetes_version(text).map_err(|error| {
            format!(
                "{}: {}: {text:?} is not a Kubernetes version ({error})",
                snapshot::title(node),
                KUBELET_FIELD
            )
        })?;
        if lowest
            .as_ref()
            .is_none_or(|(current, _)| version.minor < current.minor)
        {
            lowest = Some((version, node));
        }
    }
    if unversioned > 0 {
        notes.push(format!(
            "{unversioned} Node(s) show no kubelet version (not registered yet?): the lowest \
             kubelet is taken among the others"
        ));
    }
    if let Some((version, node)) = lowest {
        let of = match snapshot.nodes.len() - unversioned {
            1 => String::new(),
            count => format!(" (the lowest of {count} nodes)"),
        };
        return Ok(Fact::new(
            version,
            Source::new(snapshot::title(node), format!("{KUBELET_FIELD}{of}")),
        ));
    }
    if let Some(given) = given {
        return Ok(Fact::new(
            given.clone(),
            Source::new("--kubernetes", "(given; no Node shows its kubelet version)"),
        ));
    }
    let Some(server) = &snapshot.server_version else {
        return Err(format!(
            "{}: no Node shows a kubelet version and the API server's version is unknown; \
             pass --kubernetes VERSION",
            snapshot.cluster
        ));
    };
    let version = parse_kubernetes_version(server).map_err(|error| {
        format!("the API server's version {server:?} is not a Kubernetes version ({error}); pass --kubernetes VERSION")
    })?;
    notes.push(format!(
        "no Node shows its kubelet version: the Kubernetes version is the API server's \
         ({server}); kubelets may be up to three minors older, so give --kubernetes if they are"
    ));
    Ok(Fact::new(
        version,
        Source::new(
            "the API server's /version",
            "gitVersion (no Node shows its kubelet version: give --kubernetes if the oldest \
             kubelet is older)",
        ),
    ))
}
