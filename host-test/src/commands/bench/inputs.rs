//! The benchmark inputs, built in code so that every run measures the same bytes: a small Pod
//! (~2 KB admission input), a typical Deployment (~6 KB), a Pod with 50 containers (~200 KB) and
//! a 1 MB object (a Deployment carrying a large last-applied-configuration annotation).

use anyhow::{Context, Result};
use serde_json::{Value, json};

pub struct BenchInput {
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// What a real API server sends besides the object: the AdmissionRequest fields.
fn admission(kind: &str, group: &str, resource: &str, object: Value) -> Value {
    json!({
        "review": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": resource},
            "requestKind": {"group": group, "version": "v1", "kind": kind},
            "requestResource": {"group": group, "version": "v1", "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:argocd:argocd-application-controller",
                "uid": "5c1b5d44-8c7d-4d3e-9d8d-3a0f0c7f6a11",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:argocd", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "argocd-controller"},
            "namespaceObject": {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "shop", "labels": {"istio-injection": "enabled",
                    "kubernetes.io/metadata.name": "shop"}}}
        },
        "parameters": {}
    })
}

fn container(name: &str, env_count: usize) -> Value {
    let env: Vec<Value> = (0..env_count)
        .map(|index| {
            json!({"name": format!("{}_SETTING_{index}", name.to_uppercase().replace('-', "_")),
            "value": format!("value-{index}-for-{name}-with-some-realistic-length")})
        })
        .collect();
    json!({
        "name": name,
        "image": format!("registry.example.com/shop/{name}:1.42.7@sha256:4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"),
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "grpc", "containerPort": 9090, "protocol": "TCP"}],
        "env": env,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
            "initialDelaySeconds": 5, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 8080},
            "initialDelaySeconds": 15, "periodSeconds": 20},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/shop"},
            {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
    })
}

fn pod_spec(containers: Vec<Value>) -> Value {
    json!({
        "serviceAccountName": "shop",
        "terminationGracePeriodSeconds": 30,
        "containers": containers,
        "volumes": [{"name": "config", "configMap": {"name": "shop-config"}},
            {"name": "tmp", "emptyDir": {}}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": "checkout"}}}}]}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}]
    })
}

fn labels() -> Value {
    json!({"app": "checkout", "app.kubernetes.io/name": "checkout",
        "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.42.7",
        "sidecar.istio.io/inject": "true"})
}

fn small_pod() -> Value {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "checkout-7d9f8c6b5-x2k4p", "namespace": "shop", "labels": labels()},
        "spec": pod_spec(vec![container("checkout", 3)])});
    admission("Pod", "", "pods", object)
}

fn deployment(containers: Vec<Value>, annotations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "checkout", "namespace": "shop", "labels": labels(),
            "annotations": annotations},
        "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "checkout"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
            "template": {"metadata": {"labels": labels(),
                "annotations": {"proxy.istio.io/config": "{\"terminationDrainDuration\": \"20s\"}",
                    "prometheus.io/scrape": "true", "prometheus.io/port": "9102"}},
                "spec": pod_spec(containers)}}})
}

fn typical_deployment() -> Value {
    let containers = vec![container("checkout", 25), container("cache-warmer", 8)];
    admission(
        "Deployment",
        "apps",
        "deployments",
        deployment(
            containers,
            json!({"deployment.kubernetes.io/revision": "12"}),
        ),
    )
}

fn fifty_container_pod() -> Value {
    let containers = (0..50)
        .map(|index| container(&format!("worker-{index}"), 30))
        .collect();
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "batch-workers", "namespace": "shop", "labels": labels()},
        "spec": pod_spec(containers)});
    admission("Pod", "", "pods", object)
}

/// A Deployment near the size etcd accepts, as `kubectl apply` makes them: the object again in
/// the last-applied-configuration annotation, here padded to 1 MB.
fn one_megabyte_object() -> Value {
    let containers = vec![container("checkout", 25)];
    let padding = "x".repeat(1 << 20);
    let annotations = json!({"kubectl.kubernetes.io/last-applied-configuration": padding});
    admission(
        "Deployment",
        "apps",
        "deployments",
        deployment(containers, annotations),
    )
}

pub fn bench_inputs() -> Vec<BenchInput> {
    [
        ("pod-small", small_pod()),
        ("deployment-typical", typical_deployment()),
        ("pod-50-containers", fifty_container_pod()),
        ("object-1mb", one_megabyte_object()),
    ]
    .into_iter()
    .map(|(name, value)| BenchInput {
        name,
        bytes: serde_json::to_vec(&value).expect("a serde_json::Value always serialises"),
    })
    .collect()
}

/// The same input with `parameters.rules` limited to ML101, ML301 and ML401, the rules the Rego
/// rendition implements.
pub fn three_rule_input(input: &[u8]) -> Result<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(input).context("bench input is JSON")?;
    value["parameters"] = json!({"rules": ["ML101", "ML301", "ML401"]});
    Ok(serde_json::to_vec(&value)?)
}
