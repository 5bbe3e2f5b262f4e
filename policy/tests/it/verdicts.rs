//! `mesh_verdicts`: for every pod spec of an object, whether it is meshed and how, or why not,
//! as the host's "not judged" summary prints it.

use meshlife_policy::verdicts::{MeshVerdict, MisplacedKey, NotJudged, PodSpecVerdict};
use meshlife_policy::{mesh::NotMeshed, mesh_verdicts};
use serde_json::{Value, json};

fn verdicts_of(input: Value) -> Vec<PodSpecVerdict> {
    mesh_verdicts(&serde_json::to_vec(&input).unwrap())
}

fn deployment(template_meta: Value, controller_meta: Value) -> Value {
    let mut metadata = json!({"name": "web", "namespace": "shop"});
    if let Value::Object(extra) = controller_meta {
        metadata.as_object_mut().unwrap().extend(extra);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {"template": {"metadata": template_meta,
            "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}})
}

#[test]
fn a_meshed_template_says_which_mesh_and_mode() {
    let verdicts = verdicts_of(json!({"review": {"object": deployment(
        json!({"labels": {"sidecar.istio.io/inject": "true"}}), json!({}))}}));
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].path.as_deref(), Some("spec.template.spec"));
    assert_eq!(
        verdicts[0].verdict,
        MeshVerdict::Meshed {
            mesh: "istio",
            injected: false,
            mode: "classic",
        }
    );
    assert!(verdicts[0].misplaced.is_empty());
}

#[test]
fn no_signal_says_the_namespace_was_unknown() {
    let verdicts = verdicts_of(json!({"review": {"object": deployment(json!({}), json!({}))}}));
    assert_eq!(
        verdicts[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::NoMeshSignal {
            namespace: Some("shop".into()),
            namespace_object_absent: true,
            namespace_unknown: true,
        })
    );
    let with_namespace = verdicts_of(
        json!({"review": {"object": deployment(json!({}), json!({})),
        "namespaceObject": {"metadata": {"name": "shop"}}}}),
    );
    assert_eq!(
        with_namespace[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::NoMeshSignal {
            namespace: Some("shop".into()),
            namespace_object_absent: false,
            namespace_unknown: false,
        })
    );
}

#[test]
fn controller_metadata_keys_are_reported_alongside_the_reason() {
    let verdicts = verdicts_of(json!({"review": {"object": deployment(json!({}),
        json!({"labels": {"sidecar.istio.io/inject": "true", "app": "web"},
               "annotations": {"linkerd.io/inject": "enabled"}}))}}));
    assert!(matches!(
        verdicts[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::NoMeshSignal { .. })
    ));
    assert_eq!(
        verdicts[0].misplaced,
        vec![
            MisplacedKey {
                key: "linkerd.io/inject".into(),
                is_label: false,
                path: "metadata.annotations[\"linkerd.io/inject\"]".into(),
            },
            MisplacedKey {
                key: "sidecar.istio.io/inject".into(),
                is_label: true,
                path: "metadata.labels[\"sidecar.istio.io/inject\"]".into(),
            },
        ]
    );
}

#[test]
fn every_reason_is_named() {
    let opted_out = verdicts_of(json!({"review": {"object": deployment(
        json!({"annotations": {"linkerd.io/inject": "disabled"}}), json!({})),
        "namespaceObject": {"metadata": {"name": "shop", "annotations": {"linkerd.io/inject": "enabled"}}}}}));
    assert_eq!(
        opted_out[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::OptedOut {
            mesh: "linkerd",
            key: "linkerd.io/inject",
            is_label: false,
            value: "disabled".into(),
        })
    );
    let annotation_only = verdicts_of(json!({"review": {"object": deployment(
        json!({"annotations": {"sidecar.istio.io/inject": "true"}}), json!({}))}}));
    assert_eq!(
        annotation_only[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::AnnotationOnlyInjectRequest {
            namespace: Some("shop".into())
        })
    );
    let system = verdicts_of(
        json!({"parameters": {"istio": {"injectedNamespaces": ["*"]}},
        "review": {"object": {"kind": "Pod", "metadata": {"name": "dns", "namespace": "kube-system"},
            "spec": {"containers": [{"name": "dns"}]}}}}),
    );
    assert_eq!(
        system[0].verdict,
        MeshVerdict::NotMeshed(NotMeshed::SystemNamespace {
            namespace: "kube-system".into()
        })
    );
    let gateway = verdicts_of(
        json!({"review": {"object": {"kind": "Pod", "metadata": {"name": "gw"},
        "spec": {"containers": [{"name": "istio-proxy", "image": "proxyv2"}]}}}}),
    );
    assert_eq!(gateway[0].verdict, MeshVerdict::Gateway);
    let configmap =
        verdicts_of(json!({"review": {"object": {"apiVersion": "v1", "kind": "ConfigMap"}}}));
    assert_eq!(configmap[0].path, None);
    assert_eq!(
        configmap[0].verdict,
        MeshVerdict::NotJudged(NotJudged::NotAReviewedKind {
            kind: Some("ConfigMap".into()),
            api_version: Some("v1".into()),
        })
    );
    let invalid =
        verdicts_of(json!({"review": {"object": {"kind": "Pod", "spec": {"containers": "x"}}}}));
    assert!(matches!(
        &invalid[0].verdict,
        MeshVerdict::NotJudged(NotJudged::InvalidInput { path, .. }) if path == "spec.containers"
    ));
}

#[test]
fn each_embedded_pod_spec_gets_its_own_verdict() {
    let verdicts = verdicts_of(
        json!({"review": {"object": {"apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate", "metadata": {"name": "a", "namespace": "shop"},
        "spec": {"metrics": [
            {"name": "a", "provider": {"job": {"metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}},
            {"name": "b", "provider": {"job": {"spec": {"template": {
                "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                "spec": {"containers": [{"name": "c"}]}}}}}}]}}}}),
    );
    assert_eq!(verdicts.len(), 2);
    assert_eq!(
        verdicts[0].path.as_deref(),
        Some("spec.metrics[0].provider.job.spec.template.spec")
    );
    assert!(matches!(verdicts[1].verdict, MeshVerdict::Meshed { .. }));
    // The inject label on the embedded Job's own metadata never reaches its pods.
    assert_eq!(
        verdicts[0].misplaced,
        vec![MisplacedKey {
            key: "sidecar.istio.io/inject".into(),
            is_label: true,
            path: "spec.metrics[0].provider.job.metadata.labels[\"sidecar.istio.io/inject\"]"
                .into(),
        }]
    );
    // Serialisable for the host.
    let text = serde_json::to_string(&verdicts).unwrap();
    assert!(text.contains("\"status\":\"notMeshed\""), "{text}");
}
