//! `meshlife install webhook`: `meshlife serve` as the API server's own validating webhook
//! (`POST /admission`), for clusters that run neither Gatekeeper nor Kyverno. The server
//! judges under the constraints given (kept in a ConfigMap), watches Namespaces for their
//! injection labels (RBAC to list and watch them), and the ValidatingWebhookConfiguration
//! sends it the kinds meshlife reviews, never from its own namespace.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{Mount, ROUTES_PORT, Server, ServerOptions, base64, kept_secrets, own_namespace};

const NAME: &str = "meshlife";
const CONSTRAINTS_CONFIG_MAP: &str = "meshlife-constraints";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailurePolicy {
    /// Admit what the server could not judge (down, overloaded, too slow).
    Ignore,
    /// Refuse what the server could not judge.
    Fail,
}

#[derive(Args, Debug)]
pub struct WebhookInstall {
    /// Constraint files the server judges under (constraints/gatekeeper/clusters/*.yaml, or the
    /// output of `meshlife constraint`), each with its `spec.match` and `enforcementAction`.
    /// May be repeated; without it, the parameter defaults, error findings denied.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// What the API server does when the server cannot answer: `ignore` admits (fail open),
    /// `fail` refuses (fail closed).
    #[arg(long, value_enum, default_value = "ignore")]
    pub failure_policy: FailurePolicy,

    /// Seconds the API server waits for an answer (1 to 30).
    #[arg(long, default_value_t = 5)]
    pub timeout_seconds: u32,

    /// Namespace of the server, made here and never sent to the webhook.
    #[arg(long, default_value = "meshlife-system")]
    pub namespace: String,

    #[command(flatten)]
    pub server: ServerOptions,
}

/// The kinds the webhook is sent: every kind meshlife reviews, by API group, resource and
/// scope (Argo's ClusterAnalysisTemplate is the one cluster-scoped kind).
const RULES: &[(&str, &[&str], &str)] = &[
    ("\"\"", &["pods", "replicationcontrollers"], "Namespaced"),
    (
        "apps",
        &["deployments", "statefulsets", "daemonsets", "replicasets"],
        "Namespaced",
    ),
    ("batch", &["jobs", "cronjobs"], "Namespaced"),
    (
        "argoproj.io",
        &["rollouts", "analysistemplates"],
        "Namespaced",
    ),
    ("argoproj.io", &["clusteranalysistemplates"], "Cluster"),
    (
        "kubeflow.org",
        &[
            "experiments",
            "pytorchjobs",
            "tfjobs",
            "mpijobs",
            "xgboostjobs",
            "paddlejobs",
            "jaxjobs",
        ],
        "Namespaced",
    ),
    ("jobset.x-k8s.io", &["jobsets"], "Namespaced"),
    ("batch.volcano.sh", &["jobs"], "Namespaced"),
    ("networking.k8s.io", &["networkpolicies"], "Namespaced"),
];

