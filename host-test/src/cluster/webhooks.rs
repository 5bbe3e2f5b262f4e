//! The mutating webhooks that see a pod after a mesh's injector has made its proxy a native
//! sidecar (an init container with `restartPolicy: Always`), and so can take that away.
//!
//! How the API server calls them (k8s.io/apiserver, `pkg/admission/configuration/
//! mutating_webhook_manager.go` and `pkg/admission/plugin/webhook/mutating/dispatcher.go`): the
//! MutatingWebhookConfigurations in the order of their names, and within one its webhooks in the
//! order they are listed; each webhook's JSON patch is applied before the next is called. A
//! webhook decodes the pod into the Go types it was built with and answers the difference between
//! what it was sent and what it encodes again. Built on a k8s.io/api older than 0.28, whose
//! `Container` has no `restartPolicy`, it answers `remove /spec/initContainers/N/restartPolicy`
//! for every native sidecar it saw, and the API server then refuses the pod: `spec.initContainers
//! [N].startupProbe: Forbidden: may not be set for init containers without restartPolicy=Always`
//! (ML104's bug class; `meshlife diagnose` reads that message from the controller's events).
//!
//! So the webhooks that matter for the injector's pods are the ones that run once it has:
//! - those ordered after the injector's configuration;
//! - those ordered before it with `reinvocationPolicy: IfNeeded`: the injector changed the pod,
//!   so the API server calls them once more after it (admission reinvocation);
//!
//! and a webhook ordered before the injector with `reinvocationPolicy: Never` (the default) sees
//! the pod before the proxy is there: it cannot harm it. The injector's own `IfNeeded` is no
//! cure: called again after a later webhook removed the field, Istio's and Linkerd's injectors
//! leave a pod they have already injected as it is (Linkerd: "pod has a sidecar injected
//! already"; Istio: turning it on was reported to change nothing, istio/istio#49054), so the
//! removal stands, and such a webhook is listed all the same.
//!
//! Not evaluated: a webhook's `namespaceSelector`, `objectSelector` and `matchConditions` (which
//! pods it sees is the owner's to check: the notice says how), and its `failurePolicy`.

use serde_json::Value;

use super::snapshot;

/// The message the API server refuses such a pod with (k8s.io/kubernetes
/// `pkg/apis/core/validation`, `validateInitContainers`), for the notices.
pub const REFUSAL_MESSAGE: &str = "may not be set for init containers without restartPolicy=Always";

/// A mesh's sidecar injector, as its MutatingWebhookConfigurations are labelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injector {
    /// Istio's injectors of these revisions (their own configurations and their revision tags',
    /// all labelled `istio.io/rev` with the revision); every revision's when the list is empty.
    Istio { revisions: Vec<String> },
    /// Linkerd's proxy injector (`linkerd.io/control-plane-component: proxy-injector`).
    Linkerd,
}

impl Injector {
    pub fn mesh(&self) -> &'static str {
        match self {
            Injector::Istio { .. } => "Istio",
            Injector::Linkerd => "Linkerd",
        }
    }

    /// Whether `configuration` is one of this injector's.
    fn injects(&self, configuration: &Value) -> bool {
        let labels = snapshot::labels(configuration);
        match self {
            Injector::Istio { revisions } => labels
                .get("istio.io/rev")
                .is_some_and(|revision| revisions.is_empty() || revisions.contains(revision)),
            Injector::Linkerd => {
                labels
                    .get("linkerd.io/control-plane-component")
                    .map(String::as_str)
                    == Some("proxy-injector")
            }
        }
    }
}

/// A mesh's own configuration (an Istio revision's or tag's injector, Linkerd's injector and its
/// extensions' injectors, viz's tap and jaeger's): built with the mesh's own, current k8s.io/api,
/// they keep the field; they are no candidates.
fn mesh_owned(configuration: &Value) -> bool {
    let labels = snapshot::labels(configuration);
    labels.contains_key("istio.io/rev")
        || labels.contains_key("linkerd.io/control-plane-component")
        || labels.contains_key("linkerd.io/extension")
}

