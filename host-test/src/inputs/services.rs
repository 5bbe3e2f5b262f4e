//! The Services of the input that select a workload's pods: a gRPC or HTTP/2 port is often
//! named only on the Service (`grpc`, `appProtocol: kubernetes.io/h2c`), so the module is handed
//! them as `input.services` to see what the pod serves (ML404).

use std::collections::BTreeMap;

use meshlife_policy::workload::WorkloadKind;
use serde_json::Value;

use crate::inputs::manifests::{ManifestObject, string_map};

/// The input's Services by namespace.
#[derive(Debug, Default)]
pub struct ServiceIndex<'a> {
    by_namespace: BTreeMap<&'a str, Vec<Value>>,
}

impl<'a> ServiceIndex<'a> {
    pub fn from_objects(objects: &'a [ManifestObject]) -> ServiceIndex<'a> {
        let mut by_namespace: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for object in objects
            .iter()
            .filter(|object| object.identity.kind == "Service" && object.group().is_empty())
        {
            by_namespace
                .entry(object.identity.namespace.as_str())
                .or_default()
                .push(object.object.value());
        }
        ServiceIndex { by_namespace }
    }

    /// The Services in `object`'s namespace whose selector its pod labels satisfy. A Service
    /// without a selector selects no pod (its endpoints are managed by hand).
    pub fn selecting(&self, object: &ManifestObject) -> Vec<&Value> {
        let Some(services) = self.by_namespace.get(object.identity.namespace.as_str()) else {
            return Vec::new();
        };
        let Some(labels) = pod_labels(object) else {
            return Vec::new();
        };
        services
            .iter()
            .filter(|service| {
                let selector = string_map(service.pointer("/spec/selector"));
                !selector.is_empty()
                    && selector
                        .iter()
                        .all(|(key, value)| labels.get(key) == Some(value))
            })
            .collect()
    }
}

/// The labels the workload's pods get, from where the policy reads the pod template
/// (`WorkloadKind::metadata_path`); `None` for kinds without pods a Service selects.
fn pod_labels(object: &ManifestObject) -> Option<BTreeMap<String, String>> {
    let kind = WorkloadKind::from_kind(&object.identity.kind)?;
    let pointer = format!("/{}/labels", kind.metadata_path().replace('.', "/"));
    Some(string_map(object.object.pointer(&pointer).as_ref()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(kind: &str, namespace: &str, value: Value) -> ManifestObject {
        ManifestObject::for_test("a.yaml", kind, namespace, value)
    }

    #[test]
    fn a_service_selects_the_pods_whose_labels_hold_its_selector() {
        let objects = vec![
            object(
                "Service",
                "shop",
                json!({"metadata": {"name": "grpc"}, "spec": {"selector": {"app": "web"}}}),
            ),
            object(
                "Service",
                "shop",
                json!({"metadata": {"name": "other"}, "spec": {"selector": {"app": "db"}}}),
            ),
            object(
                "Service",
                "shop",
                json!({"metadata": {"name": "manual"}, "spec": {}}),
            ),
            object(
                "Service",
                "elsewhere",
                json!({"metadata": {"name": "grpc"}, "spec": {"selector": {"app": "web"}}}),
            ),
            object(
                "Deployment",
                "shop",
                json!({"spec": {"template": {"metadata": {"labels": {"app": "web", "tier": "api"}}}}}),
            ),
        ];
        let index = ServiceIndex::from_objects(&objects);
        let selected = index.selecting(&objects[4]);
        assert_eq!(selected.len(), 1);
        assert_eq!(selected[0]["metadata"]["name"], "grpc");
        assert!(
            index.selecting(&objects[0]).is_empty(),
            "a Service selects no Service"
        );
    }
}