pub fn manifests(args: &WebhookInstall) -> Result<String, String> {
    if !(1..=30).contains(&args.timeout_seconds) {
        return Err(format!(
            "--timeout-seconds must be between 1 and 30 (the API server's range), got {}",
            args.timeout_seconds
        ));
    }
    let namespace = &args.namespace;
    let files = super::read_constraints(&args.constraints)?;
    let mut server_args = Vec::new();
    let mut config_map_data = String::new();
    for (index, file) in files.iter().enumerate() {
        let key = format!("constraint-{index}.yaml");
        server_args.push(format!("--constraint=/constraints/{key}"));
        let _ = write!(
            config_map_data,
            "  # From {}\n  {key}: |\n{}",
            file.path.display(),
            super::indent(file.text.trim_end(), 4)
        );
    }
    let mut mounts = Vec::new();
    if !files.is_empty() {
        mounts.push(Mount {
            name: "constraints",
            path: "/constraints",
            source: format!("configMap: {{name: {CONSTRAINTS_CONFIG_MAP}}}"),
            comment: "The constraints judged under (read at start: restart to apply a change).",
        });
    }
    let server = Server {
        name: NAME,
        namespace,
        options: &args.server,
        args: server_args,
        mounts,
        calls_the_api: true,
        caller: "The API server",
    };
    let tls = kept_secrets::certificates(
        args.server.secrets_dir.as_deref(),
        &server.certificate_names(),
    )?;
    let mut out = format!(
        "# meshlife {version}: meshlife serve as a validating webhook, printed by `meshlife install\n\
         # webhook`. Apply with `kubectl apply -f -` (Kubernetes 1.30+: matchConditions). The Secret\n\
         # below holds a private key (made just now, or kept in --secrets-dir): keep this output\n\
         # where you keep Secrets.\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    out.push_str(&own_namespace(namespace));
    out.push_str(&super::namespace_reader(
        "POST /admission reads each object's Namespace labels (istio-injection, istio.io/rev,\n\
         # linkerd.io/inject) from a watch, as the injectors do; an AdmissionReview carries no Namespace.",
        "meshlife-namespace-reader",
        NAME,
        namespace,
    ));
    if !files.is_empty() {
        let _ = write!(
            out,
            "---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {CONSTRAINTS_CONFIG_MAP}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
data:
{config_map_data}"
        );
    }
    out.push_str(&server.manifests(&tls)?);
    out.push_str(&webhook_configuration(args, &server, &tls.ca_pem));
    Ok(out)
}

fn webhook_configuration(args: &WebhookInstall, server: &Server, ca_pem: &str) -> String {
    let namespace = &args.namespace;
    let rules: String = RULES
        .iter()
        .map(|(group, resources, scope)| {
            format!(
                "  - apiGroups: [{group}]\n    apiVersions: [\"*\"]\n    resources: [{}]\n    \
                 operations: [CREATE, UPDATE]\n    scope: {scope}\n",
                resources.join(", ")
            )
        })
        .collect();
    let (failure_policy, failure_comment) = match args.failure_policy {
        FailurePolicy::Ignore => (
            "Ignore",
            "# Ignore: an object the server could not judge (down, overloaded, too slow) is admitted,\n  \
             # and the API server logs the failure. `--failure-policy fail` refuses it instead.",
        ),
        FailurePolicy::Fail => (
            "Fail",
            "# Fail: an object the server could not judge (down, overloaded, too slow) is refused, so\n  \
             # keep the replicas and the PodDisruptionBudget; `--failure-policy ignore` admits it.",
        ),
    };
    let timeout = args.timeout_seconds;
    let ca_bundle = base64(ca_pem.as_bytes());
    let client_config = match &args.server.url {
        Some(_) => format!("url: {}", server.url(String::new(), "/admission")),
        None => format!(
            "service: {{name: {NAME}, namespace: {namespace}, path: /admission, port: {ROUTES_PORT}}}"
        ),
    };
    format!(
        "---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: meshlife
  labels: {{app.kubernetes.io/part-of: meshlife}}
webhooks:
- name: admission.meshlife.dev
  admissionReviewVersions: [v1]
  # meshlife only reads: dry-run requests are judged too.
  sideEffects: None
  {failure_comment}
  failurePolicy: {failure_policy}
  # meshlife serve stops any evaluation at 1 s; the rest is TLS set-up and the network.
  timeoutSeconds: {timeout}
  matchPolicy: Equivalent
  clientConfig:
    {client_config}
    caBundle: {ca_bundle}
  rules:
{rules}  # Never the server's own namespace (it could not start while judging itself), nor the
  # system namespaces no mesh injects into.
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{namespace}, kube-system, kube-public, kube-node-lease]
  matchConditions:
  # Mirror pods of static manifests: the kubelet cannot act on a refusal.
  - name: not-a-kubelet
    expression: \"!request.userInfo.username.startsWith('system:node:')\"
  # Only the kinds meshlife reviews, whatever version matchPolicy converted from.
  - name: reviewed-kinds
    expression: >-
      request.kind.kind in ['Pod', 'ReplicationController', 'Deployment', 'StatefulSet',
      'DaemonSet', 'ReplicaSet', 'Job', 'CronJob', 'Rollout', 'AnalysisTemplate',
      'ClusterAnalysisTemplate', 'Experiment', 'PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob',
      'PaddleJob', 'JAXJob', 'JobSet', 'NetworkPolicy']
  # An object being deleted is only updated to let it go (a finalizer removed): never refused.
  - name: not-being-deleted
    expression: \"!has(object.metadata.deletionTimestamp)\"
"
    )
}