/// A webhook known to have removed `restartPolicy` from native sidecars, in the releases built on
/// a k8s.io/api older than 0.28; each was reported with the refusal above.
#[derive(Debug)]
pub struct KnownOffender {
    /// Parts of a name that identify it: of the configuration, the webhook, or its Service.
    names: &'static [&'static str],
    /// What it is, in words.
    pub what: &'static str,
    /// Where it was reported.
    pub reports: &'static str,
}

const KNOWN_OFFENDERS: [KnownOffender; 7] = [
    KnownOffender {
        names: &["datadog"],
        what: "the Datadog Cluster Agent's admission controller",
        reports: "DataDog/datadog-agent#37837, DataDog/datadog-operator#1116",
    },
    KnownOffender {
        // EKS names the configuration `pod-identity-webhook` and the webhook
        // `iam-for-pods.amazonaws.com`; on EKS its clientConfig is a URL, not a Service.
        names: &["pod-identity-webhook", "iam-for-pods", "eks-pod-identity"],
        what: "the EKS pod identity webhook",
        reports: "aws/amazon-eks-pod-identity-webhook#208",
    },
    KnownOffender {
        names: &["kube-secrets-init", "secrets-init"],
        what: "kube-secrets-init",
        reports: "doitintl/kube-secrets-init#53",
    },
    KnownOffender {
        names: &["kube-image-keeper", "kuik"],
        what: "kube-image-keeper",
        reports: "enix/kube-image-keeper#457",
    },
    KnownOffender {
        names: &["opentelemetry-operator"],
        what: "the OpenTelemetry operator's pod webhook",
        reports: "istio/istio#49054",
    },
    KnownOffender {
        names: &["azure-workload-identity", "azure-wi-webhook"],
        what: "Azure Workload Identity's webhook",
        reports: "Azure/azure-workload-identity#1312",
    },
    KnownOffender {
        names: &["appmesh"],
        what: "the AWS App Mesh controller's webhook",
        reports: "aws/aws-app-mesh-controller-for-k8s#774",
    },
];

/// Why a webhook sees the pod after the injector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Its configuration's name sorts after the injector's.
    After,
    /// It sorts before, but with `reinvocationPolicy: IfNeeded` it is called again after the
    /// injector changed the pod.
    Reinvoked,
}

/// Whether a webhook's rules take Pod CREATE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodCreate {
    Matches,
    /// A rule could not be read: the field and why.
    Unreadable(String),
}

/// A webhook that sees the injector's pods after it.
#[derive(Clone, Debug)]
pub struct LaterWebhook {
    pub configuration: String,
    pub webhook: String,
    /// `webhooks[2]`.
    pub field: String,
    /// The mesh whose injector it follows.
    pub mesh: &'static str,
    /// The injector's configuration it follows (or, reinvoked, sorts before).
    pub injector: String,
    pub order: Order,
    pub pod_create: PodCreate,
    pub known: Option<&'static KnownOffender>,
}

impl LaterWebhook {
    /// `MutatingWebhookConfiguration datadog-webhook, webhook datadog.webhook.example`.
    pub fn title(&self) -> String {
        format!(
            "MutatingWebhookConfiguration {}, webhook {}",
            self.configuration, self.webhook
        )
    }

    /// When it runs, in words: `runs after Istio's injector (istio-sidecar-injector)`.
    pub fn when(&self) -> String {
        match self.order {
            Order::After => format!("runs after {}'s injector ({})", self.mesh, self.injector),
            Order::Reinvoked => format!(
                "sorts before {}'s injector ({}) but has reinvocationPolicy: IfNeeded, so it runs \
                 again after it",
                self.mesh, self.injector
            ),
        }
    }

    /// What is known of it: a known offender's history, or what to check.
    pub fn verdict(&self) -> String {
        match (&self.pod_create, self.known) {
            (PodCreate::Unreadable(why), _) => format!(
                "{why}, so whether it takes Pod CREATE is not known; if pods fail with \
                 \"{REFUSAL_MESSAGE}\", check it"
            ),
            (PodCreate::Matches, Some(known)) => format!(
                "{}, whose releases built on k8s.io/api older than 0.28 remove restartPolicy \
                 from native sidecars ({}), and the API server then refuses every meshed pod it \
                 sees (\"{REFUSAL_MESSAGE}\"): run a release built on k8s.io/api 0.28 or later, or \
                 leave the meshed pods out with its objectSelector or namespaceSelector",
                known.what, known.reports
            ),
            (PodCreate::Matches, None) => format!(
                "it may change pods after the injector; if pods fail with \"{REFUSAL_MESSAGE}\", \
                 check it"
            ),
        }
    }

    /// The one line `constraint --from-cluster` and `check --kubeconfig` print.
    pub fn notice(&self) -> String {
        let takes = match self.pod_create {
            PodCreate::Matches => "matches Pod CREATE and ",
            PodCreate::Unreadable(_) => "",
        };
        format!(
            "native sidecars: {}: {takes}{}; {}",
            self.title(),
            self.when(),
            self.verdict()
        )
    }
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The known offender `names` point to: parts of a name, matched without case.
fn known_offender(names: &[&str]) -> Option<&'static KnownOffender> {
    let names: Vec<String> = names.iter().map(|name| name.to_ascii_lowercase()).collect();
    KNOWN_OFFENDERS.iter().find(|known| {
        known
            .names
            .iter()
            .any(|part| names.iter().any(|name| name.contains(part)))
    })
}

/// Whether one of `webhook`'s rules takes Pod CREATE (`operations` CREATE or `*`, `apiGroups`
/// `""` or `*`, `apiVersions` `v1` or `*`, `resources` `pods`, `*` or `*/*`, and a `scope` that
/// is not `Cluster`); `Err` names the field that is not what the API server accepts.
fn takes_pod_create(webhook: &Value, field: &str) -> Result<bool, String> {
    let Some(rules) = webhook.get("rules").filter(|rules| !rules.is_null()) else {
        return Ok(false);
    };
    let rules = rules
        .as_array()
        .ok_or_else(|| format!("{field}.rules is not a list"))?;
    for (index, rule) in rules.iter().enumerate() {
        let at = format!("{field}.rules[{index}]");
        let list = |key: &str| -> Result<Vec<&str>, String> {
            match rule.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .ok_or_else(|| format!("{at}.{key} is not a list of strings"))
                    })
                    .collect(),
                Some(_) => Err(format!("{at}.{key} is not a list of strings")),
            }
        };
        let any_of =
            |values: &[&str], wanted: &[&str]| values.iter().any(|value| wanted.contains(value));
        // `pods/*` names the subresources (pods/exec, pods/binding), not the pod itself.
        let pods = any_of(&list("resources")?, &["pods", "*", "*/*"]);
        let create = any_of(&list("operations")?, &["CREATE", "*"]);
        let core = any_of(&list("apiGroups")?, &["", "*"]);
        let v1 = any_of(&list("apiVersions")?, &["v1", "*"]);
        let namespaced = text(rule, "scope").is_none_or(|scope| scope != "Cluster");
        if pods && create && core && v1 && namespaced {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The webhooks of `configurations` that see `injector`'s pods after it, and take Pod CREATE (or
/// cannot be read); in the order the API server calls them. None when the injector's
/// configuration is not among them.
pub fn webhooks_after(configurations: &[Value], injector: &Injector) -> Vec<LaterWebhook> {
    let mut sorted: Vec<&Value> = configurations.iter().collect();
    sorted.sort_by(|left, right| snapshot::name(left).cmp(snapshot::name(right)));
    let injector_at: Vec<usize> = sorted
        .iter()
        .enumerate()
        .filter(|(_, configuration)| injector.injects(configuration))
        .map(|(at, _)| at)
        .collect();
    let Some(&first) = injector_at.first() else {
        return Vec::new();
    };
    let mut later = Vec::new();
    for (at, configuration) in sorted.iter().enumerate() {
        if mesh_owned(configuration) {
            continue;
        }
        let name = snapshot::name(configuration);
        let webhooks = configuration
            .get("webhooks")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (index, webhook) in webhooks.iter().enumerate() {
            let order = if at > first {
                Order::After
            } else if text(webhook, "reinvocationPolicy") == Some("IfNeeded") {
                Order::Reinvoked
            } else {
                continue;
            };
            // The injector it follows: the nearest one before it; reinvoked, the first one.
            let follows = match order {
                Order::After => injector_at
                    .iter()
                    .rev()
                    .find(|injector| **injector < at)
                    .copied()
                    .unwrap_or(first),
                Order::Reinvoked => first,
            };
            let field = format!("webhooks[{index}]");
            let pod_create = match takes_pod_create(webhook, &field) {
                Ok(true) => PodCreate::Matches,
                Ok(false) => continue,
                Err(why) => PodCreate::Unreadable(why),
            };
            let webhook_name = text(webhook, "name").unwrap_or("(unnamed)");
            let service = webhook
                .pointer("/clientConfig/service/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            later.push(LaterWebhook {
                configuration: name.to_string(),
                webhook: webhook_name.to_string(),
                field,
                mesh: injector.mesh(),
                injector: snapshot::name(sorted[follows]).to_string(),
                order,
                pod_create,
                known: known_offender(&[name, webhook_name, service]),
            });
        }
    }
    later
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn configuration(name: &str, labels: Value, webhooks: Value) -> Value {
        json!({"kind": "MutatingWebhookConfiguration", "metadata": {"name": name, "labels": labels},
               "webhooks": webhooks})
    }

    fn pod_rule() -> Value {
        json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"]}])
    }

    #[test]
    fn the_api_servers_order_and_reinvocation_decide_who_runs_after_the_injector() {
        let istio = configuration(
            "istio-sidecar-injector",
            json!({"istio.io/rev": "default"}),
            json!([{"name": "namespace.sidecar-injector.istio.io", "rules": pod_rule()}]),
        );
        let before = configuration(
            "aaa-labeller",
            json!({}),
            json!([{"name": "labels.example.com", "rules": pod_rule()}]),
        );
        let before_reinvoked = configuration(
            "aaa-reinvoked",
            json!({}),
            json!([{"name": "again.example.com", "rules": pod_rule(),
                    "reinvocationPolicy": "IfNeeded"}]),
        );
        let services_only = configuration(
            "zzz-services",
            json!({}),
            json!([{"name": "svc.example.com", "rules": [{"operations": ["CREATE"],
                    "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}]}]),
        );
        let datadog = configuration(
            "datadog-webhook",
            json!({}),
            json!([{"name": "datadog.webhook.agent.config", "rules": [{"operations": ["*"],
                    "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]}]),
        );
        let broken = configuration(
            "zz-broken",
            json!({}),
            json!([{"name": "broken.example.com", "rules": [{"operations": "CREATE"}]}]),
        );
        let later = webhooks_after(
            &[
                datadog,
                istio,
                services_only,
                before,
                before_reinvoked,
                broken,
            ],
            &Injector::Istio {
                revisions: Vec::new(),
            },
        );
        let seen: Vec<(&str, Order)> = later
            .iter()
            .map(|one| (one.configuration.as_str(), one.order))
            .collect();
        // datadog-webhook sorts before istio-sidecar-injector: harmless unless reinvoked.
        assert_eq!(
            seen,
            [
                ("aaa-reinvoked", Order::Reinvoked),
                ("zz-broken", Order::After)
            ]
        );
        assert_eq!(
            later[1].pod_create,
            PodCreate::Unreadable(
                "webhooks[0].rules[0].operations is not a list of strings".into()
            )
        );
        assert!(later[0].notice().contains(
            "sorts before Istio's injector (istio-sidecar-injector) but has reinvocationPolicy: \
             IfNeeded, so it runs again after it"
        ));
    }

    #[test]
    fn known_offenders_are_named_by_their_configuration_webhook_or_service() {
        assert_eq!(
            known_offender(&["pod-identity-webhook", "iam-for-pods.amazonaws.com", ""])
                .map(|known| known.reports),
            Some("aws/amazon-eks-pod-identity-webhook#208")
        );
        assert_eq!(
            known_offender(&["x", "y", "kuik-webhook-service"]).map(|known| known.what),
            Some("kube-image-keeper")
        );
        assert!(known_offender(&["vault-agent-injector-cfg", "vault.hashicorp.com", ""]).is_none());
    }
}
